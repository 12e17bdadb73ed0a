"""Thin aiokafka helpers: create topics, publish events, read topics to their current end."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError, for_code

from fastci.core.codec import encode
from fastci.core.config import KafkaSettings
from fastci.core.events import Event, record_times

_SEND_WINDOW = 5000  # unacknowledged sends in flight before we wait


class TopicMismatch(RuntimeError):
    pass


class AccessDenied(PermissionError):
    """The cluster refused an operation for want of an ACL; the message names the principal, the
    operation and the topic."""


_TOPIC_ALREADY_EXISTS = 36
_NOT_AUTHORIZED = (TopicAuthorizationFailedError, ClusterAuthorizationFailedError)


def access_denied(settings: KafkaSettings, operation: str, topics: Iterable[str], error: Exception) -> AccessDenied:
    """What was refused, to whom, and which ACL would allow it (never a credential)."""
    who = f"User:{settings.username}" if settings.username else "this client (no SASL user: User:ANONYMOUS)"
    named = [a for a in getattr(error, "args", ()) if isinstance(a, str) and a in set(topics)]
    shown = ", ".join(sorted(named or set(topics)))
    return AccessDenied(
        f"{who} may not {operation} topic {shown}: no ACL allows {who} {operation} on TOPIC {shown} "
        f"(the broker answered {type(error).__name__}); 'fastci kafka acls' lists what each role may do"
    )


@contextlib.asynccontextmanager
async def refused_as(settings: KafkaSettings, operation: str, topics: Iterable[str]) -> AsyncIterator[None]:
    topics = list(topics)
    try:
        yield
    except _NOT_AUTHORIZED as error:
        raise access_denied(settings, operation, topics, error) from None


async def ensure_topics(settings: KafkaSettings, names: Iterable[str]) -> list[str]:
    """Create the (namespaced) topics that do not exist yet; return the ones created.

    Existing topics must have ``settings.partitions`` partitions: state is placed by key
    hash modulo that count, so a topic with another count would split a key's state."""
    names = [settings.topic(n) for n in names]
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        counts = Counter(tp.topic for tp in await topic_partitions(settings, names))
        for name, count in counts.items():
            if count != settings.partitions:
                raise TopicMismatch(
                    f"topic {name} has {count} partitions but FASTCI_KAFKA_PARTITIONS is {settings.partitions}: "
                    "state is placed by key hash modulo that count, so every fastci topic needs it; recreate the "
                    "topic with that count (a producer that wrote first to a broker creating topics on first use "
                    "made it with the broker's default), or set FASTCI_KAFKA_PARTITIONS for the whole deployment"
                )
        wanted = [n for n in names if n not in existing]
        if wanted:
            response = await admin.create_topics(
                [
                    NewTopic(n, num_partitions=settings.partitions, replication_factor=settings.replication)
                    for n in wanted
                ]
            )
            _check_created(settings, response.topic_errors)
        return wanted
    finally:
        await admin.close()


def _check_created(settings: KafkaSettings, topic_errors: Iterable[tuple]) -> None:
    """Raise for a topic the broker did not create (one created meanwhile by another is fine)."""
    for topic, code, *message in topic_errors:
        if code in (0, _TOPIC_ALREADY_EXISTS):
            continue
        error = for_code(code)(topic)
        if isinstance(error, _NOT_AUTHORIZED):
            denied = access_denied(settings, "CREATE", [topic], error)
            raise AccessDenied(
                f"topic {topic} does not exist, and {denied}; the operator creates fastci's topics "
                "('fastci kafka topics --apply')"
            )
        detail = f": {message[0]}" if message and message[0] else ""
        raise TopicMismatch(f"could not create topic {topic}: {type(error).__name__}{detail}")


TIME_HEADER = "fastci-time"  # on a record whose event has no time of its own: the time it is ordered at


