"""Fleet events: what the fleet decides about nodes (attribution) and tests (flakiness).

Node states (``node-state-changed``) and flaky verdicts (``flaky-verdicts``), which other capabilities
read, are contracts: ``fastci/contracts/node_states.py``, ``fastci/contracts/flaky_verdicts.py``.

- ``node-attribution`` (key node_id): what comparing one test's results across nodes says about a
  node (``failure-attribution``, keyed by test, writes it; ``node-state`` reads it).
- ``flaky-tests`` (key test_id): a flaky verdict with the test's owners from the owner map
  (``flaky-owners``, keyed by repo, adds them).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fastci.contracts.owner_maps import TeamName
from fastci.core.events import Event, FiniteFloat, Name, Sha, Text, Timestamp
from fastci.inputs import Bundle, Status

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
