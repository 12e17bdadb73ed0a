"""The pool scheduler on the embedded runtime: through the durable log, with a runner between runs."""

from __future__ import annotations

import heapq
from datetime import UTC, datetime, timedelta

from factories import BUNDLE
from processor_helpers import Store, feed

from fastci.contracts.runs import RunRequested
from fastci.core.events import Event
from fastci.inputs import ResultEvent
from fastci.runtime.embedded import DataDir, EmbeddedRuntime, sort_key
from fastci.runtime.publish import publish_embedded
from fastci.scheduling.events import ClockTick, PoolConfig, PoolNode, ScheduleEvent
from fastci.scheduling.processor import DEFAULT_CLASSES, PoolSchedulerProcessor
from fastci.topology import SYSTEM, decode
from fastci.views.refresh import refresh_embedded
from fastci.views.store import Views

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
CONFIG = PoolConfig(
    version="four-nodes",
    classes=DEFAULT_CLASSES,
    nodes=tuple(PoolNode(node_id=f"n{i}", hardware_revision="rev-a", chips=8) for i in range(4)),
)


def read(data_dir, topic: str) -> list[Event]:
    return [decode(topic, r.payload) for r in DataDir(data_dir).log.topic(topic).read()]


def run(data_dir, applied: AppliedInputs | None = None) -> None:
    """Process what is pending (noting in ``applied`` what that is, in the order it is applied)."""
    if applied is not None:
        applied.take_pending(data_dir)
    runtime = EmbeddedRuntime(data_dir, SYSTEM, processors=[PoolSchedulerProcessor()], sync=False)
    try:
        runtime.run()
    finally:
        runtime.close()


def request(name: str, work_class: str, chips: int = 8) -> RunRequested:
    return RunRequested(
        cause_id=f"cause-{name}",
        purpose=work_class,
        test_id=f"tests/{name}",
        repo="acme/stack",
        commit="abcdef1",
        bundle=BUNDLE,
        hardware_revision="any",
        work_class=work_class,
        repeats=1,
        requested_by="test",
        chips=chips,
        estimated_s=3600.0,
    )


def results_of(placed: list[ScheduleEvent], minutes: float) -> list[ResultEvent]:
    return [
        ResultEvent(
            test_id=p.tests[0].test_id,
            run_id=p.run_id,
            repo=p.repo,
            commit=p.commit,
            bundle=BUNDLE,
            node_id=p.nodes[0],
            hardware_revision="rev-a",
            trigger=p.work_class,
            status="passed",
            duration_s=60.0 * minutes,
            chips=p.chips,
            time=T0 + timedelta(minutes=minutes),
        )
        for p in placed
    ]


def test_nightly_work_preempted_by_a_release_resumes_and_completes_through_the_embedded_runtime(tmp_path):
    steps: list[list[Event]] = [
        [CONFIG, ClockTick(time=T0)],
        [request(f"night{i}", "nightly") for i in range(5)],
        [ClockTick(time=T0 + timedelta(minutes=25))],
        [request("release", "release", chips=16)],  # 25% of 32 chips is 8: two nodes is borrowing
        [request("release-small", "release")],  # within release's share: reclaims a node from nightly
    ]
    applied = AppliedInputs()
    for events in steps:
        publish_embedded(tmp_path, events)
        run(tmp_path, applied)
    schedule = read(tmp_path, "schedule")
    preempted = [e for e in schedule if e.action == "preempted"]
    assert len(preempted) == 1 and preempted[0].work_class == "nightly" and preempted[0].lost_s == 300.0
    # the runner reports every placed run that is still running; a clock tick first
    answered: set[str] = set()
    for minutes in (90, 180, 270, 360):
        running = running_now(read(tmp_path, "schedule"))
        placed = [p for p in running if p.run_id not in answered]
        answered |= {p.run_id for p in placed}
        publish_embedded(tmp_path, [ClockTick(time=T0 + timedelta(minutes=minutes))])
        publish_embedded(tmp_path, results_of(placed, minutes))
        run(tmp_path, applied)
    schedule = read(tmp_path, "schedule")
    completed = [e.job_id for e in schedule if e.action == "completed"]
    assert sorted(completed) == sorted({e.job_id for e in schedule if e.action == "queued"}) and len(completed) == 7
    resumed = [e for e in schedule if e.action == "placed" and e.job_id == preempted[0].job_id]
    assert [e.attempt for e in resumed] == [1, 2] and resumed[1].resume_from_s == 1200.0

    # the same inputs, in the order the runtime applied them, through the processor alone give the same ids
    memory = feed(PoolSchedulerProcessor(), Store(), applied)
    assert [e.id for e in memory] == [e.id for e in schedule]

    # and the schedule is a table analysts can query: queue waits per class
    views = Views(tmp_path / "views.duckdb")
    try:
        refresh_embedded(tmp_path, views)
        _, rows = views.query(
            "SELECT work_class, count(*), max(wait_s) FROM schedule WHERE action = 'placed' AND attempt = 1 "
            "GROUP BY work_class ORDER BY work_class"
        )
    finally:
        views.close()
    # the two-node release job is beyond release's share of this small pool, so it did not preempt: it
    # waited (65 min) for the first nodes that freed up, ahead of the nightly job queued before it
    assert rows == [("nightly", 5, 5400.0), ("release", 2, 3900.0)]


def running_now(schedule: list[ScheduleEvent]) -> list[ScheduleEvent]:
    """The placed attempts not yet completed or preempted."""
    running: dict[str, ScheduleEvent] = {}
    for event in schedule:
        if event.action == "placed":
            running[event.job_id] = event
        elif event.action in ("preempted", "completed"):
            running.pop(event.job_id, None)
    return list(running.values())


class AppliedInputs(list):
    """The scheduler's inputs in the order the runtime applies them: each run merges what is pending
    by record time, then topic order (the scheduler runs alone: none of its topics has a writer, so each
    is taken in time order, ties by event id)."""

    def __init__(self) -> None:
        super().__init__()
        self.offsets = dict.fromkeys(PoolSchedulerProcessor.inputs, 0)

    def take_pending(self, data_dir) -> None:
        log = DataDir(data_dir).log
        streams = []
        for index, (topic, start) in enumerate(self.offsets.items()):
            pending = [
                (*sort_key(r, index, SYSTEM.decode_or_refusal(topic, r.payload)), topic, r.payload)
                for r in log.topic(topic).read()
                if r.offset >= start
            ]
            streams.append(sorted(pending))
        for *_, offset, topic, payload in heapq.merge(*streams):
            self.append(decode(topic, payload))
            self.offsets[topic] = max(self.offsets[topic], offset + 1)
