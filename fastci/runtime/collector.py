"""Short garbage-collector pauses for the long-running runtimes.

Both runtimes keep decoded state records between batches, millions of small tracked objects, and
CPython's full collection walks every one of them: its pauses grew with the cache and were the tail
of the worker's commit-to-selection latency, while they found next to nothing (state records are
acyclic; reference counting frees them when they are replaced).

So after every batch, what survived it moves to the permanent generation (``gc.freeze``, a list
splice), and while a runtime runs the collector does not run between batches at all
(``automatic=False``): its young collections walked every object a batch kept alive and found
nothing either. Cyclic garbage waits for a full collection once an hour, one pause as long as
before where there was one every few seconds. When the runtime stops, everything is handed back to
the collector. The measurements: docs/benchmarks.md, "The runtimes without automatic garbage
collection".
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
