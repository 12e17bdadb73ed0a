"""A durable append-only log per topic: the embedded runtime's stand-in for a Kafka partition.

Layout: ``<root>/<topic>/<base offset>.log`` segment files, each a run of records
``[length u32][crc32 u32][time ms i64][payload]``; the crc covers time and payload. The
time is the record's event time where the appender knows one (the embedded runtime merges
a processor's input topics by it), else when it was appended. An offset is a record's
index in the topic. ``head.json`` remembers where the last append ended so opening a
large log does not rescan it. ``times.idx`` notes the latest time in each stretch of about
``TIME_INDEX_BYTES`` of records, so a reader looking for what happened since a time (a CI job
asking for its commit's plan) starts near it, not at the topic's first record: Kafka's
``offsetsForTimes``, for the embedded log.

Appends hold an exclusive ``flock`` (publishers and the runtime may append from
different processes) and are one ``write`` per batch. A record cut short by a
crash is invisible to readers, which stop at the first incomplete record, and is
cut off by the next appender. A complete record whose crc does not match is
corruption and raises ``LogCorrupted``.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import struct
import zlib
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson

HEADER = struct.Struct("<IIq")
# A gap: records compaction removed. Its header's time is GAP_TIME, its crc field the number of
# records it stands for, its length the bytes it covers (a hole punched in the file where the
# filesystem can). No record's time is GAP_TIME: times are milliseconds since 1970.
GAP_TIME = -(2**63)
SEGMENT_BYTES = 128 * 1024 * 1024
TIME_INDEX_BYTES = 1024 * 1024
# A stretch of records in ``times.idx``: where it ends (offset, segment, byte) and its latest time. The
# first stretch starts at the topic's first record, each next one where the one before ended.
_STRETCH = struct.Struct("<qqqq")
_READ_CHUNK = 4 * 1024 * 1024
_SUFFIX = ".log"
_TIME_INDEX = "times.idx"


class LogCorrupted(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Position:
    """Where a reader is: the next offset, and the segment and byte it starts at."""

    offset: int = 0
    segment: int = 0
    byte: int = 0


@dataclass(frozen=True, slots=True)
class LogRecord:
    offset: int
    timestamp_ms: int
    payload: bytes
    next: Position  # the position just after this record


class TopicLog:
    def __init__(self, root: Path, topic: str) -> None:
        self.topic = topic
        self.dir = Path(root) / topic
        self.dir.mkdir(parents=True, exist_ok=True)
        self._head_file = self.dir / "head.json"

    # ----- writing

    def append(self, payloads: Sequence[bytes], timestamp_ms: int | Sequence[int], sync: bool = True) -> Position:
        """Append records in order, with one time for all or one per record; return the end position
        after them."""
        if not payloads:
            return self.end()
        with self._locked():
            end = self._repair_tail()
            self._index_times(end, sync)
            segment = end.segment
            path = self._segment_path(segment)
            if path.exists() and path.stat().st_size >= SEGMENT_BYTES:
                segment = end.offset
                path = self._segment_path(segment)
                end = Position(end.offset, segment, 0)
            buffer = bytearray()
            times = [timestamp_ms] * len(payloads) if isinstance(timestamp_ms, int) else timestamp_ms
            if len(times) != len(payloads):
                raise ValueError(f"{len(times)} times for {len(payloads)} records")
            if GAP_TIME in times:
                raise ValueError(f"time {GAP_TIME} marks a gap, not a record")
            for payload, time_ms in zip(payloads, times, strict=True):
                body = struct.pack("<q", time_ms) + payload
                buffer += struct.pack("<II", len(payload), zlib.crc32(body)) + body
            with open(path, "ab") as file:
                file.write(buffer)
                file.flush()
                if sync:
                    os.fsync(file.fileno())
            after = Position(end.offset + len(payloads), segment, end.byte + len(buffer))
            self._write_head(after)
            return after

    # ----- reading

    def read(self, start: Position = Position(), limit: int | None = None) -> Iterator[LogRecord]:
        """Records from ``start`` on, in order, stopping at the end (or an incomplete record), at most
        ``limit`` of them. Records compaction removed are stepped over: their offsets are skipped."""
        yield from self._walk(start, limit)

    def position_at(self, time_ms: int) -> Position:
        """Where to start reading to find every record timed at or after ``time_ms``: the start of the
        first indexed stretch holding a record that late, or of the records not indexed yet. Every
        record before it is earlier; not every record after it is later (times are not in offset
        order: a producer's within a lateness bound, a processor's outputs at their causes' times)."""
        start, end = self._first_position(), self.end().offset
        for stretch_end, latest in self._stretches():
            if stretch_end.offset > end:  # noted before a crash cut the tail it covered: not to be trusted
                break
            if latest >= time_ms:
                break
            start = stretch_end
        return start

    def end(self) -> Position:
        """The position after the last complete record (and after any gap that follows it)."""
        position = self._read_head()
        path = self._segment_path(position.segment)
        if path.exists() and path.stat().st_size < position.byte:
            position = Position(position.segment, position.segment, 0)  # stale hint: rescan the segment
        walk = self._walk(position, None)
        while True:
            try:
                next(walk)
            except StopIteration as done:
                return done.value

    def remove(self, offsets: set[int]) -> int:
        """Turn the records at ``offsets`` into gaps, freeing their bytes where the filesystem can
        punch holes; return how many records were removed. Offsets and the byte positions readers
        stored stay valid, except inside a removed record: the caller removes only records every
        reader with a stored position has passed."""
        removed = 0
        with self._locked():
            for segment in self._segments():
                path = self._segment_path(segment)
                runs = _runs(self._walk(Position(segment, segment, 0), None, one_segment=True), offsets)
                if not runs:
                    continue
                with open(path, "r+b") as file:
                    for first_byte, end_byte, count in runs:
                        covered = end_byte - first_byte - HEADER.size
                        file.seek(first_byte)
                        file.write(HEADER.pack(covered, count, GAP_TIME))
                        file.flush()
                        _punch_hole(file.fileno(), first_byte + HEADER.size, covered)
                        removed += count
                    os.fsync(file.fileno())
        return removed

    # ----- internals

    def _walk(
        self, start: Position, limit: int | None, one_segment: bool = False
    ) -> Generator[LogRecord, None, Position]:
        """Records from ``start``, crossing into following segments (unless ``one_segment``);
        returns the position after everything read, a trailing gap included."""
        position, remaining = start, limit
        while True:
            path = self._segment_path(position.segment)
            if not path.exists():
                if position == Position():
                    return position  # an empty topic
                raise LogCorrupted(f"{self.topic}: segment {path.name} is missing")
            reader = _SegmentReader(self.topic, path, position)
            for record in reader.records(remaining):
                yield record
                if remaining is not None:
                    remaining -= 1
            position = reader.position
            if one_segment or (remaining is not None and remaining <= 0):
                return position
            # At the end of this segment: continue into the next one if it starts here.
            following = self._segment_path(position.offset)
            if position.offset != position.segment and following.exists() and position.byte == path.stat().st_size:
                position = Position(position.offset, position.offset, 0)
                continue
            return position

    def _index_times(self, end: Position, sync: bool) -> None:
        """Under the append lock, before the records from ``end`` on are written: note the stretch of
        records since the last one noted once it spans ``TIME_INDEX_BYTES`` or reaches another
        segment. A stretch is noted only over records already written, so its latest time is exact;
        records not in a stretch yet are always read. Stretches past ``end`` (a crash cut the tail
        they covered) are dropped first."""
        with open(self.dir / _TIME_INDEX, "a+b") as index:
            written = index.seek(0, os.SEEK_END)
            size = written - written % _STRETCH.size  # a torn last entry goes
            start = self._first_position()
            while size:
                offset, segment, byte, _ = _STRETCH.unpack(
                    os.pread(index.fileno(), _STRETCH.size, size - _STRETCH.size)
                )
                if offset <= end.offset:
                    start = Position(offset, segment, byte)
                    break
                size -= _STRETCH.size
            if size != written:
                index.truncate(size)
            if end.offset == start.offset or (
                end.segment == start.segment and end.byte - start.byte < TIME_INDEX_BYTES
            ):
                return
            try:
                latest = self._latest_time(start, end)
            except (OSError, struct.error):  # the index is a reader's shortcut: an append never fails for it
                return
            index.write(_STRETCH.pack(end.offset, end.segment, end.byte, latest))
            index.flush()
            if sync:
                os.fsync(index.fileno())

    def _latest_time(self, start: Position, end: Position) -> int:
        """The latest time of the records from ``start`` to ``end``, from their headers alone (a gap's
        time is the lowest there is): the records were checked as they were written."""
        latest = GAP_TIME
        for segment in [base for base in self._segments() if start.segment <= base <= end.segment]:
            with open(self._segment_path(segment), "rb") as file:
                byte = start.byte if segment == start.segment else 0
                stop = end.byte if segment == end.segment else file.seek(0, os.SEEK_END)
                file.seek(byte)
                buffer, cursor = b"", 0
                while byte < stop:
                    if len(buffer) - cursor < HEADER.size:
                        buffer = buffer[cursor:] + file.read(min(_READ_CHUNK, stop - byte))
                        cursor = 0
                    length, _, time_ms = HEADER.unpack_from(buffer, cursor)
                    latest = max(latest, time_ms)
                    byte += HEADER.size + length
                    cursor += HEADER.size + length
                    if cursor > len(buffer):  # the body runs past what was read: go on from the next header
                        file.seek(byte)
                        buffer, cursor = b"", 0
        return latest

    def _stretches(self) -> Iterator[tuple[Position, int]]:
        try:
            raw = (self.dir / _TIME_INDEX).read_bytes()
        except FileNotFoundError:
            return
        for offset, segment, byte, latest in _STRETCH.iter_unpack(raw[: len(raw) - len(raw) % _STRETCH.size]):
            yield Position(offset, segment, byte), latest

    def _segments(self) -> list[int]:
        return sorted(int(p.name[: -len(_SUFFIX)]) for p in self.dir.glob(f"*{_SUFFIX}"))

    def _segment_path(self, base: int) -> Path:
        return self.dir / f"{base:020d}{_SUFFIX}"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.dir / ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _repair_tail(self) -> Position:
        """The true end (under the lock), cutting off a record a crash left incomplete."""
        end = self.end()
        path = self._segment_path(end.segment)
        if path.exists() and path.stat().st_size > end.byte:
            with open(path, "r+b") as file:
                file.truncate(end.byte)
        return end

    def _read_head(self) -> Position:
        try:
            head = orjson.loads(self._head_file.read_bytes())
            return Position(head["offset"], head["segment"], head["byte"])
        except FileNotFoundError:
            return self._first_position()

    def _first_position(self) -> Position:
        bases = self._segments()
        return Position(bases[0], bases[0], 0) if bases else Position()

    def _write_head(self, position: Position) -> None:
        temporary = self._head_file.with_suffix(".tmp")
        temporary.write_bytes(
            orjson.dumps({"offset": position.offset, "segment": position.segment, "byte": position.byte})
        )
        os.replace(temporary, self._head_file)


def _runs(records: Iterator[LogRecord], offsets: set[int]) -> list[tuple[int, int, int]]:
    """(first byte, end byte, records) of each run of adjacent records of one segment to remove."""
    runs: list[list[int]] = []  # [first byte, end byte, count]
    last_end = -1  # end byte of the previous record, when it is being removed
    for record in records:
        start_byte = record.next.byte - HEADER.size - len(record.payload)
        if record.offset not in offsets:
            last_end = -1
        elif start_byte == last_end:  # right after the last removed record: the run grows
            runs[-1][1] += record.next.byte - start_byte
            runs[-1][2] += 1
            last_end = record.next.byte
        else:
            runs.append([start_byte, record.next.byte, 1])
            last_end = record.next.byte
    return [(first, end, count) for first, end, count in runs]


_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02


def _punch_hole(fd: int, offset: int, length: int) -> bool:
    """Free the file's blocks in [offset, offset + length), size unchanged; False where the
    filesystem (or platform) cannot, and the bytes then stay, unread."""
    if length <= 0:
        return True
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fallocate = libc.fallocate
    except (OSError, AttributeError):
        return False
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    return fallocate(fd, _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE, offset, length) == 0


class _SegmentReader:
    """Reads one segment from a position: its records, stepping over gaps (what compaction removed)."""

    def __init__(self, topic: str, path: Path, start: Position) -> None:
        self.topic = topic
        self.path = path
        self.position = start  # after everything read so far

    def records(self, limit: int | None) -> Iterator[LogRecord]:
        offset, byte, segment = self.position.offset, self.position.byte, self.position.segment
        with open(self.path, "rb") as file:
            file.seek(byte)
            buffer = b""
            cursor = 0
            produced = 0
            while limit is None or produced < limit:
                if len(buffer) - cursor < HEADER.size:
                    chunk = file.read(_READ_CHUNK)
                    if not chunk:
                        return
                    buffer = buffer[cursor:] + chunk
                    cursor = 0
                    continue
                length, crc, timestamp = HEADER.unpack_from(buffer, cursor)
                if timestamp == GAP_TIME:  # a gap: ``crc`` holds how many records it stands for
                    byte += HEADER.size + length
                    offset += crc
                    self.position = Position(offset, segment, byte)
                    file.seek(byte)  # its body is a hole in the file: not read
                    buffer, cursor = b"", 0
                    continue
                end = cursor + HEADER.size + length
                if end > len(buffer):
                    chunk = file.read(max(_READ_CHUNK, end - len(buffer)))
                    if not chunk:
                        return  # incomplete record: being written, or cut short by a crash
                    buffer = buffer[cursor:] + chunk
                    cursor = 0
                    continue
                if zlib.crc32(buffer[cursor + 8 : end]) != crc:
                    # Compaction may have turned the record into a gap since this buffer was read.
                    if HEADER.unpack(os.pread(file.fileno(), HEADER.size, byte))[2] == GAP_TIME:
                        file.seek(byte)
                        buffer, cursor = b"", 0
                        continue
                    raise LogCorrupted(f"{self.topic}: crc mismatch at offset {offset} ({self.path.name}, byte {byte})")
                payload = buffer[cursor + HEADER.size : end]
                byte += HEADER.size + length
                offset += 1
                produced += 1
                cursor = end
                self.position = Position(offset, segment, byte)
                yield LogRecord(offset - 1, timestamp, payload, self.position)


class Log:
    """All topic logs under one directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._topics: dict[str, TopicLog] = {}

    def topic(self, name: str) -> TopicLog:
        if name not in self._topics:
            self._topics[name] = TopicLog(self.root, name)
        return self._topics[name]

    def topics(self) -> list[str]:
        if not self.root.exists():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())
