"""Selection and pruning: which tests a commit needs, from the evidence graph."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from factories import result
from hypothesis import given
from hypothesis import strategies as st
from processor_helpers import Store, feed, of_topic

from fastci.inputs import CommitEvent, EvidenceEvent
from fastci.selection.events import Selection
from fastci.selection.graph import DIRECT_HOPS, executions, unit_executions, unit_name
from fastci.selection.processor import SelectionProcessor, _catalog
from fastci.selection.pruning import prune
from fastci.shared.test_ids import short_id

REPO = "acme/llm-framework"


def evidence(test_id: str, *stacks: str, run_id: str = "run-1") -> EvidenceEvent:
    return EvidenceEvent(
        test_id=test_id,
        run_id=run_id,
        repo=REPO,
        commit="abcdef1",
        method="tracing",
        stacks=[{"stack": s, "count": 1} for s in stacks],
    )


def commit(
    *changes: tuple[str, str, str], files: tuple[str, ...] = (), sha: str = "1234567", renamed: dict | None = None
) -> CommitEvent:
    paths = sorted({path for path, _, _ in changes} | set(files))
    moves = [{"path": new, "change": "renamed", "old_path": old} for old, new in (renamed or {}).items()]
    return CommitEvent(
        repo=REPO,
        sha=sha,
        author="dev",
        time=datetime(2026, 12, 1, tzinfo=UTC),
        title="change",
        changed_files=[{"path": p, "change": "modified"} for p in paths] + moves,
        changed_functions=[{"path": p, "qualname": q, "change": c} for p, q, c in changes],
    )


def frame(path: str, qualname: str, line: int = 1) -> str:
    return f"{qualname} ({path}:{line})"


def stack(*units: tuple[str, str]) -> str:
    return ";".join(frame(p, q) for p, q in units)


TEST_A = ("tests/test_model.py", "test_forward")
TEST_B = ("tests/test_model.py", "test_backward")
TEST_C = ("tests/test_data.py", "test_loader")
FORWARD = ("fw/model.py", "Model.forward")
BLOCK = ("fw/model.py", "Block.forward")
ATTN = ("fw/attention.py", "attention")
LOADER = ("fw/data.py", "load")


def selection_for(events, change: CommitEvent, **settings) -> Selection:
    outputs = feed(SelectionProcessor(**settings), Store(), [*events, change])
    (selection,) = of_topic(outputs, "selection")
    return selection


def kept_ids(selection: Selection) -> list[str]:
    return [k.test_id for k in selection.kept]


def history():
    a, b, c = (f"{p}::{q}" for p, q in (TEST_A, TEST_B, TEST_C))
    return [
        result(a, duration_s=10.0, repo=REPO, chips=8),
        result(b, duration_s=30.0, repo=REPO, chips=8),
        result(c, duration_s=5.0, repo=REPO),
        evidence(a, stack(TEST_A, FORWARD, BLOCK, ATTN)),
        evidence(b, stack(TEST_B, FORWARD, BLOCK, ATTN)),
        evidence(c, stack(TEST_C, LOADER)),
    ]


def test_a_changed_function_selects_the_tests_that_ran_it_and_prunes_the_costlier_duplicate():
    selection = selection_for(history(), commit((*ATTN, "modified")))
    assert kept_ids(selection) == ["tests/test_model.py::test_forward"]  # 10 s covers what 30 s covers
    assert [(p.test_id, p.covered_by) for p in selection.pruned] == [
        ("tests/test_model.py::test_backward", ("tests/test_model.py::test_forward",))
    ]
    assert selection.kept[0].functions == ("fw/attention.py::attention",)
    m = selection.metrics
    assert (m.tests_known, m.selected, m.kept, m.pruned, m.skipped) == (3, 2, 1, 1, 1)
    assert m.estimated_s_all == 45.0 and m.estimated_s_kept == 10.0 and m.saved_s == 35.0
    assert m.saved_gpu_s == 30.0 * 8  # test_backward's 8 chips for 30 s; test_loader uses none
    assert m.coverage_retention == 1.0


def test_a_new_test_is_expected_to_cost_what_the_median_known_test_costs():
    new = ("tests/test_model.py", "test_generate")  # added by the commit: no run recorded yet
    selection = selection_for(history(), commit((*new, "added")))
    assert [(k.test_id, k.estimated_s) for k in selection.kept] == [("tests/test_model.py::test_generate", 10.0)]
    assert selection.metrics.estimated_s_all == 45.0 + 10.0  # not a constant second per unknown test


def test_a_different_calling_context_keeps_both_tests():
    events = history()
    backward = ("fw/model.py", "Model.backward")
    events[4] = evidence("tests/test_model.py::test_backward", stack(TEST_B, backward, BLOCK, ATTN))
    selection = selection_for(events, commit((*ATTN, "modified")))
    assert kept_ids(selection) == ["tests/test_model.py::test_forward", "tests/test_model.py::test_backward"]
    assert selection.pruned == ()


def test_unaffected_and_added_functions_select_nothing_but_tests_without_evidence_always_run():
    events = [*history(), result("tests/test_new.py::test_fresh", repo=REPO)]
    selection = selection_for(events, commit((*LOADER, "added"), ("fw/unused.py", "helper", "modified")))
    assert kept_ids(selection) == ["tests/test_new.py::test_fresh"]
    assert selection.kept[0].reason == "no-evidence"


def test_module_code_and_class_bodies_select_every_test_that_ran_code_in_the_file():
    selection = selection_for(history(), commit(("fw/model.py", "<module>", "modified")))
    assert sorted(kept_ids(selection)) == ["tests/test_model.py::test_backward", "tests/test_model.py::test_forward"]
    assert {k.reason for k in selection.kept} == {"module-code"}
    body = selection_for(history(), commit(("fw/model.py", "Model.<body>", "modified")))
    assert sorted(kept_ids(body)) == sorted(kept_ids(selection))


def test_a_non_python_change_runs_everything_and_docs_and_stubs_change_nothing():
    selection = selection_for(history(), commit(files=("kernels/attention.cu",)))
    assert selection.run_all and "kernels/attention.cu" in selection.run_all_reason
    assert selection.metrics.selection_ratio == 1.0
    docs = selection_for(
        history(),
        commit(files=("README.md", "docs/guide.rst", "fw/model.pyi", "LICENSE", ".gitignore", ".readthedocs.yaml")),
    )
    assert not docs.run_all and docs.kept == ()


def test_new_evidence_replaces_the_old():
    events = [*history(), evidence("tests/test_data.py::test_loader", stack(TEST_C, ATTN), run_id="run-2")]
    selection = selection_for(events, commit((*LOADER, "modified")))
    assert kept_ids(selection) == []  # test_loader no longer runs load()
    moved = selection_for(events, commit((*ATTN, "modified")))
    assert "tests/test_data.py::test_loader" in kept_ids(moved)


def test_replaying_an_event_writes_the_same_values():
    processor, store = SelectionProcessor(), Store()
    feed(processor, store, history())
    before = dict(store.values)
    feed(processor, store, history())  # the writes are sets: a redelivery changes nothing
    assert store.values == before


def test_the_selection_id_derives_from_the_commit():
    change = commit((*ATTN, "modified"))
    assert selection_for(history(), change).id == selection_for(history(), change).id
    assert selection_for(history(), change).commit_id == change.id


def test_contexts_are_the_bounded_caller_chain():
    units, files = executions([stack(TEST_A, FORWARD, BLOCK, ATTN), stack(TEST_A, ATTN)])
    attention = short_id(unit_name(*ATTN))
    assert len(units[attention]) == 2  # called from forward, and directly from the test
    assert files == {"tests/test_model.py", "fw/model.py", "fw/attention.py"}


def test_a_unit_reached_through_one_wrapper_keeps_the_test_in_its_context():
    """A thin public wrapper over a private helper: each test calling the wrapper tests the helper
    with its own inputs (the error path only one of them takes), so neither is pruned; two library
    frames deep, the path alone is the context, and the costlier test is pruned."""
    wrapper = ("fw/zip.py", "zip_equal")
    helper = ("fw/zip.py", "_zip_equal")
    equal, unequal = ("tests/test_zip.py", "test_equal"), ("tests/test_zip.py", "test_unequal")
    ids = [f"{p}::{q}" for p, q in (equal, unequal)]
    events = [
        result(ids[0], duration_s=1.0, repo=REPO),
        result(ids[1], duration_s=2.0, repo=REPO),
        evidence(ids[0], stack(equal, wrapper, helper)),
        evidence(ids[1], stack(unequal, wrapper, helper)),
    ]
    assert kept_ids(selection_for(events, commit((*helper, "modified")))) == ids
    assert kept_ids(selection_for(events, commit((*helper, "modified")), direct_hops=0)) == ids[:1]
    deep = [*events[:2], *(evidence(t, stack(f, FORWARD, wrapper, helper)) for t, f in zip(ids, (equal, unequal)))]
    assert kept_ids(selection_for(deep, commit((*helper, "modified")))) == ids[:1]


# Pruning: the kept set covers exactly what all candidates cover, and each pruned test names
# kept tests that together cover all of its pairs.
pair = st.tuples(st.sampled_from("abcdefgh"), st.sampled_from("xyz"))
candidates_strategy = st.dictionaries(
    st.text("tuvw", min_size=1, max_size=3), st.frozensets(pair, min_size=1, max_size=10), max_size=12
)


@given(candidates_strategy, st.data())
def test_pruning_keeps_exactly_the_coverage_of_the_selection(candidates, data):
    costs = {t: data.draw(st.floats(0.1, 100)) for t in candidates}
    forced = frozenset(data.draw(st.lists(st.sampled_from(sorted(candidates)), max_size=3)) if candidates else [])
    result_ = prune(candidates, costs, forced)
    kept = set(result_.kept)
    assert forced <= kept
    assert kept.isdisjoint(result_.covered_by) and kept | set(result_.covered_by) == set(candidates)
    everything = set().union(*candidates.values()) if candidates else set()
    covered_by_kept = set().union(*(candidates[t] for t in kept)) if kept else set()
    assert covered_by_kept == everything
    for test, by in result_.covered_by.items():
        assert set(by) <= kept and candidates[test] <= set().union(*(candidates[k] for k in by))
    assert prune(candidates, costs, forced) == result_  # deterministic


def test_a_repo_with_no_known_test_runs_everything():
    selection = selection_for([], commit((*ATTN, "modified")))
    assert selection.run_all and selection.run_all_reason == f"no test of {REPO} is known yet"


def test_a_new_or_edited_test_is_kept_even_before_anything_knows_it():
    selection = selection_for(
        history(),
        commit(("tests/test_model.py", "TestAttention.test_masked", "added"), ("fw/model.py", "helper", "added")),
    )
    assert [(k.test_id, k.reason) for k in selection.kept] == [
        ("tests/test_model.py::TestAttention::test_masked", "changed-test")
    ]
    edited = selection_for(history(), commit((*ATTN, "modified"), ("tests/test_model.py", "test_backward", "modified")))
    # The edited test runs whatever pruning says, and it covers what the cheaper one would.
    assert [(k.test_id, k.reason) for k in edited.kept] == [("tests/test_model.py::test_backward", "changed-test")]
    assert [(p.test_id, p.covered_by) for p in edited.pruned] == [
        ("tests/test_model.py::test_forward", ("tests/test_model.py::test_backward",))
    ]


def test_tests_calling_a_function_directly_are_never_pruned_for_each_other():
    a, b = "tests/test_ops.py::test_small", "tests/test_ops.py::test_large"
    events = [
        result(a, duration_s=1.0, repo=REPO),
        result(b, duration_s=9.0, repo=REPO),
        evidence(a, stack(("tests/test_ops.py", "test_small"), ATTN)),
        evidence(b, stack(("tests/test_ops.py", "test_large"), ATTN)),
    ]
    selection = selection_for(events, commit((*ATTN, "modified")))
    assert sorted(kept_ids(selection)) == sorted([a, b]) and selection.pruned == ()


def test_deleted_and_renamed_tests_are_forgotten():
    processor, store = SelectionProcessor(), Store()
    feed(processor, store, history())
    deleted = feed(processor, store, [commit((*ATTN, "modified"), ("tests/test_model.py", "test_forward", "deleted"))])
    assert kept_ids(deleted[0]) == ["tests/test_model.py::test_backward"]
    assert deleted[0].metrics.tests_known == 2
    after = feed(processor, store, [commit((*ATTN, "modified"), sha="2345678")])
    assert kept_ids(after[0]) == ["tests/test_model.py::test_backward"]  # gone for good
    moved = feed(
        processor,
        store,
        [commit((*LOADER, "modified"), sha="3456789", renamed={"tests/test_data.py": "tests/test_loading.py"})],
    )
    assert kept_ids(moved[0]) == [] and moved[0].metrics.tests_known == 1


def test_a_new_class_selects_nothing_by_itself():
    selection = selection_for(history(), commit(("fw/model.py", "Cache.<body>", "added")))
    assert selection.kept == () and not selection.run_all


def test_a_docstring_edit_changes_no_unit_and_keeps_only_the_files_doctests(tmp_path):
    """Docstrings are not code, except to a doctest: a docstring-only commit runs the changed file's
    doctests and nothing else."""
    import subprocess

    from fastci.selection.changes import analyze_commit

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "fw").mkdir()
    (tmp_path / "fw" / "attention.py").write_text('def attention(x):\n    """Scores."""\n    return x\n')
    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "one")
    (tmp_path / "fw" / "attention.py").write_text(
        'def attention(x):\n    """Attention scores, >>> doc."""\n    return x\n'
    )
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-am", "docs")
    change = analyze_commit(tmp_path, "HEAD", REPO)
    assert change.changed_functions == () and [f.path for f in change.changed_files] == ["fw/attention.py"]
    doctest = "fw/attention.py::fw.attention.attention"
    ran = evidence(doctest, stack(("fw/attention.py", "attention")))
    selection = selection_for([*history(), result(doctest, duration_s=0.1, repo=REPO), ran], change)
    assert not selection.run_all and kept_ids(selection) == [doctest]
    assert selection.kept[0].reason == "changed-test"


def test_a_changed_unit_no_evidence_contains_is_a_named_blind_spot_not_perfect_coverage():
    unseen = ("fw/attention.py", "rarely_used")
    selection = selection_for(history(), commit((*unseen, "modified")))
    m = selection.metrics
    assert (m.unevidenced_units, m.unevidenced) == (1, ("fw/attention.py::rarely_used",))
    assert m.pairs_covered_by_all == 0 and m.coverage_retention == 0.0  # was reported as 1.0
    assert kept_ids(selection) == []  # no test's imports are known to reach it here
    imported = EvidenceEvent(
        test_id="fw/attention.py",
        run_id="run-1",
        repo=REPO,
        commit="abcdef1",
        method="tracing",
        kind="import",
        stacks=[{"stack": "<module> (fw/attention.py:0)", "count": 1}],
        importers=("tests/test_model.py",),
    )
    widened = selection_for([*history(), imported], commit((*unseen, "modified")))
    assert sorted(kept_ids(widened)) == ["tests/test_model.py::test_backward", "tests/test_model.py::test_forward"]
    assert {k.reason for k in widened.kept} == {"import-time"}  # its module's importers: the safe side


def test_a_deleted_test_class_runs_none_of_its_files_other_tests():
    gone = commit(
        ("tests/test_model.py", "OldTests.<body>", "deleted"), ("tests/test_model.py", "OldTests.test_x", "deleted")
    )
    selection = selection_for(history(), gone)
    assert not selection.run_all and kept_ids(selection) == []  # not module code of tests/test_model.py


def exact(test_id: str, executed: dict[str, list[tuple[str, ...]]]) -> EvidenceEvent:
    """Evidence shaped as units and calls (what the first-call collector publishes)."""
    from fastci.evidence.publish import evidence_event

    return evidence_event(test_id, "run-1", REPO, "abcdef1", "tracing", [], executed=executed)


def name(unit: tuple[str, str]) -> str:
    return unit_name(*unit)


# Units of a stack: test code (test files, conftest.py) and library code, a few of each.
UNIT_NAMES = st.sampled_from(
    [
        "tests/test_a.py::test_a",
        "tests/conftest.py::fixture",
        "lib/a.py::f",
        "lib/a.py::g",
        "lib/b.py::h",
        "lib/c.py::k",
    ]
)


def collectors_context(path: list[str]) -> tuple[str, ...]:
    """What fastci.evidence.first_calls keeps of the callers in ``path`` (root first) of its last unit."""
    from fastci.evidence.first_calls import kept_context
    from fastci.selection.units import is_test_file

    *callers, unit = path
    return kept_context(((c, is_test_file(c.split("::")[0])) for c in reversed(callers)), unit)


@given(st.lists(UNIT_NAMES, min_size=1, max_size=12))
def test_what_the_collector_keeps_of_a_call_gives_the_graph_the_context_of_the_whole_stack(path):
    """The graph reads 3 callers, and the test only within one hop: cutting a call's stack the
    collector's way never changes the context of the unit called (nor that a direct recursion has none)."""
    from fastci.selection.graph import _contexts, _named_unit

    whole = [_named_unit(unit) for unit in path]
    stack_context = {context for position, _, context in _contexts(whole, DIRECT_HOPS) if position == len(path) - 1}
    kept = collectors_context(path)
    units = sorted(set(kept))
    found, files = unit_executions(units, [[units.index(unit) for unit in kept]])
    assert found[short_id(path[-1])] == stack_context
    assert files == {unit.split("::")[0] for unit in kept}


