"""regression-detector: performance baselines and correctness-gate tracks, per test.

Performance, per (test, metric, hardware revision), from nightly results that passed:
- the baseline is the samples of recent accepted nights since the last change point (at most
  ``POOL_SAMPLES``; each night keeps a sketch of at most ``NIGHT_SAMPLES`` order statistics, so a
  baseline spans several nights however many repeats a run has), kept in state with a window of
  nightly medians (``SERIES``);
- a night whose samples fail ``perfstats.compare`` against the baseline becomes *suspect* and a
  confirmation run is requested on another node (work class bisect, same commit and bundle); the
  regression is *detected* only when the confirmation (or the next night) fails the gate too, so a
  single noisy night or a sick node is dismissed, not alerted;
- after each accepted night, change-point detection over the accepted medians finds sustained
  shifts too small for one night's repeats; a worsening one is detected at its change point, any
  other one starts a new baseline level;
- a detected regression stays open (its nights stay out of the baseline) until a night is back
  within ``min_effect`` of the old baseline and confidently better than the regressed nights
  (recovered), or ``ACCEPT_AFTER`` nights pass (the new normal).

Correctness, per (test, hardware revision), from ``gate-results``: a nightly failure after a passing
night is suspect, confirmed the same way, then detected (kind: the first failing check).

Evidence hygiene: flaky runs and results excluded by ``baseline-guard`` (sick nodes) never enter a
baseline; a flaky test is not judged at all: one marked flaky by ``flaky-detector`` (``flaky-verdicts``),
or with ``FLAKY_LIMIT`` runs among its last ``RECENT`` nightly runs that passed only on retry (the
same rule, ``fastci.shared.flakiness``, applied to the nightly series this processor sees).
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from fastci.contracts.baseline_exclusions import BaselineExclusion
from fastci.contracts.flaky_verdicts import FlakyVerdict
from fastci.contracts.regression_alerts import CheckOutcome, Endpoint, PerfEvidence, RegressionAlert, SeriesPoint
from fastci.contracts.runs import RunRequested
from fastci.core.events import Config, Event, Record, derive_id
from fastci.core.processor import KeySpace, Processor, StateReader, Step, UnitOfWork
from fastci.inputs import Bundle, ResultEvent
from fastci.regression.changepoint import change_points
from fastci.regression.events import GateResult
from fastci.shared.flakiness import RECENT, RETRY_LIMIT, flaky_by_retries
from fastci.shared.perfstats import PerfGate, compare, metric_direction, relative_noise, seed_from, sketch

GATE = PerfGate()
POOL_SAMPLES = 1024  # the baseline: this many samples of the newest accepted nights
NIGHT_SAMPLES = 256  # kept per night: evenly spaced order statistics of its samples (a quantile sketch)
SERIES = 60
MIN_BASELINE_NIGHTS = 2
ACCEPT_AFTER = 14
FLAKY_LIMIT = RETRY_LIMIT
EXCLUDED_REMEMBERED = 128
CPD_MAX_P = 0.001
NAME = "regression-detector"

NightStatus = Literal["accepted", "suspect", "dismissed", "regressed", "excluded", "flaky"]
TrackStatus = Literal["ok", "suspect", "regressed"]


class Night(Record):
    result_id: str
    run_id: str
    commit: str
    bundle: Bundle
    node_id: str
    median: float
    n: int
    status: NightStatus
    samples: tuple[float, ...] = ()  # kept while the night can be in a baseline
    time: datetime | None = None

    def endpoint(self) -> Endpoint:
        return Endpoint(
            result_id=self.result_id,
            run_id=self.run_id,
            commit=self.commit,
            bundle=self.bundle,
            node_id=self.node_id,
            median=self.median,
        )


class RunContext(Record):
    """What a confirmation or bisect run must repeat: the suspect run's code, stack, seed, config."""

    repo: str
    commit: str
    bundle: Bundle
    seed: int | None = None
    config: Config = Field(default_factory=dict)


class PerfTrack(Record):
    metric: str
    hardware_revision: str
    status: TrackStatus = "ok"
    nights: tuple[Night, ...] = ()
    level_since: str | None = None  # result id of the night the current baseline level starts at
    suspect: str | None = None  # result id of the suspect night
    context: RunContext | None = None
    confirm_wanted: int = 0
    confirm_samples: tuple[float, ...] = ()
    regression_id: str | None = None
    regressed_nights: int = 0


