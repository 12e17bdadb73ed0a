"""The processor contract: pure functions from (state, event) to (writes, outputs).

A processor holds logic and nothing else. It reads the state of its own keys
through a ``StateReader`` (a faust Table partition in the Kafka runtime, a local
store in the embedded one) and returns a ``Step``: the state values to write and
the events to emit. No I/O, no clock, no randomness: the same events in the same
order give the same outputs in every runtime. Runtimes apply the step; a
processor never mutates anything itself.

Rules a processor keeps, so that runtimes can give "no loss, no duplicates":
- an output event's id derives from the id of the input event that caused it;
- a write to a key other than the event's own key must be idempotent (a set, not
  an increment), because after a crash only the event's own key remembers that
  the event was applied (see ``fastci.processors.driver``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Generic, Protocol, TypeVar

from fastci.events import Event
from fastci.events.base import Record

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


class Processor(ABC, Generic[S]):
    """Subclasses name themselves, their input and output topics, and their state model."""

    name: ClassVar[str]
    inputs: ClassVar[tuple[str, ...]]
    outputs: ClassVar[tuple[str, ...]]
    state_model: ClassVar[type[Record]]
    state_key: ClassVar[str] = "key"  # what a state key is, as a column name in the views
    # How many recent event ids each key remembers, so a redelivered event changes nothing.
    dedup_window: ClassVar[int] = 16

    @abstractmethod
    def process(self, state: StateReader[S], event: Event) -> Step[S]:
        """Turn one event into writes and outputs, reading only ``state``."""
