"""Bring the DuckDB views up to date from the embedded log or from Kafka, reading only what is new.

Topics become event tables; each processor's state (the embedded checkpoint, or
the faust Table changelog on Kafka) becomes a table named after the processor.
Records that do not decode are skipped here: the processors dead-letter them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from fastci.core.codec import InvalidEvent, encode
from fastci.core.config import KafkaSettings
from fastci.core.processor import from_union, kind_of
from fastci.runtime.driver import decode_state, is_applied_mark
from fastci.runtime.embedded import DataDir
from fastci.runtime.kafka.broker import read_to_end
from fastci.runtime.kafka.positions import position_partition
from fastci.runtime.log import Position
from fastci.topology import ALL_PROCESSORS, TOPICS, decode
from fastci.views.schema import TableSpec, state_stream, state_tables, topic_table
from fastci.views.store import StoredPosition, Views, state_row, with_position

CHUNK = 50_000  # rows per load transaction
Progress = Callable[[str, int], None]  # (table, rows read so far)

EMBEDDED = "embedded"


def kafka_source(settings: KafkaSettings) -> str:
    return f"kafka:{settings.bootstrap}/{settings.namespace}"


@contextmanager
def refreshed_views(data_dir: Path) -> Iterator[Views]:
    """The data dir's own views (``views.duckdb`` in it), brought up to date with what the embedded
    runtime has applied there; closed on leaving."""
    views = Views(data_dir / "views.duckdb")
    try:
        refresh_embedded(data_dir, views)
        yield views
    finally:
        views.close()


@contextmanager
def refreshed_kafka_views(settings: KafkaSettings, path: Path) -> Iterator[Views]:
    """Views at ``path`` brought up to date with the topics of ``settings``; closed on leaving."""
    views = Views(path)
    try:
        asyncio.run(refresh_kafka(settings, views))
        yield views
    finally:
        views.close()


def refresh_embedded(data_dir: Path, views: Views, progress: Progress | None = None) -> dict[str, int]:
    """Load new log records and state changes of the embedded runtime; return rows read per table."""
    data = DataDir(data_dir)
    read: dict[str, int] = {}
    for topic in TOPICS:
        spec = topic_table(topic)
        stored = views.position(EMBEDDED, topic)
        position = Position(stored.next_offset, stored.segment, stored.byte)
        log = data.log.topic(topic)
        count = 0
        while True:
            rows = []
            for record in log.read(position, limit=CHUNK):
                row = _event_row(topic, record.payload, 0, record.offset)
                if row is not None:
                    rows.append(row)
                position = record.next
                count += 1
            if position.offset == stored.next_offset:
                break
            stored = StoredPosition(position.offset, position.segment, position.byte)
            views.load(spec, rows, {(EMBEDDED, topic, 0): stored})
            if progress:
                progress(spec.name, count)
        read[spec.name] = count
    if data.checkpoint_path.exists():
        checkpoint = data.checkpoint()
        try:
            for processor in ALL_PROCESSORS:
                stream = state_stream(processor)
                after = views.position(EMBEDDED, stream).next_offset
                changes = (
                    (seq, key, value)
                    for seq, key, value in checkpoint.changes(processor.name, after)
                    if not _bookkeeping(key)
                )
                read.update(_load_state(views, processor, changes, EMBEDDED, stream, progress))
        finally:
            checkpoint.close()
    return read


async def refresh_kafka(settings: KafkaSettings, views: Views, progress: Progress | None = None) -> dict[str, int]:
    """Load new records of every topic and every processor's Table changelog from Kafka."""
    source = kafka_source(settings)
    read: dict[str, int] = {}
    for topic in TOPICS:
        spec = topic_table(topic)
        next_offsets = views.positions(source, topic)
        rows: list[bytes] = []
        count = 0

        def flush(
            count: int,
            spec: TableSpec = spec,
            topic: str = topic,
            rows: list[bytes] = rows,
            next_offsets: dict[int, int] = next_offsets,
        ) -> None:
            views.load(spec, rows, {(source, topic, p): StoredPosition(o) for p, o in next_offsets.items()})
            rows.clear()
            if progress:
                progress(spec.name, count)

        async for record in read_to_end(settings, topic, next_offsets):
            row = _event_row(topic, record.value or b"", record.partition, record.offset)
            if row is not None:
                rows.append(row)
            next_offsets[record.partition] = record.offset + 1
            count += 1
            if len(rows) >= CHUNK:
                flush(count)
        if count:
            flush(count)
        read[spec.name] = count
    for processor in ALL_PROCESSORS:
        changelog = settings.changelog_topic(processor.name)
        stream = changelog + state_stream(processor).removeprefix(f"state:{processor.name}")
        next_offsets = views.positions(source, stream)
        changes = [
            (record.partition, record.offset, record.key.decode(), record.value)
            async for record in read_to_end(settings, changelog, next_offsets, namespaced=False)
            if record.key is not None
        ]
        for partition, offset, _, _ in changes:
            next_offsets[partition] = offset + 1
        changes = [change for change in changes if not _bookkeeping(change[2])]
        positions = {(source, stream, p): StoredPosition(o) for p, o in next_offsets.items()}
        read.update(
            _load_state(
                views, processor, ((0, key, value) for _, _, key, value in changes), source, stream, progress, positions
            )
        )
    return read


def _bookkeeping(key: str) -> bool:
    """A state key the runtime keeps for itself (a route's position, an applied-event marker)."""
    return position_partition(key) is not None or is_applied_mark(key)


def _event_row(topic: str, payload: bytes, partition: int, offset: int) -> bytes | None:
    try:
        event = decode(topic, payload)
    except InvalidEvent:
        return None
    return with_position(encode(event), partition, offset)


def _load_state(
    views: Views,
    processor: type,
    changes: Iterator[tuple[int, str, bytes | None]],
    source: str,
    stream: str,
    progress: Progress | None,
    positions: dict | None = None,
) -> dict[str, int]:
    """Upsert the latest state per key into its key space's table (a None state, or a tombstone,
    deletes the row); return the changes read per table."""
    specs = state_tables(processor)
    latest: dict[str, dict | None] = {}
    last_seq = views.position(source, stream).next_offset
    for seq, key, value in changes:
        latest[key] = None if value is None else decode_state(value)
        last_seq = max(last_seq, seq)
    rows: dict[str, list[bytes]] = {kind: [] for kind in specs}
    deleted: dict[str, list[str]] = {kind: [] for kind in specs}
    read = dict.fromkeys((spec.name for spec in specs.values()), 0)
    for key, state in latest.items():
        kind = kind_of(key) if processor.key_spaces else ""
        spec = specs.get(kind)
        if spec is None and state is None:
            continue  # a partition key's marks, with no state of its own
        if spec is None:
            raise ValueError(f"{processor.name}: state key {key!r} is of no declared key space")
        if state is not None and processor.key_spaces:  # maybe stored before the processor declared them
            state = from_union(processor.record_for(key), state)
        read[spec.name] += 1
        if state is None:
            deleted[kind].append(key)
        else:
            rows[kind].append(state_row(spec.key, key, state))
    if latest:
        views.load_tables(
            [(spec, rows[kind], deleted[kind]) for kind, spec in specs.items()],
            positions if positions is not None else {(source, stream, 0): StoredPosition(last_seq)},
            replace=True,
        )
        if progress:
            for name, count in read.items():
                if count:
                    progress(name, count)
    return read