def test_a_unit_run_in_no_recorded_context_keeps_its_test_from_being_pruned():
    a, b = (f"{p}::{q}" for p, q in (TEST_A, TEST_B))
    events = [
        *history(),
        exact(a, {name(ATTN): [(name(FORWARD), name(BLOCK), name(ATTN))]}),
        exact(b, {name(ATTN): [(name(FORWARD), name(BLOCK), name(ATTN))]}),
    ]
    # The same recorded context: one of the two is enough, the cheaper one.
    assert kept_ids(selection_for(events, commit((*ATTN, "modified")))) == [a]
    # B ran attention in a context it did not record: nothing says A covers it.
    events[-1] = EvidenceEvent(
        test_id=b, run_id="run-2", repo=REPO, commit="abcdef1", method="tracing", units=(name(ATTN),)
    )
    assert sorted(kept_ids(selection_for(events, commit((*ATTN, "modified"))))) == sorted([a, b])


def test_evidence_as_units_and_calls_names_each_call_by_index():
    event = exact(
        "tests/test_a.py::test_a", {"lib/a.py::g": [("tests/test_a.py::test_a", "lib/a.py::f", "lib/a.py::g")]}
    )
    assert event.units == ("lib/a.py::f", "lib/a.py::g", "tests/test_a.py::test_a")
    assert event.calls == ((2, 0, 1),)
    with pytest.raises(ValueError, match=r"calls\[0\]: must name 1 or more of the 1 units by index \(got \[0, 3\]\)"):
        EvidenceEvent(
            test_id="t", run_id="r", repo=REPO, commit="abcdef1", method="tracing", units=("a::b",), calls=((0, 3),)
        )


