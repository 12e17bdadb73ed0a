"""The in-memory runtime: the real processors through the same ``Driver`` as the durable runtimes,
with no log. Tests of processors, the simulators and the regression benchmarks drive it.

It does not apply the ordering rule (``fastci.runtime.contract``, promise 2): each published event
goes to every processor of the system that reads its topic (in system order), and what they emit is
delivered in turn, breadth first, before ``publish`` returns. So a caller decides the order events
are applied in by the order it publishes them; a test of the ordering rule runs on the embedded or
the Kafka runtime (``tests/test_runtime_contract.py``). The driver gives
it the runtimes' guarantees: an event redelivered to a key changes nothing, a processor that fails
dead-letters the event and keeps its state. State lives in a dict per processor, written from the
driver's buffered writes every ``drain_every`` deliveries (the embedded runtime's fsync and SQLite
commit per batch buy crash safety, which a run that can simply be repeated does not need).

``responders`` stand in for the actors outside the system: a function that answers an event of a
topic (a runner answering ``run-requested`` with results) returns the events to publish in reply.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from fastci.core.dead_letters import DeadLetter
from fastci.core.events import Event
from fastci.core.processor import Processor
from fastci.core.system import System
from fastci.runtime.contract import commit
from fastci.runtime.driver import Driver

Listener = Callable[[Event], None]
Responder = Callable[[Any], Iterable[Event]]


class BytesStore(dict):
    """The driver's raw store: encoded entries by key."""

    def get(self, key: str) -> bytes | None:  # type: ignore[override]
        return super().get(key)


class MemoryRuntime:
    def __init__(
        self,
        system: System,
        processors: Sequence[Processor] | None = None,
        responders: Mapping[str, Responder] | None = None,
        drain_every: int = 5000,
    ) -> None:
        self.system = system
        self.processors = list(system.build() if processors is None else processors)
        self.drivers: list[tuple[Processor, Driver, BytesStore]] = []
        reporters = System.decode_reporters(self.processors)
        written = System.written(self.processors)
        for processor in self.processors:
            store = BytesStore()
            driver = Driver(processor, store, reporters.get(processor.name, frozenset()), written)
            self.drivers.append((processor, driver, store))
        self.readers: dict[str, list[Driver]] = {}
        for processor, driver, _ in self.drivers:
            for topic in processor.inputs:
                self.readers.setdefault(topic, []).append(driver)
        self.listeners: dict[str, list[Listener]] = {}
        self.responders = dict(responders or {})
        self.drain_every = drain_every
        self.delivered = 0
        self.counts: dict[str, int] = {}
        self.outputs: list[Event] = []  # every event a processor emitted, in order
        self.responses: list[Event] = []  # every event a responder published
        self.dead_letters: list[Event] = []
        self.largest: dict[str, int] = {}  # per processor, the biggest value it stored (at the drains)

    def listen(self, topic: str, listener: Listener) -> None:
        """Call ``listener`` with every event of ``topic`` (inputs and processor outputs alike)."""
        self.listeners.setdefault(topic, []).append(listener)

    def publish(self, *events: Event | Iterable[Event]) -> list[Event]:
        """Deliver ``events`` (given one by one or as iterables) and everything they cause; return what
        the processors emitted, in order."""
        pending: deque[Event] = deque()
        for item in events:
            pending.extend([item] if isinstance(item, Event) else item)
        produced: list[Event] = []
        while pending:
            event = pending.popleft()
            self.counts[event.TOPIC] = self.counts.get(event.TOPIC, 0) + 1
            if event.TOPIC == DeadLetter.TOPIC:
                self.dead_letters.append(event)
            for listener in self.listeners.get(event.TOPIC, ()):
                listener(event)
            responder = self.responders.get(event.TOPIC)
            if responder is not None:
                answered = list(responder(event))
                self.responses += answered
                pending.extend(answered)
            for driver in self.readers.get(event.TOPIC, ()):
                outputs = driver.handle(event)
                produced += outputs
                pending.extend(outputs)
                self.delivered += 1
                if self.delivered % self.drain_every == 0:
                    self.drain()
        self.outputs += produced
        return produced

    def apply(self) -> None:
        """Nothing to do: ``publish`` applies what it delivers before it returns (the contract's
        ``Runtime.apply``)."""

    def events(self, topic: str) -> list[Event]:
        """The events of ``topic`` the processors emitted or the responders published, in order (the
        contract's ``Runtime.events``; the events a caller published are the caller's to keep)."""
        return [e for e in (*self.outputs, *self.responses) if e.TOPIC == topic]

    def of_topic(self, topic: str) -> list[Any]:
        """The processors' outputs of one topic, in order."""
        return [e for e in self.outputs if e.TOPIC == topic]

    def drain(self) -> None:
        """Write what the drivers buffered to their stores, in the commit order (nothing is durable
        here: the outputs were delivered already)."""
        stores = {processor.name: store for processor, _, store in self.drivers}
        drains = [(processor.name, driver) for processor, driver, _ in self.drivers]
        for _ in commit([], drains, lambda outputs: None, lambda writes: self._store(stores, writes)):
            pass

    def _store(self, stores: dict[str, BytesStore], writes: list[tuple[str, Mapping[str, bytes]]]) -> None:
        for name, changed in writes:
            self.largest[name] = max(self.largest.get(name, 0), max(map(len, changed.values())))
            stores[name].update(changed)

    def state(self, processor_name: str) -> tuple[Driver, dict[str, Any]]:
        """A processor's driver (its reads see unflushed writes) and its store."""
        self.drain()
        for processor, driver, store in self.drivers:
            if processor.name == processor_name:
                return driver, store
        raise KeyError(processor_name)
