"""bisect: converges on the change that caused a regression, by running midpoints.

Works from a ``bisect-plan`` (changes between the last good and first bad run, oldest first, and
the bundle components that differ). Keyed by test, so the test's own ``results`` and
``gate-results`` arrive here without repartitioning; a step's runs are recognised by trigger
'bisect' and the exact commit, bundle and hardware revision it asked for.

Phases:
- attribute: when both the code and the bundle changed, run the bad code on the good bundle. Bad:
  the code is to blame (bisect commits on the good bundle). Good: the bundle is (bisect its bumps
  on the bad code);
- code: binary search over the commits (first parent);
- bundle: binary search over component bumps applied in stack order (compiler, kernels, runtime,
  driver, firmware); the culprit is one component's version change, owned by that layer's team.

A performance step asks for enough repeats to tell the good level from the bad one at this test's
noise (per-step error about 0.13%), judges the step's median against the midpoint between the two,
and asks for another batch (up to ``MAX_ATTEMPTS``) when the median is too close to call. A
correctness step is one run judged by its gate result (or its failure). Like ``git bisect`` it
assumes one culprit and no interaction between changes.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from fastci.contracts.regression_alerts import Culprit, RegressionAlert, StepSummary, Verdict
from fastci.contracts.runs import RunRequested
from fastci.core.events import Event, Record
from fastci.core.processor import KeySpace, Processor, StateReader, Step, UnitOfWork
from fastci.inputs import Bundle, ResultEvent
from fastci.regression.events import BisectPlan, BisectStep, ComponentBump, GateResult, PlannedChange
from fastci.shared.perfstats import as_performance, relative_noise

NAME = "bisect"
CHUNK = 200  # planned changes per stored value
MAX_ATTEMPTS = 3  # batches of repeats per step before deciding on the point estimate
MAX_FAILURES = 3  # failed runs at one step before giving up
STEP_ERROR_Z = 3.0  # ~0.13% chance per step of judging good as bad or back (~1.3% over 10 steps)
MIN_REPEATS, MAX_REPEATS = 3, 5000
MAX_ACTIVE = 32


class Pending(Record):
    phase: str
    tested: str
    commit: str
    bundle: Bundle
    index: int
    attempts: int = 1  # requests made for this step (each needs its own purpose)
    wanted: int = 0  # samples asked for so far (a failed run is asked for again, not added to)
    samples: tuple[float, ...] = ()
    runs: int = 0
    failures: int = 0


class BisectProgress(Record):
    regression_id: str
    kind: str
    subject: str
    metric: str | None = None
    direction: str | None = None
    check_name: str | None = None
    hardware_revision: str
    n_changes: int
    bumps: tuple[ComponentBump, ...] = ()
    test_owners: tuple[str, ...] = ()
    phase: str
    code_bundle: Bundle
    lo: int
    hi: int
    step: int = 0
    repeats: int = 1
    good_median: float | None = None
    bad_median: float | None = None
    noise: float | None = None
    trail: tuple[StepSummary, ...] = ()
    runs_used: int = 0
    pending: Pending | None = None


class ChangesChunk(Record):
    """``CHUNK`` consecutive changes of a bisect's plan (the last chunk may hold fewer)."""

    changes: tuple[PlannedChange, ...] = ()


class ActiveBisects(Record):
    """The regressions a test is being bisected for (at most ``MAX_ACTIVE``, oldest first)."""

    regression_ids: tuple[str, ...] = ()


# The bisect's kinds of state, each under a test.
PROGRESS = KeySpace("bisect", BisectProgress, ("regression_id",))  # kept (small) once the bisect ends
ALERTS = KeySpace("bisect-alert", RegressionAlert, ("regression_id",))  # the alert bisected, until it ends
CHANGES = KeySpace("bisect-changes", ChangesChunk, ("regression_id", "chunk"))  # its plan, until it ends
ACTIVE = KeySpace("bisects", ActiveBisects)
_NONE_ACTIVE = ActiveBisects()


