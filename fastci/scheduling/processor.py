"""pool-scheduler: places CI work on the shared accelerator pool; time arrives as ``clock`` ticks.

Partitioned by pool (every input carries a ``pool`` field, default ``"default"``). Inputs:
- ``test-plan``: a change's ordered tests (presubmit work), tiered here: CPU tests (0 chips) run in
  shards on CPU/simulator capacity; tests that need chips run one job each on hardware when the change
  is on the hardware path and they fit the presubmit hardware tier (small models, at most a node's
  chips by default), otherwise in their CPU/simulator form (the big multi-node models run on hardware
  nightly and before a release); a hardware-path change with no hardware test gets the pool's smoke
  test (the tier's floor);
- ``run-requested``: one job (nightly, release, bisect, rerun, dev, or a presubmit rerun);
- ``results``: a result whose run id is one this pool handed out counts towards its job; the job
  completes when every test of the attempt has reported;
- ``node-state-changed``: only healthy nodes take new work. Work running on a node that turns
  quarantined or diagnosing is evicted and requeued (it resumes from its last checkpoint on another
  node); on a suspect node it runs to the end (baseline-guard keeps its results out of baselines);
- ``pool-config``: the nodes and each class's priority, quota and checkpoint interval;
- ``clock``: the pool's time. Nothing reads a clock: every decision is stamped with the latest tick.

After every input the policy (``fastci.scheduling.pool``) decides what starts and what is preempted.
Output: ``schedule`` events (queued, placed, preempted, requeued, completed, refused), ids derived from
the input that caused them.

State, kept small per value (docs/scheduling.md): the pool's own key holds its config, clock, running jobs
(bounded by its capacity) and per class a queue index; each queue is a run of segments of at most 64
entries under ``(pool, "queue", class, n)``; each job's details under ``(pool, "job", id)`` (a finished
job keeps a small tombstone, so a redelivered request or a late result cannot start it again).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from pydantic import Field

from fastci.contracts.node_states import NodeStateChanged
from fastci.contracts.runs import RunRequested
from fastci.contracts.test_plans import TestPlan
from fastci.core.events import Event, Record, derive_id
from fastci.core.processor import KeySpace, Processor, StateReader, Step, UnitOfWork
from fastci.inputs import Bundle, ResultEvent
from fastci.scheduling.events import (
    ANY_REVISION,
    DEFAULT_POOL,
    MAX_JOB_TESTS,
    ClassPolicy,
    ClockTick,
    PoolConfig,
    PoolNode,
    ScheduledTest,
    ScheduleEvent,
)
from fastci.scheduling.pool import ClassRule, NodeView, checkpointed, schedule_pass

SEGMENT = 64  # queue entries per stored value
LOOKAHEAD = 64  # queued jobs per class one pass considers (FIFO with backfill over this window)
DEFAULT_ESTIMATE_S = 1800.0  # a run request that gives no estimate
WHOLE_SUITE = "*"  # the test id of a job that runs every test the runner collects
WHOLE_SUITE_S = 3600.0  # its estimate, when no test of the repo has a recorded duration yet
NO_NEW_WORK = frozenset({"suspect", "quarantined", "diagnosing"})
EVICTING = frozenset({"quarantined", "diagnosing"})
RUN_ID = re.compile(r"^sched-([0-9a-f]{32})-([0-9]+)$")

JobStatus = Literal["queued", "running", "completed", "refused"]
NodeHealth = Literal["healthy", "suspect", "quarantined", "diagnosing"]


def default_config(pool: str = DEFAULT_POOL) -> PoolConfig:
    """16 nodes x 8 chips over two hardware revisions; priorities and quota shares per class."""
    return PoolConfig(
        pool=pool,
        version="default",
        nodes=tuple(
            PoolNode(node_id=f"node-{n:02d}", hardware_revision="rev-a" if n < 8 else "rev-b", chips=8)
            for n in range(16)
        ),
        classes=DEFAULT_CLASSES,
    )


# Shares follow each class's steady demand on a 128-chip pool: presubmit the largest in the day,
# nightly and release enough for their multi-node runs (32 chips), developers one node and a half.
DEFAULT_CLASSES = (
    ClassPolicy(work_class="release", priority=0, quota=0.25, checkpoint_every_s=900.0),
    ClassPolicy(work_class="presubmit", priority=1, quota=0.30),
    ClassPolicy(work_class="bisect", priority=2, quota=0.05),
    ClassPolicy(work_class="rerun", priority=3, quota=0.05),
    ClassPolicy(work_class="nightly", priority=4, quota=0.25, checkpoint_every_s=600.0),
    ClassPolicy(work_class="dev", priority=5, quota=0.10, checkpoint_every_s=600.0),
)


class NodeRecord(Record):
    node_id: str
    hardware_revision: str
    chips: int
    state: NodeHealth = "healthy"


class RunningRecord(Record):
    """A running job as the policy sees it (it is a ``RunningView``: the pass reads records as stored)."""

    job_id: str
    work_class: str
    chips: int
    placement: tuple[tuple[str, int], ...] = ()
    started: float
    expected_end: float

    @property
    def cpu(self) -> bool:
        return not self.placement


class QueueIndex(Record):
    first: int = 0  # segments first..last hold the class's queue, front to back
    last: int = -1
    jobs: int = 0
    cpu_jobs: int = 0  # of which on CPU/simulator capacity


class PoolRecord(Record):
    config_version: str
    nodes: tuple[NodeRecord, ...]
    classes: tuple[ClassPolicy, ...]
    cpu_slots: int
    cpu_shard_s: float
    presubmit_max_chips: int | None = None
    smoke_test: str | None = None
    smoke_chips: int = 8
    smoke_estimated_s: float = 300.0
    now: float | None = Field(default=None, description="The latest tick, in seconds since the epoch.")
    running: dict[str, RunningRecord] = Field(default_factory=dict)
    queues: dict[str, QueueIndex] = Field(default_factory=dict)
    counts: dict[str, int] = Field(default_factory=dict, description="Decisions so far, by action.")
    settled: bool = Field(default=False, description="Nothing changed since the last pass but the time.")


class JobRecord(Record):
    request_id: str
    work_class: str
    repo: str
    commit: str | None = None
    tests: tuple[ScheduledTest, ...] = ()
    chips: int
    revision: str = ANY_REVISION
    avoid: tuple[str, ...] = ()
    estimated_s: float
    bundle: Bundle | None = None
    status: JobStatus = "queued"
    queued_at: float
    waiting_since: float | None = None
    attempt: int = 0
    started: float | None = None
    done_s: float = Field(default=0.0, description="Seconds of work checkpointed (a resumed run starts there).")
    run_s: float = 0.0
    wait_s: float = 0.0
    reported: str = Field(default="", description="One character per test: '1' once its result arrived.")


class QueueEntry(Record):
    """A queued job as the policy sees it (it is a ``WaitingView``: the pass reads entries as they are stored)."""

    job_id: str
    work_class: str
    chips: int
    revision: str = ANY_REVISION
    avoid: tuple[str, ...] = ()
    remaining_s: float


class QueueSegment(Record):
    """One stored run of a class's queue, front to back (at most ``SEGMENT`` entries)."""

    entries: tuple[QueueEntry, ...] = ()


