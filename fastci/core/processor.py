"""The processor contract: pure functions from (state, event) to (writes, outputs).

A processor holds logic and nothing else. It reads the state of its own keys
through a ``StateReader`` (a faust Table partition in the Kafka runtime, a local
store in the embedded one) and returns a ``Step``: the state values to write and
the events to emit. No I/O, no clock, no randomness: the same events in the same
order give the same outputs in every runtime. Runtimes apply the step; a
processor never mutates anything itself.

Partitioning: each event is handled under its *partition key*, the topic's key
unless ``partition_by`` names another field for that topic (the Kafka runtime then
repartitions the topic by that field first). A processor may read and write any
state key it *owns* for that partition key: the partition key itself, or a
compound key ``compound_key(partition_key, ...)``. The Kafka runtime stores a
compound key in the partition of its first part, so everything one partition
key owns sits together on one worker.

Rules a processor keeps, so that runtimes can give "no loss, no duplicates":
- an output event's id derives from the id of the input event that caused it;
- a write to a key other than the partition key must be idempotent (a set, not
  an increment), because after a crash only the partition key's entry remembers
  that the event was applied (see ``fastci.runtime.driver``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from fastci.core.events import Event, Record

S = TypeVar("S", bound=Record)


class StateReader(Protocol[S]):
    def get(self, key: str) -> S | None:
        """The state stored under ``key``, or None when the key has none yet."""
        ...


@dataclass(frozen=True)
class Step(Generic[S]):
    """What one event did: state values to store (None deletes a key) and events to emit."""

    writes: Mapping[str, S | None] = field(default_factory=dict)
    outputs: Sequence[Event] = ()


class Transaction(Generic[S]):
    """Read-your-own-writes within one event: reads see the writes this event made so far, then the
    store; ``writes`` is what the event's ``Step`` returns. (Across events of a batch the runtime's
    driver does the same for the writes it has not persisted yet.)"""

    __slots__ = ("state", "writes")

    def __init__(self, state: StateReader[S]) -> None:
        self.state = state
        self.writes: dict[str, S | None] = {}

    def get(self, key: str) -> S | None:
        return self.writes[key] if key in self.writes else self.state.get(key)

    def set(self, key: str, value: S | None) -> None:
        """Store ``value`` under ``key`` (None deletes it) when the event's step is applied."""
        self.writes[key] = value


class UnitOfWork(Transaction[S]):
    """One event's work on a processor's state: reads see the writes it made so far, then the store
    (``Transaction``); it collects the events to emit; ``step()`` is what ``process`` returns. A
    processor whose handling of an event spans several functions passes one of these (or a subclass
    with its domain's reads and writes) instead of threading state, writes and outputs apart."""

    __slots__ = ("outputs",)

    def __init__(self, state: StateReader[S]) -> None:
        super().__init__(state)
        self.outputs: list[Event] = []

    def emit(self, *events: Event) -> None:
        self.outputs.extend(events)

    def step(self) -> Step[S]:
        return Step(writes=self.writes, outputs=self.outputs)


KEY_SEPARATOR = "\x1f"  # cannot occur in a validated name


def compound_key(owner: str, *parts: str) -> str:
    """A state key owned by ``owner`` (a partition key), e.g. compound_key(repo, function)."""
    return KEY_SEPARATOR.join((owner, *parts))


def owner_of(key: str) -> str:
    """The partition key that owns a state key."""
    return key.split(KEY_SEPARATOR, 1)[0]


R = TypeVar("R", bound=Record)


@dataclass(frozen=True)
class KeySpace(Generic[R]):
    """One kind of state a processor keeps: its keys, ``compound_key(owner, kind, *parts)`` (the
    partition key itself when ``kind`` is empty), and the record each holds. A processor that keeps
    several kinds declares one each (``Processor.key_spaces``) rather than one record with a field
    per kind: the driver decodes a key's value as its space's record, and the views load each space
    into a table of its own."""

    kind: str
    record: type[R]
    parts: tuple[str, ...] = ()  # what follows the kind in a key, by name (for readers of the code and docs)

    def key(self, owner: str, *parts: str) -> str:
        return compound_key(owner, self.kind, *parts) if self.kind else owner

    def get(self, state: StateReader[Any], key: str) -> R | None:
        """The record stored under ``key`` (one of this space's keys), or None."""
        return state.get(key)


