"""The recorded more-itertools replay (fastci.selection.replay): what it holds, and that replaying it through the
real selection processor reproduces the live run's selections."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from factories import result
from test_selection import REPO, commit, evidence, stack

from fastci.selection.processor import SelectionProcessor
from fastci.selection.replay import ReplayWriter, load, replay_path
from fastci.simulate.replay_selection import check, replay_selections


def test_a_recording_round_trips_and_replays_in_feed_order(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    a, b = "tests/test_model.py::test_forward", "tests/test_model.py::test_backward"
    writer = ReplayWriter(path, repo=REPO, base="abcdef1")
    writer.results([result(a, "base", repo=REPO), result(b, "base", repo=REPO)])
    first = evidence(a, stack(("tests/test_model.py", "test_forward"), ("fw/model.py", "Model.forward")))
    writer.evidence(
        [first, evidence(b, stack(("tests/test_model.py", "test_backward"), ("fw/data.py", "load")))], present={a, b}
    )
    change = commit(("fw/model.py", "Model.forward", "modified"))
    writer.event(change)
    writer.selection(SimpleNamespace(sha=change.sha, run_all=False), {a}, 0.5, 1.0)
    writer.results([result(a, "c1", repo=REPO, duration_s=0.5), result(b, "c1", repo=REPO, duration_s=0.5)])
    same = evidence(a, stack(("tests/test_model.py", "test_forward"), ("fw/model.py", "Model.forward")), run_id="run-2")
    writer.evidence([same], present={a, b})  # what selection reads is unchanged: not written again
    writer.fault(
        change.sha,
        SimpleNamespace(
            path="fw/model.py", qualname="Model.forward", operator="off-by-one", line=3, description="1 -> 2"
        ),
        {a},
        False,
    )
    writer.close()
    assert writer.counts["evidence"] == 2 and writer.counts["evidence unchanged, not written"] == 1

    replay = load(str(path))
    assert replay.header["repo"] == REPO and len(replay.base_results) == 2 and len(replay.base_evidence) == 2
    (step,) = replay.commits
    assert step.commit == change and step.durations == {a: 0.5, b: 0.5} and step.evidence == []
    assert step.faults[0].failing == frozenset({a}) and step.recorded.kept == (a,)
    assert [e.TOPIC for e in replay.events()] == ["results"] * 2 + ["evidence"] * 2 + ["commits"] + ["results"] * 2
    ((replayed, selection),) = list(replay_selections(replay))
    assert replayed is step and [k.test_id for k in selection.kept] == [a]


def test_a_file_that_is_not_a_recording_is_refused_by_name(tmp_path):
    import gzip

    path = tmp_path / "x.jsonl.gz"
    with gzip.open(path, "wb") as file:
        file.write(b'{"kind": "event"}\n')
    with pytest.raises(ValueError, match="not a fastci replay"):
        load(str(path))
    with pytest.raises(FileNotFoundError, match="no recorded replay 'nope'"):
        replay_path("nope")


def test_the_packaged_recording_holds_100_real_commits_with_their_faults():
    replay = load("more-itertools")
    assert replay.header["repo"] == "more-itertools/more-itertools" and len(replay.commits) == 100
    assert replay.header["shas"][0].startswith("d63ed69ad429") and replay.header["shas"][-1].startswith("17fd95a0c347")
    assert len(replay.base_results) >= 560 and len(replay.base_evidence) == len(replay.base_results)
    for step in replay.commits:
        assert step.recorded is not None and len(step.results) >= 560
        tests = set(step.durations)
        for fault in step.faults:
            assert fault.sha == step.commit.sha and fault.failing <= tests  # every detecting test ran there
    faults = [f for step in replay.commits for f in step.faults]
    # the live run: 101 mutants, 86 killed by the full suite (the rest change nothing a test checks)
    assert len(faults) == 101 and sum(1 for f in faults if f.failing) == 86


@pytest.mark.slow
def test_replaying_the_recording_reproduces_every_selection_of_the_live_run():
    # The live run pruned by the rule before thin wrappers counted as direct calls (direct_hops=0).
    # One commit differs by a rule made since: deleting the test class BatchedTests no longer runs
    # every other test of tests/test_more.py (its kept set is a subset, and no mutant escapes it).
    found = check("more-itertools", SelectionProcessor(direct_hops=0))
    assert [sha[:12] for sha in found["differing"]] == ["d63ed69ad429"] and found["commits"] == 100
    assert 0.2 < found["kept_share"] < 0.4  # the live run kept 29.3% (durations measured on a loaded host vary)
    assert (found["faults_caught"], found["faults_detected"]) == (85, 86)  # pruning lost one mutant


@pytest.mark.slow
def test_pruning_keeps_every_mutant_the_full_suite_catches_on_the_recording():
    """A test reaching the changed unit through a thin wrapper is not pruned for another: the
    mutant the live run's pruning lost (_zip_equal's error path, tested only with unequal inputs)
    is caught, at the cost of a few kept tests."""
    found = check("more-itertools")
    assert (found["faults_caught"], found["faults_detected"]) == (86, 86)
    unpruned = check("more-itertools", SelectionProcessor(pruning=False))
    assert found["kept_s"] <= unpruned["kept_s"]
