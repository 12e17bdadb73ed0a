"""Runs one processor against a key-value store; the part both runtimes share.

Each stored value is an *entry*: the processor's state for the key, plus what
the key remembers about the events already applied to it:
- ``marks``: per input stream (a topic partition, named where the record was
  first appended), an offset at or below which every record of the stream is
  done with for this key; ``past``: the offsets above it applied to the key. A
  runtime releases a stream's records in time order within a lateness bound, not
  always in offset order, and says with each record its stream's *floor*, the
  first offset not released yet: everything before it was, so the mark moves up
  to it and ``past`` keeps only what was applied out of order beyond it. After
  a crash every redelivered record is at or below its key's mark or in
  ``past``, however many there are. (A stream released in offset order keeps
  ``past`` empty: the mark is the highest offset applied.)
- ``seen``: the ids of the last few events applied, which catches the same event
  appended twice (a producer that retried), where offsets differ. Kept as their
  first 16 hex digits: 64 bits are plenty to tell 16 events apart, and every
  entry written (a changelog record on Kafka) carries them.
Both live inside the same value as the state, so one store write records them
atomically: a Kafka changelog record or a row in the embedded checkpoint.

Runtimes make outputs durable *before* they persist the writes from
``drain_writes`` (``fastci.runtime.contract.commit``). After a crash, an event whose state write was persisted is
recognised and skipped (its outputs were already durable); an event whose write
was lost is processed again and re-emits outputs with the same ids, which
consumers drop as duplicates.

An event may also write keys other than its partition key (compound keys it
owns). ``drain_writes`` lists those first and the partition keys, which carry the
marks, last. A runtime persists a batch's writes all or none: the embedded one in
one checkpoint transaction, the Kafka one as one record batch per changelog
partition (an owner and its compound keys share one). Were a compound key durable
without its owner's marks, the replay of an earlier event of the batch would read
what a later one wrote. (If the broker refuses a partition's batch whole, it goes
in several, in this order: then never a mark without the writes it stands for.)

A decision (an event a processor emits) can come back at a new offset long after it was
applied: its writer crashed after its outputs were durable and before its state was, and
emitted them again on replay. Between the two copies the reader's key may have applied any
number of other events (the copies are a whole batch apart in the writer's topic, and the
reader's merge puts other topics' records between them), so ``seen`` does not catch the
copy, and applied again to later state it makes a second, different answer under the same
id. So a runtime names the topics processors write (``remember``), and for an event of one
of them the driver keeps a marker under the key's owner (``applied_key``), written after
the key's own entry: the copy is dropped however late it comes.
"""

from __future__ import annotations

import traceback
from bisect import bisect_right, insort
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
from pydantic import BaseModel, ValidationError

from fastci.core.codec import InvalidEvent, encode
from fastci.core.dead_letters import FieldError
from fastci.core.events import Event, Record
from fastci.core.processor import KEY_SEPARATOR, Processor, compound_key, from_union
from fastci.runtime.contract import Store

_CACHE_LIMIT = 200_000  # decoded entries kept between batches
SEEN_ID_CHARS = 16
DECODE_SOURCE = "decode"
_APPLIED = "\x00applied"  # no state key part starts with NUL


def applied_key(owner: str, event_id: str) -> str:
    """The key marking that the event ``event_id`` was applied to ``owner``'s state."""
    return compound_key(owner, _APPLIED, event_id[:SEEN_ID_CHARS])


def is_applied_mark(key: str) -> bool:
    """Whether ``key`` is a driver's applied-event marker (runtime bookkeeping, not state)."""
    return f"{KEY_SEPARATOR}{_APPLIED}{KEY_SEPARATOR}" in key


class Origin(NamedTuple):
    """Where a record was first appended: its stream (topic/partition) and offset there, and the
    stream's floor when it is released (the first offset not released yet; None: the record's own,
    the stream being released in offset order)."""

    stream: str
    offset: int
    floor: int | None = None