class GateTrack(Record):
    hardware_revision: str
    status: TrackStatus = "ok"
    last_pass: Endpoint | None = None
    suspect: Endpoint | None = None
    suspect_checks: tuple[CheckOutcome, ...] = ()
    context: RunContext | None = None
    regression_id: str | None = None
    regression_subject: str | None = None
    regression_kind: str | None = None


class TestFacts(Record):
    __test__ = False
    recent_statuses: tuple[str, ...] = ()
    marked_flaky: bool = False  # by flaky-detector
    excluded: tuple[str, ...] = ()
    tracks: tuple[str, ...] = ()  # state keys of this test's perf and gate tracks


# The detector's kinds of state, each under a test.
PERF = KeySpace("perf", PerfTrack, ("metric", "hardware_revision"))  # a performance baseline track
GATES = KeySpace("gate", GateTrack, ("hardware_revision",))  # a correctness-gate track
FACTS = KeySpace("facts", TestFacts)  # what the detector knows of the test itself


def perf_key(test_id: str, metric: str, hardware: str) -> str:
    return PERF.key(test_id, metric, hardware)


def gate_key(test_id: str, hardware: str) -> str:
    return GATES.key(test_id, hardware)


def facts_key(test_id: str) -> str:
    return FACTS.key(test_id)


def regression_id_for(cause_id: str, subject: str) -> str:
    return derive_id(RegressionAlert.TOPIC, cause_id, "detected", subject)


class RegressionDetectorProcessor(Processor[Record]):
    name: ClassVar[str] = NAME
    inputs: ClassVar[tuple[str, ...]] = (
        ResultEvent.TOPIC,
        GateResult.TOPIC,
        BaselineExclusion.TOPIC,
        FlakyVerdict.TOPIC,
    )
    outputs: ClassVar[tuple[str, ...]] = (RegressionAlert.TOPIC, RunRequested.TOPIC)
    key_spaces = (PERF, GATES, FACTS)
    state_key: ClassVar[str] = "key"

    def ignores(self, event: Event) -> bool:
        # baselines are per stack and hardware: a plain repository's result has neither
        return isinstance(event, ResultEvent) and (event.bundle is None or event.hardware_revision is None)

    def process(self, state: StateReader[Record], event: Event) -> Step[Record]:
        if self.ignores(event):
            return Step()
        if isinstance(event, ResultEvent):
            return _Work(state, event.test_id).result(event)
        if isinstance(event, GateResult):
            return _Work(state, event.test_id).gate_result(event)
        if isinstance(event, FlakyVerdict):
            return _Work(state, event.test_id).flaky_verdict(event)
        assert isinstance(event, BaselineExclusion)
        return _Work(state, event.test_id).exclusion(event)


