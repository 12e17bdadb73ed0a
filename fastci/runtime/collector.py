"""Short garbage-collector pauses for the long-running runtimes.

Both runtimes keep decoded state records between batches: up to 200,000 per processor, millions of
small tracked objects. CPython's full collection walks every one of them, so its pauses grew with
the cache. After 200,000 events the embedded runtime had spent 10.9 of 53.7 s in 15 full collections
(the longest 916 ms). The faust worker paused for up to 1.3 s every 13 s, and that was the tail of
its commit-to-selection latency. Those collections found next to nothing (10 objects at most):
state records are acyclic, and reference counting frees them when they are replaced.

So after every batch, what survived it moves to the permanent generation (``gc.freeze``, a list
splice), and a collection walks only what the next batch allocated. Cyclic garbage that is frozen
before it is found waits for a full collection, which runs once an hour: one pause as long as
before, where there was one every few seconds. There is very little such garbage. With a full
collection every minute, the worker's first one found 89 unreachable objects and every later one 0,
at 0.2-0.9 s each. An hour keeps such a pause away from all but about 1 in 3,600 seconds of
traffic. When the runtime stops, everything is handed back to the collector.

Both runtimes go one step further: while they run, the collector does not run between batches at
all (``automatic=False``). Its young collections found nothing either, yet they walked every object
a batch kept alive until its freeze (decoded events, waiting records, state entries): a large share
of a history import's apply (docs/benchmarks.md). Cyclic garbage then waits for the hourly full
collection, all of it rather than only what was frozen before a collection found it. There is next
to none, in the faust worker too, asyncio and aiokafka included (docs/benchmarks.md).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field

FULL_COLLECTION_EVERY_S = 3600.0


@dataclass
class FullCollection:
    """What one full collection found and cost."""

    unreachable: int
    seconds: float


@dataclass
class PauseControl:
    """Call ``start`` when the runtime starts (``after_batch`` does, if not), ``after_batch`` once per
    batch, ``stop`` when the runtime stops. ``automatic`` False: no collection between batches."""

    full_every_s: float = FULL_COLLECTION_EVERY_S
    clock: Callable[[], float] = time.monotonic
    automatic: bool = True
    collections: list[FullCollection] = field(default_factory=list)
    _last_full: float | None = None
    _was_enabled: bool | None = None  # the collector's state before ``start``, for ``stop``

    def start(self) -> None:
        if self._was_enabled is None:
            self._was_enabled = gc.isenabled()
            if not self.automatic:
                gc.disable()

    def after_batch(self) -> FullCollection | None:
        """Freeze what survived the batch; first run a full collection if one is due."""
        self.start()
        now = self.clock()
        if self._last_full is None:
            self._last_full = now
        full = None
        if now - self._last_full >= self.full_every_s:
            full = self._collect()
            self._last_full = self.clock()
        gc.freeze()
        return full

    def stop(self) -> None:
        """Hand every object back to the collector: nothing stays frozen after a run. (No collection
        here: a caller that runs many short runs would pay one for each.) The collector runs
        again if it ran before ``start``."""
        gc.unfreeze()
        if self._was_enabled:
            gc.enable()
        self._was_enabled = None

    def _collect(self) -> FullCollection:
        started = time.perf_counter()
        gc.unfreeze()
        found = FullCollection(gc.collect(), time.perf_counter() - started)
        self.collections.append(found)
        return found
