"""The embedded runtime end to end on a local log (crash safety has its own module)."""

from __future__ import annotations

from collections import Counter

from factories import result

from fastci.core.codec import encode
from fastci.demo.history import Workload
from fastci.fleet.test_history import TestHistory
from fastci.producer.lines import check_lines
from fastci.runtime import checkpoint as checkpoint_module
from fastci.runtime.driver import decode_entry, decode_state
from fastci.runtime.embedded import DataDir, EmbeddedRuntime, RuntimeBusy
from fastci.runtime.publish import publish_embedded
from fastci.topology import SYSTEM, build_processors, decode


def run(data_dir) -> dict:
    # Only test-history: every processor reading results would dead-letter an undecodable record once.
    runtime = EmbeddedRuntime(data_dir, SYSTEM, build_processors(["test-history"]))
    try:
        counts = runtime.run().by_processor["test-history"].__dict__
        return {name: value for name, value in counts.items() if name != "seconds"}
    finally:
        runtime.close()


def outputs(data_dir, topic: str) -> list:
    return [decode(topic, r.payload) for r in DataDir(data_dir).log.topic(topic).read()]


def history(data_dir, test_id: str) -> TestHistory:
    checkpoint = DataDir(data_dir).checkpoint()
    try:
        return decode_entry(TestHistory, checkpoint.store("test-history").get(test_id)).state
    finally:
        checkpoint.close()


STATE_ROWS = "SELECT processor, key, value FROM state"
POSITION_ROWS = 'SELECT consumer, topic, "offset" FROM positions'


def rows_of(data_dir, query: str) -> list[tuple]:
    checkpoint = DataDir(data_dir).checkpoint()
    try:
        return sorted(checkpoint.db.execute(query))
    finally:
        checkpoint.close()


def logs_of(data_dir) -> dict[str, list[bytes]]:
    log = DataDir(data_dir).log
    return {topic: [r.payload for r in log.topic(topic).read()] for topic in log.topics()}


def test_processes_the_log_and_resumes_where_it_stopped(tmp_path):
    publish_embedded(tmp_path, [result(run_id="r1"), result(run_id="r2", status="failed")])
    assert run(tmp_path) == {"events": 2, "outputs": 1, "dead_letters": 0}
    assert run(tmp_path) == {"events": 0, "outputs": 0, "dead_letters": 0}  # nothing new
    publish_embedded(tmp_path, [result(run_id="r3", status="passed")])
    assert run(tmp_path)["events"] == 1
    assert [f.current for f in outputs(tmp_path, "test-status-changed")] == ["failing", "passing"]
    assert history(tmp_path, "tests/test_a.py::test_x").runs == 3


def test_a_duplicate_publish_is_counted_once(tmp_path):
    event = result(run_id="r1", status="failed")
    publish_embedded(tmp_path, [result(run_id="r0"), event])
    publish_embedded(tmp_path, [event, event])
    run(tmp_path)
    assert history(tmp_path, event.test_id).runs == 2
    assert len(outputs(tmp_path, "test-status-changed")) == 1


def test_bad_input_is_dead_lettered_and_leaves_state_alone(tmp_path):
    good = result(run_id="r1")
    lines = [
        encode(good),
        b'{"test_id": "tests/test_a.py::test_x", "run_id": "r2"',  # malformed JSON
        b'{"test_id": "tests/test_a.py::test_x", "run_id": "r3"}',  # missing fields
        encode(result(run_id="r4")).replace(b'"duration_s":12.5', b'"duration_s":"slow"'),  # wrong type
    ]
    checked = check_lines(lines, topic="results")
    assert [r.line for r in checked.refused] == [2, 3, 4]
    publish_embedded(tmp_path, [*checked.accepted, *checked.dead_letters()])
    # A record that bypassed publishing (written straight into the log) is refused when read.
    DataDir(tmp_path).log.topic("results").append([b'{"test_id": 42}'], 0)
    stats = run(tmp_path)
    assert stats == {"events": 2, "outputs": 1, "dead_letters": 1}
    letters = outputs(tmp_path, "dead-letters")
    assert [(d.source, d.topic) for d in letters] == [("publish", "results")] * 3 + [("decode", "results")]
    assert "field 'duration_s'" in letters[2].error and "malformed JSON" in letters[0].error
    assert history(tmp_path, good.test_id).runs == 1


