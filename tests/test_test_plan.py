"""test-plan: every selection ordered by risk per unit of cost, each test on the smallest config
that proves the change.
"""

from __future__ import annotations

import pytest
from factories import result
from processor_helpers import Store, feed, of_topic
from test_selection import REPO, commit, evidence, stack

from fastci.contracts.test_plans import KNOWN_PAGE_SIZE, PAGE_SIZE, TestPlan
from fastci.inputs import EvidenceEvent, WorkloadEvidence
from fastci.planning.processor import TestPlanProcessor, needed_units
from fastci.runtime.driver import Driver
from fastci.runtime.embedded import DataDir, EmbeddedRuntime
from fastci.runtime.publish import publish_embedded
from fastci.selection.events import KeptTest, Selection, SelectionMetrics
from fastci.selection.processor import SelectionProcessor
from fastci.shared.test_ids import short_id
from fastci.topology import ALL_PROCESSORS, SYSTEM, decode

METRICS = SelectionMetrics(
    tests_known=0,
    selected=0,
    kept=0,
    pruned=0,
    skipped=0,
    selection_ratio=1.0,
    estimated_s_all=0,
    estimated_s_kept=0,
    saved_s=0,
    saved_gpu_s=0,
    changed_units=0,
    pairs_covered_by_all=0,
    pairs_covered_by_kept=0,
    coverage_retention=1.0,
)
TRAIN = "tests/models/test_lm.py::test_train"
WORKLOAD = {
    "scope": {"precision": "bf16", "heads": 2},
    "dimensions": [
        {"name": "steps", "full": 300, "minimum": 20},
        {"name": "layers", "full": 4, "minimum": 1, "cost_exponent": 0.9},
    ],
    "first_executions": [
        {"unit": "fw/train.py::cosine_rate", "at": [{"steps": 30}]},
        {"unit": "fw/train.py::save_checkpoint", "at": [{"steps": 99}]},
        {"unit": "fw/lm.py::mixture_of_experts", "at": [{"layers": 1}]},
    ],
}


def selection(
    *kept: tuple[str, str, tuple[str, ...]], sha: str = "1234567", run_all: bool = False, hardware_path: bool = False
) -> Selection:
    return Selection(
        commit_id=f"commit-{sha}",
        repo=REPO,
        sha=sha,
        run_all=run_all,
        hardware_path=hardware_path,
        kept=tuple(KeptTest(test_id=t, reason=r, functions=f, estimated_s=10.0) for t, r, f in kept),
        metrics=METRICS,
    )


def plan_of(events) -> TestPlan:
    (plan,) = of_topic(feed(TestPlanProcessor(), Store(), events), "test-plan")
    return plan


def changed(test_id: str, *functions: str) -> tuple[str, str, tuple[str, ...]]:
    return (test_id, "executes-changed-code", functions)


def runs(test_id: str, *statuses: str, seconds: float = 10.0, chips: int = 0):
    return [
        result(test_id, f"run-{i}", repo=REPO, status=s, duration_s=seconds, chips=chips)
        for i, s in enumerate(statuses)
    ]


def test_recent_failures_come_first_and_a_new_test_sits_between_failing_and_long_passing_tests():
    events = [
        *runs("t/a.py::steady", *["passed"] * 20),
        *runs("t/b.py::broke", *["passed"] * 19, "failed"),
        selection(
            changed("t/a.py::steady", "f.py::g"), changed("t/b.py::broke", "f.py::g"), changed("t/c.py::new", "f.py::g")
        ),
    ]
    plan = plan_of(events)
    assert [e.test_id for e in plan.entries] == ["t/b.py::broke", "t/c.py::new", "t/a.py::steady"]
    broke, new, steady = plan.entries
    assert broke.history_risk > new.history_risk > steady.history_risk
    assert new.history_risk == 0.05  # the prior: a new test does not start at zero
    assert all(e.exposure == 1.0 for e in plan.entries)