# The scheduler's kinds of state, each under a pool: the pool's own (its partition key), one per job,
# one per queue segment.
POOLS = KeySpace("", PoolRecord)
JOBS = KeySpace("job", JobRecord, ("job_id",))
QUEUES = KeySpace("queue", QueueSegment, ("work_class", "segment"))
_NO_ENTRIES = QueueSegment()


def pool_record(config: PoolConfig, previous: PoolRecord | None = None) -> PoolRecord:
    """The pool's state under ``config``; node states, clock, running jobs and queues carry over."""
    states = {node.node_id: node.state for node in previous.nodes} if previous else {}
    carried: dict[str, Any] = {}
    if previous is not None:
        carried = {
            "now": previous.now,
            "running": previous.running,
            "queues": previous.queues,
            "counts": previous.counts,
        }
    return PoolRecord(
        config_version=config.version,
        nodes=tuple(
            NodeRecord(
                node_id=n.node_id,
                hardware_revision=n.hardware_revision,
                chips=n.chips,
                state=states.get(n.node_id, "healthy"),
            )
            for n in config.nodes
        ),
        classes=config.classes,
        cpu_slots=config.cpu_slots,
        cpu_shard_s=config.cpu_shard_s,
        presubmit_max_chips=config.presubmit_max_chips,
        smoke_test=config.smoke_test,
        smoke_chips=config.smoke_chips,
        smoke_estimated_s=config.smoke_estimated_s,
        **carried,
    )


