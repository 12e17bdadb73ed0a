"""The pool-scheduler processor: jobs from requests and plans, results, node states, clock, config."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from factories import BUNDLE
from processor_helpers import Store, feed

from fastci.contracts.node_states import NodeStateChanged
from fastci.contracts.runs import RunRequested
from fastci.contracts.test_plans import PlanMetrics, PlannedTest, TestPlan
from fastci.core.events import derive_id
from fastci.inputs import ResultEvent
from fastci.scheduling.events import ClassPolicy, ClockTick, PoolConfig, PoolNode, ScheduleEvent
from fastci.scheduling.processor import (
    DEFAULT_CLASSES,
    WHOLE_SUITE,
    WHOLE_SUITE_S,
    PlanEntry,
    PoolSchedulerProcessor,
    job_key,
    shards,
)

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def tick(minutes: float) -> ClockTick:
    return ClockTick(time=T0 + timedelta(minutes=minutes))


def request(
    name: str,
    work_class: str = "nightly",
    chips: int | None = 8,
    estimated_s: float = 600.0,
    revision: str = "any",
    **fields,
) -> RunRequested:
    return RunRequested(
        cause_id=f"cause-{name}",
        purpose="run",
        test_id=f"tests/{name}",
        repo="acme/stack",
        commit="abcdef1",
        bundle=BUNDLE,
        hardware_revision=revision,
        work_class=work_class,
        repeats=1,
        requested_by="test",
        chips=chips,
        estimated_s=estimated_s,
        **fields,
    )


def result_for(
    placed: ScheduleEvent, test_id: str | None = None, status: str = "passed", run_id: str | None = None
) -> ResultEvent:
    return ResultEvent(
        test_id=test_id or placed.tests[0].test_id,
        run_id=run_id or placed.run_id,
        repo=placed.repo,
        commit=placed.commit,
        bundle=BUNDLE,
        node_id=(placed.nodes or ("cpu",))[0],
        hardware_revision=placed.hardware_revision or "cpu",
        trigger=placed.work_class,
        status=status,
        duration_s=10.0,
        pool=placed.pool,
    )


class Pool:
    """The processor over a dict store, with the schedule it emitted so far."""

    def __init__(self, *config: PoolConfig) -> None:
        self.processor = PoolSchedulerProcessor()
        self.store = Store()
        self.schedule: list[ScheduleEvent] = []
        if config:
            self(*config)

    def __call__(self, *events) -> list[ScheduleEvent]:
        out = feed(self.processor, self.store, events)
        self.schedule += out
        return out

    def last(self, action: str, job_id: str | None = None) -> ScheduleEvent:
        return [e for e in self.schedule if e.action == action and job_id in (None, e.job_id)][-1]

    def actions(self, job_id: str) -> list[str]:
        return [e.action for e in self.schedule if e.job_id == job_id]

    def job(self, job_id: str):
        return self.store.get(job_key("default", job_id))


def small_pool(nodes: int = 2, chips: int = 8, cpu_slots: int = 2, **fields) -> PoolConfig:
    return PoolConfig(
        version="test",
        nodes=tuple(
            PoolNode(node_id=f"n{i}", hardware_revision="rev-a" if i % 2 == 0 else "rev-b", chips=chips)
            for i in range(nodes)
        ),
        cpu_slots=cpu_slots,
        classes=DEFAULT_CLASSES,
        **fields,
    )


def test_every_decision_is_stamped_with_the_latest_tick_and_derives_its_id_from_its_cause():
    pool = Pool()
    pool(tick(0), tick(5))
    first = request("a")
    queued, placed = pool(first)
    assert (queued.action, placed.action) == ("queued", "placed")
    assert queued.time == placed.time == T0 + timedelta(minutes=5)
    assert queued.cause_id == placed.cause_id == first.id
    assert placed.run_id == f"sched-{placed.job_id}-1" and placed.attempt == 1
    assert pool(tick(3)) == []  # an older tick changes nothing
    # the same request again (a retrying producer, outside the dedup window) is never queued twice
    pool(*[tick(6 + i) for i in range(20)])
    assert pool(first) == []
    # replaying the same input events on a fresh store gives the same ids
    again = Pool()
    again(tick(0), tick(5))
    assert [e.id for e in again(first)] == [queued.id, placed.id]


def test_a_job_completes_once_every_test_reported_and_stale_attempts_are_ignored():
    pool = Pool(small_pool(nodes=1))
    pool(tick(0))
    _, placed = pool(request("a"))
    pool(request("hog", work_class="release", chips=8))  # waits: one node
    assert pool.actions(placed.job_id) == ["queued", "placed"]
    # a result of the same test under another run id (someone else's run, or a stale attempt) counts for nothing
    pool(tick(1), result_for(placed, run_id=f"sched-{placed.job_id}-7"))
    assert pool.actions(placed.job_id) == ["queued", "placed"]
    done = pool(tick(10), result_for(placed))
    completed = next(e for e in done if e.action == "completed")
    assert completed.job_id == placed.job_id and completed.run_s == 600.0
    # the freed node goes to the waiting job in the same step
    assert [e.action for e in done if e.job_id != placed.job_id] == ["placed"]
    # a duplicate result changes nothing
    assert pool(tick(11), result_for(placed)) == []


def test_preempted_work_resumes_from_its_last_checkpoint_on_the_freed_or_another_node():
    pool = Pool(small_pool(nodes=4))  # 32 chips: release's 25% share is one node
    pool(tick(0))
    night = [pool(request(f"night{i}", estimated_s=3600.0))[-1] for i in range(4)]
    assert all(e.action == "placed" for e in night)
    # 22 minutes in, a release job needs one node: nightly (25%, one node; checkpoint every 10 min) borrows 3
    out = pool(tick(22), request("rel", work_class="release", estimated_s=1800.0))
    preempted = next(e for e in out if e.action == "preempted")
    requeued = next(e for e in out if e.action == "requeued")
    assert preempted.work_class == "nightly" and preempted.preempted_by == pool.last("placed").job_id
    assert preempted.lost_s == 120.0  # ran 1320 s, checkpointed at 1200 s
    assert requeued.resume_from_s == 1200.0
    # when the release job finishes, the nightly job resumes with 1200 s already done
    rel = pool.last("placed")
    assert rel.work_class == "release"
    out = pool(tick(52), result_for(rel))
    resumed = next(e for e in out if e.action == "placed")
    assert resumed.job_id == preempted.job_id and resumed.attempt == 2 and resumed.resume_from_s == 1200.0
    assert pool.job(resumed.job_id).status == "running"
    # the first attempt's result, arriving late, is ignored; the second attempt's completes it
    assert pool(tick(53), result_for(resumed, run_id=f"sched-{resumed.job_id}-1")) == []
    out = pool(tick(100), result_for(resumed))
    assert [e.action for e in out] == ["completed"]


def test_quarantined_nodes_get_no_work_and_their_running_work_is_requeued_elsewhere():
    pool = Pool(small_pool(nodes=3))
    pool(tick(0))
    placed = [pool(request(f"j{i}", estimated_s=3600.0))[-1] for i in range(2)]
    on_n0 = next(e for e in placed if e.nodes == ("n0",))
    out = pool(
        tick(5), NodeStateChanged(node_id="n0", state="quarantined", reason="xid 79", time=T0 + timedelta(minutes=5))
    )
    assert [(e.action, e.job_id) for e in out] == [
        ("preempted", on_n0.job_id),
        ("requeued", on_n0.job_id),
        ("placed", on_n0.job_id),
    ]
    assert out[0].reason == "node n0 is quarantined" and out[-1].nodes == ("n2",)
    # with n0 out, the next job waits instead of going there
    assert [e.action for e in pool(request("j2"))] == ["queued"]
    # suspect: no new work, but what runs there finishes
    pool(NodeStateChanged(node_id="n2", state="suspect", time=T0 + timedelta(minutes=6)))
    assert pool.last("placed", on_n0.job_id).attempt == 2 and pool.job(on_n0.job_id).status == "running"
    # healthy again: it takes the waiting job
    out = pool(tick(7), NodeStateChanged(node_id="n0", state="healthy", time=T0 + timedelta(minutes=7)))
    assert [(e.action, e.nodes) for e in out] == [("placed", ("n0",))]


def test_jobs_the_pool_can_never_run_are_refused_with_the_reason():
    pool = Pool(small_pool(nodes=4))
    pool(tick(0))
    (refused,) = pool(request("big", chips=24))
    assert refused.action == "refused" and "most one hardware revision has is 16" in refused.reason
    (refused,) = pool(request("odd", revision="rev-z"))
    assert refused.action == "refused" and "rev-z" in refused.reason
    # a two-node gang on one revision is fine
    assert [e.action for e in pool(request("gang", chips=16))] == ["queued", "placed"]
    assert pool.last("placed").nodes in (("n0", "n2"), ("n1", "n3"))


def test_a_new_config_keeps_running_work_and_evicts_what_ran_on_removed_nodes():
    pool = Pool(small_pool(nodes=2))
    pool(tick(0))
    a, b = (pool(request(name, estimated_s=3600.0))[-1] for name in ("a", "b"))
    smaller = PoolConfig(
        version="v2", nodes=(PoolNode(node_id="n0", hardware_revision="rev-a", chips=8),), classes=DEFAULT_CLASSES
    )
    out = pool(tick(1), smaller)
    gone = b if b.nodes == ("n1",) else a
    assert [(e.action, e.job_id) for e in out] == [("preempted", gone.job_id), ("requeued", gone.job_id)]
    assert "left the pool" in out[0].reason


def test_a_plan_becomes_cpu_shards_and_one_hardware_job_per_test_with_the_smoke_test_as_the_floor():
    pool = Pool(
        small_pool(
            nodes=2,
            cpu_slots=4,
            cpu_shard_s=100.0,
            smoke_test="tests/smoke.py::test_tiny",
            smoke_chips=4,
            smoke_estimated_s=120.0,
        )
    )
    pool(tick(0))
    entries = [
        ("tests/k.py::a", 0, 60.0),
        ("tests/models.py::llm", 8, 900.0),
        ("tests/k.py::b", 0, 60.0),
        ("tests/k.py::c", 0, 30.0),
        ("tests/models.py::vit", 8, 600.0),
    ]
    out = pool(plan("p1", entries, hardware_path=True))
    queued = [e for e in out if e.action == "queued"]
    assert [(tuple(t.test_id for t in e.tests), e.chips) for e in queued] == [
        (("tests/models.py::llm",), 8),
        (("tests/models.py::vit",), 8),
        (("tests/k.py::a",), 0),
        (("tests/k.py::b", "tests/k.py::c"), 0),  # shards of about 100 s, in plan order
    ]
    assert all(e.request_id == out[0].cause_id and e.work_class == "presubmit" for e in queued)
    # off the hardware path, the model tests run in their CPU/simulator form
    out = pool(plan("p2", entries, hardware_path=False))
    assert all(e.chips == 0 for e in out if e.action == "queued")
    # a model that needs many nodes runs per change in its CPU/simulator form (on hardware nightly)
    out = pool(plan("p4", [("tests/models.py::llm-70b", 16, 900.0)], hardware_path=True))
    assert [(e.chips, e.tests[0].test_id) for e in out if e.action == "queued"] == [
        (4, "tests/smoke.py::test_tiny"),
        (0, "tests/models.py::llm-70b"),
    ]
    # a hardware-path change whose plan has no hardware test still gets the smoke test on hardware
    out = pool(plan("p3", [("tests/k.py::a", 0, 60.0)], hardware_path=True))
    smoke = next(e for e in out if e.action == "queued" and e.chips)
    assert smoke.tests[0].test_id == "tests/smoke.py::test_tiny" and smoke.chips == 4


def test_a_cpu_shard_completes_when_all_its_tests_reported():
    pool = Pool(small_pool(cpu_slots=1, cpu_shard_s=1000.0))
    pool(tick(0))
    out = pool(plan("p", [("t::a", 0, 1.0), ("t::b", 0, 1.0), ("t::c", 0, 1.0)], hardware_path=False))
    placed = next(e for e in out if e.action == "placed")
    assert placed.cpu and [t.test_id for t in placed.tests] == ["t::a", "t::b", "t::c"]
    assert pool(result_for(placed, "t::b"), result_for(placed, "t::a"), result_for(placed, "t::a")) == []
    assert [e.action for e in pool(result_for(placed, "t::c"))] == ["completed"]


def test_shards_group_consecutive_entries_by_estimated_time():
    entries = [PlanEntry(test_id=f"t{i}", estimated_s=s, chips=0) for i, s in enumerate((50, 50, 50, 500, 10))]
    assert [[e.test_id for e in group] for group in shards(entries, 100.0)] == [["t0", "t1"], ["t2"], ["t3"], ["t4"]]


def test_class_policy_comes_from_the_config():
    classes = tuple(
        p.model_copy(update={"priority": 5 - p.priority}) if p.work_class in ("dev", "release") else p
        for p in DEFAULT_CLASSES
    )
    classes = tuple(
        ClassPolicy(
            work_class=p.work_class, priority={"dev": 0, "release": 5}.get(p.work_class, p.priority), quota=p.quota
        )
        for p in classes
    )
    pool = Pool(small_pool(nodes=1).model_copy(update={"classes": classes, "version": "dev-first"}))
    pool(tick(0))
    pool(request("hold", chips=8))
    pool(request("r", work_class="release"), request("d", work_class="dev"))
    out = pool(tick(10), result_for(pool.last("placed")))
    assert next(e for e in out if e.action == "placed").work_class == "dev"


def plan(name: str, entries, hardware_path: bool, run_all: bool = False) -> TestPlan:
    """A one-page test-plan event with these (test id, chips, estimated seconds) entries."""
    tests = [
        PlannedTest(
            test_id=t,
            reason="run-all" if run_all else "executes-changed-code",
            risk=0.5,
            history_risk=0.1,
            exposure=0.5,
            flaky_rate=0.0,
            expected_s=s,
            estimated_s=s,
            chips=c,
            saved_chip_s=0.0,
        )
        for t, c, s in entries
    ]
    total = sum(s for _, _, s in entries)
    return TestPlan(
        selection_id=derive_id("selection", name),
        commit_id=derive_id("commits", name),
        repo="acme/stack",
        sha="abcdef1",
        hardware_path=hardware_path,
        run_all=run_all,
        page=0,
        pages=1,
        first_rank=0,
        entries=tests,
        metrics=PlanMetrics(
            tests=len(tests), expected_s=total, estimated_s=total, estimated_chip_s=0, saved_chip_s=0, shrunk=0
        ),
    )


def test_a_run_all_plan_with_no_known_test_places_the_whole_suite_as_one_job():
    pool = Pool(small_pool(cpu_slots=1))
    pool(tick(0))
    out = pool(plan("new-repo", [], hardware_path=False, run_all=True))
    (queued,) = [e for e in out if e.action == "queued"]
    assert [(t.test_id, t.estimated_s) for t in queued.tests] == [(WHOLE_SUITE, WHOLE_SUITE_S)]
    assert any(e.action == "placed" for e in out)
    assert [e for e in pool(plan("nothing-to-run", [], hardware_path=False)) if e.action == "queued"] == []