def progress_key(test_id: str, regression_id: str) -> str:
    return PROGRESS.key(test_id, regression_id)


def alert_key(test_id: str, regression_id: str) -> str:
    return ALERTS.key(test_id, regression_id)


def changes_key(test_id: str, regression_id: str, chunk: int) -> str:
    return CHANGES.key(test_id, regression_id, str(chunk))


def active_key(test_id: str) -> str:
    return ACTIVE.key(test_id)


def step_repeats(noise: float, good: float, bad: float) -> int:
    """Repeats so that the step's median lands on the right side of the good/bad midpoint with
    ~99.87% probability (the median's sd is 1.2533 sd / sqrt(n) for normal noise)."""
    half_gap = abs(bad / good - 1) / 2
    if not math.isfinite(noise) or noise <= 0 or half_gap <= 0:
        return MIN_REPEATS
    return int(min(MAX_REPEATS, max(MIN_REPEATS, math.ceil((STEP_ERROR_Z * 1.2533 * noise / half_gap) ** 2))))


class BisectProcessor(Processor[Record]):
    name: ClassVar[str] = NAME
    inputs: ClassVar[tuple[str, ...]] = (BisectPlan.TOPIC, ResultEvent.TOPIC, GateResult.TOPIC)
    outputs: ClassVar[tuple[str, ...]] = (RunRequested.TOPIC, BisectStep.TOPIC, RegressionAlert.TOPIC)
    key_spaces = (PROGRESS, ALERTS, CHANGES, ACTIVE)
    state_key: ClassVar[str] = "key"

    def ignores(self, event: Event) -> bool:
        # a result or gate result of a run no bisect asked for, or off a stack, changes no bisect
        if isinstance(event, BisectPlan):
            return False
        assert isinstance(event, ResultEvent | GateResult)
        return event.trigger != "bisect" or event.bundle is None

    def process(self, state: StateReader[Record], event: Event) -> Step[Record]:
        if self.ignores(event):
            return Step()
        work = _Work(state, event)
        if isinstance(event, BisectPlan):
            work.start(event)
        else:
            assert isinstance(event, ResultEvent | GateResult)
            work.run_outcome(event)
        return work.step()