def time_headers(events: list[Event]) -> list[list[tuple[str, bytes]] | None]:
    """The headers that give each event without a time of its own (a golden reference, an owner map)
    the time it is ordered at, as the embedded log records it (``record_times``): the worker merges a
    processor's topics by event time. Not the record's timestamp: the broker deletes records by
    their timestamps, and a history published with its own would be gone at the next retention
    check."""
    times = record_times(events, time.time_ns() // 1_000_000)
    return [
        None if event.time_ms() is not None else [(TIME_HEADER, str(time_ms).encode())]
        for event, time_ms in zip(events, times, strict=True)
    ]


async def publish(settings: KafkaSettings, events: Iterable[Event]) -> int:
    """Send events keyed by their partition key and wait until the broker has acknowledged all."""
    events = list(events)
    producer = AIOKafkaProducer(acks="all", enable_idempotence=True, linger_ms=5, **settings.client_options())
    sent = 0
    async with refused_as(settings, "WRITE", {settings.topic(e.TOPIC) for e in events}):
        try:
            await producer.start()  # an idempotent producer needs WRITE on some topic already here
            pending: list[asyncio.Future] = []
            for event, headers in zip(events, time_headers(events), strict=True):
                topic, value, key = settings.topic(event.TOPIC), encode(event), event.key.encode()
                pending.append(await producer.send(topic, value=value, key=key, headers=headers))
                sent += 1
                if len(pending) >= _SEND_WINDOW:
                    await asyncio.gather(*pending)
                    pending.clear()
            await asyncio.gather(*pending)
        finally:
            await producer.stop()
    return sent


async def drop_namespace(settings: KafkaSettings) -> list[str]:
    """Delete every topic of ``settings.namespace`` (one benchmark run's, workers' own included) and
    return their names: a broker that keeps every run's partitions slows down run after run."""
    if not settings.namespace:
        raise ValueError("drop_namespace needs a namespace: without one it would delete every topic")
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        names = [t for t in await admin.list_topics() if t.startswith(settings.namespace)]
        if names:
            await admin.delete_topics(names)
    finally:
        await admin.close()
    return names


async def topic_partitions(settings: KafkaSettings, names: list[str]) -> list[TopicPartition]:
    """The partitions of existing topics among ``names`` (full names; missing topics have none)."""
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        existing = set(await admin.list_topics())  # describing a missing topic would auto-create it
        present = [n for n in names if n in existing]
        described = await admin.describe_topics(present) if present else []
    finally:
        await admin.close()
    return sorted(
        TopicPartition(topic["topic"], partition["partition"])
        for topic in described
        if topic["error_code"] == 0
        for partition in topic["partitions"]
    )


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    topic: str  # without the namespace
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


async def read_to_end(
    settings: KafkaSettings,
    topic: str,
    start: Mapping[int, int] | None = None,
    namespaced: bool = True,
) -> AsyncIterator[KafkaRecord]:
    """Every record of ``topic`` from ``start`` (partition -> next offset) to the end seen on entry."""
    name = settings.topic(topic) if namespaced else topic
    tps = await topic_partitions(settings, [name])
    if not tps:
        return
    consumer = AIOKafkaConsumer(enable_auto_commit=False, auto_offset_reset="earliest", **settings.client_options())
    await consumer.start()
    try:
        async with refused_as(settings, "READ", [name]):
            consumer.assign(tps)
            ends = await consumer.end_offsets(tps)
            remaining = set()
            for tp in tps:
                first = (start or {}).get(tp.partition, 0)
                if first < ends[tp]:
                    consumer.seek(tp, first)
                    remaining.add(tp)
            while remaining:
                batches = await consumer.getmany(*remaining, timeout_ms=1000)
                for tp, messages in batches.items():
                    for message in messages:
                        if message.offset < ends[tp]:
                            yield KafkaRecord(topic, tp.partition, message.offset, message.key, message.value)
                    if messages and messages[-1].offset >= ends[tp] - 1:
                        remaining.discard(tp)
                for tp in list(remaining):
                    if await consumer.position(tp) >= ends[tp]:
                        remaining.discard(tp)
    finally:
        await consumer.stop()


async def group_lag(settings: KafkaSettings, group: str, topics: Iterable[str]) -> int:
    """Records in ``topics`` that consumer group ``group`` has not committed yet."""
    tps = await topic_partitions(settings, [settings.topic(t) for t in topics])
    admin = AIOKafkaAdminClient(**settings.client_options())
    consumer = AIOKafkaConsumer(**settings.client_options())
    await admin.start()
    await consumer.start()
    try:
        ends = await consumer.end_offsets(tps) if tps else {}
        committed = await admin.list_consumer_group_offsets(group)
        return sum(max(0, end - (committed[tp].offset if tp in committed else 0)) for tp, end in ends.items())
    finally:
        await consumer.stop()
        await admin.close()