def run_id_of(job_id: str, attempt: int) -> str:
    return f"sched-{job_id}-{attempt}"


def pool_key(pool: str) -> str:
    return POOLS.key(pool)


def job_key(pool: str, job_id: str) -> str:
    return JOBS.key(pool, job_id)


def segment_key(pool: str, work_class: str, number: int) -> str:
    return QUEUES.key(pool, work_class, str(number))


def to_time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def seconds(time: datetime) -> float:
    return time.timestamp()


@dataclass(frozen=True, slots=True)
class PlanEntry:
    """One test of a change's plan, as the scheduler needs it (from a validated ``test-plan`` event)."""

    test_id: str
    estimated_s: float
    chips: int
    config: dict[str, Any] = field(default_factory=dict)


class PoolSchedulerProcessor(Processor[Record]):
    name: ClassVar[str] = "pool-scheduler"
    inputs: ClassVar[tuple[str, ...]] = (
        PoolConfig.TOPIC,
        ClockTick.TOPIC,
        RunRequested.TOPIC,
        NodeStateChanged.TOPIC,
        ResultEvent.TOPIC,
        TestPlan.TOPIC,
    )
    outputs: ClassVar[tuple[str, ...]] = (ScheduleEvent.TOPIC,)
    key_spaces = (POOLS, JOBS, QUEUES)
    state_key: ClassVar[str] = "key"
    partition_by = {
        RunRequested.TOPIC: "pool",
        NodeStateChanged.TOPIC: "pool",
        ResultEvent.TOPIC: "pool",
        TestPlan.TOPIC: "pool",
    }

    def __init__(self) -> None:
        self._test_index: dict[tuple[str, str], dict[str, int]] = {}  # (pool, job) -> test -> index

    def ignores(self, event: Event) -> bool:
        return isinstance(event, ResultEvent) and not RUN_ID.match(event.run_id)  # not a run it handed out

    def process(self, state: StateReader[Record], event: Event) -> Step[Record]:
        if self.ignores(event):
            return Step()
        pool = self.partition_key(event)
        work = _Work(state, pool, event.id, self._test_index)
        if isinstance(event, ClockTick):
            if work.pool.now is not None and seconds(event.time) <= work.pool.now:
                return Step()
            work.set_pool(now=seconds(event.time))
            if work.pool.settled:
                # Time alone frees nothing (a backfill only gets harder as it passes): no pass needed.
                return work.step()
        elif isinstance(event, PoolConfig):
            work.configure(event)
        elif isinstance(event, RunRequested):
            work.enqueue_request(event)
        elif isinstance(event, NodeStateChanged):
            work.node_state(event)
        elif isinstance(event, ResultEvent):
            if not work.result(event):
                return work.step()  # counted (or ignored); the pool did not change
        else:
            plan = plan_of(event)
            if plan is None:
                return Step()
            work.enqueue_plan(*plan)
        work.schedule()
        return work.step()


def plan_of(event: Event) -> tuple[str, str, str | None, bool, list[PlanEntry], bool] | None:
    """(request id, repo, sha, hardware_path, entries, whole plan) of a test-plan event; None for any
    other. A plan may come in pages; ``whole plan`` is False for every page but the last."""
    if not isinstance(event, TestPlan):
        return None
    entries = [PlanEntry(e.test_id, e.estimated_s, e.chips, e.config) for e in event.entries]
    if event.run_all and not entries and event.pages == 1:
        # Run-all means the suite, not the catalog: with no test known yet, the suite is one job.
        entries = [PlanEntry(WHOLE_SUITE, WHOLE_SUITE_S, 0)]
    last = event.page + 1 >= event.pages
    return (
        event.id,
        event.repo,
        event.sha,
        bool(event.hardware_path),
        entries,
        last,
    )


