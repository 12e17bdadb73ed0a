"""The embedded runtime's checkpoint (``fastci.runtime.checkpoint``): state rows written as upserts
into a rowid table, and a checkpoint made before that (a WITHOUT ROWID table) moved on open, every
row and position kept."""

from __future__ import annotations

import sqlite3

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
