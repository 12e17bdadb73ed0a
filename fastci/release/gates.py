"""The release gates: pure functions from the evidence about a bundle to a verdict per gate.

A bundle may be promoted only when every gate passes:

- ``correctness``: no correctness regression. The latest trusted result of every test that ran on
  the bundle (all tiers; throughput checks excluded) passed, its golden gate too when it has one, and
  no correctness regression alert (output, loss curve, eval) whose failing run used the bundle is open.
- ``eval``: every served (production) model's eval score is at least 99% of its accepted reference on
  every required hardware revision (the ``eval_ratio`` a qualification training result records, or
  the ratio of an eval check in the model's gate results).
- ``performance``: no open performance regression against the bundle (its failing run used the bundle,
  or its culprit is a bundle layer at the version the bundle pins), and no failed throughput check.
- ``qualification``: full qualification on every required hardware revision: for each served model,
  each of its precisions (the serving config's ``precision``, default bf16 and fp8) and each check
  (inference, training, throughput), the latest result of ``qualify/<model>/<precision>/<check>`` in
  a full-qualification tier (nightly or release, or a rerun of one) passed.
- ``staging`` (production only): the bundle was promoted to staging, by a merge on the release repo's
  main branch that has not been rolled back (read from git history, not from a flag).

"Trusted" means not excluded by ``baseline-guard`` (the run's node was suspect, quarantined or
diagnosing); "open" means a regression detected with no later ``recovered`` stage.

Only results whose provenance the release accepts count for any gate: signed by a principal the
release policy lets qualify a release (``qualifying_principals`` in release.toml), with a signature
that verifies under that principal's key (``fastci.core.provenance``). Any other result is left
out, so it can neither pass nor fail a gate, and a failing gate names what was left out and why.
The ``provenance`` gate fails when a result on the bundle carries a signature that does not verify
under the key of the principal it names: a forgery, or a producer with the wrong key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from fastci.contracts.regression_alerts import RegressionAlert
from fastci.inputs import Bundle
from fastci.release.events import GateOutcome

EVAL_MIN_RATIO = 0.99
DEFAULT_PRECISIONS = ("bf16", "fp8")
QUALIFY_CHECKS = ("inference", "training", "throughput")
FULL_TIERS = frozenset({"nightly", "release"})
WANTS_EVIDENCE = ("correctness", "eval", "qualification")  # gates that fail when a result is missing
DEFAULT_QUALIFYING = ("qualifier",)  # principals whose results count for a release (release.toml can say others)
MAX_LISTED = 6  # problems spelled out per gate; the rest are counted


@dataclass(frozen=True)
class TestResult:
    """The latest trusted result of one test on the bundle, per hardware revision and tier."""

    __test__ = False  # not a pytest class

    test_id: str
    model: str
    precision: str | None
    check: str | None
    hardware_revision: str
    tier: str
    status: str
    gate_passed: bool | None
    gate_failing: str
    eval_ratio: float | None
    time: datetime | None
    offset: int
    run_id: str = ""
    principal: str | None = None  # who signed it, as the result names it
    provenance_problem: str | None = None  # None: its signature verifies under that principal's key
    forged: bool = False  # a signature that does not verify under a key the verifier holds

    @property
    def ok(self) -> bool:
        return self.status == "passed" and self.gate_passed is not False

    def problem(self) -> str:
        gate = f"; gate: {self.gate_failing}" if self.gate_passed is False and self.gate_failing else ""
        return f"{self.test_id} on {self.hardware_revision} ({self.tier}): {self.status}{gate}"


@dataclass(frozen=True)
class Staged:
    """What git history says about the bundle in staging."""

    promoted_in: str | None  # the merge commit that promoted it to staging
    rolled_back_in: str | None = None


@dataclass(frozen=True)
class Evidence:
    bundle: Bundle
    results: Sequence[TestResult]
    alerts: Sequence[RegressionAlert]


def evaluate(
    environment: str,
    evidence: Evidence,
    serving: Mapping[str, Mapping],
    revisions: Sequence[str],
    staged: Staged | None = None,
    qualifying: Sequence[str] = DEFAULT_QUALIFYING,
) -> list[GateOutcome]:
    refused = {id(r): reason for r in evidence.results if (reason := not_counted(r, qualifying)) is not None}
    counted = Evidence(evidence.bundle, [r for r in evidence.results if id(r) not in refused], evidence.alerts)
    left_out = sorted(f"{_described(r)}: {refused[id(r)]}" for r in evidence.results if id(r) in refused)
    gates = [
        correctness(counted),
        eval_gate(counted, serving, revisions),
        performance(counted),
        qualification(counted, serving, revisions),
    ]
    if left_out:  # a gate that can fail for want of evidence says what was not counted
        note = f" | {len(left_out)} result(s) on this bundle not counted: {_listed(left_out)}"
        gates = [
            g.model_copy(update={"detail": g.detail + note}) if not g.passed and g.gate in WANTS_EVIDENCE else g
            for g in gates
        ]
    gates.append(provenance_gate(evidence.results, left_out, qualifying))
    if environment == "production":
        gates.append(staging_gate(staged or Staged(None)))
    return gates


def not_counted(result: TestResult, qualifying: Sequence[str]) -> str | None:
    """Why a result does not count for a release, or None when it does."""
    if result.provenance_problem is not None:
        return result.provenance_problem
    if result.principal not in qualifying:
        return (
            f"signed by {result.principal!r}, which may not qualify a release "
            f"(release.toml qualifying_principals: {', '.join(qualifying) or 'none'})"
        )
    return None


def _described(r: TestResult) -> str:
    return f"{r.test_id} on {r.hardware_revision} (run {r.run_id}, {r.status})"


def provenance_gate(results: Sequence[TestResult], left_out: Sequence[str], qualifying: Sequence[str]) -> GateOutcome:
    forged = sorted(f"{_described(r)}: {r.provenance_problem}" for r in results if r.forged)
    if forged:
        return GateOutcome(
            gate="provenance",
            passed=False,
            detail=f"{len(forged)} result(s) on this bundle carry a signature that does not verify (forged, or "
            f"signed with the wrong key): {_listed(forged)}",
        )
    counted = len(results) - len(left_out)
    detail = f"{counted} result(s) signed by {', '.join(qualifying) or 'no principal'} counted"
    if left_out:
        detail += f"; {len(left_out)} not counted: {_listed(left_out)}"
    return GateOutcome(gate="provenance", passed=True, detail=detail)


def _latest(results: Sequence[TestResult], tiers: frozenset[str] | None = None) -> dict[tuple[str, str], TestResult]:
    """The newest result per (test, hardware revision), among ``tiers`` when given."""
    latest: dict[tuple[str, str], TestResult] = {}
    for r in results:
        if tiers is not None and r.tier not in tiers:
            continue
        key = (r.test_id, r.hardware_revision)
        seen = latest.get(key)
        if seen is None or _order(r) > _order(seen):
            latest[key] = r
    return latest


def _order(r: TestResult) -> tuple:
    return (r.time is not None, r.time or datetime.min, r.offset)


def _listed(problems: Sequence[str]) -> str:
    shown = "; ".join(problems[:MAX_LISTED])
    return shown + (f"; and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else "")


def _open_alerts(alerts: Sequence[RegressionAlert]) -> list[RegressionAlert]:
    """The 'detected' alert of every regression with no 'recovered' stage."""
    recovered = {a.regression_id for a in alerts if a.stage == "recovered"}
    return [a for a in alerts if a.stage == "detected" and a.regression_id not in recovered]


def _against(alert: RegressionAlert, alerts: Sequence[RegressionAlert], bundle: Bundle) -> bool:
    """Whether a regression concerns ``bundle``: its failing run used it, or its culprit is a layer at
    the version the bundle pins."""
    if alert.bad.bundle == bundle:
        return True
    for later in alerts:
        culprit = later.culprit
        if later.regression_id == alert.regression_id and culprit is not None and culprit.kind == "component":
            if culprit.component and getattr(bundle, culprit.component, None) == culprit.to_version:
                return True
    return False


def correctness(evidence: Evidence) -> GateOutcome:
    latest = [r for r in _latest(evidence.results).values() if r.check != "throughput"]
    failing = sorted(r.problem() for r in latest if not r.ok)
    open_alerts = [
        a
        for a in _open_alerts(evidence.alerts)
        if a.kind != "performance" and _against(a, evidence.alerts, evidence.bundle)
    ]
    failing += [f"open {a.kind} regression of {a.test_id} ({a.subject}): {a.summary}" for a in open_alerts]
    if not latest:
        return GateOutcome(gate="correctness", passed=False, detail="no result has run on this bundle")
    if failing:
        return GateOutcome(gate="correctness", passed=False, detail=f"{len(failing)} problem(s): {_listed(failing)}")
    gated = sum(1 for r in latest if r.gate_passed is not None)
    return GateOutcome(
        gate="correctness",
        passed=True,
        detail=f"the latest {len(latest)} result(s) of tests on this bundle (per test and hardware "
        f"revision) passed, {gated} with a golden gate; no open correctness regression",
    )


def _precisions(config: Mapping) -> tuple[str, ...]:
    value = config.get("precision")
    if value is None:
        return DEFAULT_PRECISIONS
    return tuple(str(v) for v in value) if isinstance(value, list) else (str(value),)


def eval_gate(evidence: Evidence, serving: Mapping[str, Mapping], revisions: Sequence[str]) -> GateOutcome:
    latest = _latest(evidence.results)
    problems, shown = [], []
    for model in sorted(serving):
        precisions = set(_precisions(serving[model]))
        for revision in revisions:
            ratios = sorted(
                (r.eval_ratio, r.test_id)
                for r in latest.values()
                if r.model == model
                and r.hardware_revision == revision
                and r.eval_ratio is not None
                and (r.precision is None or r.precision in precisions)
            )
            if not ratios:
                problems.append(f"{model} on {revision}: no eval result on this bundle")
                continue
            worst, test_id = ratios[0]
            if worst < EVAL_MIN_RATIO:
                problems.append(
                    f"{model} on {revision}: eval {worst:.1%} of reference < {EVAL_MIN_RATIO:.0%} ({test_id})"
                )
            else:
                shown.append(f"{model}/{revision} {worst:.1%}")
    if problems:
        return GateOutcome(gate="eval", passed=False, detail=_listed(problems))
    return GateOutcome(
        gate="eval", passed=True, detail=f"every served model >= {EVAL_MIN_RATIO:.0%} of reference: {_listed(shown)}"
    )


def performance(evidence: Evidence) -> GateOutcome:
    problems = [
        f"open performance regression of {a.test_id} ({a.subject}): {a.summary}"
        for a in _open_alerts(evidence.alerts)
        if a.kind == "performance" and _against(a, evidence.alerts, evidence.bundle)
    ]
    problems += sorted(r.problem() for r in _latest(evidence.results).values() if r.check == "throughput" and not r.ok)
    if problems:
        return GateOutcome(gate="performance", passed=False, detail=_listed(problems))
    return GateOutcome(
        gate="performance",
        passed=True,
        detail="no open performance regression against this bundle; no failed throughput check",
    )


def qualification(evidence: Evidence, serving: Mapping[str, Mapping], revisions: Sequence[str]) -> GateOutcome:
    latest = _latest(evidence.results, FULL_TIERS)
    missing, failing, passed = [], [], 0
    for model in sorted(serving):
        for precision in _precisions(serving[model]):
            for check in QUALIFY_CHECKS:
                test_id = f"qualify/{model}/{precision}/{check}"
                for revision in revisions:
                    result = latest.get((test_id, revision))
                    if result is None:
                        missing.append(f"{test_id} on {revision}")
                    elif not result.ok:
                        failing.append(result.problem())
                    else:
                        passed += 1
    if missing or failing:
        parts = []
        if failing:
            parts.append(f"{len(failing)} failed: {_listed(failing)}")
        if missing:
            parts.append(f"{len(missing)} missing (no nightly or release result): {_listed(missing)}")
        return GateOutcome(gate="qualification", passed=False, detail=" | ".join(parts))
    return GateOutcome(
        gate="qualification",
        passed=True,
        detail=f"{passed} qualification result(s) passed on {', '.join(revisions)} "
        f"({len(serving)} model(s) x precisions x {len(QUALIFY_CHECKS)} checks)",
    )


def staging_gate(staged: Staged) -> GateOutcome:
    if staged.promoted_in is None:
        return GateOutcome(
            gate="staging",
            passed=False,
            detail="this bundle was never promoted to staging; production accepts only a bundle staging has promoted",
        )
    if staged.rolled_back_in is not None:
        return GateOutcome(
            gate="staging",
            passed=False,
            detail=f"promoted to staging in {staged.promoted_in[:10]} but rolled back in {staged.rolled_back_in[:10]}",
        )
    return GateOutcome(gate="staging", passed=True, detail=f"promoted to staging in {staged.promoted_in[:10]}")
