"""Compaction of the embedded log: a test's older evidence goes, offsets and readers' positions stay,
and a replay of what is left reaches the state the whole log reached."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta

import orjson
from factories import result

from fastci.cli.main import main
from fastci.inputs import CommitEvent, EvidenceEvent
from fastci.runtime import log as log_module
from fastci.runtime.compaction import disk_bytes
from fastci.runtime.embedded import DataDir, EmbeddedRuntime
from fastci.runtime.log import Position, TopicLog
from fastci.runtime.publish import publish_embedded
from fastci.selection.processor import audit_key
from fastci.topology import SYSTEM
from fastci.views.store import Views

REPO = "acme/llm-framework"
T0 = datetime(2026, 11, 2, tzinfo=UTC)
TESTS = ["tests/test_model.py::test_forward", "tests/test_model.py::test_backward", "tests/test_data.py::test_load"]


def test_removed_records_become_a_gap_readers_step_over_with_offsets_and_positions_kept(tmp_path):
    log = TopicLog(tmp_path, "evidence")
    big = [bytes([65 + n]) * 65_536 for n in range(10)]  # 64 KiB each: whole blocks to free
    log.append(big, 1)
    records = list(log.read())
    after_four = records[4].next  # a reader's stored position, past a record that stays
    before = disk_bytes(log.dir)
    assert log.remove({1, 2, 3, 6, 9 - 9}) == 5
    assert [(r.offset, r.payload[:1]) for r in log.read()] == [(4, b"E"), (5, b"F"), (7, b"H"), (8, b"I"), (9, b"J")]
    assert [r.offset for r in log.read(after_four)] == [5, 7, 8, 9]
    assert [r.offset for r in log.read(limit=2)] == [4, 5]  # a limit counts records, not offsets
    assert log.end() == records[-1].next  # the end, and every byte position after a kept record, unchanged
    assert disk_bytes(log.dir) < before - 4 * 65_536  # the holes are punched (ext4, xfs, tmpfs, btrfs)
    log.append([b"new"], 2)
    assert [r.payload for r in log.read(after_four)][-1] == b"new"


def test_a_reader_that_read_a_record_s_header_before_it_was_removed_steps_over_the_gap(tmp_path):
    log = TopicLog(tmp_path, "evidence")
    log.append([b"first", b"x" * (6 << 20), b"last"], 1)  # the middle record is longer than a read chunk
    reader = log.read()
    assert next(reader).payload == b"first"  # its chunk holds the next record's header, not all its bytes
    log.remove({1})
    assert [(r.offset, r.payload) for r in reader] == [(2, b"last")]


def test_a_gap_at_the_end_of_a_segment_does_not_stop_readers_crossing_into_the_next(tmp_path, monkeypatch):
    monkeypatch.setattr(log_module, "SEGMENT_BYTES", 64)
    log = TopicLog(tmp_path, "evidence")
    for n in range(8):
        log.append([f"record-{n}".encode() * 3], n)
    segments = sorted(log.dir.glob("*.log"))
    assert len(segments) > 2
    last_of_first = [r.offset for r in log.read(Position(0, 0, 0))][: int(segments[1].stem)][-1]
    log.remove({last_of_first})
    assert [r.offset for r in log.read()] == [n for n in range(8) if n != last_of_first]
    assert log.end().offset == 8


def commit(n: int) -> CommitEvent:
    return CommitEvent(
        repo=REPO,
        sha=f"{n + 1:07x}",
        author="dev",
        time=T0 + timedelta(days=n),
        title=f"change {n}",
        changed_functions=[{"path": "fw/model.py", "qualname": "Model.forward", "change": "modified"}],
        changed_files=[{"path": "fw/model.py", "change": "modified"}],
    )


def nightly(n: int) -> list:
    """Night ``n``: every test's result and traced evidence (test_load reaches Model.forward from night 3)."""
    time = T0 + timedelta(days=n, hours=12)
    events = []
    for test_id in TESTS:
        path, name = test_id.split("::")
        frames = [f"{name} ({path}:1)"]
        if test_id != TESTS[2] or n >= 3:
            frames.append("Model.forward (fw/model.py:10)")
        events.append(result(test_id, run_id=f"night-{n}", repo=REPO, time=time))
        events.append(
            EvidenceEvent(
                test_id=test_id,
                run_id=f"night-{n}",
                repo=REPO,
                commit=f"{n + 1:07x}",
                method="tracing",
                stacks=[{"stack": ";".join(frames), "count": 1}],
                time=time,
            )
        )
    return events


