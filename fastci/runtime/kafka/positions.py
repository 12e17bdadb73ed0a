"""Where each route is in every partition it consumes, kept next to its state.

Why we keep our own positions instead of trusting faust's committed offsets:
around a rebalance faust can hand an agent a record fetched before the rebalance,
past a range it has not delivered (faust-streaming issues #216, #221), and it then
records the range as a "gap" it may commit past: the two-worker fault test
(tests/test_kafka_faults.py) lost runs that way, and docs/kafka.md has the figures.

Our topics have no legitimate gaps (no compaction, no transactions), so an offset
past the expected one means records were skipped. The route takes nothing more
from that partition and the runtime seeks the consumer back to the expected
offset; records at or below it are duplicates and are dropped. Before a route has
stored anything for a partition it expects the first offset the log still holds
(the runtime reads it when the partition is assigned), not whatever record faust
delivers first: after a rebalance faust delivered a worker's own topic from
offset 833, the route took that as its start, and 833 forwarded results were
never applied (tests/test_kafka_faults.py, one run in six). Positions are
stored under a reserved key in the route's own Table, in the changelog partition
of the input partition, written after the state of the same batch: Kafka keeps
one partition's records in order, so a stored position never runs ahead of the
state it covers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from enum import Enum
from typing import Protocol

POSITION_PREFIX = "\x00position\x1f"  # no partition key starts with NUL


class Verdict(Enum):
    NEXT = "next"  # the expected record: apply it
    DUPLICATE = "duplicate"  # already applied (redelivered after a restart or a seek)
    GAP = "gap"  # records before it were skipped: rewind


class Store(Protocol):
    def get(self, key: str) -> bytes | None: ...


def position_key(route: str, topic: str, partition: int) -> str:
    return f"{POSITION_PREFIX}{route}\x1f{topic}\x1f{partition}"


def position_partition(key: str) -> int | None:
    """The partition a position key belongs to, or None when ``key`` is not a position key."""
    if not key.startswith(POSITION_PREFIX):
        return None
    return int(key.rsplit("\x1f", 1)[1])


class Positions:
    """The next offset one route expects in each partition, read through from its store."""

    def __init__(self, route: str, store: Store, log_starts: Mapping[tuple[str, int], int] | None = None) -> None:
        """``log_starts``: (topic, partition) -> the first offset the log still holds, shared by
        every route of a consumer and kept up to date by the runtime (retention moves it)."""
        self.route = route
        self.store = store
        self.log_starts = {} if log_starts is None else log_starts
        self._next: dict[tuple[str, int], int] = {}
        self._dirty: set[tuple[str, int]] = set()
        # Records admitted but held for event-time order, not applied yet: the stored position stays
        # at the first of them, so a crash replays what was held (in admission order, with the
        # offsets released out of order until the first one is).
        self._held: dict[tuple[str, int], deque[int]] = {}
        self._released: dict[tuple[str, int], set[int]] = {}

    def expected(self, topic: str, partition: int) -> int | None:
        """The next offset to apply: the stored position, else the start of the log; None when
        neither is known."""
        where = (topic, partition)
        stored = self._next.get(where)
        if stored is None:
            raw = self.store.get(position_key(self.route, topic, partition))
            if raw is not None:
                stored = self._next[where] = int(raw)
        start = self.log_starts.get(where)
        if stored is None or start is None:
            return stored if start is None else start
        return max(stored, start)  # what retention deleted before it was applied cannot be read

    def admit(self, topic: str, partition: int, offset: int) -> Verdict:
        """Judge one consumed record; a NEXT record advances the position."""
        expected = self.expected(topic, partition)
        # With nothing stored and no known log start the first record is taken as the start.
        if expected is not None and offset < expected:
            return Verdict.DUPLICATE
        if expected is not None and offset > expected:
            return Verdict.GAP
        self._next[(topic, partition)] = offset + 1
        self._dirty.add((topic, partition))
        return Verdict.NEXT

    def hold(self, topic: str, partition: int, offset: int) -> None:
        """An admitted record waits to be applied: until ``release``, the stored position stays at it."""
        self._held.setdefault((topic, partition), deque()).append(offset)

    def release(self, topic: str, partition: int, offset: int) -> None:
        """A held record was applied."""
        where = (topic, partition)
        self._released.setdefault(where, set()).add(offset)
        self._dirty.add(where)

    def drain_writes(self) -> dict[str, bytes]:
        """Positions changed since the last drain, as store writes: the next offset to apply, or the
        first record still held when one is."""
        writes = {
            position_key(self.route, topic, partition): str(self._stored(topic, partition)).encode()
            for topic, partition in sorted(self._dirty)
        }
        self._dirty.clear()
        return writes

    def _stored(self, topic: str, partition: int) -> int:
        where = (topic, partition)
        held = self._held.get(where)
        if held:
            released = self._released[where] if where in self._released else set()
            while held and held[0] in released:
                released.discard(held.popleft())
            if held:
                return held[0]
        return self._next[where]

    def forget(self) -> None:
        """Drop cached positions and what was held (after a rebalance the store holds the truth)."""
        self._next.clear()
        self._dirty.clear()
        self._held.clear()
        self._released.clear()