def test_outputs_appended_before_a_crash_are_not_appended_again(tmp_path):
    """The window of a crash: outputs are on disk, the checkpoint commit never happened (two batches'
    outputs: the runtime commits every four records here)."""
    events = [result(run_id=f"r{n}", status=("passed", "failed")[n % 2]) for n in range(6)]
    publish_embedded(tmp_path, events)
    crashing = EmbeddedRuntime(tmp_path, SYSTEM, batch_size=2, commit_every=4)

    def power_cut(*args, **kwargs):
        raise SystemExit("killed between append and commit")

    crashing.checkpoint.commit = power_cut
    try:
        crashing.run()
    except SystemExit:
        pass
    finally:
        crashing.close()
    assert len(outputs(tmp_path, "test-status-changed")) == 3  # appended, never committed
    run(tmp_path)
    flips = outputs(tmp_path, "test-status-changed")
    assert [f.run_id for f in flips] == ["r1", "r2", "r3", "r4", "r5"]
    assert history(tmp_path, events[0].test_id).runs == 6


def test_one_runtime_at_a_time_processes_a_data_dir_and_a_later_run_sees_what_another_did(tmp_path):
    import subprocess
    import sys
    import time

    publish_embedded(tmp_path, [result("t1", "r1"), result("t1", "r2", status="failed")])
    follower = subprocess.Popen(
        [sys.executable, "-m", "fastci.cli", "--data-dir", str(tmp_path), "run", "--follow"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        runtime = EmbeddedRuntime(tmp_path, SYSTEM)  # made before the follower has processed anything
        deadline = time.monotonic() + 60
        while DataDir(tmp_path).log.topic("test-status-changed").end().offset == 0:
            assert time.monotonic() < deadline and follower.poll() is None, follower.stderr.read()
            time.sleep(0.2)
        try:
            runtime.run()
            raise AssertionError("two runtimes processed one data dir at once")
        except RuntimeBusy as busy:
            assert "another fastci runtime is processing" in str(busy)
    finally:
        follower.terminate()
        follower.wait(30)
    stats = runtime.run()  # the follower is gone: this one starts from where it stopped
    runtime.close()
    assert stats.events == 0
    assert DataDir(tmp_path).log.topic("test-status-changed").end().offset == 1


def test_a_plain_repositorys_results_go_through_every_processor_without_a_dead_letter(tmp_path):
    """No bundle, no hardware revision: history, flakiness, node health, selection and planning take
    them; the stack's gates, detector and bisect leave them alone."""
    statuses = ["passed", "failed", "flaky", "error", "passed", "failed"]
    events = [
        result(
            f"tests/test_plain.py::test_{n}",
            f"run-{run}",
            repo="acme/plain",
            bundle=None,
            hardware_revision=None,
            node_id=f"runner-{run % 3}",
            status=statuses[(n + run) % len(statuses)],
            duration_s=0.01,
        )
        for run in range(6)
        for n in range(5)
    ]
    publish_embedded(tmp_path, events)
    runtime = EmbeddedRuntime(tmp_path, SYSTEM)
    stats = runtime.run()
    runtime.close()
    assert stats.by_processor["test-history"].events == len(events)
    assert list(DataDir(tmp_path).log.topic("dead-letters").read()) == []
    assert DataDir(tmp_path).log.topic("test-status-changed").end().offset > 0


def test_a_run_that_commits_seldom_writes_fewer_rows_and_ends_as_one_that_commits_often(tmp_path):
    """Commits coalesce a key's writes: every 50 records, or only when each processor has caught up,
    the same state, positions and log."""
    events = Workload(commits=30, seed=5).events()
    rows: dict[str, Counter] = {}
    for name, commit_every in (("often", 50), ("seldom", 100_000)):
        publish_embedded(tmp_path / name, events)
        runtime = EmbeddedRuntime(tmp_path / name, SYSTEM, batch_size=50, sync=False, commit_every=commit_every)
        written = rows[name] = Counter()
        commit = runtime.checkpoint.commit

        def counting(processor, writes, *args, _commit=commit, _written=written):
            _written[processor] += len(writes)
            return _commit(processor, writes, *args)

        runtime.checkpoint.commit = counting  # type: ignore[method-assign]
        try:
            runtime.run()
        finally:
            runtime.close()

    def stored(data_dir):
        return logs_of(data_dir), rows_of(data_dir, STATE_ROWS), rows_of(data_dir, POSITION_ROWS)

    often, seldom = stored(tmp_path / "often"), stored(tmp_path / "seldom")
    assert seldom == often
    assert sum(len(records) for records in often[0].values()) > 2 * len(events)  # decisions were made
    for processor in ("test-history", "flaky-detector", "test-planner"):
        assert 0 < rows["seldom"][processor] < rows["often"][processor], (processor, rows)


def test_a_runtime_applies_on_top_of_what_another_committed_since_it_last_ran(tmp_path, monkeypatch):
    """A store holds its processor's keys once a run has asked for many it does not have, so that a
    key never written costs no SELECT. Keys another runtime committed meanwhile (another process,
    before this one took the data dir's lock) must be read again when this one runs, or their state
    would be taken as empty."""
    monkeypatch.setattr(checkpoint_module, "READ_KEYS_AFTER", 1)
    early = EmbeddedRuntime(tmp_path, SYSTEM, build_processors(["test-history"]))
    try:
        publish_embedded(tmp_path, [result(run_id="r1")])
        assert early.run().by_processor["test-history"].events == 1  # reads its keys: test_x's alone
        later = "tests/test_b.py::test_y"
        publish_embedded(tmp_path, [result(later, run_id="r2", status="failed")])
        assert run(tmp_path)["events"] == 1  # another runtime applies it: test_y's first run
        publish_embedded(tmp_path, [result(later, run_id="r3")])
        assert early.run().by_processor["test-history"].events == 1
    finally:
        early.close()
    assert history(tmp_path, later).runs == 2
    # test_y recovered: taken as new, its passing run would have changed nothing
    assert [(f.test_id, f.current) for f in outputs(tmp_path, "test-status-changed")] == [(later, "passing")]


def test_a_run_stopped_at_its_deadline_keeps_what_it_applied_and_ends_as_an_uninterrupted_run(tmp_path):
    """A caller with a time budget (a CI job asking for its plan) stops the runtime between rounds:
    what it applied is committed, and runs after it go on from there to the same state and log."""
    events = Workload(commits=30, seed=5).events()

    def stored(data_dir):  # the states, not the marks: where a run stops, its releases' bookkeeping may differ
        states = sorted((p, k, decode_state(v)) for p, k, v in rows_of(data_dir, STATE_ROWS))
        return logs_of(data_dir), states

    publish_embedded(tmp_path / "whole", events)
    whole = EmbeddedRuntime(tmp_path / "whole", SYSTEM, batch_size=50, sync=False)
    try:
        assert not whole.run().stopped_early
    finally:
        whole.close()

    publish_embedded(tmp_path / "stopped", events)
    backlogs: list[int] = []
    while True:
        runtime = EmbeddedRuntime(tmp_path / "stopped", SYSTEM, batch_size=50, sync=False)
        try:
            stats = runtime.run(deadline=0.0)  # long past: one round, then stop
            backlogs.append(runtime.backlog())
        finally:
            runtime.close()
        if not stats.stopped_early:
            break
        before = backlogs[-2] if len(backlogs) > 1 else len(events)
        assert stats.events > 0 and 0 < backlogs[-1] < before  # what it applied was kept
    assert len(backlogs) > 3 and backlogs == sorted(backlogs, reverse=True) and backlogs[-1] == 0
    assert stored(tmp_path / "stopped") == stored(tmp_path / "whole")
