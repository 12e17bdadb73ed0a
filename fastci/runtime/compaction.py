"""Compaction of the embedded log: of the events a later one replaces (``Event.REPLACED_BY_SAME``,
e.g. a test's evidence), keep only the latest, so the log grows with the code, not with the runs.

A record is removed only when a later record of its topic carries the same replacing fields, and
only below every reader's stored position (the processors' in the checkpoint, the views' in
``views.duckdb``): no reader is ever inside a removed record, and every processor has already
applied it. Offsets and byte positions stay valid (``TopicLog.remove`` turns the records into
gaps). A processor replaying the log from the start reaches the same state, since each of these
events replaces its predecessor there too; the decisions made between the two are not replayed.
Compaction holds the runtime lock; a reader starting from the beginning meanwhile (a first views
refresh) either reads a removed record whole or steps over its gap.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import orjson

from fastci.core.events import Event
from fastci.core.system import System
from fastci.runtime.embedded import DataDir
from fastci.runtime.log import TopicLog


@dataclass(frozen=True)
class Compacted:
    topic: str
    records: int  # live records before
    removed: int
    upto: int  # records at offsets below this were eligible (every reader had passed them)
    bytes_before: int  # disk use of the topic's segments (allocated blocks)
    bytes_after: int


def compaction_key(model: type[Event], payload: bytes) -> tuple | None:
    """The values of the model's replacing fields in a record (defaults where absent), or None for a
    record that does not parse (it is left alone: a dead letter's story)."""
    try:
        document = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(document, dict):
        return None
    fields = model.model_fields
    return tuple(document.get(name, fields[name].default) for name in model.REPLACED_BY_SAME)


def compact_topic(log: TopicLog, model: type[Event], readers: Mapping[str, int]) -> Compacted:
    """Remove the records of ``log`` a later record replaces, below every reader's next offset."""
    upto = min(readers.values(), default=0)
    before = disk_bytes(log.dir)
    latest: dict[tuple, int] = {}
    candidates: list[tuple[int, tuple]] = []
    records = 0
    for record in log.read():
        records += 1
        key = compaction_key(model, record.payload)
        if key is None:
            continue
        latest[key] = record.offset
        if record.offset < upto:
            candidates.append((record.offset, key))
    superseded = {offset for offset, key in candidates if latest[key] > offset}
    removed = log.remove(superseded) if superseded else 0
    return Compacted(log.topic, records, removed, upto, before, disk_bytes(log.dir))


def disk_bytes(path: Path) -> int:
    """Bytes a file, or the files under a directory, take on disk (holes punched in them do not count)."""
    if not path.is_dir():
        return path.stat().st_blocks * 512 if path.exists() else 0
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total


def processor_readers(data: DataDir, system: System, topic: str) -> dict[str, int]:
    """The next offset of ``topic`` each processor reading it has yet to apply (0: none applied)."""
    checkpoint = data.checkpoint()
    try:
        return {
            f"processor:{cls.name}": checkpoint.position(f"processor:{cls.name}", topic).offset
            for cls in system.processors
            if topic in cls.inputs
        }
    finally:
        checkpoint.close()


def compactable_topics(system: System) -> dict[str, type[Event]]:
    return {topic: model for topic, model in system.topics.items() if model.REPLACED_BY_SAME}