def test_more_of_the_change_executed_means_more_risk_and_cheaper_tests_go_first_at_equal_risk():
    events = [
        *runs("t/a.py::one", "passed"),
        *runs("t/b.py::both", "passed"),
        *runs("t/c.py::both_slow", "passed", seconds=100),
        selection(
            changed("t/a.py::one", "f.py::g"),
            changed("t/b.py::both", "f.py::g", "f.py::h"),
            changed("t/c.py::both_slow", "f.py::g", "f.py::h"),
        ),
    ]
    plan = plan_of(events)
    assert [e.test_id for e in plan.entries] == ["t/b.py::both", "t/a.py::one", "t/c.py::both_slow"]
    assert plan.entries[1].exposure == 0.5 and plan.entries[0].risk > plan.entries[1].risk


def test_a_flaky_test_is_discounted_against_one_with_the_same_failures():
    plan = plan_of(
        [
            *runs("t/a.py::flaky", *["passed", "flaky"] * 5, "failed"),
            *runs("t/b.py::solid", *["passed"] * 10, "failed"),
            selection(changed("t/a.py::flaky", "f.py::g"), changed("t/b.py::solid", "f.py::g")),
        ]
    )
    flaky, solid = plan.entries[1], plan.entries[0]
    assert (flaky.test_id, solid.test_id) == ("t/a.py::flaky", "t/b.py::solid")
    assert flaky.flaky_rate > solid.flaky_rate and flaky.risk < solid.risk


def test_chips_make_a_test_costlier_per_unit_of_risk():
    plan = plan_of(
        [
            *runs("t/a.py::gpu", "passed", chips=8),
            *runs("t/b.py::cpu", "passed", seconds=40.0),
            selection(changed("t/a.py::gpu", "f.py::g"), changed("t/b.py::cpu", "f.py::g")),
        ]
    )
    assert [(e.test_id, e.chips) for e in plan.entries] == [("t/b.py::cpu", 0), ("t/a.py::gpu", 8)]


def test_the_plan_id_derives_from_the_selection_and_redelivery_changes_nothing():
    sel = selection(changed("t/a.py::x", "f.py::g"), sha="abcdef1", hardware_path=True)
    store = Store()
    first = feed(TestPlanProcessor(), store, [*runs("t/a.py::x", "failed"), sel])
    again = feed(TestPlanProcessor(), store, [*runs("t/a.py::x", "failed"), sel])  # the same results, redelivered
    assert [p.id for p in first] == [p.id for p in again] and first[0].entries == again[0].entries
    plan = first[0]
    assert plan.selection_id == sel.id and plan.commit_id == sel.commit_id and plan.hardware_path
    assert plan.id == TestPlan.model_validate({**plan.model_dump(), "id": ""}).id


def test_a_run_all_selection_plans_every_known_test_but_those_the_commit_deleted():
    deleting = commit(("tests/test_old.py", "test_gone", "deleted"), sha="7654321")
    events = [
        *runs("tests/test_old.py::test_gone", "passed"),
        *runs("tests/test_old.py::test_kept", "passed"),
        evidence("tests/test_new.py::test_evidence_only", stack(("tests/test_new.py", "test_evidence_only"))),
        deleting,
        selection(run_all=True, sha="7654321"),
    ]
    plan = plan_of(events)
    assert plan.run_all and {e.test_id for e in plan.entries} == {
        "tests/test_old.py::test_kept",
        "tests/test_new.py::test_evidence_only",
    }
    assert {e.reason for e in plan.entries} == {"run-all"}
    # the known tests travel with the plan (the deleted one is gone), so a job can tell new tests apart
    assert plan.known == tuple(
        sorted(short_id(t) for t in ("tests/test_old.py::test_kept", "tests/test_new.py::test_evidence_only"))
    )