@dataclass(slots=True)
class Entry:
    """A key's stored value. Mutable, and private to one driver: changed in place as events apply,
    which spares two allocations and a dict copy per event."""

    state: Record | None
    seen: list[str] = field(default_factory=list)
    marks: dict[str, int] = field(default_factory=dict)
    past: dict[str, list[int]] = field(default_factory=dict)  # per stream, offsets above its mark applied

    def applied(self, origin: Origin) -> bool:
        """Whether the record at ``origin`` was applied to this key already (or passed over)."""
        if origin.offset <= self.marks.get(origin.stream, -1):
            return True
        past = self.past.get(origin.stream)
        return past is not None and origin.offset in past

    def mark(self, origin: Origin) -> None:
        stream, offset, floor = origin
        if (floor is None or floor >= offset) and stream not in self.past:  # in offset order: the common case
            self.marks[stream] = offset
            return
        assert floor is not None
        mark = max(self.marks.get(stream, -1), floor - 1)
        # ``past`` is sorted: bisection keeps a mark O(log n) plus a move, however far the stream's
        # releases run ahead of its floor (a backlog of a busy key can hold thousands there)
        past = self.past.pop(stream, [])
        del past[: bisect_right(past, mark)]
        if offset > mark:
            insort(past, offset)
        run = 0
        while run < len(past) and past[run] == mark + 1:  # the released run up to the floor
            mark = past[run]
            run += 1
        del past[:run]
        self.marks[stream] = mark
        if past:
            self.past[stream] = past


def encode_entry(entry: Entry) -> bytes:
    document = {"state": entry.state, "seen": entry.seen, "marks": entry.marks}
    if entry.past:
        document["past"] = entry.past
    return orjson.dumps(document, default=_fields)


def _fields(value: object) -> dict[str, Any]:
    """A state model as orjson writes it: its fields, as ``model_dump()`` gives them (records have no
    custom serializers, aliases or extras), without building the dicts of every nested model first,
    which cost more than the rest of an entry's encoding. A model built by ``Record.trusted`` from
    values that are not exactly its fields goes through ``model_dump``, which writes only the fields."""
    if isinstance(value, BaseModel):
        fields = value.__dict__
        if len(fields) == len(type(value).model_fields):
            return fields
        return value.model_dump()
    raise TypeError(f"cannot encode {type(value).__name__} in a state entry")


def decode_entry(model: type[Record], raw: bytes) -> Entry:
    document = orjson.loads(raw)
    state = document["state"]
    return Entry(
        None if state is None else _validated(model, state),
        document["seen"],
        document.get("marks", {}),
        document.get("past", {}),
    )


def _validated(model: type[Record], state: Any) -> Record:
    try:
        return model.model_validate(state)
    except ValidationError:
        if not isinstance(state, dict):
            raise
        # Stored before its processor declared key spaces: the kind's value inside a union record.
        # It takes the key space's shape when the key is next written.
        upgraded = from_union(model, state)
        if upgraded == state:
            raise
        return model.model_validate(upgraded)


# A marker is an entry with no state: whatever reads a store's keys reads it as an empty key.
APPLIED_MARK = encode_entry(Entry(None))


def decode_state(raw: bytes) -> dict[str, Any] | None:
    """The plain state document of a stored entry (for views), without validation."""
    return orjson.loads(raw)["state"]


