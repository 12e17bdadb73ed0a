"""Append events to the embedded log or to Kafka, as they are (validation is the caller's door:
``fastci.producer.lines`` for lines from outside, the models for events built in code), results
signed by this producer's principal when one is configured (``fastci.core.provenance``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from fastci.core.codec import encode
from fastci.core.config import KafkaSettings
from fastci.core.events import Event, record_times
from fastci.core.provenance import Signer, sign_all
from fastci.runtime.log import Log


def publish_embedded(data_dir: Path, events: list[Event]) -> None:
    """Append events to the embedded log, grouped by topic, in their given order per topic."""
    events = sign_all(events, Signer.from_env())
    log = Log(Path(data_dir) / "log")  # DataDir's log, without importing the runtime that applies it
    by_topic: dict[str, tuple[list[bytes], list[int]]] = {}
    for event, time_ms in zip(events, record_times(events, time.time_ns() // 1_000_000), strict=True):
        payloads, times = by_topic.setdefault(event.TOPIC, ([], []))
        payloads.append(encode(event))
        times.append(time_ms)
    for topic, (payloads, times) in by_topic.items():
        log.topic(topic).append(payloads, times)


def publish_kafka(settings: KafkaSettings, events: list[Event]) -> None:
    from fastci.runtime.kafka import broker  # aiokafka: not for a producer to the embedded log

    events = sign_all(events, Signer.from_env())

    async def send() -> None:
        await broker.ensure_topics(settings, {e.TOPIC for e in events})
        await broker.publish(settings, events)

    asyncio.run(send())
