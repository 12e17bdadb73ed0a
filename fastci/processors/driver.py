"""Runs one processor against a key-value store; the part both runtimes share.

Each stored value is an *entry*: the processor's state for the key plus the ids
of the last few events applied to that key (the dedup window). Because the
window is inside the same value as the state, one store write records both
atomically: a Kafka changelog record or a row in the embedded checkpoint.

Runtimes make outputs durable *before* they persist the writes from
``drain_writes``. After a crash, an event whose state write was persisted is
recognised by the window and skipped (its outputs were already durable); an
event whose write was lost is processed again and re-emits outputs with the
same ids, which consumers drop as duplicates.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from fastci.events import Event, InvalidEvent, decode, encode
from fastci.events.base import Record
from fastci.events.outputs import FieldError
from fastci.processors.base import Processor

_CACHE_LIMIT = 200_000  # decoded entries kept between batches
DECODE_SOURCE = "decode"


class RawStore(Protocol):
    def get(self, key: str) -> bytes | None: ...


@dataclass(frozen=True, slots=True)
class Entry:
    state: Record | None
    seen: tuple[str, ...]


def encode_entry(entry: Entry) -> bytes:
    state = None if entry.state is None else entry.state.model_dump()
    return orjson.dumps({"state": state, "seen": entry.seen})


def decode_entry(model: type[Record], raw: bytes) -> Entry:
    document = orjson.loads(raw)
    state = document["state"]
    return Entry(None if state is None else model.model_validate(state), tuple(document["seen"]))


def decode_state(raw: bytes) -> dict[str, Any] | None:
    """The plain state document of a stored entry (for views), without validation."""
    return orjson.loads(raw)["state"]


class Driver:
    """Applies events to one processor, buffering writes until the runtime drains them."""

    def __init__(self, processor: Processor[Any], store: RawStore) -> None:
        self.processor = processor
        self.store = store
        self._entries: dict[str, Entry | None] = {}
        self._dirty: set[str] = set()

    @property
    def source(self) -> str:
        return f"processor:{self.processor.name}"

    def get(self, key: str) -> Record | None:
        """The StateReader the processor sees: this batch's writes first, then the store."""
        entry = self._entry(key)
        return None if entry is None else entry.state

    def handle_record(self, topic: str, payload: bytes, offset: int | None = None) -> list[Event]:
        """Decode and apply one record as read from a topic; a record that does not decode is
        dead-lettered (as source 'decode', so every processor that reads it reports it once)."""
        try:
            event = decode(topic, payload)
        except InvalidEvent as error:
            return [error.dead_letter(DECODE_SOURCE, offset)]
        return self.handle(event, offset)

    def handle(self, event: Event, offset: int | None = None) -> list[Event]:
        """Apply one event; return the events it emits (a dead letter if the processor failed)."""
        key = self.processor.partition_key(event)
        own = self._entry(key)
        if own is not None and event.id in own.seen:
            return []
        try:
            step = self.processor.process(self, event)
            outputs = list(step.outputs)
        except Exception as error:  # a processor bug must not stop the stream or touch state
            reason = "".join(traceback.format_exception_only(error)).strip()
            refused = InvalidEvent(event.TOPIC, [FieldError(field="", reason=reason)], encode(event))
            step, outputs = None, [refused.dead_letter(self.source, offset)]
        if step is not None:
            for key, state in step.writes.items():
                previous = self._entry(key)
                self._put(key, Entry(state, () if previous is None else previous.seen))
        own = self._entry(key)
        seen = (() if own is None else own.seen)[-(self.processor.dedup_window - 1) :] + (event.id,)
        self._put(key, Entry(None if own is None else own.state, seen))
        return outputs

    def drain_writes(self) -> dict[str, bytes]:
        """Encoded entries changed since the last drain; the runtime persists them."""
        writes = {key: encode_entry(self._entries[key]) for key in self._dirty}  # type: ignore[arg-type]
        self._dirty.clear()
        if len(self._entries) > _CACHE_LIMIT:
            self._entries.clear()
        return writes

    def forget_cache(self) -> None:
        """Drop decoded entries (after a rebalance the store may hold newer values)."""
        self._entries.clear()
        self._dirty.clear()

    def _entry(self, key: str) -> Entry | None:
        if key in self._entries:
            return self._entries[key]
        raw = self.store.get(key)
        entry = None if raw is None else decode_entry(self.processor.state_model, raw)
        self._entries[key] = entry
        return entry

    def _put(self, key: str, entry: Entry) -> None:
        self._entries[key] = entry
        self._dirty.add(key)

