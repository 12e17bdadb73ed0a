"""A write-ahead spool on local disk: every event a producer publishes is appended here first, and a
batch file is deleted only after the target acknowledged every event in it.

So a suite whose publish target is down loses nothing: its batches stay in the spool and the next
producer (or ``fastci spool drain``) sends them. A batch that was delivered but not yet deleted
when the process died is sent again; that is harmless, because an event's id derives from its
content (``test_id`` and ``run_id`` for a result) and every consumer and view drops the second copy.

Files, one event per line as an envelope ``{"topic": ..., "event": {...}}`` (the format
``fastci publish`` reads without ``--topic``):

- ``<time>-<pid>-<n>.open``: the batch this process is appending to (one ``write`` per event, so a
  killed process leaves whole lines behind: they are in the kernel's page cache);
- ``<time>-<pid>-<n>.jsonl``: a sealed batch (fsynced, then renamed), waiting to be sent;
  an ``.open`` file whose process is gone is sealed by the next drain;
- ``rejected/``: lines that no longer decode (a damaged file), with the reason, never resent.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from fastci.core.codec import InvalidEvent, encode
from fastci.core.events import Event
from fastci.producer.lines import check_lines

OPEN, SEALED = ".open", ".jsonl"


@dataclass
class Batch:
    path: Path
    events: list[Event] = field(default_factory=list)
    refused: list[InvalidEvent] = field(default_factory=list)


class Spool:
    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._open_path: Path | None = None
        self._open_fd: int | None = None
        self._open_count = 0
        self._sequence = itertools.count()

    # ----- writing (this process)

    def append(self, event: Event) -> int:
        """Append one event to this process's open batch; return how many that batch now holds."""
        if self._open_fd is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            name = f"{time.time_ns():020d}-{os.getpid()}-{next(self._sequence)}{OPEN}"
            self._open_path = self.directory / name
            self._open_fd = os.open(self._open_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._open_count = 0
        line = orjson.dumps({"topic": event.TOPIC, "event": orjson.Fragment(encode(event))}) + b"\n"
        os.write(self._open_fd, line)  # one write per line: a crash leaves whole lines only
        self._open_count += 1
        return self._open_count

    def seal(self) -> Path | None:
        """Make the open batch durable (fsync) and hand it to senders."""
        if self._open_fd is None or self._open_path is None:
            return None
        os.fsync(self._open_fd)
        os.close(self._open_fd)
        sealed = self._open_path.with_suffix(SEALED)
        os.replace(self._open_path, sealed)
        _fsync_dir(self.directory)
        self._open_fd, self._open_path, self._open_count = None, None, 0
        return sealed

    # ----- sending (any process)

    @contextmanager
    def draining(self, wait_s: float = 0.0) -> Iterator[bool]:
        """Hold the drain lock if no other process does (waiting up to ``wait_s`` for one that
        does); yields whether it is held."""
        self.directory.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + wait_s
        with open(self.directory / ".drain.lock", "a") as lock:
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        yield False
                        return
                    time.sleep(0.05)
            try:
                yield True
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def sealed_batches(self) -> list[Path]:
        """Batches waiting to be sent, oldest first (adopting open batches of processes that died)."""
        if not self.directory.exists():
            return []
        for path in self.directory.glob(f"*{OPEN}"):
            if path != self._open_path and not _alive(_pid_of(path)):
                try:
                    os.replace(path, path.with_suffix(SEALED))
                except FileNotFoundError:
                    pass  # another drainer adopted it first
        return sorted(self.directory.glob(f"*{SEALED}"))

    def read(self, path: Path) -> Batch:
        """The events of a batch; lines that no longer decode are set aside as refused."""
        raw = path.read_bytes()
        lines = raw.split(b"\n")
        if lines and lines[-1] and not raw.endswith(b"\n"):
            lines = lines[:-1]  # a line cut short by a power loss: it was never complete

        checked = check_lines(lines, topic=None)
        return Batch(path, checked.accepted, [r.error for r in checked.refused])

    def done(self, batch: Batch) -> None:
        """The target acknowledged ``batch``: keep its refused lines aside, delete the file."""
        if batch.refused:
            rejected = self.directory / "rejected"
            rejected.mkdir(exist_ok=True)
            lines = [orjson.dumps({"error": str(e), "raw": e.raw.decode("utf-8", "replace")}) for e in batch.refused]
            (rejected / batch.path.name).write_bytes(b"\n".join(lines) + b"\n")
        batch.path.unlink(missing_ok=True)
        _fsync_dir(self.directory)

    def pending(self) -> int:
        """Events waiting in sealed or open batches (this process's included)."""
        if not self.directory.exists():
            return 0
        return sum(_count_lines(p) for p in self.directory.iterdir() if p.suffix in (OPEN, SEALED))

    def close(self) -> None:
        self.seal()


def _pid_of(path: Path) -> int:
    try:
        return int(path.name.split("-")[1])
    except (IndexError, ValueError):
        return -1


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
