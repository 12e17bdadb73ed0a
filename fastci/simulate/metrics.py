"""What a simulated run measured, read off the events it produced (selection, test-plan, schedule, results).

Definitions (measured: the changes arriving in the measured days, after the warm-up):
- **CI latency** of a change: from its arrival to the last result of its presubmit work (CPU and
  hardware). **Time to a presubmit hardware result**: from the arrival of a hardware-path change
  to the last result of its hardware work (the selected models' runs, or the smoke test).
- **Time to first failure** of a faulty change: from its arrival to its first failing result
  (a test that detects the injected fault); a fault is *caught* when there is one.
- **Chip-hours**: chips held x seconds held, from placement to completion or preemption (work lost
  to preemption included); presubmit chip-hours are those of the measured changes; per class,
  those held within the measured days.
- **Queue waits**: seconds from queued to first placed, per class, for jobs queued in the measured days.
- **Nightly completion**: when the last job of a measured night's set completed, in hours from its
  00:00 start (the latest night when several are measured).
Changes still running when the simulation ends count with the time they had waited so far
(``unfinished`` says how many): a lower bound. A fault is *missed* when its change finished without
a failing result, *pending* when its change had not finished.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fastci.contracts.runs import RunRequested
from fastci.scheduling.events import ScheduleEvent
from fastci.simulate.arrivals import DAY, Change


def percentile(values: Sequence[float], share: float) -> float:
    """The ``share`` quantile by linear interpolation (numpy's default); nan for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    position = (len(ordered) - 1) * share
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class ChangeStats:
    change: Change
    pages: set[int] = field(default_factory=set)
    pages_total: int = 0
    jobs: int = 0
    hardware_jobs: int = 0
    completed: int = 0
    hardware_completed: int = 0
    done_s: float | None = None
    hardware_done_s: float | None = None
    first_failure_s: float | None = None
    selected: int = 0
    known: int = 0
    planned_models: int = 0

    @property
    def planned(self) -> bool:
        return self.pages_total > 0 and len(self.pages) == self.pages_total


class Metrics:
    def __init__(self, sim: Any, start_s: float) -> None:
        self.sim = sim
        self.start_s = start_s
        self.days = sim.settings.days
        self.by_commit: dict[str, ChangeStats] = {}
        self.change_of_plan: dict[str, ChangeStats] = {}
        self.change_of_job: dict[str, ChangeStats] = {}
        self.hardware_job: dict[str, bool] = {}
        self.job_of_run: dict[str, str] = {}
        self.request_day: dict[str, tuple[str, int]] = {}  # run request id -> (class, day)
        self.job_request: dict[str, str] = {}
        self.placed: dict[str, ScheduleEvent] = {}
        self.waits: dict[str, list[float]] = defaultdict(list)
        self.queued_at: dict[str, float] = {}
        self.chip_s: dict[str, float] = defaultdict(float)  # per class, clipped to the measured day
        self.presubmit_chip_s = 0.0  # of the measured day's changes
        self.nightly_done: dict[int, float] = {}
        self.nightly_left: dict[int, int] = defaultdict(int)
        self.preemptions: dict[str, int] = defaultdict(int)
        self.latest_sha: str | None = None
        self.end_s = start_s
        self.queued_now = 0  # jobs waiting in the pool's queues
        self.queued_max = 0
        self.largest_value = 0  # bytes of the biggest value the scheduler stored (filled at the end)
        sim.bus.listen("selection", self.on_selection)
        sim.bus.listen("test-plan", self.on_plan)
        sim.bus.listen("schedule", self.on_schedule)
        sim.bus.listen("results", self.on_result)

    # ----- the window

    def day_of(self, seconds: float) -> int:
        return math.floor((seconds - self.start_s) / DAY)

    def measured(self, day: int) -> bool:
        return 0 <= day < self.days

    @property
    def window(self) -> tuple[float, float]:
        return self.start_s, self.start_s + self.days * DAY

    def all_done(self) -> bool:
        """Every measured change finished and every measured night's set completed."""
        return all(s.done_s is not None for s in self.measured_changes()) and all(
            day in self.nightly_done for day in range(self.days)
        )

    # ----- inputs

    def arrived(self, change: Change) -> None:
        self.by_commit[change.commit_id] = ChangeStats(change)
        self.latest_sha = change.sha

    def requested(self, request: RunRequested, day: int) -> None:
        self.request_day[request.id] = (request.work_class, day)
        if request.work_class == "nightly":
            self.nightly_left[day] += 1

    def on_selection(self, selection: Any) -> None:
        stats = self.by_commit.get(selection.commit_id)
        if stats is not None:
            stats.selected = selection.metrics.kept
            stats.known = selection.metrics.tests_known

    def on_plan(self, plan: Any) -> None:
        stats = self.by_commit.get(plan.commit_id)
        if stats is None:
            return
        self.change_of_plan[plan.id] = stats
        stats.pages.add(plan.page)
        stats.pages_total = plan.pages
        stats.planned_models += sum(1 for e in plan.entries if e.test_id in self.sim.model_of)

    def on_schedule(self, event: ScheduleEvent) -> None:
        now = event.time.timestamp()
        self.end_s = max(self.end_s, now)
        self.queued_now += {"queued": 1, "requeued": 1, "placed": -1}.get(event.action, 0)
        self.queued_max = max(self.queued_max, self.queued_now)
        if event.action == "queued":
            self.queued_at[event.job_id] = now
            stats = self.change_of_plan.get(event.request_id)
            if stats is not None:
                self.change_of_job[event.job_id] = stats
                self.hardware_job[event.job_id] = event.chips > 0
                stats.jobs += 1
                stats.hardware_jobs += event.chips > 0
            self.job_request[event.job_id] = event.request_id
        elif event.action == "placed":
            self.placed[event.job_id] = event
            assert event.run_id is not None
            self.job_of_run[event.run_id] = event.job_id
            if event.attempt == 1 and self.measured(self.day_of(self.queued_at.get(event.job_id, now))):
                self.waits[event.work_class].append(event.wait_s)
        elif event.action in ("completed", "preempted"):
            self._held(event, now)
            if event.action == "preempted":
                self.preemptions[event.work_class] += 1
                return
            stats = self.change_of_job.get(event.job_id)
            if stats is not None:
                stats.completed += 1
                if self.hardware_job.get(event.job_id):
                    stats.hardware_completed += 1
                    if stats.hardware_completed == stats.hardware_jobs:
                        stats.hardware_done_s = now
                self._maybe_done(stats, now)
            request = self.request_day.get(self.job_request.get(event.job_id, ""))
            if request and request[0] == "nightly":
                day = request[1]
                self.nightly_left[day] -= 1
                if self.nightly_left[day] == 0:
                    self.nightly_done[day] = now

    def on_result(self, result: Any) -> None:
        if result.status not in ("failed", "error"):
            return
        stats = self.change_of_job.get(self.job_of_run.get(result.run_id, ""))
        if stats is not None and result.time is not None:
            failed_at = result.time.timestamp()
            if stats.first_failure_s is None or failed_at < stats.first_failure_s:
                stats.first_failure_s = failed_at

    def _held(self, event: ScheduleEvent, now: float) -> None:
        placed = self.placed.pop(event.job_id, None)
        if placed is None or not placed.chips:
            return
        began = placed.time.timestamp()
        start, end = self.window
        overlap = max(0.0, min(now, end) - max(began, start))
        self.chip_s[placed.work_class] += placed.chips * overlap
        stats = self.change_of_job.get(event.job_id)
        if stats is not None and self.measured(stats.change.day):
            self.presubmit_chip_s += placed.chips * (now - began)

    def settled(self, change: Change) -> None:
        """After a change's arrival was processed: a plan that asked for no work is done at once."""
        stats = self.by_commit.get(change.commit_id)
        if stats is not None and stats.jobs == 0:
            self._maybe_done(stats, change.arrival_s)

    def _maybe_done(self, stats: ChangeStats, now: float) -> None:
        if stats.done_s is None and stats.planned and stats.completed == stats.jobs:
            stats.done_s = now
            if stats.hardware_jobs == 0 and stats.change.hardware_path:
                stats.hardware_done_s = now

    def finish(self, now: float) -> None:
        """Account for what still holds chips when the simulation stops."""
        self.end_s = max(self.end_s, now)
        for job_id in list(self.placed):
            placed = self.placed[job_id]
            self._held(placed.model_copy(update={"action": "completed"}), now)

    # ----- the report

    def measured_changes(self) -> list[ChangeStats]:
        return [s for s in self.by_commit.values() if self.measured(s.change.day)]

    def report(self) -> dict[str, Any]:
        changes = self.measured_changes()
        end = self.end_s

        def latency(stats: ChangeStats, done: float | None) -> float:
            return (done if done is not None else end) - stats.change.arrival_s

        ci = [latency(s, s.done_s) for s in changes]
        hardware = [latency(s, s.hardware_done_s) for s in changes if s.change.hardware_path]
        faulty = [s for s in changes if s.change.fault is not None]
        caught = [s for s in faulty if s.first_failure_s is not None]
        first_failure = [s.first_failure_s - s.change.arrival_s for s in caught]  # type: ignore[operator]
        nights = [self.nightly_done.get(day) for day in range(self.days)]
        latest = None if None in nights else max(done - (self.start_s + day * DAY) for day, done in enumerate(nights))
        return {
            "changes": len(changes),
            "hardware_changes": len(hardware),
            "unfinished": sum(1 for s in changes if s.done_s is None),
            "ci_latency_mean_s": sum(ci) / len(ci) if ci else math.nan,
            "ci_latency_p50_s": percentile(ci, 0.5),
            "ci_latency_p90_s": percentile(ci, 0.9),
            "hardware_p50_s": percentile(hardware, 0.5),
            "hardware_p90_s": percentile(hardware, 0.9),
            "presubmit_chip_hours": self.presubmit_chip_s / 3600,
            "chip_hours_by_class": {k: v / 3600 for k, v in sorted(self.chip_s.items())},
            "waits_p50_s": {k: percentile(v, 0.5) for k, v in sorted(self.waits.items())},
            "waits_p90_s": {k: percentile(v, 0.9) for k, v in sorted(self.waits.items())},
            "nightly_done_h": None if latest is None else latest / 3600,  # the latest night's, from its 00:00
            "nightly_left": sum(self.nightly_left.get(day, 0) for day in range(self.days)),
            "faults": len(faulty),
            "caught": len(caught),
            "first_failure_p50_s": percentile(first_failure, 0.5),
            "first_failure_p90_s": percentile(first_failure, 0.9),
            "first_failure_mean_s": sum(first_failure) / len(first_failure) if first_failure else math.nan,
            # not caught although every job of the change ran: selection (or a shrunk config) missed it
            "missed": sorted(s.change.fault.name for s in faulty if s.first_failure_s is None and s.done_s is not None),
            # not caught yet: the change's jobs were still queued or running when the simulation ended
            "pending": sum(1 for s in faulty if s.first_failure_s is None and s.done_s is None),
            "kept_share": (sum(s.selected for s in changes) / sum(s.known for s in changes))
            if sum(s.known for s in changes)
            else math.nan,
            "models_per_hardware_change": (
                sum(s.planned_models for s in changes if s.change.hardware_path) / len(hardware)
                if hardware
                else math.nan
            ),
            "preemptions": dict(self.preemptions),
            "queued_max": self.queued_max,
            "largest_state_value_bytes": self.largest_value,
        }
