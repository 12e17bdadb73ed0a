"""Regression events: gate verdicts, bisect plans and steps.

Two of the regression capability's events are contracts, since other capabilities read them:
regression alerts (``regression-alert``: the release gates, the reports and the ticket consumer),
with the records they carry, in ``fastci/contracts/regression_alerts.py``, and baseline exclusions
(``baseline-exclusions``: the fleet) in ``fastci/contracts/baseline_exclusions.py``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fastci.contracts.regression_alerts import CheckOutcome, RegressionAlert, Verdict
from fastci.core.events import Config, Event, FiniteFloat, Name, Record, Sha, Text, Timestamp
from fastci.inputs import Bundle, Layer, Trigger


class GateResult(Event):
    """A result checked against its test's golden reference. Key: test_id. Id: from the result's id."""

    TOPIC: ClassVar[str] = "gate-results"
    KEY: ClassVar[str] = "test_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("result_id",)

    result_id: str = Field(max_length=64)
    test_id: Name
    run_id: Name
    repo: Name
    commit: Sha
    bundle: Bundle
    hardware_revision: Name
    node_id: Name
    trigger: Trigger
    dtype: Name
    golden_version: int
    golden_commit: Sha
    golden_bundle: Bundle
    passed: bool
    checks: tuple[CheckOutcome, ...] = Field(max_length=300)
    seed: int | None = None
    config: Config = Field(default_factory=dict)
    time: Timestamp | None = None


class PlannedChange(Record):
    sha: Sha
    title: Text = ""
    author: Text = ""
    layers: tuple[Layer, ...] = ()
    owners: tuple[Name, ...] = Field(default=(), max_length=16)


class ComponentBump(Record):
    component: Name
    from_version: Name
    to_version: Name
    owners: tuple[Name, ...] = Field(default=(), max_length=16)
    related_commits: tuple[Sha, ...] = Field(default=(), max_length=50)


class BisectPlan(Event):
    """What a bisect searches: the changes between good and bad, oldest first. Key: test_id."""

    TOPIC: ClassVar[str] = "bisect-plan"
    KEY: ClassVar[str] = "test_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("alert_id",)

    alert_id: str = Field(max_length=64)
    test_id: Name
    alert: RegressionAlert
    changes: tuple[PlannedChange, ...] = Field(max_length=5000, description="Commits after good up to bad.")
    bumps: tuple[ComponentBump, ...] = Field(default=(), max_length=8)
    test_owners: tuple[Name, ...] = Field(
        default=(),
        max_length=16,
        description="Owners of the test's file: who gets the ticket when no culprit is found.",
    )
    problem: Text = Field(default="", description="Why the commit range is incomplete, if it is.")


class BisectStep(Event):
    """One decided bisect step. Key: test_id."""

    TOPIC: ClassVar[str] = "bisect-step"
    KEY: ClassVar[str] = "test_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("cause_id", "regression_id")

    cause_id: str = Field(max_length=64)
    regression_id: str = Field(max_length=64)
    test_id: Name
    step: int = Field(ge=1)
    phase: Literal["attribute", "code", "bundle"]
    tested: Text
    commit: Sha
    bundle: Bundle
    verdict: Verdict
    samples: int = Field(ge=0)
    median: FiniteFloat | None = None
    boundary: FiniteFloat | None = Field(default=None, description="Median halfway between good and bad.")
    candidates_left: int = Field(ge=0)
    runs: int = Field(ge=0, description="Runs this step took.")