class _Work(UnitOfWork[Record]):
    """One input's effect on one pool: reads through this event's own writes, collects outputs."""

    def __init__(
        self,
        state: StateReader[Record],
        pool: str,
        cause_id: str,
        test_index: dict[tuple[str, str], dict[str, int]],
    ) -> None:
        super().__init__(state)
        self.name = pool
        self.cause_id = cause_id
        self.test_index = test_index
        self.counts: dict[str, int] = {}
        stored = POOLS.get(self, pool_key(pool))
        self.pool_changed = stored is None
        self.pool: PoolRecord = stored if stored is not None else pool_record(default_config(pool))

    # ----- state access

    def set_pool(self, **changes: Any) -> None:
        self.pool = self.pool.model_copy(update=changes)
        self.pool_changed = True

    def step(self) -> Step[Record]:
        """This input's step: the pool's own value is written once, with its decision counts."""
        if self.counts:
            counts = dict(self.pool.counts)
            for action, number in self.counts.items():
                counts[action] = counts.get(action, 0) + number
            self.set_pool(counts=counts)
        if self.pool_changed:
            self.set(pool_key(self.name), self.pool)
        return super().step()

    def job(self, job_id: str) -> JobRecord | None:
        return JOBS.get(self, job_key(self.name, job_id))

    def set_job(self, job_id: str, job: JobRecord) -> None:
        self.set(job_key(self.name, job_id), job)

    def segment(self, work_class: str, number: int) -> list[QueueEntry]:
        return list((QUEUES.get(self, segment_key(self.name, work_class, number)) or _NO_ENTRIES).entries)

    def set_segment(self, work_class: str, number: int, entries: list[QueueEntry]) -> None:
        key = segment_key(self.name, work_class, number)
        # built from validated entries: not validated again
        self.set(key, QueueSegment.trusted({"entries": tuple(entries)}) if entries else None)

    @property
    def now(self) -> float:
        return self.pool.now if self.pool.now is not None else 0.0

    def count(self, action: str) -> None:
        self.counts[action] = self.counts.get(action, 0) + 1

    # ----- the queue: segments first..last per class

    def _index(self, work_class: str) -> QueueIndex:
        return self.pool.queues.get(work_class) or QueueIndex()

    def _set_index(self, work_class: str, index: QueueIndex) -> None:
        queues = dict(self.pool.queues)
        if index.jobs == 0:
            queues.pop(work_class, None)
            for number in range(index.first, index.last + 1):
                if self.segment(work_class, number):
                    self.set_segment(work_class, number, [])
        else:
            queues[work_class] = index
        self.set_pool(queues=queues)

    def push_front(self, work_class: str, entry: QueueEntry) -> None:
        """Put a job back at the head of its class's queue (a preempted job resumes first)."""
        index = self._index(work_class)
        if index.jobs == 0:
            index = QueueIndex(first=0, last=0, jobs=0, cpu_jobs=0)
        number = index.first
        entries = self.segment(work_class, number)
        if len(entries) >= SEGMENT:
            number, entries = number - 1, []
        self.set_segment(work_class, number, [entry, *entries])
        self._set_index(
            work_class,
            QueueIndex(
                first=number,
                last=index.last,
                jobs=index.jobs + 1,
                cpu_jobs=index.cpu_jobs + (entry.chips == 0),
            ),
        )

    def push_back(self, work_class: str, new: list[QueueEntry]) -> None:
        """Append jobs to the tail of their class's queue, in order, with one read and one write per
        segment touched and one of the class's index (a plan queues tens of jobs at once)."""
        if not new:
            return
        index = self._index(work_class)
        if index.jobs == 0:
            index = QueueIndex(first=0, last=0, jobs=0, cpu_jobs=0)
        number, entries, changed = index.last, self.segment(work_class, index.last), False
        for entry in new:
            if len(entries) >= SEGMENT:
                if changed:
                    self.set_segment(work_class, number, entries)
                number, entries = number + 1, []
            entries.append(entry)
            changed = True
        self.set_segment(work_class, number, entries)
        self._set_index(
            work_class,
            QueueIndex(
                first=index.first,
                last=number,
                jobs=index.jobs + len(new),
                cpu_jobs=index.cpu_jobs + sum(1 for entry in new if entry.chips == 0),
            ),
        )

    def remove(self, work_class: str, removals: dict[int, set[str]]) -> None:
        """Take jobs out of their segments (segment number -> job ids)."""
        index = self._index(work_class)
        removed = removed_cpu = 0
        for number, job_ids in removals.items():
            entries = self.segment(work_class, number)
            kept = [e for e in entries if e.job_id not in job_ids]
            removed += len(entries) - len(kept)
            removed_cpu += sum(1 for e in entries if e.job_id in job_ids and e.chips == 0)
            self.set_segment(work_class, number, kept)
        first, last = index.first, index.last
        while first <= last and not self.segment(work_class, first):
            first += 1
        while last >= first and not self.segment(work_class, last):
            last -= 1
        self._set_index(
            work_class,
            QueueIndex(
                first=first, last=last, jobs=max(0, index.jobs - removed), cpu_jobs=max(0, index.cpu_jobs - removed_cpu)
            ),
        )

    def waiting(self, work_class: str) -> list[tuple[int, QueueEntry]]:
        """The first LOOKAHEAD queued entries of a class, with the segment each sits in."""
        index = self._index(work_class)
        found: list[tuple[int, QueueEntry]] = []
        for number in range(index.first, index.last + 1):
            found.extend((number, entry) for entry in self.segment(work_class, number))
            if len(found) >= LOOKAHEAD:
                break
        return found[:LOOKAHEAD]

    # ----- inputs

    def configure(self, config: PoolConfig) -> None:
        self.pool = pool_record(config, self.pool)
        self.pool_changed = True
        present = {node.node_id for node in config.nodes}
        for job_id, running in sorted(self.pool.running.items()):
            gone = sorted({node for node, _ in running.placement} - present)
            if gone:
                self.evict(job_id, reason=f"node {gone[0]} left the pool")

    def node_state(self, event: NodeStateChanged) -> None:
        nodes = tuple(
            n.model_copy(update={"state": event.state}) if n.node_id == event.node_id else n for n in self.pool.nodes
        )
        self.set_pool(nodes=nodes)
        if event.state in EVICTING:
            for job_id, running in sorted(self.pool.running.items()):
                if any(node == event.node_id for node, _ in running.placement):
                    self.evict(job_id, reason=f"node {event.node_id} is {event.state}")

    def enqueue_request(self, request: RunRequested) -> None:
        chips = self._node_chips() if request.chips is None else request.chips
        test = ScheduledTest(
            test_id=request.test_id,
            config=dict(request.config),
            estimated_s=request.estimated_s if request.estimated_s is not None else DEFAULT_ESTIMATE_S,
        )
        job_id = derive_id("job", request.id)
        if self.job(job_id) is not None:
            return  # already known (a redelivered request): never queued twice
        entry = self.new_job(
            job_id,
            request.id,
            request.work_class,
            request.repo,
            request.commit,
            (test,),
            chips,
            request.hardware_revision,
            request.avoid_nodes,
            request.bundle,
        )
        if entry is not None:
            self.push_back(request.work_class, [entry])

    def enqueue_plan(
        self,
        plan_id: str,
        repo: str,
        sha: str | None,
        hardware_path: bool,
        entries: Sequence[PlanEntry],
        last_page: bool = True,
    ) -> None:
        limit = self._node_chips() if self.pool.presubmit_max_chips is None else self.pool.presubmit_max_chips
        on_hardware = [hardware_path and 0 < e.chips <= limit for e in entries]
        hardware = [e for e, here in zip(entries, on_hardware) if here]
        cpu = [e for e, here in zip(entries, on_hardware) if not here]
        # The smoke floor is judged per page: a plan long enough to have pages is a run of everything,
        # which lists the hardware tests (a page without any then adds one smoke run, not a miss).
        if hardware_path and not hardware and self.pool.smoke_test and last_page:
            hardware = [
                PlanEntry(
                    test_id=self.pool.smoke_test, estimated_s=self.pool.smoke_estimated_s, chips=self.pool.smoke_chips
                )
            ]
        jobs = [
            (derive_id("job", plan_id, "hw", str(position)), (_scheduled(entry),), entry.chips)
            for position, entry in enumerate(hardware)
        ]
        jobs += [
            (derive_id("job", plan_id, "cpu", str(number)), tuple(_scheduled(e) for e in shard), 0)
            for number, shard in enumerate(shards(cpu, self.pool.cpu_shard_s))
        ]
        # One plan's jobs are written in one step: when its first is known, the plan was queued already.
        if not jobs or self.job(jobs[0][0]) is not None:
            return
        queued: list[QueueEntry] = []
        for job_id, tests, chips in jobs:
            entry = self.new_job(job_id, plan_id, "presubmit", repo, sha, tests, chips, ANY_REVISION, (), None)
            if entry is not None:
                queued.append(entry)
        self.push_back("presubmit", queued)

    def new_job(
        self,
        job_id: str,
        request_id: str,
        work_class: str,
        repo: str,
        commit: str | None,
        tests: tuple[ScheduledTest, ...],
        chips: int,
        revision: str,
        avoid: Iterable[str],
        bundle: Bundle | None,
    ) -> QueueEntry | None:
        """Record a job not known yet and emit its decision; returns its queue entry for the caller
        to push, or None when the pool can never run it (refused)."""
        estimated = sum(t.estimated_s for t in tests)
        job = JobRecord(
            request_id=request_id,
            work_class=work_class,
            repo=repo,
            commit=commit,
            tests=tests,
            chips=chips,
            revision=revision,
            avoid=tuple(sorted(set(avoid))),
            estimated_s=estimated,
            bundle=bundle,
            queued_at=self.now,
            waiting_since=self.now,
            reported="0" * len(tests),
        )
        problem = self._infeasible(job)
        if problem:
            job = job.model_copy(update={"status": "refused", "tests": ()})
            self.set_job(job_id, job)
            self.emit_decision(job_id, job, "refused", reason=problem, tests=tests)
            return None
        self.set_job(job_id, job)
        self.emit_decision(job_id, job, "queued", tests=tests)
        return QueueEntry(
            job_id=job_id, work_class=work_class, chips=chips, revision=revision, avoid=job.avoid, remaining_s=estimated
        )

    def result(self, event: ResultEvent) -> bool:
        """Count a result towards its job; True when the job completed (the pool changed)."""
        match = RUN_ID.match(event.run_id)
        assert match is not None
        job_id, attempt = match.group(1), int(match.group(2))
        job = self.job(job_id)
        if job is None or job.status != "running" or job.attempt != attempt:
            return False  # a stale attempt (preempted, evicted) or someone else's run
        position = self._position(job_id, job, event.test_id)
        if position is None or job.reported[position] == "1":
            return False
        reported = job.reported[:position] + "1" + job.reported[position + 1 :]
        if "0" in reported:
            self.set_job(job_id, job.model_copy(update={"reported": reported}))
            return False
        self.complete(job_id, job)
        return True

    def _position(self, job_id: str, job: JobRecord, test_id: str) -> int | None:
        cache_key = (self.name, job_id)
        positions = self.test_index.get(cache_key)
        if positions is None:
            if len(self.test_index) > 4096:
                self.test_index.clear()
            positions = self.test_index[cache_key] = {t.test_id: i for i, t in enumerate(job.tests)}
        return positions.get(test_id)

    # ----- decisions

    def complete(self, job_id: str, job: JobRecord) -> None:
        running = dict(self.pool.running)
        held = running.pop(job_id, None)
        self.set_pool(running=running)
        run_s = job.run_s + (self.now - job.started if job.started is not None else 0.0)
        done = job.model_copy(update={"status": "completed", "run_s": run_s, "tests": (), "reported": ""})
        self.set_job(job_id, done)
        self.test_index.pop((self.name, job_id), None)
        self.emit_decision(
            job_id,
            done,
            "completed",
            chips=held.chips if held else 0,
            nodes=tuple(n for n, _ in held.placement) if held else (),
        )

    def evict(self, job_id: str, reason: str, by: str | None = None) -> None:
        """Stop a running job and put it back at the front of its class's queue."""
        running = dict(self.pool.running)
        held = running.pop(job_id)
        self.set_pool(running=running)
        job = self.job(job_id)
        assert job is not None
        ran = max(0.0, self.now - (job.started or self.now))
        every = self._policy(job.work_class).checkpoint_every_s
        kept = min(checkpointed(ran, every), max(0.0, job.estimated_s - job.done_s))
        job = job.model_copy(
            update={
                "status": "queued",
                "done_s": job.done_s + kept,
                "run_s": job.run_s + ran,
                "waiting_since": self.now,
                "started": None,
            }
        )
        self.set_job(job_id, job)
        nodes = tuple(node for node, _ in held.placement)
        self.emit_decision(
            job_id, job, "preempted", chips=held.chips, nodes=nodes, lost_s=ran - kept, preempted_by=by, reason=reason
        )
        entry = QueueEntry(
            job_id=job_id,
            work_class=job.work_class,
            chips=job.chips,
            revision=job.revision,
            avoid=job.avoid,
            remaining_s=max(0.0, job.estimated_s - job.done_s),
        )
        self.push_front(job.work_class, entry)
        self.emit_decision(job_id, job, "requeued", resume_from_s=job.done_s, reason=reason)

    def schedule(self) -> None:
        """Run the policy over the pool as it stands and apply what it decides."""
        pool = self.pool
        used: dict[str, int] = {}
        for running in pool.running.values():
            for node, chips in running.placement:
                used[node] = used.get(node, 0) + chips
        if pool.queues and self._nothing_can_start(used):
            self.set_pool(settled=True)
            return
        nodes = [
            NodeView(n.node_id, n.hardware_revision, n.chips, used.get(n.node_id, 0), n.state not in NO_NEW_WORK)
            for n in pool.nodes
        ]
        running_views = list(pool.running.values())
        listed = {work_class: self.waiting(work_class) for work_class in pool.queues}
        queues = {work_class: [entry for _, entry in entries] for work_class, entries in listed.items()}
        if not queues:
            self.set_pool(settled=True)
            return
        rules = {p.work_class: ClassRule(p.priority, p.quota) for p in pool.classes}
        decided = schedule_pass(self.now, nodes, running_views, queues, rules, pool.cpu_slots)
        # A pass is a fixed point of its window, so ticks need not run another until something changes;
        # unless it took jobs out of a queue longer than its window (others came into view).
        longer = any(self._index(c).jobs > LOOKAHEAD for c in pool.queues)
        self.set_pool(settled=not (longer and decided.placements))
        for victim, by in decided.preempted.items():
            self.evict(victim, reason=f"preempted by {self.job(by).work_class} job {by}", by=by)  # type: ignore[union-attr]
        placed = {placement.job_id for placement in decided.placements}
        removals: dict[str, dict[int, set[str]]] = {}
        for work_class, entries in listed.items():
            for number, entry in entries:
                if entry.job_id in placed:
                    removals.setdefault(work_class, {}).setdefault(number, set()).add(entry.job_id)
        for work_class, by_segment in removals.items():
            self.remove(work_class, by_segment)
        for placement in decided.placements:
            self.start(placement.job_id, placement.placement, placement.revision)

    def start(self, job_id: str, placement: tuple[tuple[str, int], ...], revision: str | None) -> None:
        job = self.job(job_id)
        assert job is not None
        attempt = job.attempt + 1
        remaining = max(0.0, job.estimated_s - job.done_s)
        job = job.model_copy(
            update={
                "status": "running",
                "attempt": attempt,
                "started": self.now,
                "waiting_since": None,
                "wait_s": job.wait_s
                + max(0.0, self.now - (job.waiting_since if job.waiting_since is not None else self.now)),
            }
        )
        self.set_job(job_id, job)
        chips = sum(c for _, c in placement)
        running = dict(self.pool.running)
        running[job_id] = RunningRecord.trusted(
            {
                "job_id": job_id,
                "work_class": job.work_class,
                "chips": chips,
                "placement": placement,
                "started": self.now,
                "expected_end": self.now + remaining,
            }
        )
        self.set_pool(running=running)
        pending = tuple(t for t, flag in zip(job.tests, job.reported, strict=True) if flag == "0")
        self.emit_decision(
            job_id,
            job,
            "placed",
            tests=pending,
            chips=chips,
            nodes=tuple(n for n, _ in placement),
            hardware_revision=revision,
            cpu=not placement,
            run_id=run_id_of(job_id, attempt),
            resume_from_s=job.done_s,
        )

    def emit_decision(self, job_id: str, job: JobRecord, action: str, **fields: Any) -> None:
        values: dict[str, Any] = {
            "chips": job.chips,
            "hardware_revision": None if job.revision == ANY_REVISION else job.revision,
            "estimated_s": job.estimated_s,
            **fields,
        }
        values.update(
            cause_id=self.cause_id,
            pool=self.name,
            job_id=job_id,
            action=action,
            time=to_time(self.now),
            request_id=job.request_id,
            work_class=job.work_class,
            repo=job.repo,
            commit=job.commit,
            bundle=job.bundle,
            attempt=job.attempt,
            queued_at=to_time(job.queued_at),
            wait_s=job.wait_s,
            run_s=job.run_s,
        )
        # 'queued', one per job of every plan, comes from the job record just validated and the
        # plan's tests: built without validating it again. Every other decision computes values.
        trusted = action == "queued"
        self.emit(ScheduleEvent.trusted_event(values) if trusted else ScheduleEvent(**values))
        self.count(action)

    # ----- helpers

    def _nothing_can_start(self, used: dict[str, int]) -> bool:
        """True when no queued job can start, whatever the policy decides: no CPU slot free for a
        queued CPU job, no chip free on a healthy node, and no class that could reclaim chips (one
        below its share with queued hardware work, and a lower-priority class above its share). A
        saturated pool then skips the pass (most of its inputs are results that free nothing)."""
        pool = self.pool
        cpu_running = sum(1 for r in pool.running.values() if not r.placement)
        if cpu_running < pool.cpu_slots and any(q.cpu_jobs for q in pool.queues.values()):
            return False
        if any(n.chips - used.get(n.node_id, 0) > 0 for n in pool.nodes if n.state not in NO_NEW_WORK):
            return False
        healthy = sum(n.chips for n in pool.nodes if n.state not in NO_NEW_WORK)
        usage: dict[str, int] = {}
        for r in pool.running.values():
            usage[r.work_class] = usage.get(r.work_class, 0) + r.chips
        policies = {p.work_class: p for p in pool.classes}
        for name, index in pool.queues.items():
            if index.jobs == index.cpu_jobs or usage.get(name, 0) >= policies[name].quota * healthy:
                continue
            if any(
                policies[other].priority > policies[name].priority and held > policies[other].quota * healthy
                for other, held in usage.items()
            ):
                return False
        return True

    def _policy(self, work_class: str) -> ClassPolicy:
        return next(p for p in self.pool.classes if p.work_class == work_class)

    def _node_chips(self) -> int:
        return max(node.chips for node in self.pool.nodes)

    def _infeasible(self, job: JobRecord) -> str:
        """Why the pool can never run the job (whatever its nodes' health), or ''."""
        if job.chips == 0:
            return "" if self.pool.cpu_slots > 0 else "the pool has no CPU/simulator capacity"
        nodes = [
            n
            for n in self.pool.nodes
            if job.revision in (ANY_REVISION, n.hardware_revision) and n.node_id not in job.avoid
        ]
        if not nodes:
            return f"no node of hardware revision {job.revision!r} (outside the nodes to avoid)"
        if job.chips <= max(n.chips for n in nodes):
            return ""
        by_revision: dict[str, int] = {}
        for node in nodes:
            by_revision[node.hardware_revision] = by_revision.get(node.hardware_revision, 0) + node.chips
        if max(by_revision.values()) < job.chips:
            return f"needs {job.chips} chips; the most one hardware revision has is {max(by_revision.values())}"
        return ""


def _scheduled(entry: PlanEntry) -> ScheduledTest:
    return ScheduledTest.trusted({"test_id": entry.test_id, "config": entry.config, "estimated_s": entry.estimated_s})


def shards(entries: Sequence[PlanEntry], target_s: float) -> list[list[PlanEntry]]:
    """Consecutive entries in groups of about ``target_s`` estimated seconds (at least one each)."""
    groups: list[list[PlanEntry]] = []
    current: list[PlanEntry] = []
    total = 0.0
    for entry in entries:
        if current and (total + entry.estimated_s > target_s or len(current) >= MAX_JOB_TESTS):
            groups.append(current)
            current, total = [], 0.0
        current.append(entry)
        total += entry.estimated_s
    if current:
        groups.append(current)
    return groups