def test_a_plan_carries_its_base_the_run_all_reason_and_every_known_test_in_pages():
    known = [f"t/x.py::test_{i:05d}" for i in range(KNOWN_PAGE_SIZE + 3)]
    events = [result(t, "run-0", repo=REPO, status="passed", duration_s=1.0) for t in known]
    chosen = selection(changed(known[0], "f.py::g")).model_copy(update={"base": "abcdef0"})
    plans = of_topic(feed(TestPlanProcessor(), Store(), [*events, chosen]), "test-plan")
    assert [(p.page, p.pages, len(p.entries), len(p.known)) for p in plans] == [
        (0, 2, 1, KNOWN_PAGE_SIZE),
        (1, 2, 0, 3),
    ]
    assert [k for p in plans for k in p.known] == sorted(short_id(t) for t in known)
    assert {p.base for p in plans} == {"abcdef0"} and not plans[0].run_all_reason
    everything = selection(run_all=True).model_copy(update={"run_all_reason": "non-Python file changed: setup.cfg"})
    first, *_ = of_topic(feed(TestPlanProcessor(), Store(), [*events, everything]), "test-plan")
    assert first.run_all and first.run_all_reason == "non-Python file changed: setup.cfg"


def test_a_big_plan_is_split_into_pages_in_run_order():
    tests = [changed(f"t/x.py::test_{i:04d}", "f.py::g") for i in range(PAGE_SIZE + 5)]
    plans = of_topic(feed(TestPlanProcessor(), Store(), [selection(*tests)]), "test-plan")
    assert [(p.page, p.pages, p.first_rank, len(p.entries)) for p in plans] == [
        (0, 2, 0, PAGE_SIZE),
        (1, 2, PAGE_SIZE, 5),
    ]
    assert len({p.id for p in plans}) == 2 and all(p.metrics.tests == PAGE_SIZE + 5 for p in plans)


def workload_evidence(test_id: str = TRAIN, **changes) -> EvidenceEvent:
    return EvidenceEvent(
        test_id=test_id,
        run_id="ev-1",
        repo=REPO,
        commit="abcdef1",
        method="tracing",
        stacks=[{"stack": "test_train (tests/models/test_lm.py:1)", "count": 1}],
        workload=WorkloadEvidence.model_validate({**WORKLOAD, **changes}),
    )


def test_a_change_to_code_that_runs_from_step_30_shrinks_steps_to_31_and_layers_to_the_minimum():
    plan = plan_of(
        [
            *runs(TRAIN, "passed", seconds=600.0, chips=8),
            workload_evidence(),
            selection(changed(TRAIN, "fw/train.py::cosine_rate", "fw/data.py::load")),
        ]
    )
    (entry,) = plan.entries
    assert entry.shrunk == {"steps": 31, "layers": 1}
    assert entry.config == {"precision": "bf16", "heads": 2, "steps": 31, "layers": 1}  # the scope is never touched
    scale = (31 / 300) * (1 / 4) ** 0.9
    assert abs(entry.estimated_s - 600.0 * scale) < 1e-9
    assert abs(entry.saved_chip_s - (600.0 - 600.0 * scale) * 8) < 1e-6
    assert plan.metrics.shrunk == 1 and plan.metrics.saved_chip_s == entry.saved_chip_s


def test_deeper_and_later_units_keep_what_they_need():
    plan = plan_of(
        [workload_evidence(), selection(changed(TRAIN, "fw/lm.py::mixture_of_experts", "fw/train.py::save_checkpoint"))]
    )
    assert plan.entries[0].shrunk == {"steps": 100, "layers": 2}


def test_a_changed_test_or_one_without_evidence_runs_its_full_config():
    for reason in ("changed-test", "no-evidence"):
        (entry,) = plan_of([workload_evidence(), selection((TRAIN, reason, ()))]).entries
        assert entry.shrunk == {} and entry.config["steps"] == 300 and entry.estimated_s == entry.expected_s