def fastci(data_dir, *args: str) -> int:
    return main(["--data-dir", str(data_dir), *args])


def state(data_dir, processor: str) -> dict[str, tuple]:
    """Key -> (state, offset marks) of a processor; not the ids of the last events applied (a replay of
    the compacted log applied fewer), nor the selection audit's records of past selections (a replay
    selects a past commit from the evidence left, not the evidence it had then)."""
    checkpoint = DataDir(data_dir).checkpoint()
    try:
        rows = checkpoint.db.execute("SELECT key, value FROM state WHERE processor = ?", (processor,)).fetchall()
    finally:
        checkpoint.close()
    entries = {key: orjson.loads(value) for key, value in rows if audit_key(REPO, "") not in key}
    return {key: (entry["state"], entry["marks"]) for key, entry in entries.items()}


def selection_of(data_dir, sha: str) -> tuple:
    views = Views(data_dir / "views.duckdb", read_only=True)
    try:
        [row] = views.query("SELECT run_all, kept FROM selection WHERE sha = ?", [sha])[1]
    finally:
        views.close()
    return row


def test_compaction_keeps_each_tests_latest_evidence_and_a_replay_reaches_the_same_state(tmp_path, capfd):
    data = tmp_path / "data"
    for n in range(5):
        publish_embedded(data, [commit(n), *nightly(n)])
    assert fastci(data, "run") == 0
    assert fastci(data, "views", "refresh") == 0
    capfd.readouterr()

    assert fastci(data, "compact") == 0
    printed = capfd.readouterr().err
    assert "evidence" in printed and "12" in printed  # 15 evidence events, 12 replaced by a later night's
    evidence = [EvidenceEvent.model_validate_json(r.payload) for r in DataDir(data).log.topic("evidence").read()]
    assert sorted((e.test_id, e.run_id) for e in evidence) == sorted((t, "night-4") for t in TESTS)
    views = Views(data / "views.duckdb", read_only=True)
    try:
        assert views.query("SELECT count(*) FROM evidence")[1] == [(3,)]
        assert views.query("SELECT count(*) FROM results")[1] == [(15,)]  # results are history: never compacted
    finally:
        views.close()
    assert fastci(data, "compact") == 0  # again: nothing more to remove
    assert "evidence" in capfd.readouterr().err

    # A replay of the compacted log from scratch reaches the state the whole log reached.
    replay = tmp_path / "replay"
    shutil.copytree(data / "log", replay / "log")
    runtime = EmbeddedRuntime(replay, SYSTEM, sync=False)
    runtime.run()
    runtime.close()
    for processor in ("test-selection", "test-planner"):
        assert state(replay, processor) == state(data, processor), processor

    # The compacted data dir goes on: a new commit is selected from the latest evidence, as in the replay.
    for data_dir in (data, replay):
        publish_embedded(data_dir, [commit(5)])
        assert fastci(data_dir, "run") == 0
        assert fastci(data_dir, "views", "refresh") == 0
    assert selection_of(data, commit(5).sha) == selection_of(replay, commit(5).sha)
    run_all, kept = selection_of(data, commit(5).sha)
    assert not run_all and {k["test_id"] for k in orjson.loads(kept)} == set(TESTS)  # night 4: all reach forward


def test_nothing_is_compacted_that_a_processor_has_not_applied(tmp_path, capfd):
    data = tmp_path / "data"
    for n in range(3):
        publish_embedded(data, nightly(n))
    assert fastci(data, "run", "--processor", "test-history") == 0  # the evidence readers never ran
    assert fastci(data, "compact") == 0
    assert len(list(DataDir(data).log.topic("evidence").read())) == 9
    assert fastci(data, "run") == 0  # now they have: the older nights' evidence can go
    assert fastci(data, "compact") == 0
    assert len(list(DataDir(data).log.topic("evidence").read())) == 3
