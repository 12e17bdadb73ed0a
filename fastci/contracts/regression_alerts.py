"""Regression alerts: a regression's lifecycle (detected, culprit or unresolved, recovered).

The regression capability writes them; the release gates, the reports and the ticket consumer read
them. The records an alert carries (checks, endpoints, performance evidence, culprit, bisect trail)
are here with it; the gate results and bisect steps in ``fastci/regression/events.py`` reuse some.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fastci.core.events import Config, Event, FiniteFloat, Name, Record, Sha, Text
from fastci.inputs import Bundle

CheckKind = Literal["output", "loss_curve", "eval"]
RegressionKind = Literal["performance", "output", "loss_curve", "eval"]
AlertStage = Literal["detected", "culprit", "unresolved", "recovered"]
Verdict = Literal["good", "bad"]
MAX_SAMPLES = 4096


class CheckOutcome(Record):
    """One correctness check of one result against its golden reference."""

    kind: CheckKind
    name: Name = Field(description="Output metric name, 'loss_curve' or 'eval_score'.")
    passed: bool
    detail: Text = Field(default="", description="One line a person can act on.")
    elements: int | None = None
    mismatches: int | None = None
    max_abs_error: FiniteFloat | None = None
    max_rel_error: FiniteFloat | None = None
    norm_error: FiniteFloat | None = Field(default=None, description="||observed - reference|| / ||reference||.")
    worst_index: int | None = None
    rtol: FiniteFloat | None = None
    atol: FiniteFloat | None = None
    bitwise_equal: bool | None = None
    diverged_at_step: int | None = Field(default=None, description="0-based loss_curve index where divergence starts.")
    direction: Literal["above", "below"] | None = None
    compared_steps: int | None = None
    score: FiniteFloat | None = None
    reference: FiniteFloat | None = None
    ratio: FiniteFloat | None = None
    min_ratio: FiniteFloat | None = None


class Endpoint(Record):
    """One side of a regression: the run, and the code and stack it ran."""

    result_id: str = Field(max_length=64)
    run_id: Name
    commit: Sha
    bundle: Bundle
    node_id: Name
    median: FiniteFloat | None = None


class SeriesPoint(Record):
    result_id: str = Field(max_length=64)
    commit: Sha
    median: FiniteFloat
    samples: int
    status: Literal["accepted", "suspect", "dismissed", "regressed", "excluded", "flaky"]


class PerfEvidence(Record):
    """The statistics behind a performance regression, with the data for its plots."""

    metric: Name
    direction: Literal["higher", "lower"]
    method: Literal["gate", "change-point"]
    threshold: FiniteFloat
    min_effect: FiniteFloat
    ratio: FiniteFloat = Field(description="Candidate over baseline median, as performance (< 1 is worse).")
    ci_low: FiniteFloat
    ci_high: FiniteFloat
    p_value: FiniteFloat
    noise: FiniteFloat = Field(description="Run-to-run noise of the baseline (robust CV).")
    baseline_samples: tuple[FiniteFloat, ...] = Field(max_length=MAX_SAMPLES)
    candidate_samples: tuple[FiniteFloat, ...] = Field(max_length=MAX_SAMPLES)
    series: tuple[SeriesPoint, ...] = Field(default=(), max_length=200)
    change_points: tuple[int, ...] = Field(default=(), max_length=200, description="Indexes into series.")


class Culprit(Record):
    kind: Literal["commit", "component"]
    commit: Sha | None = None
    title: Text = ""
    author: Text = ""
    component: Name | None = Field(default=None, description="Bundle component for a component bump.")
    from_version: Name | None = None
    to_version: Name | None = None
    related_commits: tuple[Sha, ...] = Field(
        default=(), max_length=50, description="Commits in range touching that layer."
    )
    owners: tuple[Name, ...] = Field(default=(), max_length=16)


class StepSummary(Record):
    step: int
    phase: Literal["attribute", "code", "bundle"]
    tested: Text
    commit: Sha
    verdict: Verdict
    samples: int
    median: FiniteFloat | None = None
    candidates_left: int


class RegressionAlert(Event):
    """A regression's lifecycle: detected (bisect starts), culprit or unresolved, recovered. Key: test_id.

    ``regression_id`` is the id of the 'detected' alert and ties the stages together.
    """

    TOPIC: ClassVar[str] = "regression-alert"
    KEY: ClassVar[str] = "test_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("cause_id", "stage", "subject")

    cause_id: str = Field(max_length=64, description="The event that led to this stage.")
    stage: AlertStage
    subject: Name = Field(description="The metric or check that regressed, with the hardware revision.")
    regression_id: str = Field(max_length=64)
    kind: RegressionKind
    test_id: Name
    repo: Name
    hardware_revision: Name
    good: Endpoint
    bad: Endpoint
    seed: int | None = None
    config: Config = Field(default_factory=dict)
    summary: Text
    perf: PerfEvidence | None = None
    checks: tuple[CheckOutcome, ...] = Field(default=(), max_length=300)
    culprit: Culprit | None = None
    owners: tuple[Name, ...] = Field(default=(), max_length=16)
    trail: tuple[StepSummary, ...] = Field(default=(), max_length=64)
    runs_used: int = Field(default=0, ge=0, description="Runs requested by the bisect.")
    problem: Text = Field(default="", description="Why a bisect could not name a culprit.")