def from_union(record: type[Record], state: dict[str, Any]) -> dict[str, Any]:
    """A stored state in the shape ``record`` reads, from the shape it had before its processor
    declared key spaces: one union record per processor, every kind's fields present and those of
    other kinds None (or empty). Fields that are None go (``record``'s defaults stand for them), and
    so do empty ones ``record`` lacks. What is left, when it is one field ``record`` lacks, was the
    kind's value under the union: the record itself (a dict of its fields), or the value of its one
    field. A record whose own fields changed shape says how in ``from_union_fields``. Anything else
    is returned as it is, for validation to refuse with its own error (a state in the record's own
    shape too: the views pass every state through here, most of them already new)."""
    fields = record.model_fields
    if state.keys() <= fields.keys():  # already the record's shape: a union always has other kinds' fields
        return state
    kept = {
        name: value for name, value in state.items() if value is not None and (name in fields or value not in ([], {}))
    }
    if len(kept) == 1:
        ((name, value),) = kept.items()
        if name not in fields:
            if isinstance(value, dict) and set(value) <= set(fields):
                kept = value
            elif len(fields) == 1:
                kept = {next(iter(fields)): value}
    upgrade = getattr(record, "from_union_fields", None)
    return upgrade(kept) if upgrade is not None else kept


def kind_of(key: str) -> str:
    """The kind of a state key: its part after the owner ("" for a partition key itself)."""
    parts = key.split(KEY_SEPARATOR, 2)
    return parts[1] if len(parts) > 1 else ""


class MarksOnly(Record):
    """What the partition key of a processor with key spaces holds, unless it declares a space for
    it: nothing but the driver's marks (its entry's state is None)."""


class Processor(ABC, Generic[S]):
    """Subclasses name themselves, their input and output topics, and their state: one record
    (``state_model``) or several kinds of key, each with its own record (``key_spaces``)."""

    name: ClassVar[str]
    inputs: ClassVar[tuple[str, ...]]
    outputs: ClassVar[tuple[str, ...]]
    state_model: ClassVar[type[Record] | None] = None
    key_spaces: ClassVar[tuple[KeySpace[Any], ...]] = ()
    state_key: ClassVar[str] = "key"  # what a state key is, as a column name in the views
    _records: ClassVar[dict[str, type[Record]]] = {}  # key space kind -> its record
    # How many recent event ids each key remembers, so a redelivered event changes nothing.
    dedup_window: ClassVar[int] = 16
    # Input topic -> event field to partition by, where it is not the topic's own key.
    partition_by: ClassVar[Mapping[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._records = {space.kind: space.record for space in cls.key_spaces}

    @classmethod
    def record_for(cls, key: str) -> type[Record]:
        """The record a state key holds: its key space's, else the processor's ``state_model``."""
        if cls.key_spaces:
            kind = kind_of(key)
            found = cls._records.get(kind)
            if found is not None:
                return found
            if not kind or kind.startswith("\x00"):  # the partition key's marks; the driver's own markers
                return MarksOnly
            raise KeyError(f"{cls.name}: state key {key!r} is of no declared key space ({kind!r})")
        assert cls.state_model is not None, f"{cls.name} declares neither state_model nor key_spaces"
        return cls.state_model

    def ignores(self, event: Event) -> bool:
        """Whether this processor does nothing with ``event`` whatever its state (a result of a kind it
        never reads). It must depend on the event alone: the driver then skips the event without
        reading or writing its key's entry, so it leaves no dedup record (doing nothing twice, after a
        crash or for a duplicate, is harmless), and an import of a plain repository's results does not
        write a row per result into processors that only read a fleet's."""
        return False

    def partition_key(self, event: Event) -> str:
        field = self.partition_by.get(event.TOPIC)
        return event.key if field is None else str(getattr(event, field))

    @abstractmethod
    def process(self, state: StateReader[S], event: Event) -> Step[S]:
        """Turn one event into writes and outputs, reading only ``state``."""
