"""Flaky verdicts: which tests the fleet's ``flaky-detector`` marked flaky (or stable again).

- ``flaky-verdicts`` (key test_id): written by ``flaky-detector`` (the rules are
  ``fastci/shared/flakiness.py``); read by ``flaky-owners`` and ``failure-attribution`` in the fleet
  and by ``regression-detector``, which keeps flaky tests out of baselines and regression calls.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fastci.contracts.node_states import MAX_EVIDENCE
from fastci.core.events import Config, Event, Name, Record, Sha, Text, Timestamp
from fastci.inputs import Bundle, Status


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