class Driver:
    """Applies events to one processor, buffering writes until the runtime drains them."""

    def __init__(
        self,
        processor: Processor[Any],
        store: Store,
        reports: frozenset[str] | None = None,
        remember: frozenset[str] = frozenset(),
    ) -> None:
        """``reports``: the input topics whose undecodable records this driver dead-letters (None:
        all of its inputs). A runtime gives each topic one reporter (``System.decode_reporter``),
        so a bad record lands on dead-letters once, not once per processor that reads it.
        ``remember``: the input topics whose events are marked applied by id for good (those
        processors write: ``System.written``), not only in the ``seen`` window."""
        self.processor = processor
        self._record_for = type(processor).record_for
        self.store = store
        self.reports = reports
        self.remember = remember
        self._entries: dict[str, Entry | None] = {}
        self._dirty: dict[str, None] = {}  # keys written this batch, in order
        self._applied: dict[str, None] = {}  # partition keys whose marks moved this batch
        self._marked: dict[str, bool] = {}  # applied-event markers read or written (True: written this batch)
        # Per event, the two questions every processor is asked. Most inherit both answers from
        # ``Processor``: then the driver skips the call to ``ignores`` and reads the key field itself.
        kind = type(processor)
        self._ignores = None if kind.ignores is Processor.ignores else processor.ignores
        self._key_fields = None if kind.partition_key is not Processor.partition_key else processor.partition_by

    @property
    def source(self) -> str:
        return f"processor:{self.processor.name}"

    def get(self, key: str) -> Record | None:
        """The StateReader the processor sees: this batch's writes first, then the store."""
        entry = self._entry(key)
        return None if entry is None else entry.state

    def handle_decoded(self, item: Event | InvalidEvent, origin: Origin | None = None) -> list[Event]:
        """Apply a decoded record; one that did not decode is dead-lettered (as source 'decode', so
        every processor that reads it reports it under one id)."""
        if isinstance(item, InvalidEvent):
            if self.reports is not None and item.topic not in self.reports:
                return []  # another processor reading the topic reports it
            return [item.dead_letter(DECODE_SOURCE, None if origin is None else origin.offset)]
        return self.handle(item, origin)

    def handle(self, event: Event, origin: Origin | None = None) -> list[Event]:
        """Apply one event; return the events it emits (a dead letter if the processor failed)."""
        processor = self.processor
        if self._ignores is not None and self._ignores(event):
            return []
        if self._key_fields is None:
            key = processor.partition_key(event)
        else:
            key = getattr(event, self._key_fields.get(event.TOPIC) or event.KEY)
            if type(key) is not str:
                key = str(key)
        short_id = event.id[:SEEN_ID_CHARS]
        entries = self._entries
        own = entries[key] if key in entries else self._entry(key)
        if own is not None and (short_id in own.seen or (origin is not None and own.applied(origin))):
            return []
        marker = applied_key(key, event.id) if event.TOPIC in self.remember else None
        if marker is not None and self._was_marked(marker):
            return []
        try:
            step = processor.process(self, event)
            outputs = list(step.outputs)
        except Exception as error:  # a processor bug must not stop the stream or touch state
            reason = "".join(traceback.format_exception_only(error)).strip()
            refused = InvalidEvent(event.TOPIC, [FieldError(field="", reason=reason)], encode(event))
            outputs = [refused.dead_letter(self.source, None if origin is None else origin.offset)]
        else:
            dirty = self._dirty
            for written, state in step.writes.items():
                previous = entries[written] if written in entries else self._entry(written)
                if previous is None:
                    entries[written] = Entry(state)
                else:
                    previous.state = state
                dirty[written] = None
        own = entries.get(key)
        if own is None:
            own = entries[key] = Entry(None)
        seen = own.seen
        seen.append(short_id)
        if len(seen) > processor.dedup_window:
            del seen[0]
        if origin is not None:
            own.mark(origin)
        self._applied[key] = None
        if marker is not None:
            self._marked[marker] = True
        return outputs

    def _was_marked(self, marker: str) -> bool:
        if marker not in self._marked:
            if self.store.get(marker) is None:
                return False
            self._marked[marker] = False
        return True

    def drain_writes(self) -> dict[str, bytes]:
        """Encoded entries changed since the last drain, partition keys after the other keys they
        own, applied-event markers last; the runtime persists them in this order."""
        order = [key for key in self._dirty if key not in self._applied] + list(self._applied)
        writes = {key: encode_entry(self._entries[key]) for key in order}  # type: ignore[arg-type]
        for marker, new in self._marked.items():
            if new:
                writes[marker] = APPLIED_MARK
                self._marked[marker] = False
        self._dirty.clear()
        self._applied.clear()
        if len(self._entries) > _CACHE_LIMIT:
            self._entries.clear()
        if len(self._marked) > _CACHE_LIMIT:
            self._marked.clear()
        return writes

    def forget_cache(self) -> None:
        """Drop decoded entries (after a rebalance the store may hold newer values)."""
        self._entries.clear()
        self._dirty.clear()
        self._applied.clear()
        self._marked.clear()

    def _entry(self, key: str) -> Entry | None:
        if key in self._entries:
            return self._entries[key]
        raw = self.store.get(key)
        entry = None if raw is None else decode_entry(self._record_for(key), raw)
        self._entries[key] = entry
        return entry
