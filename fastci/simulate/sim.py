"""One simulated run of the CI: a replayed change stream through the real processors on the pool.

Processors (each through the same ``Driver`` the runtimes use, over in-memory state):
``test-selection`` -> ``test-plan`` -> ``pool-scheduler``; the ablation's variants construct the
first two with parts switched off. Around them, the simulation plays what is not a processor: the
change stream (``commits`` and recorded ``evidence``), the nightly trigger and developers
(``run-requested``), the clock (``clock``), and a runner that runs what the scheduler places and
publishes ``results`` (durations from ``fastci.simulate.fleet_suite``; a test fails when the change it
runs for carries a fault that test detects).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastci.contracts.runs import RunRequested
from fastci.core.events import derive_id
from fastci.inputs import CommitEvent, EvidenceEvent, ResultEvent
from fastci.planning.processor import TestPlanProcessor
from fastci.runtime.memory import MemoryRuntime
from fastci.scheduling.events import PoolConfig, ScheduleEvent
from fastci.scheduling.processor import PoolSchedulerProcessor, default_config
from fastci.selection.processor import SelectionProcessor
from fastci.selection.units import is_test_file
from fastci.simulate.arrivals import DAY, Change, Settings, Stream, change_stream, experiments
from fastci.simulate.fleet_suite import Durations, FleetModel, choose_models
from fastci.simulate.loop import SIM_BUNDLE, Loop, Runner, TestRun, at_seconds
from fastci.simulate.metrics import Metrics
from fastci.topology import SYSTEM

START_S = 1_795_996_800.0  # 2026-12-01 00:00 UTC, a Tuesday: the first measured day starts here
DRAIN_CHECK_S = 900.0
NIGHTLY_SUFFIX = "#nightly"  # nightly and experiment results are reported under their own repo names,
EXPERIMENT_REPO = "fleet/experiments"  # so a presubmit catalog never learns a run it would not select


@dataclass(frozen=True)
class Variant:
    name: str
    selection: bool
    pruning: bool
    risk_order: bool
    workload: bool


VARIANTS = (
    Variant("run-everything", selection=False, pruning=False, risk_order=False, workload=False),
    Variant("selection", selection=True, pruning=False, risk_order=False, workload=False),
    Variant("+pruning", selection=True, pruning=True, risk_order=False, workload=False),
    Variant("+risk order", selection=True, pruning=True, risk_order=True, workload=False),
    Variant("+workload optimisation", selection=True, pruning=True, risk_order=True, workload=True),
)


def touches_library(commit: CommitEvent) -> bool:
    """Whether a change touches library code: a Python file that is neither a test nor documentation."""
    return any(
        f.path.endswith(".py") and not is_test_file(f.path) and not f.path.startswith(("docs/", "doc/"))
        for f in commit.changed_files
    )


def plan_processor(variant: Variant) -> Any:

    return TestPlanProcessor(order="risk" if variant.risk_order else "declared", shrink=variant.workload)


class Simulation:
    def __init__(
        self,
        replay: Any,
        durations: Durations,
        variant: Variant,
        settings: Settings,
        pool: PoolConfig | None = None,
        models: list[FleetModel] | None = None,
        shrink_ratio: Callable[[FleetModel, dict], float] | None = None,
        workload_evidence: Callable[[FleetModel, EvidenceEvent], Any] | None = None,
        smoke_config: Callable[[FleetModel], dict] | None = None,
    ) -> None:
        self.replay = replay
        self.durations = durations
        self.variant = variant
        self.settings = settings
        self.repo = replay.commits[0].commit.repo
        base_tests = [r.test_id for r in replay.base_results]
        self.models = models or choose_models(base_tests)
        self.model_of = {m.stand_in: m for m in self.models}
        self.shrink_ratio = shrink_ratio or (lambda model, config: 1.0)
        self.workload_evidence = workload_evidence
        self.smoke_config = smoke_config or (lambda model: {})
        smoke = min((m for m in self.models if m.family == "lm-tiny" and not m.multi_node), key=lambda m: m.chips)
        self.pool = pool or default_config().model_copy(
            update={
                "version": "simulated",
                "smoke_test": smoke.stand_in,
                "smoke_chips": smoke.chips,
                "smoke_estimated_s": durations.mean_smoke(smoke),
            }
        )
        self.bus = MemoryRuntime(
            SYSTEM,
            [
                SelectionProcessor(pruning=variant.pruning, run_everything=not variant.selection),
                plan_processor(variant),
                PoolSchedulerProcessor(),
            ],
        )
        self.begin_s = START_S - settings.warmup_h * 3600
        self.loop = Loop(self.bus, self.begin_s)
        self.runner = Runner(self.loop, self.outcome)
        self.stream: Stream = change_stream(
            [c.commit.time.timestamp() for c in replay.commits],
            [c.commit.sha for c in replay.commits],
            [c.faults for c in replay.commits],
            settings,
            START_S,
            [touches_library(c.commit) for c in replay.commits],
        )
        self.metrics = Metrics(self, START_S)
        self.requested: dict[str, tuple[str, Any, float]] = {}  # test id -> (kind, model, seconds)

    # ----- what the runner does

    def outcome(self, placed: ScheduleEvent, test_id: str) -> TestRun:
        rng = random.Random(f"{self.settings.seed}:{placed.job_id}:{test_id}")
        if placed.work_class != "presubmit":
            kind, _, seconds = self.requested[test_id]
            return TestRun(test_id, seconds)
        stats = self.metrics.change_of_job.get(placed.job_id)
        change = stats.change if stats is not None else None
        model = self.model_of.get(test_id)
        if model is not None:  # on hardware, or off the hardware path in its CPU/simulator form, as long
            config = next((t.config for t in placed.tests if t.test_id == test_id), {})
            seconds = self.durations.smoke(model, rng) * self.shrink_ratio(model, dict(config))
        else:
            seconds = self.durations.unit_test(test_id, rng)
        failing = change is not None and change.fault is not None and test_id in change.fault.failing
        return TestRun(test_id, seconds, "failed" if failing else "passed")

    # ----- what arrives

    def run(self) -> Metrics:
        self.loop.at(self.begin_s, self.prepare)
        for change in self.stream.changes:
            self.loop.at(change.arrival_s, lambda change=change: self.arrive(change))
        for day in range(int(self.settings.days + self.settings.drain_days)):
            self.loop.at(START_S + day * DAY, lambda day=day: self.nightly(day))
        for experiment in experiments(self.settings, START_S):
            self.loop.at(experiment.arrival_s, lambda e=experiment: self.experiment(e))
        measured_end = START_S + self.settings.days * DAY
        end = measured_end + self.settings.drain_days * DAY
        check = measured_end
        while check < end:  # after the measured days, stop as soon as everything measured is done
            self.loop.run(until_s=check)
            if self.metrics.all_done():
                break
            check += DRAIN_CHECK_S
        else:
            self.loop.run(until_s=end)
        self.metrics.finish(self.loop.now)
        self.bus.drain()
        self.metrics.largest_value = self.bus.largest.get(PoolSchedulerProcessor.name, 0)
        if self.bus.dead_letters:  # a processor refused an event: the figures would be about a broken run
            first = self.bus.dead_letters[0]
            raise RuntimeError(
                f"{len(self.bus.dead_letters)} dead letter(s); the first from {first.source}: {first.error}"
            )
        return self.metrics

    def prepare(self) -> None:
        """The pool's config, and the history the catalog starts from: one measured run per test
        (unit tests as recorded; models as their smoke run on the fleet), then the base evidence."""
        self.bus.publish(self.pool)
        history = []
        for base in self.replay.base_results:
            model = self.model_of.get(base.test_id)
            history.append(
                ResultEvent(
                    test_id=base.test_id,
                    run_id="history",
                    repo=self.repo,
                    commit=base.commit,
                    bundle=SIM_BUNDLE,
                    node_id="history",
                    hardware_revision="any",
                    trigger="presubmit",
                    status="passed",
                    duration_s=self.durations.mean_smoke(model)
                    if model
                    else self.durations.mean_unit_test(base.test_id),
                    chips=model.chips if model else 0,
                    time=at_seconds(self.begin_s - DAY),
                    config=self.smoke_config(model) if model else {},
                )
            )
        self.bus.publish(*history)
        self.bus.publish(*self.base_evidence())

    def base_evidence(self) -> list[EvidenceEvent]:
        return [self.with_workload(e) for e in self.replay.base_evidence]

    def with_workload(self, event: EvidenceEvent) -> EvidenceEvent:
        model = self.model_of.get(event.test_id)
        if model is None or self.workload_evidence is None:
            return event
        return event.model_copy(update={"workload": self.workload_evidence(model, event)})

    def arrive(self, change: Change) -> None:
        recorded = self.replay.commits[change.index]
        if change.loop_start and change.loop > 0:
            self.bus.publish(*self.base_evidence())  # the graph as the recording began it
        document = recorded.commit.model_dump(exclude={"id"})
        previous = self.stream.changes[change.number - 1].sha if change.number else None
        document.update(
            sha=change.sha,
            time=at_seconds(change.arrival_s),
            hardware_path=change.hardware_path,
            parents=(previous,) if previous else (),
        )
        commit = CommitEvent.model_validate(document)
        change.commit_id = commit.id
        self.metrics.arrived(change)
        self.bus.publish(commit)
        self.metrics.settled(change)
        self.bus.publish(*(self.with_workload(e) for e in recorded.evidence))

    def nightly(self, day: int) -> None:
        sha = self.metrics.latest_sha or self.replay.commits[0].commit.sha
        for model in self.models:
            seconds = self.durations.nightly(model, random.Random(f"{self.settings.seed}:nightly:{day}:{model.name}"))
            test_id = f"{model.stand_in}{NIGHTLY_SUFFIX}"
            self.requested[test_id] = ("nightly", model, seconds)
            request = RunRequested(
                cause_id=derive_id("nightly", self.repo, day),
                purpose=f"nightly:{model.name}",
                test_id=test_id,
                repo=f"{self.repo}{NIGHTLY_SUFFIX}",
                commit=sha,
                bundle=SIM_BUNDLE,
                hardware_revision="any",
                work_class="nightly",
                repeats=1,
                requested_by="nightly-trigger",
                chips=model.chips,
                estimated_s=self.durations.mean_nightly(model),
                config={"model": model.name},
            )
            self.metrics.requested(request, day)
            self.bus.publish(request)

    def experiment(self, experiment: Any) -> None:
        model = next(
            m
            for m in self.models
            if m.family == ("lm-tiny", "convnet-small", "speech-conv-attn", "dlrm-small")[experiment.family_index]
        )
        rng = random.Random(f"{self.settings.seed}:{experiment.name}")
        seconds = self.durations.nightly(model, rng) * experiment.length
        self.requested[experiment.name] = ("dev", model, seconds)
        request = RunRequested(
            cause_id=derive_id("experiment", experiment.name),
            purpose="experiment",
            test_id=experiment.name,
            repo=EXPERIMENT_REPO,
            commit="0000000",
            bundle=SIM_BUNDLE,
            hardware_revision="any",
            work_class="dev",
            repeats=1,
            requested_by="developer",
            chips=experiment.chips,
            estimated_s=seconds,
        )
        self.metrics.requested(request, math.floor((experiment.arrival_s - START_S) / DAY))
        self.bus.publish(request)
