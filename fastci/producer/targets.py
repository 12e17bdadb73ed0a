"""Where a producer publishes: the embedded log or Kafka. ``send`` returns only once the target has
acknowledged every event (fsynced to the log; ``acks=all`` from the broker) and raises
``TargetUnavailable`` otherwise, within a bounded time, so a suite never hangs on a dead target."""

from __future__ import annotations

import threading
from dataclasses import astuple
from pathlib import Path
from typing import Any, Protocol

import orjson

from fastci.core.codec import encode
from fastci.core.config import KafkaSettings
from fastci.core.events import Event


class TargetUnavailable(RuntimeError):
    """The target did not acknowledge a batch; it stays spooled."""


class Target(Protocol):
    description: str

    def send(self, events: list[Event]) -> None:
        """Publish ``events`` and return once every one is acknowledged."""

    def mark(self) -> Any:
        """Where the target ends now (JSON), or None when it cannot say."""

    def ids_since(self, mark: Any, topics: set[str]) -> set[str]:
        """The ids of the events of ``topics`` appended since ``mark`` (empty when it cannot say)."""


class EmbeddedTarget:
    def __init__(self, data_dir: str | Path) -> None:
        self.data_dir = Path(data_dir)
        self.description = f"the embedded log in {self.data_dir}"

    def send(self, events: list[Event]) -> None:
        from fastci.runtime.publish import publish_embedded

        try:
            publish_embedded(self.data_dir, events)  # appends are fsynced before it returns
        except OSError as error:
            raise TargetUnavailable(f"{self.description}: {error}") from error

    def mark(self) -> dict[str, list[int]]:
        """The end of every topic of the log now."""
        log = self._log()
        return {topic: list(astuple(log.topic(topic).end())) for topic in log.topics()}

    def ids_since(self, mark: dict[str, list[int]], topics: set[str]) -> set[str]:
        from fastci.runtime.log import Position

        log = self._log()
        return {
            orjson.loads(record.payload)["id"]
            for topic in sorted(topics)
            for record in log.topic(topic).read(Position(*mark.get(topic, [0, 0, 0])))  # absent: made since
        }

    def _log(self) -> Any:
        from fastci.runtime.embedded import DataDir

        return DataDir(self.data_dir).log


class KafkaTarget:
    """Kafka with ``acks=all`` and an idempotent producer; topics are created (with the configured
    partition count) on first use, like ``fastci publish --kafka``."""

    def __init__(self, settings: KafkaSettings, timeout_s: float = 15.0) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self.description = f"Kafka at {settings.bootstrap}" + (
            f" (namespace {settings.namespace})" if settings.namespace else ""
        )
        self._topics_ready: set[str] = set()

    def mark(self) -> None:
        return None  # reading back what a broker holds since a point is not worth it: ids make copies harmless

    def ids_since(self, mark: Any, topics: set[str]) -> set[str]:
        return set()

    def send(self, events: list[Event]) -> None:
        try:
            _run(self._send(events), self.timeout_s)
        except TimeoutError as error:
            raise TargetUnavailable(f"{self.description}: no acknowledgement within {self.timeout_s:g} s") from error
        except Exception as error:  # aiokafka raises many kinds; all mean "not acknowledged"
            raise TargetUnavailable(f"{self.description}: {type(error).__name__}: {error}") from error

    async def _send(self, events: list[Event]) -> None:
        from asyncio import gather

        from aiokafka import AIOKafkaProducer

        from fastci.runtime.kafka.broker import ensure_topics, refused_as, time_headers

        topics = {e.TOPIC for e in events} - self._topics_ready
        if topics:
            await ensure_topics(self.settings, topics)
            self._topics_ready |= topics
        producer = AIOKafkaProducer(
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=int(self.timeout_s * 1000),
            **self.settings.client_options(),
        )
        async with refused_as(self.settings, "WRITE", {self.settings.topic(e.TOPIC) for e in events}):
            try:
                await producer.start()  # inside: a producer that failed to start is stopped too
                pending = [
                    await producer.send(self.settings.topic(e.TOPIC), value=encode(e), key=e.key.encode(), headers=h)
                    for e, h in zip(events, time_headers(events), strict=True)
                ]
                await gather(*pending)
            finally:
                await producer.stop()


def _run(coroutine: Any, timeout_s: float | None = None) -> Any:
    """Run a coroutine to completion (within ``timeout_s``), also from code that is itself inside a
    running event loop. asyncio is imported here: only Kafka needs it, not the embedded target."""
    import asyncio

    if timeout_s is not None:
        coroutine = asyncio.wait_for(coroutine, timeout_s)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    outcome: dict[str, Any] = {}

    def runner() -> None:
        try:
            outcome["value"] = asyncio.run(coroutine)
        except BaseException as error:  # re-raised in the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=runner, name="fastci-kafka-send")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")
