"""The discrete-event loop and the stand-in runner.

A heap of (time, sequence, action) is all the simulation needs: every actor (the change stream, the
nightly trigger, the runner) schedules plain callbacks, and no actor waits on another inside a
step, so simpy's processes would add a dependency without removing any code. Before the actions of a
new instant run, the loop publishes a ``clock`` tick: the pool scheduler's only notion of time.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from fastci.inputs import Bundle, ResultEvent
from fastci.runtime.memory import MemoryRuntime
from fastci.scheduling.events import DEFAULT_POOL, ClockTick, ScheduleEvent

SIM_BUNDLE = Bundle(compiler="cc-1.0", kernels="kn-1.0", runtime="rt-1.0", driver="dr-535", firmware="fw-7")


def at_seconds(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class Loop:
    def __init__(self, bus: MemoryRuntime, start_s: float, pool: str = DEFAULT_POOL) -> None:
        self.bus = bus
        self.pool = pool
        self.now = start_s
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._sequence = itertools.count()
        self._ticked: float | None = None

    def at(self, time_s: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._heap, (max(time_s, self.now), next(self._sequence), action))

    def after(self, delay_s: float, action: Callable[[], None]) -> None:
        self.at(self.now + delay_s, action)

    def run(self, until_s: float | None = None) -> None:
        """Run every action due up to ``until_s`` (all of them when None)."""
        while self._heap and (until_s is None or self._heap[0][0] <= until_s):
            time_s, _, action = heapq.heappop(self._heap)
            self.now = time_s
            if self._ticked != time_s:
                self._ticked = time_s
                self.bus.publish(ClockTick(pool=self.pool, time=at_seconds(time_s)))
            action()

    @property
    def idle(self) -> bool:
        return not self._heap


@dataclass(frozen=True)
class TestRun:
    """What one test of a placed job does: how long it takes and how it ends."""

    __test__ = False
    test_id: str
    duration_s: float
    status: str = "passed"


# (the placed event, its test) -> how the test runs; the runner asks once per attempt.
Outcome = Callable[[ScheduleEvent, str], TestRun]


class Runner:
    """Runs what the scheduler places: after the tests' durations it publishes one ``results`` event
    per test (run id and trigger as the schedule says). A preempted attempt publishes nothing; a
    resumed one runs only what was left after its last checkpoint."""

    def __init__(self, loop: Loop, outcome: Outcome, repo_of: Callable[[ScheduleEvent], str] | None = None) -> None:
        self.loop = loop
        self.outcome = outcome
        self.active: dict[str, str] = {}  # job id -> run id of the attempt running now
        self.finished_attempts: dict[str, int] = {}  # job id -> attempts that ran to their end
        loop.bus.listen("schedule", self.on_schedule)

    def on_schedule(self, event: ScheduleEvent) -> None:
        if event.action == "placed":
            assert event.job_id not in self.active, f"job {event.job_id} placed while it runs"
            assert event.run_id is not None
            self.active[event.job_id] = event.run_id
            runs = [self.outcome(event, test.test_id) for test in event.tests]
            total = sum(run.duration_s for run in runs)
            left = max(0.0, total - event.resume_from_s)
            scale = left / total if total > 0 else 0.0
            self.loop.after(left, lambda: self._finish(event, runs, scale))
        elif event.action == "preempted":
            self.active.pop(event.job_id, None)

    def _finish(self, placed: ScheduleEvent, runs: list[TestRun], scale: float) -> None:
        if self.active.get(placed.job_id) != placed.run_id:
            return  # preempted or evicted meanwhile: this attempt never finished
        del self.active[placed.job_id]
        self.finished_attempts[placed.job_id] = self.finished_attempts.get(placed.job_id, 0) + 1
        started = self.loop.now - sum(run.duration_s for run in runs) * scale
        node = placed.nodes[0] if placed.nodes else "cpu"
        configs = {test.test_id: dict(test.config) for test in placed.tests}
        elapsed = 0.0
        results = []
        for run in runs:
            elapsed += run.duration_s * scale
            results.append(
                ResultEvent(
                    test_id=run.test_id,
                    run_id=placed.run_id,
                    repo=placed.repo,
                    commit=placed.commit or "0000000",
                    bundle=placed.bundle or SIM_BUNDLE,
                    node_id=node,
                    hardware_revision=placed.hardware_revision or "cpu",
                    trigger=placed.work_class,
                    status=run.status,
                    duration_s=run.duration_s,
                    chips=placed.chips,
                    time=at_seconds(started + elapsed),
                    pool=placed.pool,
                    config=configs.get(run.test_id, {}),
                )
            )
        self.loop.bus.publish(*results)
