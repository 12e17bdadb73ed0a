"""The embedded runtime's checkpoint (``fastci.runtime.checkpoint``): state rows written as upserts
into a rowid table, a checkpoint made before that (a WITHOUT ROWID table) moved on open, every
row and position kept, and a store's keys held in memory up to a limit."""

from __future__ import annotations

import sqlite3

from fastci.runtime import checkpoint as checkpoint_module
from fastci.runtime.checkpoint import Checkpoint
from fastci.runtime.log import Position

OLD_SCHEMA = """
CREATE TABLE state (
    processor TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (processor, key)
) WITHOUT ROWID;
CREATE INDEX state_by_seq ON state (processor, seq);
CREATE TABLE positions (
    consumer TEXT NOT NULL, topic TEXT NOT NULL,
    "offset" INTEGER NOT NULL, segment INTEGER NOT NULL, byte INTEGER NOT NULL,
    PRIMARY KEY (consumer, topic)
) WITHOUT ROWID;
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
"""


def state_table_sql(path) -> str:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT sql FROM sqlite_master WHERE name = 'state'").fetchone()[0]
    finally:
        db.close()


def test_a_checkpoint_without_rowids_is_moved_on_open_keeping_every_row(tmp_path):
    path = tmp_path / "state.sqlite"
    old = sqlite3.connect(path)
    old.executescript(OLD_SCHEMA)
    old.executemany(
        "INSERT INTO state VALUES (?, ?, ?, ?)",
        [("test-history", f"t{n}", b"v%d" % n, n) for n in range(1, 301)] + [("node-state", "n1", b"x", 301)],
    )
    old.execute("INSERT INTO positions VALUES ('processor:test-history', 'results', 300, 0, 9000)")
    old.execute("INSERT INTO counters VALUES ('seq', 301)")
    old.commit()
    old.close()

    checkpoint = Checkpoint(path)
    assert "WITHOUT ROWID" not in state_table_sql(path).upper()
    store = checkpoint.store("test-history")
    assert store.get("t7") == b"v7" and store.get("t300") == b"v300" and store.get("n1") is None
    assert [seq for seq, _, _ in checkpoint.changes("test-history", 295)] == [296, 297, 298, 299, 300]
    assert checkpoint.position("processor:test-history", "results") == Position(300, 0, 9000)
    # the next write continues the sequence; an existing key keeps one row, with its new value and seq
    checkpoint.commit("test-history", {"t7": b"w7", "t999": b"new"}, {})
    assert store.get("t7") == b"w7"
    assert list(checkpoint.changes("test-history", 301)) == [(302, "t7", b"w7"), (303, "t999", b"new")]
    rows = checkpoint.db.execute("SELECT count(*) FROM state WHERE processor = 'test-history'").fetchone()[0]
    assert rows == 301
    checkpoint.close()
    again = Checkpoint(path)  # opening a moved checkpoint changes nothing
    assert again.store("test-history").get("t7") == b"w7"
    assert again.db.execute("SELECT count(*) FROM state").fetchone()[0] == 302
    again.close()


def test_a_new_checkpoint_has_rowids(tmp_path):
    Checkpoint(tmp_path / "state.sqlite").close()
    assert "WITHOUT ROWID" not in state_table_sql(tmp_path / "state.sqlite").upper()


def test_a_store_holds_its_keys_once_asked_for_many_it_does_not_have(tmp_path, monkeypatch):
    """A store reads its keys after READ_KEYS_AFTER reads of keys it does not have (a catch-up), not
    for a query's few; then a key never written costs no SELECT. Past KEYS_KEPT it asks SQLite for
    every key, with the same values."""
    monkeypatch.setattr(checkpoint_module, "READ_KEYS_AFTER", 2)
    monkeypatch.setattr(checkpoint_module, "KEYS_KEPT", 3)
    checkpoint = Checkpoint(tmp_path / "state.sqlite")
    store = checkpoint.store("test-history")
    store.refresh()
    checkpoint.commit("test-history", {"t1": b"v1", "t2": b"v2"}, {})
    assert store.get("t1") == b"v1" and store.get("t8") is None and store.keys is None  # one miss: not yet
    assert store.get("t9") is None and store.keys == {"t1", "t2"}  # the second: read
    checkpoint.commit("test-history", {"t3": b"v3"}, {})
    assert store.keys == {"t1", "t2", "t3"} and store.get("t3") == b"v3"
    checkpoint.commit("test-history", {"t4": b"v4"}, {})  # past the limit
    assert store.keys is None
    assert [store.get(k) for k in ("t1", "t4", "t9")] == [b"v1", b"v4", None]
    store.refresh()  # read again after two misses: more keys than the limit, so none held
    assert [store.get(k) for k in ("t8", "t9", "t3")] == [None, None, b"v3"] and store.keys is None
    checkpoint.close()
