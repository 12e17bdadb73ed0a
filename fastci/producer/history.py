"""``fastci import``: past CI history (JUnit XML files, results as JSON lines or Parquet) published as
results.

Each file is read as a stream and published in batches. After each batch the file's progress (how
many of its outcomes are published) is written to ``<data dir>/import/``, so an import killed
part-way resumes where it stopped and a file imported once is not published again; the results'
ids are deterministic too (a JUnit file's run id defaults to a hash of its bytes), so a batch
published twice around a kill is the same events, and on the embedded log an interrupted batch is
completed with just what it lacks. An outcome that does not make a valid result is
refused with its file and line, and lands on dead-letters like any refused event.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson

from fastci.core.codec import InvalidEvent
from fastci.core.dead_letters import DeadLetter, FieldError
from fastci.core.events import Event
from fastci.core.system import LATENESS_MS
from fastci.producer.context import RunContext
from fastci.producer.junit import JUnitError, read_cases, test_id
from fastci.producer.lines import check_event
from fastci.producer.targets import Target

SOURCE = "import"
Progress = Callable[[Path, int, int], None]  # (file, bytes read, bytes in all)


class ParquetError(ValueError):
    """The file is not Parquet DuckDB can read; the message names the file."""


# A file the import cannot read on: what came before the damage is published, the rest is not.
UNREADABLE = (JUnitError, ParquetError)


@dataclass
class FileReport:
    path: Path
    published: int = 0  # outcomes published by this import
    resumed_at: int = 0  # outcomes an earlier, interrupted import had published
    refused: list[str] = field(default_factory=list)  # "FILE:LINE: why"
    already: bool = False  # imported before: nothing published
    late: int = 0  # results more than LATENESS_MS older than one published before them (``Lateness``)


@dataclass
class Lateness:
    """The latest result time an import has published so far, across its files: a result more than
    ``LATENESS_MS`` older than that is applied when it arrives, not in time order (docs/topology.md,
    "Ordering rule"), so an import of files newest first is worth a warning."""

    latest_ms: float = float("-inf")

    def late(self, event: Event) -> bool:
        time_ms = event.time_ms()
        if time_ms is None:
            return False
        if time_ms > self.latest_ms:
            self.latest_ms = time_ms
        return time_ms < self.latest_ms - LATENESS_MS


def format_of(path: Path, given: str | None) -> str:
    if given:
        return given
    suffix = path.suffix.lower()
    if suffix == ".xml":
        return "junit"
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise ValueError(
        f"{path}: cannot tell the format from '{suffix or 'no suffix'}' (pass --format junit|jsonl|parquet)"
    )


def import_file(
    path: Path,
    fmt: str,
    context: RunContext | None,
    target: Target,
    progress_dir: Path,
    root: Path | None = None,
    run_id: str | None = None,
    batch: int = 5000,
    progress: Progress | None = None,
    lateness: Lateness | None = None,
    modules: dict[str, int] | None = None,
) -> FileReport:
    """Publish ``path``'s outcomes after those an earlier import of it published.

    Before each batch the progress record notes the batch and where the target ended; a kill
    between the two leaves that note, and the next import publishes only the batch's events the
    target does not hold (a target that cannot tell gets the batch again: the same ids).
    ``modules``: JUnit class names resolved to modules under ``root`` so far, shared by the files of
    one import (a suite's shards and nights repeat its classes; None: this file's own)."""
    report = FileReport(path)
    marker = progress_dir / f"{_file_key(path)}.json"
    saved = orjson.loads(marker.read_bytes()) if marker.exists() else {"done": 0, "complete": False}
    if saved["complete"]:
        report.already = True
        return report
    report.resumed_at = done = saved["done"]
    in_flight = saved.get("in_flight")
    size = path.stat().st_size
    if fmt == "junit":
        outcomes = _junit_outcomes(path, context, root, run_id or _run_id(path), {} if modules is None else modules)
    elif fmt == "parquet":
        outcomes = _parquet_outcomes(path)
    else:
        outcomes = _jsonl_outcomes(path)
    pending: list[Event] = []
    seen = 0

    def record(state: dict[str, Any]) -> None:
        progress_dir.mkdir(parents=True, exist_ok=True)
        temporary = marker.with_suffix(".tmp")
        temporary.write_bytes(orjson.dumps({"path": str(path), **state}))
        os.replace(temporary, marker)

    def flush(complete: bool) -> None:
        nonlocal pending, done
        if pending:
            if in_flight is not None and seen == in_flight["until"]:  # the batch a kill interrupted
                topics = {event.TOPIC for event in pending}
                held = target.ids_since(in_flight["mark"], topics) if in_flight["mark"] is not None else set()
                pending = [event for event in pending if event.id not in held]
            else:
                record({"done": done, "complete": False, "in_flight": {"until": seen, "mark": target.mark()}})
            if pending:
                target.send(pending)
                report.published += sum(1 for event in pending if event.TOPIC != DeadLetter.TOPIC)
        done = seen
        record({"done": done, "complete": complete})
        pending = []

    try:
        for line, event, position in outcomes:
            seen += 1
            if seen <= done:
                continue
            if isinstance(event, InvalidEvent):
                report.refused.append(f"{path}:{line}: {event}")
                pending.append(event.dead_letter(SOURCE))
            else:
                pending.append(event)
                if lateness is not None and lateness.late(event):
                    report.late += 1
            if len(pending) >= batch or (in_flight is not None and seen == in_flight["until"]):
                flush(False)
                if progress:
                    progress(path, position, size)
    except UNREADABLE:
        flush(False)  # what came before the damage is published
        raise
    flush(True)
    if progress:
        progress(path, size, size)
    return report


def _junit_outcomes(
    path: Path, context: RunContext, root: Path | None, run_id: str, modules: dict[str, int]
) -> Iterator[tuple[int, Event | InvalidEvent, int]]:
    base = context.model_dump(mode="json")
    for case in read_cases(path):
        position = case.byte
        identity = test_id(case.attributes, root, modules)
        document: dict[str, Any] = {
            **base,
            "run_id": case.properties.get("run_id") or run_id,
            "status": case.status,
            "duration_s": _duration(case.attributes.get("time")),
            "time": case.finished.isoformat() if case.finished else None,
        }
        for name in ("commit", "repo"):
            if case.properties.get(name):
                document[name] = case.properties[name]
        raw = orjson.dumps({"test_id": identity, **document})
        if identity is None:
            reason = "a <testcase> needs a 'name' attribute"
            yield case.line, InvalidEvent("results", [FieldError(field="test_id", reason=reason)], raw), position
            continue
        try:
            yield case.line, check_event("results", raw), position
        except InvalidEvent as error:
            yield case.line, error, position


def _jsonl_outcomes(path: Path) -> Iterator[tuple[int, Event | InvalidEvent, int]]:
    position = 0
    with open(path, "rb") as file:
        for number, line in enumerate(file, start=1):
            position += len(line)
            if not line.strip():
                continue
            try:
                document = orjson.loads(line)
            except orjson.JSONDecodeError as error:
                reason = f"malformed JSON: {error}"
                yield number, InvalidEvent("results", [FieldError(field="", reason=reason)], line.strip()), position
                continue
            if isinstance(document, dict) and isinstance(document.get("topic"), str) and "event" in document:
                topic, raw = document["topic"], orjson.dumps(document["event"])
            else:
                topic, raw = "results", line.strip()
            try:
                yield number, check_event(topic, raw), position
            except InvalidEvent as error:
                yield number, error, position


PARQUET_ROWS = 10_000  # rows fetched from DuckDB at a time: a file of any size in bounded memory


def _parquet_outcomes(path: Path) -> Iterator[tuple[int, Event | InvalidEvent, int]]:
    """A Parquet file's rows as results, one row a result: its columns are the result's fields (as in
    a results JSON line; a null column is an absent field, so it takes its default). The "line" of a
    row is its row number from 1; its position, the share of the file's bytes its rows come to.

    DuckDB reads the file column by column and hands the rows over in blocks; each row is then
    checked as a published result is, by the one door every event goes through."""
    import duckdb  # a dependency of record (the views); imported here, as only this format needs it

    size = path.stat().st_size
    with duckdb.connect() as db:
        db.execute("SET TimeZone = 'UTC'")  # a TIMESTAMPTZ column read as UTC
        try:
            described = db.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()
            total = db.execute("SELECT count(*) FROM read_parquet(?)", [str(path)]).fetchone()[0]
        except duckdb.Error as error:
            raise ParquetError(f"{path}: not a Parquet file DuckDB can read ({error})") from None
        names = [name for name, *_ in described]
        # TIMESTAMPTZ as a plain UTC timestamp: turning zoned values into Python needs pytz.
        select = ", ".join(
            f"CAST({_quoted(name)} AS TIMESTAMP) AS {_quoted(name)}"
            if kind == "TIMESTAMP WITH TIME ZONE"
            else _quoted(name)
            for name, kind, *_ in described
        )
        # DuckDB keeps a file's row order (preserve_insertion_order, on by default): row N is the file's Nth
        db.execute("SET preserve_insertion_order = true")
        number = 0
        try:
            cursor = db.execute(f"SELECT {select} FROM read_parquet(?)", [str(path)])
            while rows := cursor.fetchmany(PARQUET_ROWS):
                for row in rows:
                    number += 1
                    document = {name: value for name, value in zip(names, row, strict=True) if value is not None}
                    raw = orjson.dumps(document, default=_plain, option=orjson.OPT_NAIVE_UTC | orjson.OPT_NON_STR_KEYS)
                    position = size * number // max(total, 1)
                    try:
                        yield number, check_event("results", raw), position
                    except InvalidEvent as error:
                        yield number, error, position
        except duckdb.Error as error:
            raise ParquetError(f"{path}: unreadable after row {number:,} ({error})") from None


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _plain(value: object) -> object:
    """A column value orjson does not write itself (a DECIMAL's Decimal): as a number, else as text."""
    if isinstance(value, Decimal):
        return float(value)
    return str(value)


def _duration(text: str | None) -> float | str:
    try:
        return float(text) if text else 0.0
    except ValueError:
        return text  # validation names it


def _run_id(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return f"junit-{digest.hexdigest()[:16]}"


def _file_key(path: Path) -> str:
    """The same file (by path, size and modification time) maps to the same progress record."""
    stat = path.stat()
    text = f"{path.resolve()}\x1f{stat.st_size}\x1f{stat.st_mtime_ns}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]