class _Work(UnitOfWork[Record]):
    """One event's worth of reads and writes for one test."""

    def __init__(self, state: StateReader[Record], test_id: str) -> None:
        super().__init__(state)
        self.test_id = test_id
        self.facts = FACTS.get(self, facts_key(test_id)) or TestFacts()

    def _set_facts(self, facts: TestFacts) -> None:
        self.facts = facts
        self.set(facts_key(self.test_id), facts)

    def _track_known(self, key: str) -> None:
        if key not in self.facts.tracks:
            self._set_facts(self.facts.model_copy(update={"tracks": (*self.facts.tracks, key)[-256:]}))

    @property
    def flaky(self) -> bool:
        return self.facts.marked_flaky or flaky_by_retries(self.facts.recent_statuses)

    def flaky_verdict(self, event: FlakyVerdict) -> Step[Record]:
        if event.flaky != self.facts.marked_flaky:
            self._set_facts(self.facts.model_copy(update={"marked_flaky": event.flaky}))
        return self.step()

    # ----- results (performance)

    def result(self, event: ResultEvent) -> Step[Record]:
        if event.trigger == "nightly":
            self._set_facts(
                self.facts.model_copy(update={"recent_statuses": (*self.facts.recent_statuses, event.status)[-RECENT:]})
            )
        if event.status not in ("passed", "flaky"):
            return self.step()
        excluded = event.id in self.facts.excluded
        confirm_wanted = 0
        for metric, samples in event.metrics.items():
            direction = metric_direction(metric)
            if direction is None or not samples or any(s <= 0 for s in samples):
                continue
            key = perf_key(self.test_id, metric, event.hardware_revision)
            track = PERF.get(self, key) or PerfTrack(metric=metric, hardware_revision=event.hardware_revision)
            if event.trigger == "nightly":
                self._track_known(key)
                status: NightStatus = (
                    "excluded" if excluded else "flaky" if event.status == "flaky" or self.flaky else "accepted"
                )
                track, wanted = self._night(track, event, samples, direction, status)
                confirm_wanted = max(confirm_wanted, wanted)
            elif (
                event.trigger == "bisect"
                and track.status == "suspect"
                and not excluded
                and _same_run(track.context, event)
            ):
                track = self._confirmation(track, event, samples, direction)
            else:
                continue
            self.set(key, track)
        if confirm_wanted:
            self.emit(_confirm_request(event, confirm_wanted))
        return self.step()

    def _night(
        self, track: PerfTrack, event: ResultEvent, samples, direction, status: NightStatus
    ) -> tuple[PerfTrack, int]:
        night = Night(
            result_id=event.id,
            run_id=event.run_id,
            commit=event.commit,
            bundle=event.bundle,
            node_id=event.node_id,
            median=float(np.median(samples)),
            n=len(samples),
            status=status,
            samples=tuple(samples),
            time=event.time,
        )
        if status != "accepted":
            return _append(track, night.model_copy(update={"samples": ()})), 0
        if track.status != "suspect":  # what a confirmation or bisect run of this night must repeat
            track = track.model_copy(
                update={
                    "context": RunContext(
                        repo=event.repo,
                        commit=event.commit,
                        bundle=event.bundle,
                        seed=event.seed,
                        config=dict(event.config),
                    )
                }
            )
        baseline = _pool(track)
        seed = seed_from(event.id, track.metric)
        if track.status == "suspect":  # the next night arrived before the confirmation did
            verdict = compare(baseline, samples, direction, GATE, seed)
            if verdict.regression:
                return self._detect(
                    _append(track, night.model_copy(update={"status": "regressed"})),
                    event.id,
                    direction,
                    samples,
                    "gate",
                ), 0
            track = _set_night(track, track.suspect, "dismissed").model_copy(update={"status": "ok", "suspect": None})
        if track.status == "regressed":
            return self._while_regressed(track, night, baseline, samples, direction, seed, event.id), 0
        if _nights_in_pool(track) < MIN_BASELINE_NIGHTS:
            return _append(track, night), 0
        verdict = compare(baseline, samples, direction, GATE, seed)
        if verdict.regression:
            track = _append(track, night.model_copy(update={"status": "suspect"})).model_copy(
                update={"status": "suspect", "suspect": event.id, "confirm_wanted": len(samples), "confirm_samples": ()}
            )
            return track, len(samples)
        return self._after_accepting(_append(track, night), direction, event.id), 0

    def _while_regressed(
        self, track: PerfTrack, night: Night, baseline, samples, direction, seed, cause_id
    ) -> PerfTrack:
        """Recovered when the night is back within min_effect of the old baseline and confidently
        better than the regressed nights (one lucky noisy night is not a fix)."""
        regressed = [s for n in track.nights if n.status == "regressed" for s in n.samples][-POOL_SAMPLES:]
        back = compare(baseline, samples, direction, GATE, seed).ratio >= 1 - GATE.effect
        if back and compare(samples, regressed, direction, GATE, seed).regression:
            self.emit(self._recovered(track, night, cause_id))
            return _append(track, night).model_copy(
                update={"status": "ok", "regression_id": None, "regressed_nights": 0}
            )
        track = _append(track, night.model_copy(update={"status": "regressed"}))
        if track.regressed_nights + 1 < ACCEPT_AFTER:
            return track.model_copy(update={"regressed_nights": track.regressed_nights + 1})
        # Nobody fixed it: the regressed level is the new normal.
        first = next((n.result_id for n in track.nights if n.status == "regressed"), night.result_id)
        nights = tuple(
            n.model_copy(update={"status": "accepted"}) if n.status == "regressed" else n for n in track.nights
        )
        return track.model_copy(
            update={
                "status": "ok",
                "nights": nights,
                "level_since": first,
                "regression_id": None,
                "regressed_nights": 0,
            }
        )

    def _after_accepting(self, track: PerfTrack, direction, cause_id: str) -> PerfTrack:
        """Change points over the accepted medians: a worsening one is a regression, any other a new level."""
        accepted = [n for n in track.nights if n.status == "accepted"]
        medians = [n.median if direction == "higher" else 1 / n.median for n in accepted]
        points = change_points(medians, min_size=2, max_p=CPD_MAX_P, min_effect=GATE.effect)
        if not points:
            return track
        last = points[-1]
        start = accepted[last.index].result_id
        ids = [n.result_id for n in track.nights]
        if track.level_since in ids and ids.index(start) <= ids.index(track.level_since):
            return track  # a change point we already know about
        if last.after >= last.before:
            return track.model_copy(update={"level_since": start})
        later = {n.result_id for n in accepted[last.index :]}
        nights = tuple(
            n.model_copy(update={"status": "regressed"}) if n.result_id in later else n for n in track.nights
        )
        track = track.model_copy(update={"nights": nights})
        candidate = [s for n in accepted[last.index :] for s in n.samples]
        return self._detect(track, cause_id, direction, candidate, "change-point", bad_id=start)

    def _confirmation(self, track: PerfTrack, event: ResultEvent, samples, direction) -> PerfTrack:
        gathered = (*track.confirm_samples, *samples)
        track = track.model_copy(update={"confirm_samples": gathered})
        if len(gathered) < track.confirm_wanted:
            return track
        verdict = compare(_pool(track), gathered, direction, GATE, seed_from(event.id, track.metric))
        if verdict.regression:
            track = _set_night(track, track.suspect, "regressed")
            return self._detect(track, event.id, direction, gathered, "gate")
        track = _set_night(track, track.suspect, "dismissed")
        return track.model_copy(update={"status": "ok", "suspect": None, "confirm_samples": ()})

    def _detect(
        self, track: PerfTrack, cause_id: str, direction, candidate, method, bad_id: str | None = None
    ) -> PerfTrack:
        bad_id = bad_id or track.suspect or track.nights[-1].result_id
        nights = {n.result_id: n for n in track.nights}
        bad = nights[bad_id]
        order = [n.result_id for n in track.nights]
        good = next((n for n in reversed(track.nights[: order.index(bad_id)]) if n.status == "accepted"), None)
        if good is None:
            return track.model_copy(update={"status": "ok", "suspect": None})
        baseline = _pool(track, before=bad_id)
        verdict = compare(baseline, candidate, direction, GATE, seed_from(cause_id, track.metric))
        subject = f"{track.metric}@{track.hardware_revision}"
        regression_id = regression_id_for(cause_id, subject)
        accepted = [i for i, n in enumerate(track.nights) if n.status == "accepted"]
        medians = [track.nights[i].median if direction == "higher" else 1 / track.nights[i].median for i in accepted]
        cps = tuple(
            accepted[p.index] for p in change_points(medians, min_size=2, max_p=CPD_MAX_P, min_effect=GATE.effect)
        )
        evidence = PerfEvidence(
            metric=track.metric,
            direction=direction,
            method=method,
            threshold=GATE.threshold,
            min_effect=GATE.effect,
            ratio=_finite(verdict.ratio),
            ci_low=_finite(verdict.ci_low),
            ci_high=_finite(verdict.ci_high),
            p_value=_finite(verdict.p_value),
            noise=_finite(relative_noise(baseline)),
            baseline_samples=tuple(baseline[-4096:]),
            candidate_samples=tuple(candidate[-4096:]),
            series=tuple(
                SeriesPoint(result_id=n.result_id, commit=n.commit, median=n.median, samples=n.n, status=n.status)
                for n in track.nights
            ),
            change_points=cps,
        )
        context = track.context or RunContext(repo="unknown", commit=bad.commit, bundle=bad.bundle)
        how = "confirmed by a rerun" if method == "gate" else "sustained over the nightly series"
        summary = (
            f"{track.metric} on {track.hardware_revision}: {verdict.loss:.1%} worse than baseline "
            f"(p={verdict.p_value:.2g}, {how}); last good {good.commit[:10]}, first bad {bad.commit[:10]}"
        )
        self.emit(
            RegressionAlert(
                cause_id=cause_id,
                stage="detected",
                subject=subject,
                regression_id=regression_id,
                kind="performance",
                test_id=self.test_id,
                repo=context.repo,
                hardware_revision=track.hardware_revision,
                good=good.endpoint(),
                bad=bad.endpoint(),
                seed=context.seed,
                config=context.config,
                summary=summary,
                perf=evidence,
            )
        )
        return track.model_copy(
            update={
                "status": "regressed",
                "suspect": None,
                "regression_id": regression_id,
                "regressed_nights": 0,
                "confirm_samples": (),
            }
        )

    def _recovered(self, track: PerfTrack, night: Night, cause_id: str) -> RegressionAlert:
        subject = f"{track.metric}@{track.hardware_revision}"
        good = night.endpoint()
        return RegressionAlert(
            cause_id=cause_id,
            stage="recovered",
            subject=subject,
            regression_id=track.regression_id or "",
            kind="performance",
            test_id=self.test_id,
            repo=(track.context.repo if track.context else "") or "unknown",
            hardware_revision=track.hardware_revision,
            good=good,
            bad=good,
            summary=f"{track.metric} on {track.hardware_revision} is back to its baseline at {night.commit[:10]}",
        )

    # ----- gate results (correctness)

    def gate_result(self, event: GateResult) -> Step[Record]:
        if event.result_id in self.facts.excluded:
            return self.step()
        key = gate_key(self.test_id, event.hardware_revision)
        track = GATES.get(self, key) or GateTrack(hardware_revision=event.hardware_revision)
        here = Endpoint(
            result_id=event.result_id,
            run_id=event.run_id,
            commit=event.commit,
            bundle=event.bundle,
            node_id=event.node_id,
        )
        if event.trigger == "nightly":
            self._track_known(key)
            track = self._gate_night(track, event, here)
        elif (
            event.trigger == "bisect"
            and track.status == "suspect"
            and track.suspect is not None
            and (event.commit, event.bundle) == (track.suspect.commit, track.suspect.bundle)
        ):
            if event.passed:
                track = track.model_copy(update={"status": "ok", "suspect": None, "suspect_checks": ()})
            else:
                track = self._gate_detect(track, event)
        else:
            return self.step()
        self.set(key, track)
        return self.step()

    def _gate_night(self, track: GateTrack, event: GateResult, here: Endpoint) -> GateTrack:
        if event.passed:
            if track.status == "regressed":
                self.emit(
                    RegressionAlert(
                        cause_id=event.id,
                        stage="recovered",
                        subject=track.regression_subject or f"correctness@{track.hardware_revision}",
                        regression_id=track.regression_id or "",
                        kind=track.regression_kind or "output",  # type: ignore[arg-type]
                        test_id=self.test_id,
                        repo=event.repo,
                        hardware_revision=track.hardware_revision,
                        good=here,
                        bad=here,
                        summary=f"gates pass again on {track.hardware_revision} at {event.commit[:10]}",
                    )
                )
            return track.model_copy(update={"status": "ok", "last_pass": here, "suspect": None, "regression_id": None})
        if track.status == "suspect":  # failed again the next night: confirmed
            return self._gate_detect(track, event)
        if track.status == "regressed" or track.last_pass is None or self.flaky:
            return track
        context = RunContext(
            repo=event.repo, commit=event.commit, bundle=event.bundle, seed=event.seed, config=dict(event.config)
        )
        self.emit(
            RunRequested(
                cause_id=event.id,
                purpose="confirm",
                test_id=self.test_id,
                repo=event.repo,
                commit=event.commit,
                bundle=event.bundle,
                hardware_revision=event.hardware_revision,
                work_class="bisect",
                repeats=1,
                seed=event.seed,
                config=event.config,
                avoid_nodes=(event.node_id,),
                requested_by=NAME,
                reason=f"confirm a correctness gate failure of {event.run_id} on another node",
            )
        )
        return track.model_copy(
            update={"status": "suspect", "suspect": here, "suspect_checks": event.checks, "context": context}
        )

    def _gate_detect(self, track: GateTrack, event: GateResult) -> GateTrack:
        failing = [c for c in event.checks if not c.passed] or list(track.suspect_checks)
        kind = failing[0].kind if failing else "output"
        subject = f"{kind}:{failing[0].name if failing else 'outputs'}@{track.hardware_revision}"
        regression_id = regression_id_for(event.id, subject)
        assert track.last_pass is not None and track.suspect is not None
        what = "; ".join(c.detail for c in failing[:3])
        self.emit(
            RegressionAlert(
                cause_id=event.id,
                stage="detected",
                subject=subject,
                regression_id=regression_id,
                kind=kind,
                test_id=self.test_id,
                repo=event.repo,
                hardware_revision=track.hardware_revision,
                good=track.last_pass,
                bad=track.suspect,
                seed=track.context.seed if track.context else None,
                config=track.context.config if track.context else {},
                summary=f"correctness gate fails on {track.hardware_revision} (confirmed): {what}"[:4096],
                checks=tuple(failing),
            )
        )
        return track.model_copy(
            update={
                "status": "regressed",
                "regression_id": regression_id,
                "regression_subject": subject,
                "regression_kind": kind,
            }
        )

    # ----- exclusions

    def exclusion(self, event: BaselineExclusion) -> Step[Record]:
        if event.result_id in self.facts.excluded:
            return self.step()
        self._set_facts(
            self.facts.model_copy(update={"excluded": (*self.facts.excluded, event.result_id)[-EXCLUDED_REMEMBERED:]})
        )
        for key in self.facts.tracks:  # perf and gate keys
            held = self.get(key)
            if isinstance(held, PerfTrack) and any(n.result_id == event.result_id for n in held.nights):
                track = _set_night(held, event.result_id, "excluded")
                if track.suspect == event.result_id:
                    track = track.model_copy(update={"status": "ok", "suspect": None, "confirm_samples": ()})
                self.set(key, track)
            elif isinstance(held, GateTrack) and held.suspect is not None and held.suspect.result_id == event.result_id:
                self.set(key, held.model_copy(update={"status": "ok", "suspect": None}))
        return self.step()


