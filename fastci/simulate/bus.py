"""An in-memory event bus that runs the real processors through the same ``Driver`` as the runtimes.

A simulation publishes events here instead of to a log: each goes to every processor that reads its
topic (in ``ALL_PROCESSORS`` order), and what they emit is delivered in turn, breadth first, before
``publish`` returns. State lives in a dict per processor, written from the driver's buffered writes
every ``drain_every`` events (the embedded runtime's fsync and SQLite commit per batch buy crash
safety, which a simulation that can simply be run again does not need).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from fastci.core.events import Event
from fastci.core.processor import Processor
from fastci.runtime.driver import Driver

Listener = Callable[[Event], None]


class BytesStore(dict):
    """The driver's raw store: encoded entries by key."""

    def get(self, key: str) -> bytes | None:  # type: ignore[override]
        return super().get(key)


class Bus:
    def __init__(self, processors: Iterable[Processor], drain_every: int = 5000) -> None:
        self.drivers: list[tuple[Processor, Driver, BytesStore]] = []
        for processor in processors:
            store = BytesStore()
            self.drivers.append((processor, Driver(processor, store), store))
        self.readers: dict[str, list[Driver]] = {}
        for processor, driver, _ in self.drivers:
            for topic in processor.inputs:
                self.readers.setdefault(topic, []).append(driver)
        self.listeners: dict[str, list[Listener]] = {}
        self.drain_every = drain_every
        self.delivered = 0
        self.counts: dict[str, int] = {}
        self.dead_letters: list[Event] = []
        self.largest: dict[str, int] = {}  # per processor, the biggest value it stored (at the drains)

    def listen(self, topic: str, listener: Listener) -> None:
        """Call ``listener`` with every event of ``topic`` (inputs and processor outputs alike)."""
        self.listeners.setdefault(topic, []).append(listener)

    def publish(self, *events: Event) -> None:
        pending: deque[Event] = deque(events)
        while pending:
            event = pending.popleft()
            self.counts[event.TOPIC] = self.counts.get(event.TOPIC, 0) + 1
            if event.TOPIC == "dead-letters":
                self.dead_letters.append(event)
            for listener in self.listeners.get(event.TOPIC, ()):
                listener(event)
            for driver in self.readers.get(event.TOPIC, ()):
                pending.extend(driver.handle(event))
                self.delivered += 1
                if self.delivered % self.drain_every == 0:
                    self.drain()

    def drain(self) -> None:
        for processor, driver, store in self.drivers:
            writes = driver.drain_writes()
            if writes:
                biggest = max(len(value) for value in writes.values())
                self.largest[processor.name] = max(self.largest.get(processor.name, 0), biggest)
            store.update(writes)

    def state(self, processor_name: str) -> tuple[Driver, dict[str, Any]]:
        """A processor's driver (its reads see unflushed writes) and its store."""
        self.drain()
        for processor, driver, store in self.drivers:
            if processor.name == processor_name:
                return driver, store
        raise KeyError(processor_name)
