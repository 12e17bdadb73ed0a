"""The embedded runtime's durable log."""

from __future__ import annotations

import multiprocessing
import random

import pytest

from fastci.runtime import log as log_module
from fastci.runtime.log import LogCorrupted, Position, TopicLog

START = Position()


def payloads(log: TopicLog, start: Position = START, limit: int | None = None) -> list[bytes]:
    return [r.payload for r in log.read(start, limit)]


def test_append_and_read_back_in_order_with_offsets(tmp_path):
    log = TopicLog(tmp_path, "results")
    assert payloads(log) == [] and log.end() == Position()
    log.append([b"a", b"b"], 1)
    end = log.append([b"c"], 2)
    records = list(log.read())
    assert [(r.offset, r.payload, r.timestamp_ms) for r in records] == [(0, b"a", 1), (1, b"b", 1), (2, b"c", 2)]
    assert end == log.end() == records[-1].next and end.offset == 3
    assert payloads(log, records[0].next, limit=1) == [b"b"]


def test_segments_roll_and_reading_crosses_them(tmp_path, monkeypatch):
    monkeypatch.setattr(log_module, "SEGMENT_BYTES", 64)
    log = TopicLog(tmp_path, "results")
    for n in range(10):
        log.append([f"record-{n}".encode()], n)
    assert len(list(log.dir.glob("*.log"))) > 2
    assert payloads(log) == [f"record-{n}".encode() for n in range(10)]
    middle = list(log.read())[4].next
    assert payloads(log, middle, limit=3) == [b"record-5", b"record-6", b"record-7"]
    (log.dir / "head.json").unlink()  # the hint is only a hint
    assert log.end().offset == 10


def test_a_torn_tail_is_invisible_and_cut_off_by_the_next_append(tmp_path):
    log = TopicLog(tmp_path, "results")
    log.append([b"first"], 1)
    segment = next(log.dir.glob("*.log"))
    with open(segment, "ab") as file:
        file.write(b"\x40\x00\x00\x00\x00\x00\x00\x00half a rec")  # a crash in the middle of a write
    assert payloads(log) == [b"first"] and log.end().offset == 1
    log.append([b"second"], 2)
    assert payloads(log) == [b"first", b"second"]


def test_a_flipped_byte_is_reported_as_corruption(tmp_path):
    log = TopicLog(tmp_path, "results")
    log.append([b"payload-one", b"payload-two"], 1)
    segment = next(log.dir.glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[-3] ^= 0xFF
    segment.write_bytes(bytes(data))
    with pytest.raises(LogCorrupted, match="crc mismatch at offset 1"):
        payloads(log)


def _append_many(root: str, worker: int) -> None:
    log_module.TIME_INDEX_BYTES = 200  # a stretch of the time index every few appends, noted by any writer
    log = TopicLog(root, "results")
    for n in range(200):
        log.append([f"{worker}-{n}".encode()], n, sync=False)


def test_appends_from_several_processes_interleave_without_loss(tmp_path):
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_many, args=(str(tmp_path), w)) for w in range(3)]
    for process in workers:
        process.start()
    for process in workers:
        process.join(60)
    got = payloads(TopicLog(tmp_path, "results"))
    assert sorted(got) == sorted(f"{w}-{n}".encode() for w in range(3) for n in range(200))
    for w in range(3):  # each writer's own order is kept
        mine = [p for p in got if p.startswith(f"{w}-".encode())]
        assert mine == [f"{w}-{n}".encode() for n in range(200)]
    log = TopicLog(tmp_path, "results")
    every = list(log.read())
    assert log.position_at(190).offset > 0  # the writers noted stretches between them
    for time_ms in range(0, 201, 10):
        read = {r.offset for r in log.read(log.position_at(time_ms))}
        assert {r.offset for r in every if r.timestamp_ms >= time_ms} <= read, time_ms


def _jittered_history(log: TopicLog, appends: int, seed: int) -> None:
    """Appends of one to three records, timed about a minute apart and up to five minutes out of
    order, as a producer's topic within its lateness bound."""
    rng = random.Random(seed)
    for n in range(appends):
        times = [60_000 * n + rng.randint(-300_000, 300_000) for _ in range(rng.randint(1, 3))]
        log.append([f"record-{n}-{i}".encode() * 4 for i in range(len(times))], times, sync=False)


def test_a_reader_looking_for_a_time_starts_near_it_and_misses_nothing_later(tmp_path, monkeypatch):
    monkeypatch.setattr(log_module, "TIME_INDEX_BYTES", 300)
    monkeypatch.setattr(log_module, "SEGMENT_BYTES", 2_000)  # stretches cross segments
    log = TopicLog(tmp_path, "commits")
    _jittered_history(log, 200, seed=7)
    every = list(log.read())
    assert len(list(log.dir.glob("*.log"))) > 3
    for time_ms in range(-600_000, 200 * 60_000 + 600_000, 45_000):
        start = log.position_at(time_ms)
        read = {r.offset for r in log.read(start)}
        assert {r.offset for r in every if r.timestamp_ms >= time_ms} <= read, time_ms
        assert all(r.timestamp_ms < time_ms for r in every if r.offset < start.offset)
    late = log.position_at(190 * 60_000)
    assert late.offset > len(every) * 0.8  # the last minutes' records, not the topic from its start
    assert log.position_at(-(2**62)) == Position()

    log.remove(set(range(0, len(every), 3)))  # compaction's gaps, then more records noted over them
    _jittered_history(log, 50, seed=8)
    every = list(log.read())
    for time_ms in range(0, 200 * 60_000, 300_000):
        read = {r.offset for r in log.read(log.position_at(time_ms))}
        assert {r.offset for r in every if r.timestamp_ms >= time_ms} <= read, time_ms


def test_a_time_noted_over_records_a_crash_cut_off_is_forgotten(tmp_path, monkeypatch):
    monkeypatch.setattr(log_module, "TIME_INDEX_BYTES", 100)
    log = TopicLog(tmp_path, "commits")
    for n in range(20):
        log.append([b"early-record-%d" % n], n, sync=False)
    kept = list(log.read())[4].next
    segment = next(log.dir.glob("*.log"))
    with open(segment, "r+b") as file:  # a power loss took the tail the time index had noted
        file.truncate(kept.byte)
    (log.dir / "head.json").unlink()
    for n in range(20):  # the same offsets again, written later
        log.append([b"later-record-%d" % n], 1_000 + n, sync=False)
    read = [r.payload for r in log.read(log.position_at(1_000))]
    assert read[-20:] == [b"later-record-%d" % n for n in range(20)]
    assert read[:-20] in ([], [b"early-record-4"])  # at most the stretch the cut went through


def test_a_log_written_before_the_time_index_is_read_whole_until_its_next_append(tmp_path, monkeypatch):
    monkeypatch.setattr(log_module, "TIME_INDEX_BYTES", 100)
    log = TopicLog(tmp_path, "commits")
    for n in range(20):
        log.append([b"record-%d" % n], n, sync=False)
    assert log.position_at(15).offset > 0
    (log.dir / "times.idx").unlink()
    assert log.position_at(15) == Position()  # nothing noted: the whole topic
    log.append([b"record-20"], 20)  # notes the records before it as one stretch, read once
    assert [r.payload for r in log.read(log.position_at(20))] == [b"record-20"]