def test_a_tests_expected_duration_comes_from_its_runs_that_recorded_no_evidence():
    """A nightly that records evidence runs a test slower than it is: its duration counts only
    while no run without evidence has measured the test."""
    a = f"{TEST_A[0]}::{TEST_A[1]}"
    store = Store()
    feed(SelectionProcessor(), store, [result(a, "nightly-1", duration_s=9.0, repo=REPO, traced=True)])
    (entry,) = _catalog(store, REPO).values()
    assert entry.mean_s == 9.0  # all there is
    feed(SelectionProcessor(), store, [result(a, "presubmit-2", duration_s=3.0, repo=REPO)])
    feed(SelectionProcessor(), store, [result(a, "nightly-3", duration_s=9.5, repo=REPO, traced=True)])
    (entry,) = _catalog(store, REPO).values()
    assert entry.mean_s == 3.0 and entry.traced == ("nightly-1", "nightly-3")


def test_a_changed_lambda_no_test_ran_selects_the_tests_that_ran_the_function_making_it():
    """``getattr(math, "isqrt", lambda x: ...)``'s fallback never runs: its change can reach only the
    tests that ran the function making it, not every test importing the module."""
    a, b = (f"{p}::{q}" for p, q in (TEST_A, TEST_B))
    events = [
        *history(),
        exact(a, {name(FORWARD): [(a, name(FORWARD))]}),
        exact(b, {name(ATTN): [(b, name(ATTN))]}),
    ]
    change = commit(("fw/model.py", "Model.forward.<locals>.<lambda>", "modified"))
    selection = selection_for(events, change)
    assert [(k.test_id, k.reason) for k in selection.kept] == [(a, "runs-enclosing-code")]
    assert selection.metrics.unevidenced == ()  # not a blind spot: its maker's tests are known
    deeper = commit(("fw/model.py", "Model.forward.<locals>.helper.<locals>.<lambda>", "modified"))
    assert kept_ids(selection_for(events, deeper)) == [a]  # through an inner def no test ran either
    nobody = commit(("fw/other.py", "build.<locals>.<lambda>", "modified"))  # no test ran build either
    assert selection_for(events, nobody).metrics.unevidenced == ("fw/other.py::build.<locals>.<lambda>",)
