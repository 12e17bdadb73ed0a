"""Driving the faust worker from tests: start it, wait until it has consumed everything, stop it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError

from fastci.core.config import KafkaSettings
from fastci.core.processor import Processor
from fastci.runtime.kafka.broker import read_to_end, topic_partitions
from fastci.runtime.kafka.progress import unapplied
from fastci.topology import build_processors, decode


def start_worker(
    settings: KafkaSettings, log_path: Path, extra_env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> subprocess.Popen:
    env = {
        **os.environ,
        **(extra_env or {}),
        "FASTCI_KAFKA_BOOTSTRAP": settings.bootstrap,
        "FASTCI_KAFKA_NAMESPACE": settings.namespace,
        "FASTCI_KAFKA_PARTITIONS": str(settings.partitions),
        "FASTCI_DATA_DIR": str(log_path.with_suffix(".data")),  # its own, not the checkout's
    }
    log = open(log_path, "ab")
    return subprocess.Popen(
        [sys.executable, "-m", "fastci.cli", "worker", *args], env=env, stdout=log, stderr=subprocess.STDOUT
    )


def wait_until_consumed(
    settings: KafkaSettings,
    worker: subprocess.Popen,
    log_path: Path,
    timeout_s: float = 180,
    processors: list[Processor] | None = None,
) -> float:
    """Block until every route of ``processors`` (default: all) has applied everything it reads,
    by the positions stored with its state; return the seconds it took. Not faust's committed
    offsets: they trail what is applied by up to a commit interval, and after a rebalance they
    wait for the records the routes seek back for."""
    started = time.perf_counter()
    every = build_processors() if processors is None else processors
    while time.perf_counter() - started < timeout_s:
        if worker.poll() is not None:
            raise AssertionError(f"worker exited with {worker.returncode}:\n{log_path.read_text()[-4000:]}")
        try:
            if not any(asyncio.run(unapplied(settings, every)).values()):
                return time.perf_counter() - started
        except KafkaError:  # e.g. the group coordinator of a fresh broker is not up yet
            pass
        time.sleep(0.5)
    raise AssertionError(f"worker did not catch up in {timeout_s} s:\n{log_path.read_text()[-4000:]}")


def kill_mid_stream(
    settings: KafkaSettings, worker: subprocess.Popen, first: str, last: str, expected: int, timeout_s: float = 120
) -> int:
    """SIGKILL ``worker`` as soon as output topic ``first`` holds a record, and check that topic
    ``last`` did not yet hold all the ``expected`` records it will: the kill came between decisions.
    Return how many ``last`` held. (End offsets are one cheap call; the positions stored with the
    state take seconds to read, longer than a small history takes to apply.)"""

    async def watch() -> int:
        consumer = AIOKafkaConsumer(**settings.client_options())
        await consumer.start()
        try:
            watched = await topic_partitions(settings, [settings.topic(first)])
            finished = await topic_partitions(settings, [settings.topic(last)])
            deadline = time.perf_counter() + timeout_s
            while time.perf_counter() < deadline:
                if sum((await consumer.end_offsets(watched)).values()):
                    worker.send_signal(signal.SIGKILL)
                    return sum((await consumer.end_offsets(finished)).values())
                await asyncio.sleep(0.02)
        finally:
            await consumer.stop()
        raise AssertionError(f"{first} stayed empty for {timeout_s} s")

    held = asyncio.run(watch())
    worker.wait(30)
    assert held < expected, f"the workers wrote all {expected} records of {last} before the kill"
    return held


def stop_worker(worker: subprocess.Popen, hard: bool = False) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
        try:
            worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(30)


def read_events(settings: KafkaSettings, topic: str) -> list:
    async def collect() -> list:
        return [decode(topic, r.value) async for r in read_to_end(settings, topic)]

    return asyncio.run(collect())


def committed(settings: KafkaSettings, topics: list[str]) -> int:
    """Records of ``topics`` the worker's consumer group has committed so far."""

    async def total() -> int:
        names = [settings.topic(t) for t in topics]
        wanted = set(await topic_partitions(settings, names))
        admin = AIOKafkaAdminClient(**settings.client_options())
        await admin.start()
        try:
            offsets = await admin.list_consumer_group_offsets(settings.app_id)
        finally:
            await admin.close()
        return sum(meta.offset for tp, meta in offsets.items() if tp in wanted and meta.offset > 0)

    return asyncio.run(total())


def wait_for_committed(settings: KafkaSettings, topics: list[str], at_least: int, timeout_s: float = 120) -> float:
    """Block until the group has committed at least ``at_least`` records; return when that was seen."""
    deadline = time.perf_counter() + timeout_s
    while time.perf_counter() < deadline:
        try:
            if committed(settings, topics) >= at_least:
                return time.perf_counter()
        except KafkaError:  # the broker may be restarting
            pass
        time.sleep(0.2)
    raise AssertionError(f"the group did not commit {at_least} records within {timeout_s} s")


def load_with_librdkafka(settings, events) -> int:
    """Produce ``events`` with librdkafka (confluent-kafka), keyed as fastci keys them but placed by
    librdkafka's default partitioner (consistent_random: CRC32), the default of the confluent-kafka,
    Go, .NET and Node clients; return how many landed outside the partition murmur2 gives their key."""
    from confluent_kafka import Producer

    from fastci.core.codec import encode
    from fastci.runtime.kafka.broker import ensure_topics
    from fastci.runtime.kafka.routes import partition_of
    from fastci.topology import TOPICS

    asyncio.run(ensure_topics(settings, TOPICS))
    delivered: list[tuple[bytes, int]] = []
    producer = Producer({"bootstrap.servers": settings.bootstrap, "acks": "all", "enable.idempotence": True})
    for event in events:
        producer.produce(
            settings.topic(event.TOPIC),
            key=event.key.encode(),
            value=encode(event),
            on_delivery=lambda error, message: delivered.append((message.key(), message.partition())),
        )
        producer.poll(0)
    assert producer.flush(60) == 0
    assert len(delivered) == len(events)
    return sum(1 for key, partition in delivered if partition != partition_of(key, settings.partitions))
