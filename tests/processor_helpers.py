"""Drive processors in tests: a dict stands in for the store, events go in one by one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastci.core.events import Event
from fastci.core.processor import Processor


class Store:
    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self.values.get(key)


def feed(processor: Processor, store: Store, events: Iterable[Event]) -> list[Event]:
    outputs: list[Event] = []
    for event in events:
        step = processor.process(store, event)
        for key, value in step.writes.items():
            if value is None:
                store.values.pop(key, None)
            else:
                store.values[key] = value
        outputs += step.outputs
    return outputs


def of_topic(events: Iterable[Event], topic: str) -> list[Any]:
    return [e for e in events if e.TOPIC == topic]
