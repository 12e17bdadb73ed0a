"""A change's plan as one job reads it, from the selection and plan events of its commits: its share
of the suite's time, the tests that lack evidence, the rules that keep every test and their units."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from fastci.ci.change import Change
from fastci.ci.plan import Found, Plan, PlannedRun, combine
from fastci.contracts.test_plans import PlanMetrics, PlannedTest, TestPlan
from fastci.inputs import CommitEvent
from fastci.selection.events import KeptTest, Selection, SelectionMetrics
from fastci.shared.test_ids import short_id

TESTS = ["tests/test_a.py::test_one", "tests/test_a.py::test_two", "tests/test_b.py::test_three"]


def commit(n: int) -> CommitEvent:
    return CommitEvent(
        repo="r",
        sha=f"{n:07x}aaaaa",
        parents=(f"{n - 1:07x}aaaaa",),
        author="Dev",
        time=datetime(2027, 1, n, tzinfo=UTC),
        title=f"commit {n}",
    )


def decisions(
    event: CommitEvent,
    kept: dict[str, tuple[str, tuple[str, ...]]],
    planned_s: float,
    all_s: float,
    unevidenced: tuple[str, ...] = (),
) -> tuple[Selection, TestPlan]:
    """One commit's selection (``kept``: test -> reason, units) and its plan, the planner's
    durations summing to ``planned_s`` and the selection's suite to ``all_s``."""
    zero = dict.fromkeys(("selected", "pruned", "skipped", "changed_units"), 0)
    selection = Selection(
        commit_id=event.id,
        repo="r",
        sha=event.sha,
        base=event.parents[0],
        run_all=False,
        kept=tuple(KeptTest(test_id=t, reason=r, functions=f, estimated_s=1.0) for t, (r, f) in kept.items()),
        metrics=SelectionMetrics(
            tests_known=len(TESTS),
            kept=len(kept),
            selection_ratio=len(kept) / len(TESTS),
            estimated_s_all=all_s,
            estimated_s_kept=all_s,
            saved_s=0.0,
            saved_gpu_s=0.0,
            pairs_covered_by_all=0,
            pairs_covered_by_kept=0,
            unevidenced_units=len(unevidenced),
            unevidenced=unevidenced,
            coverage_retention=1.0,
            **zero,
        ),
    )
    each = planned_s / len(kept)
    entries = tuple(
        PlannedTest(
            test_id=t,
            reason=r,
            risk=0.5,
            history_risk=0.1,
            exposure=0.5,
            flaky_rate=0.0,
            expected_s=each,
            estimated_s=each,
            chips=0,
            saved_chip_s=0.0,
        )
        for t, (r, _) in kept.items()
    )
    plan = TestPlan(
        selection_id=selection.id,
        commit_id=event.id,
        repo="r",
        sha=event.sha,
        base=event.parents[0],
        hardware_path=False,
        run_all=False,
        page=0,
        pages=1,
        first_rank=0,
        entries=entries,
        known=tuple(sorted(short_id(t) for t in TESTS)),
        metrics=PlanMetrics(
            tests=len(entries),
            expected_s=planned_s,
            estimated_s=planned_s,
            estimated_chip_s=0,
            saved_chip_s=0,
            shrunk=0,
        ),
    )
    return selection, plan


def combined(*commits: tuple[CommitEvent, Selection, TestPlan]) -> Plan:
    found = Found()
    for _, selection, plan in commits:
        found.add(selection)
        found.add(plan)
    events = [c for c, _, _ in commits]
    change = Change(Path("."), events[-1].sha, None, tuple(c.sha for c in events))
    return combine(change, events, found, "test")


def test_the_share_never_exceeds_the_whole_suite_when_the_planners_durations_sum_past_the_selections():
    event = commit(1)
    every = {t: ("no-evidence", ()) for t in TESTS}
    plan = combined((event, *decisions(event, every, planned_s=3.015, all_s=3.0)))
    assert plan.estimated_s > plan.estimated_s_all and plan.share == 1.0
    assert plan.to_json()["metrics"]["share"] == 1.0
    half = {TESTS[0]: ("executes-changed-code", ("pkg/a.py::f",))}
    assert combined((event, *decisions(event, half, planned_s=1.5, all_s=3.0))).share == 0.5


def test_the_line_counts_tests_without_evidence_and_names_each_rule_that_keeps_everything_with_its_units():
    event = commit(1)
    kept = {
        TESTS[0]: ("no-evidence", ()),
        TESTS[1]: ("import-time", ("pkg/registry.py::register", "pkg/a.py::helper")),
        TESTS[2]: ("import-time", ("pkg/registry.py::register",)),
    }
    plan = combined((event, *decisions(event, kept, 3.0, 3.0, unevidenced=("pkg/a.py::helper",))))
    assert plan.no_evidence == 1
    assert plan.notes() == [
        "1 of the 3 known tests have no evidence and always run: `pytest --fastci-evidence --fastci-results` "
        "(in a nightly) gives them some",
        "1 changed unit(s) no test's evidence runs: pkg/a.py::helper (the tests importing their modules run)",
        "every known test is kept: 2 import-time for pkg/a.py::helper, pkg/registry.py::register",
    ]
    some = {TESTS[1]: ("executes-changed-code", ("pkg/a.py::f",))}  # a subset: no rule to name
    assert combined((event, *decisions(event, some, 1.0, 3.0))).notes() == []


def test_a_pull_requests_plan_unites_its_commits_units_and_carries_them_through_json():
    first, second = commit(1), commit(2)
    plan = combined(
        (first, *decisions(first, {TESTS[0]: ("import-time", ("pkg/a.py::f",))}, 1.0, 3.0, ("pkg/a.py::f",))),
        (
            second,
            *decisions(
                second,
                {TESTS[0]: ("executes-changed-code", ("pkg/b.py::g",)), TESTS[2]: ("no-evidence", ())},
                2.0,
                3.0,
                ("pkg/a.py::f", "pkg/c.py::h"),
            ),
        ),
    )
    assert plan.unevidenced == ("pkg/a.py::f", "pkg/c.py::h") and plan.unevidenced_units == 2
    assert {t.test_id: t.functions for t in plan.tests}[TESTS[0]] == ("pkg/a.py::f", "pkg/b.py::g")
    document = plan.to_json(with_known=True)
    assert document["metrics"]["unevidenced"] == ["pkg/a.py::f", "pkg/c.py::h"]
    assert document["metrics"]["no_evidence"] == 1
    again = Plan.from_json(document)
    assert again.to_json(with_known=True) == document and again.notes() == plan.notes()


def test_a_plan_of_a_repository_nothing_is_known_of_says_what_gives_its_tests_evidence():
    nothing = Plan(repo="r", head="abc1234", commits=("abc1234",), run_all=True, reason="no test of r is known yet")
    assert nothing.notes() == []  # not answered: fastci could not decide, and the reason says why
    nothing.answered = True
    assert nothing.notes() == [
        "`pytest --fastci-evidence --fastci-results` (in a nightly) records what each test runs, so a change runs "
        "only its tests"
    ]
    nothing.known = frozenset({short_id(TESTS[0])})  # results known, a CI file changed: the reason says it all
    assert nothing.notes() == []
    run = PlannedRun(TESTS[0], "no-evidence", 0.5, 1.0, 1.0)
    assert Plan.from_json(Plan("r", "abc1234", (), run_all=False, tests=[run]).to_json()).tests == [run]
