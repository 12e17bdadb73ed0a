"""The selection audit, run by test-selection: runs beyond a selection find its misses, and a miss widens
later selections."""

from __future__ import annotations

from datetime import UTC, datetime

from factories import result
from processor_helpers import Store, feed, of_topic
from test_selection import ATTN, LOADER, REPO, TEST_A, TEST_B, TEST_C, commit, history

from fastci.runtime.embedded import EmbeddedRuntime
from fastci.runtime.publish import publish_embedded
from fastci.selection.events import SelectionPolicy
from fastci.selection.processor import DEFAULT_WIDEN_COMMITS, SelectionProcessor
from fastci.topology import SYSTEM

A, B, C = (f"{p}::{q}" for p, q in (TEST_A, TEST_B, TEST_C))


def selection_of(change):
    (selection,) = of_topic(feed(SelectionProcessor(), Store(), [*history(), change]), "selection")
    return selection


def audit(*events):
    """What test-selection's audit emits for ``events``, after the test history."""
    return of_topic(feed(SelectionProcessor(), Store(), [*history(), *events]), "selection-audit")


def nightly(test_id, status, sha="1234567", run="nightly-1", **fields):
    return result(test_id, run, repo=REPO, commit=sha, status=status, **fields)


def test_a_failure_of_a_test_the_selection_left_out_is_a_miss_and_the_commit_is_audited_once():
    change = commit((*ATTN, "modified"), files=("fw/attention.py",))
    selection = selection_of(change)  # keeps test_forward, prunes test_backward, skips test_loader
    events = audit(
        change,
        nightly(A, "failed"),  # kept: the selection caught it
        nightly(B, "failed"),  # pruned: a miss
        nightly(C, "error"),  # not selected: a miss
        nightly(C, "error"),  # redelivered: nothing new
    )
    assert [(e.kind, e.test_id) for e in events] == [("audited", None), ("miss", B), ("miss", C)]
    audited, pruned, skipped = events
    assert pruned.evidence == f"pruned: its changed code was covered by {A}"
    assert skipped.evidence.startswith("not selected: its recorded evidence executes none of the changed code")
    assert pruned.changed_files == ("fw/attention.py",) and pruned.selection_id == selection.id
    assert audited.saved_s == selection.metrics.saved_s and audited.kept == 1 and audited.tests_known == 3
    assert len({e.id for e in events}) == 3


def test_results_that_come_before_their_selection_are_judged_when_it_comes():
    change = commit((*ATTN, "modified"))
    events = audit(nightly(C, "failed"), nightly(A, "passed"), change)
    assert [(e.kind, e.test_id) for e in events] == [("audited", None), ("miss", C)]


def test_a_run_all_selection_and_a_subset_run_audit_nothing():
    everything = commit(files=("setup.cfg",))
    assert audit(everything, nightly(C, "failed")) == []
    change = commit((*ATTN, "modified"), sha="2345678")
    assert audit(change, nightly(A, "failed", sha="2345678")) == []


def test_a_job_that_says_what_it_kept_is_audited_without_the_commits_selection():
    shadow = [
        nightly(A, "passed", sha="3456789", run="shadow-1", selected=True),
        nightly(C, "failed", sha="3456789", run="shadow-1", selected=False),
    ]
    events = audit(*shadow)
    assert [(e.kind, e.test_id) for e in events] == [("audited", None), ("miss", C)]
    assert "the job's selection did not keep it" in events[1].evidence


def missed(processor: SelectionProcessor, store: Store) -> None:
    """Commit aaaaaaa changes attention.py and data.py; its selection keeps test_forward alone, and
    test_loader fails in the nightly: a miss."""
    feed(processor, store, history())
    feed(processor, store, [commit((*ATTN, "modified"), files=("fw/data.py",), sha="aaaaaaa")])
    audits = of_topic(feed(processor, store, [nightly(C, "failed", sha="aaaaaaa")]), "selection-audit")
    assert [(a.kind, a.test_id) for a in audits] == [("audited", None), ("miss", C)]


