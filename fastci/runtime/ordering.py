"""The records of one stream waiting to be released to a processor, in both runtimes.

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

from fastci.core.system import SortKey

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
