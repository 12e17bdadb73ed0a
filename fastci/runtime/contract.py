"""What every runtime promises, and the one order in which it commits what it applied.

A runtime moves events; processors decide (``fastci.core.processor``). Every backend (the memory
runtime, the embedded one, the Kafka worker) drives each processor through a ``Driver`` over a
``Store`` of its own, and promises:

1. **Each event applied once per processor**: a record delivered again, the same event appended
   twice, or a decision appended again by a writer that crashed changes nothing (the driver's marks,
   ``seen`` window and applied markers, kept in the same store write as the state).
2. **In the ordering rule's order**: a processor's inputs merged by event time
   (``fastci.runtime.ordering``; docs/topology.md, "Ordering rule"). The memory runtime is the one
   exception, and says so: it delivers each event as it is published, breadth first.
3. **Outputs durable before the state that made them** (``commit`` below): after a crash, an event
   whose state is durable is skipped, and one whose state is lost is applied again and makes the
   same outputs, with the same ids, which their readers drop.
4. **Positions** (where each input is read up to) durable with the state they stand for, so a
   restart resumes where the state ends.
5. **Bad input on dead letters**: a record that does not decode, or an event a processor fails on,
   becomes a ``DeadLetter`` and touches no state.

``tests/test_runtime_contract.py`` holds every backend to these promises, and
``tests/test_store_contract.py`` every ``Store``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol, TypeVar

from fastci.core.events import Event


class Store(Protocol):
    """A processor's raw key-value store: encoded entries (``fastci.runtime.driver``) by state key.
    Implementations: the embedded checkpoint's ``ProcessorStore`` (SQLite), the memory runtime's
    ``BytesStore``, the Kafka runtime's ``TableStore`` (a faust Table)."""

    def get(self, key: str) -> bytes | None: ...


class Runtime(Protocol):
    """A backend as its user drives it: publish input events, apply them, read what came of it.
    ``EmbeddedRuntime`` and ``MemoryRuntime`` implement it; the Kafka worker is driven through the
    broker (``tests/test_runtime_contract.py`` wraps it in the same shape)."""

    def publish(self, events: Iterable[Event]) -> None:
        """Append ``events`` to their input topics."""

    def apply(self) -> None:
        """Apply everything published so far, and what it causes, before returning."""

    def events(self, topic: str) -> list[Event]:
        """Every event of ``topic``, in the order it was appended."""


class Drains(Protocol):
    """What a commit takes writes from: a ``Driver`` (state entries) or the Kafka runtime's
    ``Positions`` (read positions, stored as entries of the same store)."""

    def drain_writes(self) -> dict[str, bytes]: ...


Where = TypeVar("Where")  # where a runtime persists a drain's writes (a processor name, a Table)
Step = TypeVar("Step")  # what a runtime's step returns (None; an awaitable on an async runtime)


def commit(
    outputs: Any,
    drains: Iterable[tuple[Where, Drains]],
    make_durable: Callable[[Any], Step],
    persist: Callable[[list[tuple[Where, Mapping[str, bytes]]]], Step],
) -> Iterator[Step]:
    """The commit order, one step at a time: a runtime runs each step to its end before asking for
    the next (an async runtime awaits what each yields; a sync one iterates).

    1. Take the writes of every drain, in the order given: processors' state before the positions
       that stand for it. A driver gives the keys an event writes besides its partition key first,
       then the partition keys, which carry the marks, then applied-event markers: were a partition
       key durable without the keys it owns, the replay of an earlier event would read what a later
       one wrote. Taken before anything waits, because a rebalance may clear the drivers meanwhile.
    2. Make ``outputs`` durable (appended and synced; acknowledged by the broker). A runtime that
       appends each step's outputs as it goes, before it commits, passes what is left (nothing).
    3. Persist the writes, all or none (one transaction; one record batch per changelog partition),
       in the order taken.
    """
    writes = [(where, drain.drain_writes()) for where, drain in drains]
    yield make_durable(outputs)
    yield persist([(where, changed) for where, changed in writes if changed])
