"""Processor state and consumer positions in one SQLite file, committed together.

One transaction per commit holds every state write since the last one and the
input positions that produced them, so after a crash state and positions always agree.
Each state row carries a sequence number so views can load only what changed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

import orjson

from fastci.runtime.log import Position

# State values are a few hundred bytes to tens of KiB: a rowid table keeps them out of the key's
# B-tree, which a WITHOUT ROWID table fills with them (SQLite advises it only for rows under a
# twentieth of a page). Written as an upsert, a changed key keeps its row. docs/benchmarks.md has
# what it saves a history import.
_STATE = """
CREATE TABLE IF NOT EXISTS state (
    processor TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (processor, key)
);
CREATE INDEX IF NOT EXISTS state_by_seq ON state (processor, seq);
"""
_SCHEMA = (
    _STATE
    + """
CREATE TABLE IF NOT EXISTS positions (
    consumer TEXT NOT NULL, topic TEXT NOT NULL,
    "offset" INTEGER NOT NULL, segment INTEGER NOT NULL, byte INTEGER NOT NULL,
    PRIMARY KEY (consumer, topic)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS released (
    consumer TEXT NOT NULL, topic TEXT NOT NULL, offsets TEXT NOT NULL,
    PRIMARY KEY (consumer, topic)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
"""
)
_UPSERT = (
    "INSERT INTO state (processor, key, value, seq) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (processor, key) DO UPDATE SET value = excluded.value, seq = excluded.seq"
)
# A processor's keys held in memory, up to this many, so that asking for a key it never wrote (a new
# test, plan, job: most of a catch-up's first reads) costs a set lookup, not a SELECT. They are read
# only once a store has been asked for this many keys it does not have: a catch-up asks for
# thousands, a CI job's query for a handful, and reading a year's keys takes seconds.
KEYS_KEPT = 500_000  # at most about 70 MB per processor (keys of 60 characters)
READ_KEYS_AFTER = 1_000


class Checkpoint:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        # A replay writes a row per key per processor each batch: with SQLite's defaults (2 MiB of
        # page cache, a WAL checkpoint and its fsync every 1,000 pages) committing was the largest
        # part of a results replay (docs/benchmarks.md).
        self.db.execute("PRAGMA cache_size=-262144")  # KiB: 256 MiB, allocated as pages are used
        self.db.execute("PRAGMA wal_autocheckpoint=16384")  # pages: checkpoint every 64 MiB of WAL
        self._migrate()
        self.db.executescript(_SCHEMA)
        self._stores: dict[str, ProcessorStore] = {}

    def _migrate(self) -> None:
        """A checkpoint made before the state table had rowids: its rows moved into one that has."""
        if not self._state_without_rowids():
            return
        with self._transaction():
            if not self._state_without_rowids():  # another process moved them while this one waited
                return
            self.db.execute("DROP INDEX IF EXISTS state_by_seq")
            self.db.execute("ALTER TABLE state RENAME TO state_before_rowids")
            for statement in _STATE.split(";"):
                if statement.strip():
                    self.db.execute(statement)
            self.db.execute(
                "INSERT INTO state (processor, key, value, seq) "
                "SELECT processor, key, value, seq FROM state_before_rowids"
            )
            self.db.execute("DROP TABLE state_before_rowids")

    def _state_without_rowids(self) -> bool:
        row = self.db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'state'").fetchone()
        return row is not None and "WITHOUT ROWID" in row[0].upper()

    def close(self) -> None:
        self.db.close()

    def store(self, processor: str) -> ProcessorStore:
        """The processor's committed entries (one store per processor: commits keep its keys current)."""
        if processor not in self._stores:
            self._stores[processor] = ProcessorStore(self.db, processor)
        return self._stores[processor]

    def position(self, consumer: str, topic: str) -> Position:
        row = self.db.execute(
            'SELECT "offset", segment, byte FROM positions WHERE consumer = ? AND topic = ?', (consumer, topic)
        ).fetchone()
        return Position(*row) if row else Position()

    def released(self, consumer: str, topic: str) -> set[int]:
        """The offsets at or past the consumer's position in ``topic`` that it has applied already (a
        topic released in time order within a lateness bound, not in offset order)."""
        row = self.db.execute(
            "SELECT offsets FROM released WHERE consumer = ? AND topic = ?", (consumer, topic)
        ).fetchone()
        return set(orjson.loads(row[0])) if row else set()

    def commit(
        self,
        processor: str,
        writes: Mapping[str, bytes],
        positions: Mapping[tuple[str, str], Position],
        released: Mapping[tuple[str, str], Collection[int]] | None = None,
    ) -> None:
        """Persist one batch: state writes, positions and the offsets applied past them, all or nothing."""
        with self._transaction():
            if writes:
                seq = self._next_seq(len(writes))
                self.db.executemany(
                    _UPSERT, [(processor, key, value, seq + i) for i, (key, value) in enumerate(writes.items())]
                )
            self.db.executemany(
                'INSERT OR REPLACE INTO positions (consumer, topic, "offset", segment, byte) VALUES (?, ?, ?, ?, ?)',
                [(c, t, p.offset, p.segment, p.byte) for (c, t), p in positions.items()],
            )
            for (consumer, topic), offsets in (released or {}).items():
                if offsets:
                    self.db.execute(
                        "INSERT OR REPLACE INTO released (consumer, topic, offsets) VALUES (?, ?, ?)",
                        (consumer, topic, orjson.dumps(sorted(offsets)).decode()),
                    )
                else:
                    self.db.execute("DELETE FROM released WHERE consumer = ? AND topic = ?", (consumer, topic))
        if writes and processor in self._stores:
            self._stores[processor].wrote(writes)

    def changes(self, processor: str, after_seq: int) -> Iterator[tuple[int, str, bytes]]:
        """State rows written after ``after_seq``, oldest first: (seq, key, value)."""
        yield from self.db.execute(
            "SELECT seq, key, value FROM state WHERE processor = ? AND seq > ? ORDER BY seq",
            (processor, after_seq),
        )

    def _next_seq(self, count: int) -> int:
        row = self.db.execute("SELECT value FROM counters WHERE name = 'seq'").fetchone()
        first = (row[0] if row else 0) + 1
        self.db.execute("INSERT OR REPLACE INTO counters (name, value) VALUES ('seq', ?)", (first + count - 1,))
        return first

    def _transaction(self) -> _Transaction:
        return _Transaction(self.db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")


class ProcessorStore:
    """One processor's committed entries, read by key (a ``fastci.runtime.contract.Store``)."""

    def __init__(self, db: sqlite3.Connection, processor: str) -> None:
        self.db = db
        self.processor = processor
        self.keys: set[str] | None = None  # every key it has, once read (None: ask SQLite)
        self._misses: int | None = None  # keys asked for that it did not have (None: never read them)

    def refresh(self) -> None:
        """Forget which keys the processor has: another process may have committed since (a runtime
        reloads under the data dir's lock, before it applies anything). They are read again after
        ``READ_KEYS_AFTER`` reads of keys it does not have."""
        self.keys = None
        self._misses = 0

    def _read_keys(self) -> None:
        rows = self.db.execute(
            "SELECT key FROM state WHERE processor = ? LIMIT ?", (self.processor, KEYS_KEPT + 1)
        ).fetchall()
        self.keys = None if len(rows) > KEYS_KEPT else {key for (key,) in rows}
        self._misses = None  # read once per refresh: past KEYS_KEPT, SQLite is asked for every key

    def wrote(self, keys: Collection[str]) -> None:
        """Keys just committed (rows are never deleted: a key once written stays)."""
        if self.keys is not None:
            self.keys.update(keys)
            if len(self.keys) > KEYS_KEPT:
                self.keys = None

    def get(self, key: str) -> bytes | None:
        if self.keys is not None and key not in self.keys:
            return None
        row = self.db.execute(
            "SELECT value FROM state WHERE processor = ? AND key = ?", (self.processor, key)
        ).fetchone()
        if row is not None:
            return row[0]
        if self._misses is not None:
            self._misses += 1
            if self._misses >= READ_KEYS_AFTER:
                self._read_keys()
        return None
