"""Fleet events: what the fleet decides about nodes (attribution) and tests (flakiness).

Node states (``node-state-changed``), which other capabilities read, are a contract:
``fastci/contracts/node_states.py``.

- ``node-attribution`` (key node_id): what comparing one test's results across nodes says about a
  node (``failure-attribution``, keyed by test, writes it; ``node-state`` reads it).
- ``flaky-verdicts`` (key test_id): ``flaky-detector`` marked a test flaky (or stable again).
- ``flaky-tests`` (key test_id): the same verdict with the test's owners from the owner map
  (``flaky-owners``, keyed by repo, adds them).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fastci.contracts.node_states import MAX_EVIDENCE
from fastci.core.events import Config, Event, FiniteFloat, Name, Record, Sha, Text, Timestamp
from fastci.inputs import Bundle, Status
from fastci.regression.references import TeamName

AttributionKind = Literal["failure", "cleared", "throughput"]


class NodeAttribution(Event):
    """What comparing one test's results across nodes says about one node. Key: node_id.

    - ``failure``: the test failed on this node on a bundle where it passed on other nodes (and
      failed on few): evidence of a node fault;
    - ``cleared``: a failure attributed earlier turned out not to be the node's (the test then
      failed on many nodes: a software regression; or it was marked flaky);
    - ``throughput``: one passing run's throughput relative to the same test's other nodes on the
      same bundle and hardware revision (``ratio`` = this run's median / the others' median).

    Id: from the judged result's id and the kind (and the metric), so a replay says it once.
    """

    TOPIC: ClassVar[str] = "node-attribution"
    KEY: ClassVar[str] = "node_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("result_id", "kind", "metric")

    node_id: Name
    kind: AttributionKind
    result_id: str = Field(max_length=64, description="The result judged.")
    cause_id: str = Field(max_length=64, description="The event whose arrival decided it.")
    test_id: Name
    bundle: Bundle | None = Field(description="The stack the runs compared share; None for a plain repository.")
    hardware_revision: Name | None = Field(description="Their hardware revision; None for a plain repository.")
    time: Timestamp | None = Field(default=None, description="When the judged result ran.")
    failing_nodes: int = Field(default=0, ge=0, description="Distinct nodes failing the test on the bundle (window).")
    passing_nodes: int = Field(default=0, ge=0, description="Distinct other nodes passing it.")
    metric: Name | None = None
    ratio: FiniteFloat | None = Field(default=None, gt=0)
    peer_runs: int = Field(default=0, ge=0, description="Other nodes' runs the ratio was taken against.")
    clears: str | None = Field(default=None, max_length=64, description="Id of the attribution withdrawn.")
    detail: Text = ""


class RunOutcome(Record):
    result_id: str = Field(max_length=64)
    node_id: Name
    status: Status
    trigger: Name


class FlakyVerdict(Event):
    """A test was marked flaky, or stable again. Key: test_id. Id: from the deciding result's id.

    ``rule``: 'outcomes-differ' (runs of the same commit, bundle, config and seed disagree, and not
    because of one sick node), 'retries' (too many runs passed only on retry), 'stable' (long
    enough without either), 'withdrawn' (the disagreement turned out to be a sick node's: its
    failures were excluded after the verdict).
    """

    TOPIC: ClassVar[str] = "flaky-verdicts"
    KEY: ClassVar[str] = "test_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("cause_id",)

    cause_id: str = Field(max_length=64)
    test_id: Name
    repo: Name
    flaky: bool
    rule: Literal["outcomes-differ", "retries", "stable", "withdrawn"]
    reason: Text
    time: Timestamp | None = None
    commit: Sha | None = None
    bundle: Bundle | None = None
    config: Config = Field(default_factory=dict)
    seed: int | None = None
    chips: int = Field(default=0, ge=0)
    outcomes: tuple[RunOutcome, ...] = Field(
        default=(), max_length=MAX_EVIDENCE, description="The runs that disagreed."
    )


class FlakyTest(Event):
    """A flaky verdict with the test's owners from the repo's owner map. Key: test_id."""

    TOPIC: ClassVar[str] = "flaky-tests"
    KEY: ClassVar[str] = "test_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("verdict_id",)

    verdict_id: str = Field(max_length=64)
    test_id: Name
    repo: Name
    flaky: bool
    owners: tuple[TeamName, ...] = Field(default=(), max_length=16)
    owner_map_version: Name | None = Field(
        default=None, description="The owner map used; None if the repo has none yet."
    )
    rule: Name
    reason: Text
    time: Timestamp | None = None
    chips: int = Field(default=0, ge=0)


Health = Literal["passing", "failing"]


class TestStatusChanged(Event):
    """A test flipped between passing and failing. Key: test_id. Id: derived from the result's id."""

    TOPIC: ClassVar[str] = "test-status-changed"
    KEY: ClassVar[str] = "test_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("result_id",)
    __test__ = False  # not a pytest test class, despite the name

    result_id: str = Field(description="Id of the result event that caused the flip.")
    test_id: Name
    run_id: Name
    commit: Sha
    node_id: Name
    previous: Health
    current: Health
    status: Status = Field(description="The status of the result that caused the flip.")
    runs: int = Field(ge=1, description="Runs of this test seen so far, this one included.")
