"""A simulated week on the default pool, through the real pool-scheduler processor: proven by ids.

Nightly qualification every night (single-node runs and two 4-node gangs), presubmit runs in the
working day, developer experiments, bisect runs, two releases (one lands in the middle of a
nightly run and preempts it), a node quarantined for an afternoon. A stand-in runner runs what is
placed and reports results; preempted attempts report nothing and resume from their checkpoint.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict, deque
from datetime import UTC, datetime

import pytest
from factories import BUNDLE

from fastci.contracts.node_states import NodeStateChanged
from fastci.contracts.runs import RunRequested
from fastci.runtime.memory import MemoryRuntime
from fastci.scheduling.events import ScheduleEvent
from fastci.scheduling.processor import DEFAULT_CLASSES, PoolSchedulerProcessor, default_config
from fastci.simulate.loop import Loop, Runner, TestRun, at_seconds
from fastci.topology import SYSTEM

MONDAY = datetime(2026, 11, 30, tzinfo=UTC).timestamp()
HOUR = 3600.0
DAY = 24 * HOUR
POLICY = {p.work_class: p for p in DEFAULT_CLASSES}


class Week:
    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.bus = MemoryRuntime(SYSTEM, [PoolSchedulerProcessor()])
        self.loop = Loop(self.bus, MONDAY)
        self.runner = Runner(self.loop, self.outcome)
        self.schedule: list[ScheduleEvent] = []
        self.checker = QuotaChecker()
        self.bus.listen("schedule", self.on_schedule)
        self.true_s: dict[str, float] = {}  # test id -> how long it really takes (estimate +-20%)
        self.requests: dict[str, RunRequested] = {}
        self.release_ids: set[str] = set()
        self.quarantined_spans: list[tuple[str, float, float]] = []
        self.count = 0

    def on_schedule(self, event: ScheduleEvent) -> None:
        self.schedule.append(event)
        self.checker.on_schedule(event)

    def outcome(self, placed: ScheduleEvent, test_id: str) -> TestRun:
        return TestRun(test_id, self.true_s[test_id])

    def request(self, work_class: str, estimated_s: float, chips: int = 8) -> None:
        self.count += 1
        test_id = f"tests/{work_class}/{self.count:05d}"
        self.true_s[test_id] = estimated_s * self.rng.uniform(0.8, 1.2)
        event = RunRequested(
            cause_id=f"week-{self.count}",
            purpose=work_class,
            test_id=test_id,
            repo="acme/stack",
            commit="abcdef1",
            bundle=BUNDLE,
            hardware_revision="any",
            work_class=work_class,
            repeats=1,
            requested_by="week",
            chips=chips,
            estimated_s=estimated_s,
        )
        self.requests[event.id] = event
        self.bus.publish(event)

    def node(self, node_id: str, state: str) -> None:
        self.checker.node_state(node_id, state)
        self.bus.publish(NodeStateChanged(node_id=node_id, state=state, time=at_seconds(self.loop.now)))

    def plan(self) -> None:
        rng, at = self.rng, self.loop.at
        for day in range(7):
            base = MONDAY + day * DAY
            for _ in range(40):
                at(base, lambda: self.request("nightly", rng.uniform(45, 75) * 60))
            for _ in range(2):
                at(base, lambda: self.request("nightly", 2 * HOUR, chips=32))
            time = base + 8 * HOUR
            while time < base + 20 * HOUR:
                at(time, lambda: self.request("presubmit", rng.uniform(10, 20) * 60))
                time += rng.expovariate(1 / 360)
            for quarter in range(9 * 4, 18 * 4):  # developers keep about 12 nodes busy when they can
                at(base + quarter * HOUR / 4, lambda: self.request("dev", rng.uniform(2, 4) * HOUR))
            for hour in (11, 14, 17):
                at(base + hour * HOUR, lambda: self.request("bisect", 30 * 60))
        # Wednesday 02:00, mid-nightly: a release's long run (a 4-node gang); Saturday two more runs
        at(MONDAY + 2 * DAY + 2 * HOUR, lambda: self.release(4 * HOUR, 32))
        at(MONDAY + 5 * DAY + 3 * HOUR, lambda: self.release(3 * HOUR, 8))
        at(MONDAY + 5 * DAY + 3 * HOUR, lambda: self.release(3 * HOUR, 8))
        # Thursday afternoon: node-05 quarantined, back in the evening
        at(MONDAY + 3 * DAY + 13 * HOUR, lambda: self.node("node-05", "quarantined"))
        at(MONDAY + 3 * DAY + 19 * HOUR, lambda: self.node("node-05", "healthy"))
        self.quarantined_spans.append(("node-05", MONDAY + 3 * DAY + 13 * HOUR, MONDAY + 3 * DAY + 19 * HOUR))

    def release(self, estimated_s: float, chips: int) -> None:
        before = set(self.requests)
        self.request("release", estimated_s, chips)
        self.release_ids |= set(self.requests) - before

    def run(self) -> None:
        self.plan()
        while not self.loop.idle:
            self.loop.run(until_s=self.loop._heap[0][0])
            self.checker.check()


class QuotaChecker:
    """Tracks the pool from the schedule alone and checks, after every step of the week, that a class
    waiting within its share is never kept waiting by a lower-priority class borrowing chips."""

    def __init__(self) -> None:
        config = default_config()
        self.node_chips = {n.node_id: n.chips for n in config.nodes}
        self.state = dict.fromkeys(self.node_chips, "healthy")
        self.running: dict[str, ScheduleEvent] = {}
        self.queues: dict[str, deque[tuple[str, int]]] = defaultdict(deque)
        self.used = Counter()
        self.checked = 0
        self.violations: list[str] = []
        self.errors: list[str] = []

    def node_state(self, node_id: str, state: str) -> None:
        self.state[node_id] = state

    def on_schedule(self, event: ScheduleEvent) -> None:
        queue = self.queues[event.work_class]
        if event.action == "queued":
            queue.append((event.job_id, event.chips))
        elif event.action == "requeued":
            queue.appendleft((event.job_id, event.chips))
        elif event.action == "placed":
            queue.remove((event.job_id, event.chips))
            if event.nodes and any(self.state[n] != "healthy" for n in event.nodes):
                self.errors.append(f"{event.job_id} placed on an unhealthy node {event.nodes}")
            self.running[event.job_id] = event
            for node in event.nodes:
                self.used[node] += event.chips // len(event.nodes)
                if self.used[node] > self.node_chips[node]:
                    self.errors.append(f"node {node} over capacity at {event.time}")
        elif event.action in ("preempted", "completed"):
            placed = self.running.pop(event.job_id)
            for node in placed.nodes:
                self.used[node] -= placed.chips // len(placed.nodes)

    def check(self) -> None:
        healthy = sum(chips for node, chips in self.node_chips.items() if self.state[node] == "healthy")
        quota = {p.work_class: p.quota * healthy for p in DEFAULT_CLASSES}
        usage = Counter()
        for placed in self.running.values():
            usage[placed.work_class] += placed.chips
        for policy in sorted(DEFAULT_CLASSES, key=lambda p: p.priority):
            name = policy.work_class
            first = next(
                (
                    (job, chips)
                    for job, chips in self.queues[name]
                    if chips and usage[name] + chips <= quota[name] + 1e-9
                ),
                None,
            )
            if first is None:
                continue
            if first[1] <= 8:  # a single-node job, the first one the pass looked at: no reservation limits it
                self.checked += 1
                for lower in DEFAULT_CLASSES:
                    if lower.priority > policy.priority and usage[lower.work_class] > quota[lower.work_class] + 1e-9:
                        self.violations.append(
                            f"{name} waits within its share while {lower.work_class} borrows "
                            f"({usage[lower.work_class]} > {quota[lower.work_class]:.1f} chips)"
                        )
            break


@pytest.fixture(scope="module")
def week() -> Week:
    simulated = Week()
    simulated.run()
    return simulated


def test_every_job_is_placed_and_completes_exactly_once(week):
    by_job: dict[str, list[ScheduleEvent]] = defaultdict(list)
    for event in week.schedule:
        by_job[event.job_id].append(event)
    assert len(by_job) == len(week.requests) > 1200
    assert {e.request_id for e in week.schedule} == set(week.requests)
    for job_id, events in by_job.items():
        actions = [e.action for e in events]
        assert actions[0] == "queued" and actions[-1] == "completed", (job_id, actions)
        assert actions.count("completed") == 1
        # queued, placed, then (preempted, requeued, placed) per resumption, then completed
        assert actions[1:-1] == ["placed"] + ["preempted", "requeued", "placed"] * actions.count("preempted")
        attempts = [e.attempt for e in events if e.action == "placed"]
        assert attempts == list(range(1, len(attempts) + 1))
        resumed = [e.resume_from_s for e in events if e.action == "placed"]
        assert resumed == sorted(resumed)
    # the runner saw every job run to its end exactly once, and nothing is left running or queued
    assert week.runner.finished_attempts == dict.fromkeys(by_job, 1)
    assert not week.runner.active
    assert len({e.id for e in week.schedule}) == len(week.schedule)


def test_a_release_preempts_nightly_work_which_resumes_from_its_checkpoint_and_completes(week):
    releases = {e.job_id for e in week.schedule if e.request_id in week.release_ids}
    preempted = [e for e in week.schedule if e.action == "preempted" and e.preempted_by in releases]
    assert preempted and {e.work_class for e in preempted} == {"nightly"}
    for victim in preempted:
        later = [e for e in week.schedule if e.job_id == victim.job_id and e.time >= victim.time]
        resumed = next(e for e in later if e.action == "placed")
        assert resumed.attempt == victim.attempt + 1
        every = POLICY["nightly"].checkpoint_every_s
        assert resumed.resume_from_s == pytest.approx(next(e for e in later if e.action == "requeued").resume_from_s)
        assert victim.lost_s < every  # at most one checkpoint interval of work is lost
        assert later[-1].action == "completed"
    # the gang of the first release got its four nodes at once, on one hardware revision
    gang = next(e for e in week.schedule if e.action == "placed" and e.job_id in releases and e.chips == 32)
    assert len(gang.nodes) == 4 and gang.hardware_revision in ("rev-a", "rev-b")
    assert len({n < "node-08" for n in gang.nodes}) == 1


def test_no_node_is_overcommitted_and_a_quarantined_node_gets_no_work(week):
    assert week.checker.errors == []
    node, start, end = week.quarantined_spans[0]
    start_t, end_t = at_seconds(start), at_seconds(end)
    evicted = [e for e in week.schedule if e.action == "preempted" and e.reason == f"node {node} is quarantined"]
    placed_there = [e for e in week.schedule if e.action == "placed" and node in e.nodes and start_t <= e.time < end_t]
    assert evicted and not placed_there
    for victim in evicted:
        assert week.schedule[-1].time > victim.time
        assert [e.action for e in week.schedule if e.job_id == victim.job_id][-1] == "completed"


def test_quotas_are_honoured_all_week(week):
    # lower-priority borrowers (developers beyond their 5%) gave chips back to classes reclaiming their share
    reclaimed = [e for e in week.schedule if e.action == "preempted" and e.work_class == "dev" and e.preempted_by]
    assert len(reclaimed) > 50
    assert week.checker.violations == []
    # every class got work done; borrowing let the idle shares be used
    assert {e.work_class for e in week.schedule if e.action == "completed"} == {
        "nightly",
        "presubmit",
        "dev",
        "bisect",
        "release",
    }


def test_the_quota_check_catches_a_scheduler_that_does_not_reclaim(monkeypatch):
    import fastci.scheduling.pool as policy

    monkeypatch.setattr(policy, "_reclaim", lambda pool, job, reservation: ((), None))
    broken = Week()
    broken.run()
    assert broken.checker.violations and broken.checker.checked > 100