def test_a_miss_widens_the_next_selections_until_enough_clean_audited_commits():
    processor, store = SelectionProcessor(), Store()
    missed(processor, store)
    (wide,) = of_topic(feed(processor, store, [commit((*ATTN, "modified"), sha="bbbbbbb")]), "selection")
    assert {k.test_id: k.reason for k in wide.kept} == {
        A: "executes-changed-code",
        B: "executes-changed-code",  # no pruning while widened
        C: "widened",  # a test of the file the missed change touched
    }
    assert wide.widened.startswith("widened after the miss at aaaaaaa: no pruning")

    def clean_audit(n: int) -> list:
        """Commit c00000n, and a shadow job's pass of a test its selection did not keep (while widened,
        the commit's own selection keeps every test here)."""
        sha = f"c{n:06d}"
        return [commit((*LOADER, "modified"), sha=sha), nightly(A, "passed", sha=sha, run="shadow", selected=False)]

    for n in range(DEFAULT_WIDEN_COMMITS - 1):
        feed(processor, store, clean_audit(n))
    (still,) = of_topic(feed(processor, store, [commit((*ATTN, "modified"), sha="ccccccc")]), "selection")
    assert still.widened and "for 1 more clean audited commit(s)" in still.widened
    feed(processor, store, clean_audit(DEFAULT_WIDEN_COMMITS))
    (normal,) = of_topic(feed(processor, store, [commit((*ATTN, "modified"), sha="ddddddd")]), "selection")
    assert not normal.widened and [k.test_id for k in normal.kept] == [A]


def test_a_policy_of_zero_turns_widening_off():
    processor, store = SelectionProcessor(), Store()
    policy = SelectionPolicy(repo=REPO, time=datetime(2026, 12, 1, tzinfo=UTC), widen_commits=0)
    feed(processor, store, [policy])
    missed(processor, store)
    (selection,) = of_topic(feed(processor, store, [commit((*ATTN, "modified"), sha="bbbbbbb")]), "selection")
    assert not selection.widened and [k.test_id for k in selection.kept] == [A]


def test_the_loop_closes_in_the_embedded_runtime(tmp_path):
    """Selection -> nightly results -> audit miss -> a wider selection for the next commit."""
    first = commit((*ATTN, "modified"), files=("fw/attention.py",), sha="1111111")
    publish_embedded(tmp_path, [*history(), first])
    EmbeddedRuntime(tmp_path, SYSTEM).run()
    publish_embedded(tmp_path, [nightly(C, "failed", sha="1111111"), nightly(A, "passed", sha="1111111")])
    EmbeddedRuntime(tmp_path, SYSTEM).run()
    second = commit((*LOADER, "modified"), sha="2222222")
    publish_embedded(tmp_path, [second])
    EmbeddedRuntime(tmp_path, SYSTEM).run()
    from fastci.runtime.embedded import DataDir
    from fastci.topology import decode

    log = DataDir(tmp_path).log
    audits = [decode("selection-audit", r.payload) for r in log.topic("selection-audit").read()]
    assert [(a.kind, a.test_id) for a in audits] == [("audited", None), ("miss", C)]
    selections = [decode("selection", r.payload) for r in log.topic("selection").read()]
    assert selections[-1].sha == "2222222" and selections[-1].widened
    assert {k.test_id for k in selections[-1].kept} == {C, A, B}  # loader's test, and attention.py's tests


def test_fastci_policy_publishes_the_policy_and_refuses_a_negative_count(tmp_path, capsys):
    from fastci.cli.main import main
    from fastci.runtime.embedded import DataDir
    from fastci.topology import decode

    assert main(["--data-dir", str(tmp_path), "policy", REPO, "--widen-commits", "-1"]) == 2
    assert "--widen-commits: Input should be greater than or equal to 0" in capsys.readouterr().err
    assert main(["--data-dir", str(tmp_path), "policy", REPO, "--widen-commits", "2"]) == 0
    (policy,) = [decode("selection-policy", r.payload) for r in DataDir(tmp_path).log.topic("selection-policy").read()]
    assert (policy.repo, policy.widen_commits) == (REPO, 2)
