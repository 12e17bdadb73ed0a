"""The analysts' DuckDB file: one table per topic, one per processor's state, loaded incrementally.

Every load is idempotent: event tables are keyed by event id (a redelivered or
duplicated event is ignored) and state tables by their key (last write wins).
Rows and the positions they were read up to are committed in one transaction.
Loads go through a temporary newline-delimited JSON file and ``read_json`` with
bound parameters: no event text is ever spliced into SQL.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import orjson

from fastci.topology import ALL_PROCESSORS, TOPICS
from fastci.views import analytics
from fastci.views import fleet_views as fleet
from fastci.views.schema import TableSpec, quote, state_tables, table_name, topic_table

# Modules of analyst SQL views over the tables, (re)created whenever the file is opened for writing.
ANALYST_VIEWS = (fleet.create, analytics.create_views)

_POSITIONS = """
CREATE TABLE IF NOT EXISTS _positions (
    source VARCHAR, stream VARCHAR, part INTEGER,
    next_offset BIGINT, segment BIGINT, byte BIGINT,
    PRIMARY KEY (source, stream, part)
)"""


@dataclass(frozen=True)
class StoredPosition:
    next_offset: int = 0
    segment: int = 0
    byte: int = 0


def missing_views(path: Path) -> str:
    """Why there is nothing to read at ``path``, and the likely fix: the data dir to refresh, or the
    folder where ``fastci demo`` left its views."""
    data_dir = path.parent
    fix = f"run 'fastci --data-dir {data_dir} views refresh' first"
    demo = Path(".fastci/demo")
    if (demo / "views.duckdb").exists() and data_dir.resolve() != demo.resolve():
        fix += f", or read the demo's views with --data-dir {demo}"
    return f"no views at {path} (the views of data dir {data_dir}): {fix}"


class Views:
    def __init__(self, path: Path, read_only: bool = False) -> None:
        self.path = Path(path)
        if read_only and not self.path.exists():
            raise FileNotFoundError(missing_views(self.path))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect(str(self.path), read_only=read_only)
        if not read_only:
            self._create()

    def close(self) -> None:
        self.con.close()

    def _create(self) -> None:
        self.con.execute(_POSITIONS)
        for spec in self.specs():
            self.con.execute(spec.ddl())
            self._add_new_columns(spec)
        for processor in ALL_PROCESSORS:  # its one table, from before it declared key spaces
            if processor.key_spaces:
                self.con.execute(f"DROP TABLE IF EXISTS {quote(table_name(processor.name))}")
        for create in ANALYST_VIEWS:
            create(self.con)

    def _add_new_columns(self, spec: TableSpec) -> None:
        """A field added to a model since the table was created becomes a column (NULL in older rows)."""
        existing = {
            row[0]
            for row in self.con.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [spec.name]
            ).fetchall()
        }
        for column, sql_type in spec.columns.items():
            if column not in existing:
                self.con.execute(f"ALTER TABLE {quote(spec.name)} ADD COLUMN {quote(column)} {sql_type}")

    @staticmethod
    def specs() -> list[TableSpec]:
        return [topic_table(t) for t in TOPICS] + [spec for p in ALL_PROCESSORS for spec in state_tables(p).values()]

    # ----- positions

    def position(self, source: str, stream: str, part: int = 0) -> StoredPosition:
        row = self.con.execute(
            "SELECT next_offset, segment, byte FROM _positions WHERE source = ? AND stream = ? AND part = ?",
            [source, stream, part],
        ).fetchone()
        return StoredPosition(*row) if row else StoredPosition()

    def positions(self, source: str, stream: str) -> dict[int, int]:
        rows = self.con.execute(
            "SELECT part, next_offset FROM _positions WHERE source = ? AND stream = ?", [source, stream]
        ).fetchall()
        return dict(rows)

    # ----- loading

    def load(
        self,
        spec: TableSpec,
        rows: Iterable[bytes],
        positions: Mapping[tuple[str, str, int], StoredPosition],
        replace: bool = False,
        deleted: Iterable[str] = (),
    ) -> None:
        """Insert rows (JSON documents with the table's columns) and record positions, atomically.

        Events are inserted once (``replace=False``: a known id is ignored); state rows replace the
        previous row for their key; ``deleted`` keys are removed.
        """
        self.load_tables([(spec, rows, deleted)], positions, replace)

    def load_tables(
        self,
        loads: Sequence[tuple[TableSpec, Iterable[bytes], Iterable[str]]],
        positions: Mapping[tuple[str, str, int], StoredPosition],
        replace: bool = False,
    ) -> None:
        """``load`` into several tables (spec, rows, deleted keys) and record positions, in one
        transaction: a processor's key spaces move together."""
        files: list[tuple[str, int]] = []
        try:
            for _, rows, _ in loads:
                handle, name = tempfile.mkstemp(suffix=".ndjson", prefix="fastci-load-")
                files.append((name, 0))
                with os.fdopen(handle, "wb") as file:
                    count = 0
                    for row in rows:
                        file.write(row)
                        file.write(b"\n")
                        count += 1
                files[-1] = (name, count)
            self.con.execute("BEGIN TRANSACTION")
            try:
                for (spec, _, deleted), (name, count) in zip(loads, files, strict=True):
                    self._load_file(spec, name, count, list(deleted), replace)
                for (source, stream, part), p in positions.items():
                    self.con.execute(
                        "INSERT OR REPLACE INTO _positions VALUES (?, ?, ?, ?, ?, ?)",
                        [source, stream, part, p.next_offset, p.segment, p.byte],
                    )
                self.con.execute("COMMIT")
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
        finally:
            for name, _ in files:
                os.unlink(name)

    def _load_file(self, spec: TableSpec, name: str, count: int, deleted: list[str], replace: bool) -> None:
        if deleted:
            self.con.execute(f"DELETE FROM {quote(spec.name)} WHERE {quote(spec.key)} IN (SELECT unnest(?))", [deleted])
        if count:
            verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
            self.con.execute(
                f"{verb} INTO {quote(spec.name)} BY NAME "
                "SELECT * FROM read_json(?, format = 'newline_delimited', columns = ?)",
                [name, spec.columns],
            )

    def drop_replaced(self, topic: str, fields: tuple[str, ...]) -> int:
        """Delete the event rows of ``topic`` a later row (in the same partition) with the same
        ``fields`` replaces, as compaction removes them from the log; return how many."""
        table = quote(topic_table(topic).name)
        same = " AND ".join(f"later.{quote(f)} IS NOT DISTINCT FROM {table}.{quote(f)}" for f in fields)
        condition = (
            f"EXISTS (SELECT 1 FROM {table} AS later WHERE {same} AND later._partition = {table}._partition "
            f"AND later._offset > {table}._offset)"
        )
        [(count,)] = self.con.execute(f"SELECT count(*) FROM {table} WHERE {condition}").fetchall()
        if count:
            self.con.execute(f"DELETE FROM {table} WHERE {condition}")
            self.con.execute("CHECKPOINT")
        return count

    def event_tables(self) -> dict[str, list[tuple]]:
        """Every topic's rows by id, without where they were read (``_partition``, ``_offset``), and
        ``test_history`` by test: what two runs over the same events must agree on."""
        tables = {}
        for topic in TOPICS:
            name = topic_table(topic).name
            columns = [c for c in self.query(f"SELECT * FROM {quote(name)} LIMIT 0")[0] if not c.startswith("_")]
            listed = ", ".join(quote(c) for c in columns)
            tables[name] = self.query(f"SELECT {listed} FROM {quote(name)} ORDER BY id")[1]
        tables["test_history"] = self.query("SELECT * FROM test_history ORDER BY test_id")[1]
        return tables

    # ----- querying

    def query(self, sql: str, parameters: list | None = None) -> tuple[list[str], list[tuple]]:
        cursor = self.con.execute(sql, parameters or [])
        columns = [d[0] for d in cursor.description] if cursor.description else []
        return columns, cursor.fetchall()


def with_position(payload: bytes, partition: int, offset: int) -> bytes:
    """An encoded event (a JSON object) with ``_partition`` and ``_offset`` added in front."""
    return b'{"_partition":%d,"_offset":%d,%s' % (partition, offset, payload[1:])


def state_row(key_column: str, key: str, state: dict) -> bytes:
    return orjson.dumps({key_column: key, **state})