def test_module_code_asks_for_every_unit_of_its_file_and_a_full_list_for_every_unit():
    units = {"a.py::f": 1, "a.py::C.g": 1, "b.py::h": 1}
    assert needed_units(("a.py::<module>",), units) == ["a.py::C.g", "a.py::f"]
    assert needed_units(("a.py::C.<body>", "b.py::h"), units) == ["a.py::C.g", "a.py::f", "b.py::h"]
    assert needed_units(tuple(f"x.py::f{i}" for i in range(16)), units) == sorted(units)  # may be truncated
    plan = plan_of([workload_evidence(), selection((TRAIN, "module-code", ("fw/train.py::<module>",)))])
    assert plan.entries[0].shrunk == {"steps": 100, "layers": 1}


def test_evidence_without_a_workload_forgets_the_declaration_and_shrunk_runs_count_at_full_length():
    store = Store()
    feed(
        TestPlanProcessor(),
        store,
        [workload_evidence(), result(TRAIN, "short", repo=REPO, duration_s=10.0, config={"steps": 30, "layers": 4})],
    )
    (entry,) = of_topic(feed(TestPlanProcessor(), store, [selection((TRAIN, "no-evidence", ()))]), "test-plan")[
        0
    ].entries
    assert entry.expected_s == 100.0  # 10 s at a tenth of the steps
    no_workload = EvidenceEvent(
        test_id=TRAIN,
        run_id="ev-2",
        repo=REPO,
        commit="abcdef1",
        method="tracing",
        stacks=[{"stack": "test_train (tests/models/test_lm.py:1)", "count": 1}],
    )
    later = feed(
        TestPlanProcessor(), store, [no_workload, selection(changed(TRAIN, "fw/train.py::cosine_rate"), sha="2222222")]
    )
    assert of_topic(later, "test-plan")[0].entries[0].config == {}


def test_the_processor_runs_after_selection_in_both_runtimes():
    names = [p.name for p in ALL_PROCESSORS]
    assert names.index("test-planner") > names.index("test-selection")


def test_commits_through_selection_to_a_plan_in_the_embedded_runtime(tmp_path):
    a, b = "tests/test_model.py::test_forward", "tests/test_model.py::test_backward"
    history = [
        *runs(a, "passed", "passed"),
        *runs(b, "passed", "failed", chips=8),
        evidence(a, stack(("tests/test_model.py", "test_forward"), ("fw/model.py", "Model.forward"))),
        evidence(
            b,
            stack(
                ("tests/test_model.py", "test_backward"),
                ("fw/model.py", "Model.backward"),
                ("fw/model.py", "Model.forward"),
            ),
        ),
    ]
    change = commit(("fw/model.py", "Model.forward", "modified"))
    publish_embedded(tmp_path, [*history, change])
    runtime = EmbeddedRuntime(tmp_path, SYSTEM)
    try:
        runtime.run()
    finally:
        runtime.close()
    log = DataDir(tmp_path).log
    (sel,) = [decode("selection", r.payload) for r in log.topic("selection").read()]
    (plan,) = [decode("test-plan", r.payload) for r in log.topic("test-plan").read()]
    assert plan.selection_id == sel.id and plan.sha == change.sha
    assert {k.test_id for k in sel.kept} == {a, b}  # different calling contexts: both kept
    assert [e.test_id for e in plan.entries] == [a, b]  # b failed last time, but holds 8 chips for as long
    assert plan.entries[1].history_risk > plan.entries[0].history_risk
    assert plan.entries[1].risk / 80 < plan.entries[0].risk / 10


def test_the_driver_keeps_plans_identical_when_a_store_is_replayed_from_scratch():
    events = [*runs("t/a.py::x", "passed", "failed"), selection(changed("t/a.py::x", "f.py::g"))]
    outputs = []
    for _ in range(2):
        driver = Driver(TestPlanProcessor(), {})
        outputs.append([o for e in events for o in driver.handle(e)])
    assert outputs[0] == outputs[1] and outputs[0][0].TOPIC == "test-plan"
    assert SelectionProcessor.name in {p.name for p in ALL_PROCESSORS}


