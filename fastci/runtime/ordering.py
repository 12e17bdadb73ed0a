"""The ordering rule's engine, in every runtime that keeps it: streams of waiting records and the merge.

A processor's merge holds one ``Stream`` per input stream (a topic in the embedded log; a topic's
origin partition on Kafka) and releases the least head across them while it sorts before what any
stream may still be given: its *limit*. A runtime says only that (``Merge.release(limit)``), from
what it knows: whether a stream is read to its end, its writers' low watermarks, the lateness bound
(``lateness_limit``, ``writers_limit``). The embedded runtime's ``_ProcessorRunner`` and the Kafka
worker's ``Ordering`` are those two functions and nothing more of the rule (docs/topology.md,
"Ordering rule").

A producer's topic is released in time order within ``LATENESS_MS`` (``System.in_time_order``); a
topic processors write, in the order it was appended. The queue keeps what waits in log order, and
only once a record comes that sorts before one already waiting does it take a heap, until everything
read has gone: most producers append in time order, and a deque is cheaper than a heap. Whatever
the order of release, the first record still waiting in log order is at hand: the stream's floor,
which a runtime stores as its position and the driver's marks use (``fastci.runtime.driver``).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar

from fastci.core.system import LATENESS_MS, SortKey

NOTHING_LEFT: SortKey = (float("inf"),)  # a limit: the stream will hold nothing more
ANYTHING: SortKey = (float("-inf"),)  # a limit: the stream may still hold anything


class Waiting(Protocol):
    key: SortKey  # ``merge_key``
    released: bool  # set when it goes out of log order: the queue drops it from its log order later


W = TypeVar("W", bound=Waiting)


class ReleaseQueue(Generic[W]):
    """One stream's waiting records: ``pop`` gives the next to release, ``first`` the stream's floor."""

    __slots__ = ("count", "heap", "in_time_order", "order", "pushed")

    def __init__(self, in_time_order: bool) -> None:
        self.in_time_order = in_time_order
        self.order: deque[W] = deque()  # waiting, in log order (released ones dropped lazily)
        self.heap: list[tuple[SortKey, int, W]] = []  # waiting, least key first, while out of order
        self.count = 0  # waiting
        self.pushed = 0  # ties in the heap go in arrival order (a record sent twice has one key)

    def __len__(self) -> int:
        return self.count

    def push(self, item: W) -> None:
        if self.heap:
            self.pushed += 1
            heapq.heappush(self.heap, (item.key, self.pushed, item))
        elif self.in_time_order and self.order and item.key < self.order[-1].key:
            # out of order among what waits: a heap until it has let everything go
            self.heap = [(waiting.key, self.pushed + n, waiting) for n, waiting in enumerate(self.order, 1)]
            self.pushed += len(self.heap) + 1
            self.heap.append((item.key, self.pushed, item))
            heapq.heapify(self.heap)
        self.order.append(item)
        self.count += 1

    def head(self) -> SortKey:
        """The key of the record that goes next."""
        return self.heap[0][0] if self.heap else self.order[0].key

    def pop(self) -> W:
        """The record that goes next."""
        if self.heap:
            _, _, item = heapq.heappop(self.heap)
            item.released = True
            if not self.heap:  # everything read has gone: in log order again
                self.order.clear()
        else:
            item = self.order.popleft()
        self.count -= 1
        return item

    def first(self) -> W | None:
        """The first record in log order still waiting (None: nothing waits)."""
        order = self.order
        while order and order[0].released:
            order.popleft()
        return order[0] if order else None


class Source(Protocol):
    """A stream's waiting records as a merge sees them (an embedded window, a worker's stream)."""

    in_time_order: bool

    def __len__(self) -> int: ...

    def head(self) -> SortKey: ...

    def pop(self) -> Any: ...


S = TypeVar("S", bound=Source)


def merged(sources: Sequence[S], bound: SortKey, limit: Callable[[S], SortKey]) -> Iterator[tuple[S, Any]]:
    """A processor's merge, in both runtimes: each source's next record, least key first, while it
    sorts before ``bound``, the least key a record still to come may have (as the runtime knows it:
    its writers' low watermarks, the lateness bound). A source in log order that runs empty may
    still be given any record from its ``limit`` on: that joins the bound. Yields (source, record),
    the record popped just before."""
    heads = [(source.head(), n, source) for n, source in enumerate(sources) if len(source)]
    if len(heads) == 1:  # the common case (one input with records waiting): no heap to keep
        source = heads[0][2]
        while len(source) and source.head() < bound:
            yield source, source.pop()
        return
    heapq.heapify(heads)
    while heads and heads[0][0] < bound:
        _, n, source = heads[0]
        item = source.pop()
        if len(source):
            heapq.heapreplace(heads, (source.head(), n, source))
        else:
            heapq.heappop(heads)
            if not source.in_time_order:
                bound = min(bound, limit(source))
        yield source, item


def limit_after(time_ms: float, index: int) -> SortKey:
    """The limit of a stream that may still hold records of topic ``index`` timed ``time_ms`` or
    later: a head sorts before all of them only when it is earlier, or as early from a topic
    earlier in the processor's order (a key longer than the limit's, with its prefix, sorts after)."""
    return (time_ms, index)


def writers_limit(earliest: float, index: int) -> SortKey:
    """The limit of a stream read to its end whose writers may still emit records timed ``earliest``
    or later (infinite: they hold nothing; a producer's topic has no writer)."""
    return NOTHING_LEFT if earliest == float("inf") else limit_after(earliest, index)


class Stream(Generic[W]):
    """One input stream of a merge: its waiting records in a ``ReleaseQueue``, in log order or, for a
    producer's topic (``in_time_order``), in time order within ``LATENESS_MS``, and the latest time
    the runtime has seen in it (what the lateness bound counts from)."""

    def __init__(self, in_time_order: bool) -> None:
        self.in_time_order = in_time_order
        self.waiting: ReleaseQueue[W] = ReleaseQueue(in_time_order)
        self.latest = float("-inf")

    def __len__(self) -> int:
        return len(self.waiting)

    def saw(self, time_ms: float) -> None:
        if time_ms > self.latest:
            self.latest = time_ms

    def push(self, item: W) -> None:
        self.waiting.push(item)

    def head(self) -> SortKey:
        return self.waiting.head()

    def pop(self) -> W:
        return self.waiting.pop()

    def first(self) -> W | None:
        return self.waiting.first()


def lateness_limit(stream: Stream, index: int) -> SortKey:
    """The limit of a stream not read to its end: in time order, records up to ``LATENESS_MS`` earlier
    than the latest seen may still come; in log order (or nothing seen yet), anything."""
    if not stream.in_time_order or stream.latest == float("-inf"):
        return ANYTHING
    return limit_after(stream.latest - LATENESS_MS, index)


T = TypeVar("T", bound=Stream)


class Merge(Generic[T]):
    """One processor's input streams, released in the order of their sort keys (``streams``: by a
    name the runtime chooses)."""

    def __init__(self) -> None:
        self.streams: dict[str, T] = {}

    def held(self) -> int:
        return sum(len(s) for s in self.streams.values())

    def release(self, limit: Callable[[T], SortKey]) -> Iterator[tuple[T, Any]]:
        """The held records that may go now, least first, each with its stream: a head goes when it
        sorts before the limit of every stream that is empty or released in time order (what it may
        still be given). ``limit`` is asked only about those."""
        streams = list(self.streams.values())
        if not any(len(s) for s in streams):
            return
        bound = min((limit(s) for s in streams if not len(s) or s.in_time_order), default=NOTHING_LEFT)
        yield from merged(streams, bound, limit)

    def low_watermark(self, limit: Callable[[T], SortKey]) -> float:
        """The earliest time this merge may still release a record at (infinite when it may release
        nothing more): what the outputs it has yet to make can be timed, at the earliest."""
        earliest = float("inf")
        for s in self.streams.values():
            if not len(s):
                earliest = min(earliest, limit(s)[0])
            else:
                earliest = min(earliest, s.head()[0], limit(s)[0] if s.in_time_order else float("inf"))
        return earliest
