"""Processors in memory, without a log: for tests and benchmarks that drive many small histories.

Every event goes to every processor that reads its topic, one at a time, first in first out, and
each processor's outputs are queued the same way; ``runner`` answers ``run-requested`` events with
the results a scheduler and a runner would publish. The state store is a dict per processor, and
writes are applied as the runtimes apply them. The runtimes (embedded, Kafka) are what production
uses; this is the same processors with the I/O taken out.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from fastci.core.events import Event
from fastci.scheduling.runs import RunRequested
from fastci.core.processor import Processor
from fastci.topology import build_processors

Runner = Callable[[RunRequested], Iterable[Event]]


class _DictStore:
    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self.values.get(key)


class Pipeline:
    def __init__(self, processors: Sequence[Processor] | None = None, runner: Runner | None = None) -> None:
        self.processors = list(processors or build_processors())
        self.stores = {p.name: _DictStore() for p in self.processors}
        self.runner = runner
        self.outputs: list[Event] = []
        self.run_results: list[Event] = []  # what the runner published for run requests

    def publish(self, events: Iterable[Event]) -> list[Event]:
        """Process ``events`` and everything they cause; return the outputs, in order."""
        queue: deque[Event] = deque(events)
        produced: list[Event] = []
        while queue:
            event = queue.popleft()
            for processor in self.processors:
                if event.TOPIC not in processor.inputs:
                    continue
                store = self.stores[processor.name]
                step = processor.process(store, event)
                for key, value in step.writes.items():
                    if value is None:
                        store.values.pop(key, None)
                    else:
                        store.values[key] = value
                for output in step.outputs:
                    produced.append(output)
                    queue.append(output)
                    if self.runner is not None and isinstance(output, RunRequested):
                        answered = list(self.runner(output))
                        self.run_results += answered
                        queue.extend(answered)
        self.outputs += produced
        return produced

    def of_topic(self, topic: str) -> list[Any]:
        return [e for e in self.outputs if e.TOPIC == topic]