def test_a_test_never_run_is_expected_to_cost_the_median_planned_test_not_the_selection_default():
    events = [
        *runs("t/a.py::fast", "passed", seconds=0.002),
        *runs("t/b.py::fast2", "passed", seconds=0.004),
        *runs("t/c.py::slow", "passed", seconds=0.5),
        selection(
            changed("t/a.py::fast", "f.py::g"),
            changed("t/b.py::fast2", "f.py::g"),
            changed("t/c.py::slow", "f.py::g"),
            ("t/d.py::new", "changed-test", ()),
        ),
    ]
    plan = plan_of(events)
    new = next(e for e in plan.entries if e.test_id == "t/d.py::new")
    assert new.expected_s == 0.004  # the median of 2, 4 and 500 ms; selection said 10 s
    order = [e.test_id for e in plan.entries]
    assert order.index("t/d.py::new") < order.index("t/b.py::fast2")  # at the same cost its prior makes it riskier


def test_the_ablation_knobs_keep_the_selection_order_and_the_full_config():
    events = [
        *runs("t/a.py::steady", *["passed"] * 20),
        *runs("t/b.py::broke", "failed"),
        *runs(TRAIN, "passed", seconds=600.0, chips=8),
        workload_evidence(),
        selection(
            changed("t/a.py::steady", "f.py::g"),
            changed(TRAIN, "fw/train.py::cosine_rate"),
            changed("t/b.py::broke", "f.py::g"),
        ),
    ]
    (risk,) = of_topic(feed(TestPlanProcessor(), Store(), events), "test-plan")
    (declared,) = of_topic(feed(TestPlanProcessor(order="declared", shrink=False), Store(), events), "test-plan")
    assert [e.test_id for e in risk.entries][0] == "t/b.py::broke"
    assert [e.test_id for e in declared.entries] == ["t/a.py::steady", TRAIN, "t/b.py::broke"]
    assert {e.test_id: e.shrunk for e in risk.entries}[TRAIN] == {"steps": 31, "layers": 1}
    full = {e.test_id: e for e in declared.entries}[TRAIN]
    assert full.shrunk == {} and full.config == {"precision": "bf16", "heads": 2, "steps": 300, "layers": 4}
    assert full.estimated_s == 600.0 and declared.metrics.saved_chip_s == 0.0


def test_an_unknown_order_is_refused_by_name():
    with pytest.raises(ValueError, match="order must be 'risk' or 'declared'"):
        TestPlanProcessor(order="random")


def test_a_cpu_form_run_does_not_make_a_model_test_free_of_chips():
    events = [
        result(TRAIN, "hw-1", repo=REPO, duration_s=600.0, chips=8),
        result(TRAIN, "cpu-1", repo=REPO, duration_s=60.0, chips=0),
        selection(changed(TRAIN, "fw/data.py::load")),
    ]
    (entry,) = plan_of(events).entries
    assert entry.chips == 8


def test_a_tests_expected_duration_comes_from_runs_that_recorded_no_evidence():
    from fastci.planning.processor import TestRecord

    record = TestRecord(
        test_id="tests/test_a.py::test_x",
        runs={"nightly-1": ("passed", 9.0), "presubmit-2": ("passed", 3.0), "presubmit-3": ("skipped", 0.0)},
        traced=("nightly-1",),
    )
    assert record.expected_s == 3.0
    assert record.model_copy(update={"traced": ("nightly-1", "presubmit-2")}).expected_s == 6.0  # all traced
    store = Store()
    feed(TestPlanProcessor(), store, [result("tests/test_a.py::test_x", "n1", duration_s=9.0, traced=True)])
    feed(TestPlanProcessor(), store, [result("tests/test_a.py::test_x", "p2", duration_s=3.0)])
    (recorded,) = [v for v in store.values.values() if isinstance(v, TestRecord)]
    assert recorded.traced == ("n1",) and recorded.expected_s == 3.0