def _same_run(context: RunContext | None, event: ResultEvent) -> bool:
    return context is not None and context.commit == event.commit and context.bundle == event.bundle


def _append(track: PerfTrack, night: Night) -> PerfTrack:
    """Add a night; keep sample sketches only for the nights the baseline pool can still use."""
    if len(night.samples) > NIGHT_SAMPLES:
        night = night.model_copy(update={"samples": sketch(night.samples, NIGHT_SAMPLES)})
    nights = [*track.nights, night][-SERIES:]
    kept, budget = [], POOL_SAMPLES * 2
    for n in reversed(nights):
        if n.samples and (n.status not in ("accepted", "suspect", "regressed") or budget <= 0):
            n = n.model_copy(update={"samples": ()})
        budget -= len(n.samples)
        kept.append(n)
    return track.model_copy(update={"nights": tuple(reversed(kept))})


def _set_night(track: PerfTrack, result_id: str | None, status: NightStatus) -> PerfTrack:
    nights = tuple(n.model_copy(update={"status": status}) if n.result_id == result_id else n for n in track.nights)
    return track.model_copy(update={"nights": nights})


def _level_nights(track: PerfTrack, before: str | None = None) -> list[Night]:
    ids = [n.result_id for n in track.nights]
    start = ids.index(track.level_since) if track.level_since in ids else 0
    end = ids.index(before) if before in ids else len(ids)
    return [n for n in track.nights[start:end] if n.status == "accepted" and n.samples]


def _nights_in_pool(track: PerfTrack) -> int:
    return len(_level_nights(track))


def _pool(track: PerfTrack, before: str | None = None) -> list[float]:
    """Samples of the newest accepted nights of the current level, at most POOL_SAMPLES."""
    pool: list[float] = []
    for night in reversed(_level_nights(track, before)):
        room = POOL_SAMPLES - len(pool)
        if room <= 0:
            break
        samples = night.samples if len(night.samples) <= room else sketch(night.samples, room)
        pool.extend(samples)
    return pool


def _finite(value: float) -> float:
    return value if math.isfinite(value) else 0.0


def _confirm_request(event: ResultEvent, repeats: int) -> RunRequested:
    return RunRequested(
        cause_id=event.id,
        purpose="confirm",
        test_id=event.test_id,
        repo=event.repo,
        commit=event.commit,
        bundle=event.bundle,
        hardware_revision=event.hardware_revision,
        work_class="bisect",
        repeats=repeats,
        seed=event.seed,
        config=event.config,
        avoid_nodes=(event.node_id,),
        requested_by=NAME,
        reason=f"confirm a performance drop seen in {event.run_id} on {event.node_id}",
    )