class _Work(UnitOfWork[Record]):
    def __init__(self, state: StateReader[Record], event: Event) -> None:
        super().__init__(state)
        self.event = event

    # ----- reading and writing (this event's own writes first: the store sees them only afterwards)

    def _alert(self, test_id: str, rid: str) -> RegressionAlert:
        alert = ALERTS.get(self, alert_key(test_id, rid))
        assert alert is not None
        return alert

    def _change(self, test_id: str, rid: str, index: int) -> PlannedChange:
        chunk = CHANGES.get(self, changes_key(test_id, rid, index // CHUNK))
        assert chunk is not None
        return chunk.changes[index % CHUNK]

    def _active(self, test_id: str) -> tuple[str, ...]:
        return (ACTIVE.get(self, active_key(test_id)) or _NONE_ACTIVE).regression_ids

    def _set_active(self, test_id: str, regression_ids: tuple[str, ...]) -> None:
        self.set(active_key(test_id), ActiveBisects(regression_ids=regression_ids))

    def _save(self, test_id: str, progress: BisectProgress) -> None:
        self.set(progress_key(test_id, progress.regression_id), progress)

    # ----- a new plan

    def start(self, plan: BisectPlan) -> None:
        alert, test_id = plan.alert, plan.test_id
        rid = alert.regression_id
        if PROGRESS.get(self, progress_key(test_id, rid)) is not None:
            return  # already bisecting (a redelivered plan)
        self.set(alert_key(test_id, rid), alert)
        for chunk in range(0, len(plan.changes), CHUNK):
            self.set(
                changes_key(test_id, rid, chunk // CHUNK), ChangesChunk(changes=plan.changes[chunk : chunk + CHUNK])
            )
        n, bumps = len(plan.changes), plan.bumps
        progress = BisectProgress(
            regression_id=rid,
            kind=alert.kind,
            subject=alert.subject,
            hardware_revision=alert.hardware_revision,
            n_changes=n,
            bumps=bumps,
            phase="code",
            code_bundle=alert.bad.bundle,
            lo=-1,
            hi=n - 1,
            test_owners=plan.test_owners,
        )
        if alert.perf is not None:
            good = as_performance(alert.perf.baseline_samples, alert.perf.direction)
            bad = as_performance(alert.perf.candidate_samples, alert.perf.direction)
            good_median, bad_median = float(np.median(good)), float(np.median(bad))
            noise = relative_noise(good)
            progress = progress.model_copy(
                update={
                    "metric": alert.perf.metric,
                    "direction": alert.perf.direction,
                    "good_median": good_median,
                    "bad_median": bad_median,
                    "noise": noise,
                    "repeats": step_repeats(noise, good_median, bad_median),
                }
            )
        elif alert.checks:
            progress = progress.model_copy(update={"check_name": alert.checks[0].name})
        if plan.problem and alert.good.commit != alert.bad.commit:
            self._finish(test_id, progress, problem=plan.problem)
            return
        if n == 0 and not bumps:
            self._finish(
                test_id, progress, problem="the good and bad runs had the same code and stack: nothing to bisect"
            )
            return
        if n and bumps:
            progress = progress.model_copy(update={"phase": "attribute"})
        elif not n:
            progress = progress.model_copy(update={"phase": "bundle", "lo": 0, "hi": len(bumps)})
        self._set_active(test_id, (*self._active(test_id), rid)[-MAX_ACTIVE:])
        self._next(test_id, progress)

    # ----- choosing and requesting the next step

    def _next(self, test_id: str, progress: BisectProgress) -> None:
        alert = self._alert(test_id, progress.regression_id)
        if progress.phase == "attribute":
            tested = f"{alert.bad.commit[:10]} on the good bundle"
            pending = Pending(
                phase="attribute", tested=tested, commit=alert.bad.commit, bundle=alert.good.bundle, index=-1
            )
        elif progress.phase == "code":
            if progress.hi - progress.lo <= 1:
                self._finish(test_id, progress, culprit=self._commit_culprit(test_id, progress))
                return
            mid = (progress.lo + progress.hi) // 2
            change = self._change(test_id, progress.regression_id, mid)
            pending = Pending(
                phase="code",
                tested=f"{change.sha[:10]} {change.title[:80]}",
                commit=change.sha,
                bundle=progress.code_bundle,
                index=mid,
            )
        else:
            if progress.hi - progress.lo <= 1:
                self._finish(test_id, progress, culprit=_bump_culprit(progress.bumps[progress.hi - 1]))
                return
            mid = (progress.lo + progress.hi) // 2
            bundle = _with_bumps(alert.good.bundle, progress.bumps[:mid])
            names = ", ".join(f"{b.component} {b.to_version}" for b in progress.bumps[:mid])
            pending = Pending(
                phase="bundle", tested=f"good bundle + {names}", commit=alert.bad.commit, bundle=bundle, index=mid
            )
        pending = pending.model_copy(update={"wanted": progress.repeats if progress.metric else 1})
        progress = progress.model_copy(update={"step": progress.step + 1, "pending": pending})
        self._save(test_id, self._request(test_id, progress, alert))

    def _request(self, test_id: str, progress: BisectProgress, alert: RegressionAlert) -> BisectProgress:
        """Ask for the pending step's runs; return the progress with the run counted."""
        pending = progress.pending
        assert pending is not None
        self.emit(
            RunRequested(
                cause_id=self.event.id,
                purpose=f"bisect:{progress.regression_id}:{progress.step}:{pending.attempts}",
                test_id=test_id,
                repo=alert.repo,
                commit=pending.commit,
                bundle=pending.bundle,
                hardware_revision=progress.hardware_revision,
                work_class="bisect",
                repeats=progress.repeats if progress.metric else 1,
                seed=alert.seed,
                config=alert.config,
                regression_id=progress.regression_id,
                requested_by=NAME,
                reason=f"bisect step {progress.step} ({pending.phase}) of {progress.subject}: {pending.tested}"[:4096],
            )
        )
        return progress.model_copy(update={"runs_used": progress.runs_used + 1})

    # ----- outcomes

    def run_outcome(self, event: ResultEvent | GateResult) -> None:
        test_id = event.test_id
        for rid in self._active(test_id):
            progress = PROGRESS.get(self, progress_key(test_id, rid))
            if progress is None or progress.pending is None:
                continue
            pending = progress.pending
            if (event.commit, event.bundle, event.hardware_revision) != (
                pending.commit,
                pending.bundle,
                progress.hardware_revision,
            ):
                continue
            if progress.metric is not None:
                if isinstance(event, ResultEvent):
                    self._perf_outcome(test_id, progress, event)
            elif isinstance(event, ResultEvent):
                if event.status in ("failed", "error"):
                    self._decide(test_id, progress, "bad", runs=pending.runs + 1)
            else:
                failing = [
                    c
                    for c in event.checks
                    if not c.passed
                    and c.kind == progress.kind
                    and (progress.kind != "output" or c.name == progress.check_name)
                ]
                self._decide(test_id, progress, "bad" if failing else "good", runs=pending.runs + 1)

    def _perf_outcome(self, test_id: str, progress: BisectProgress, event: ResultEvent) -> None:
        pending = progress.pending
        assert pending is not None and progress.metric is not None and progress.direction is not None
        samples = event.metrics.get(progress.metric, ())
        if event.status not in ("passed", "flaky") or not samples:
            failures = pending.failures + 1
            if failures >= MAX_FAILURES:
                self._finish(
                    test_id, progress, problem=f"{failures} runs at {pending.tested} failed or had no {progress.metric}"
                )
                return
            progress = progress.model_copy(
                update={"pending": pending.model_copy(update={"failures": failures, "attempts": pending.attempts + 1})}
            )
            self._save(test_id, self._request(test_id, progress, self._alert(test_id, progress.regression_id)))
            return
        pending = pending.model_copy(
            update={
                "samples": (*pending.samples, *as_performance(samples, progress.direction).tolist()),
                "runs": pending.runs + 1,
            }
        )
        progress = progress.model_copy(update={"pending": pending})
        if len(pending.samples) < pending.wanted:
            self._save(test_id, progress)
            return
        assert progress.good_median is not None and progress.bad_median is not None
        median = float(np.median(pending.samples))
        boundary = (progress.good_median + progress.bad_median) / 2
        se = 1.2533 * (progress.noise or 0) * boundary / math.sqrt(len(pending.samples))
        if abs(median - boundary) < 0.5 * se and pending.wanted < MAX_ATTEMPTS * progress.repeats:
            progress = progress.model_copy(
                update={
                    "pending": pending.model_copy(
                        update={"attempts": pending.attempts + 1, "wanted": pending.wanted + progress.repeats}
                    )
                }
            )
            self._save(test_id, self._request(test_id, progress, self._alert(test_id, progress.regression_id)))
            return
        bad_is_lower = progress.bad_median < progress.good_median
        verdict: Verdict = "bad" if (median < boundary) == bad_is_lower else "good"
        self._decide(test_id, progress, verdict, runs=pending.runs, median=median, boundary=boundary)

    def _decide(
        self,
        test_id: str,
        progress: BisectProgress,
        verdict: Verdict,
        runs: int,
        median: float | None = None,
        boundary: float | None = None,
    ) -> None:
        pending = progress.pending
        assert pending is not None
        lo, hi, phase = progress.lo, progress.hi, progress.phase
        if phase == "attribute":
            if verdict == "bad":  # the code alone reproduces it on the good bundle
                alert = self._alert(test_id, progress.regression_id)
                phase, lo, hi = "code", -1, progress.n_changes - 1
                progress = progress.model_copy(update={"code_bundle": alert.good.bundle})
            else:
                phase, lo, hi = "bundle", 0, len(progress.bumps)
        elif verdict == "bad":
            hi = pending.index
        else:
            lo = pending.index
        left = hi - lo if phase != "attribute" else progress.n_changes + len(progress.bumps)
        summary = StepSummary(
            step=progress.step,
            phase=pending.phase,
            tested=pending.tested,
            commit=pending.commit,
            verdict=verdict,
            samples=len(pending.samples),
            median=median,
            candidates_left=max(left, 0),
        )
        self.emit(
            BisectStep(
                cause_id=self.event.id,
                regression_id=progress.regression_id,
                test_id=test_id,
                step=progress.step,
                phase=pending.phase,
                tested=pending.tested,
                commit=pending.commit,
                bundle=pending.bundle,
                verdict=verdict,
                samples=len(pending.samples),
                median=median,
                boundary=boundary,
                candidates_left=max(left, 0),
                runs=runs,
            )
        )
        progress = progress.model_copy(
            update={"phase": phase, "lo": lo, "hi": hi, "pending": None, "trail": (*progress.trail, summary)[-64:]}
        )
        self._next(test_id, progress)

    # ----- the end

    def _commit_culprit(self, test_id: str, progress: BisectProgress) -> Culprit:
        change = self._change(test_id, progress.regression_id, progress.hi)
        return Culprit(kind="commit", commit=change.sha, title=change.title, author=change.author, owners=change.owners)

    def _finish(
        self, test_id: str, progress: BisectProgress, culprit: Culprit | None = None, problem: str = ""
    ) -> None:
        alert = self._alert(test_id, progress.regression_id)
        if culprit is not None:
            what = (
                f"commit {culprit.commit[:10]} '{culprit.title[:80]}' by {culprit.author}"
                if culprit.kind == "commit"
                else f"{culprit.component} {culprit.from_version} -> {culprit.to_version}"
            )
            owners = ", ".join(culprit.owners) or "no owner in the owner map"
            summary = f"{alert.summary}. Culprit: {what} (owners: {owners}), after {len(progress.trail)} bisect steps"
        else:
            owners = ", ".join(progress.test_owners) or "no owner in the owner map"
            summary = f"{alert.summary}. No culprit: {problem} (the test's owners: {owners})"
        self.emit(
            RegressionAlert.model_validate(
                {
                    **alert.model_dump(exclude={"id"}),
                    "cause_id": self.event.id,
                    "stage": "culprit" if culprit else "unresolved",
                    "culprit": culprit.model_dump() if culprit else None,
                    "owners": culprit.owners if culprit else progress.test_owners,
                    "trail": [s.model_dump() for s in progress.trail],
                    "runs_used": progress.runs_used,
                    "problem": problem[:4096],
                    "summary": summary[:4096],
                }
            )
        )
        # Keep the small progress (it makes a redelivered plan a no-op); drop the plan's bulk.
        self._save(test_id, progress.model_copy(update={"pending": None, "phase": "done"}))
        self.set(alert_key(test_id, progress.regression_id), None)
        for chunk in range(math.ceil(progress.n_changes / CHUNK)):
            self.set(changes_key(test_id, progress.regression_id, chunk), None)
        self._set_active(test_id, tuple(r for r in self._active(test_id) if r != progress.regression_id))


def _with_bumps(bundle: Bundle, bumps: tuple[ComponentBump, ...]) -> Bundle:
    return bundle.model_copy(update={b.component: b.to_version for b in bumps})


def _bump_culprit(bump: ComponentBump) -> Culprit:
    return Culprit(
        kind="component",
        component=bump.component,
        from_version=bump.from_version,
        to_version=bump.to_version,
        related_commits=bump.related_commits,
        owners=bump.owners,
    )
