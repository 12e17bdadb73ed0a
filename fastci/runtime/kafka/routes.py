"""How each input topic reaches a processor's merge on Kafka: its routes, the worker's own topics,
and where a key's records and state live.

No producer's partitioner is assumed. A key's state lives in the changelog partition our own
partitioner (murmur2, as Java's and aiokafka's) gives its owner, so a record is applied where it
is consumed only when it sits in that partition. A record another partitioner put elsewhere
(librdkafka's default, consistent_random, does for most keys) is forwarded to the worker's own
topic for that input, keyed by the field its processors partition by, and applied from there; a
topic its processors partition by another field is forwarded whole, as faust's ``group_by`` does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from aiokafka.partitioner import murmur2

from fastci.core.codec import InvalidEvent
from fastci.core.config import KafkaSettings
from fastci.core.events import Event
from fastci.core.processor import Processor, owner_of
from fastci.runtime.driver import Origin
from fastci.runtime.kafka.broker import TIME_HEADER
from fastci.runtime.kafka.positions import Positions, position_partition
from fastci.runtime.kafka.sends import Send
from fastci.topology import SYSTEM, TOPICS

ORIGIN_HEADER = "fastci-origin"  # on repartitioned records: "<topic>/<partition>/<offset>" they came from


class TableStore:
    """A faust Table seen as the driver's raw key-value store (keys as UTF-8 bytes)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def get(self, key: str) -> bytes | None:
        return self.table.get(key.encode())


@dataclass(frozen=True, eq=False)
class Route:
    """One consumer of a wire topic: a processor's input, or a forwarder to a repartitioned topic."""

    handle: Callable[[Any, Decoded], list[Send]]  # a consumed faust message -> the records it makes
    positions: Positions
    table: Any  # the Table its positions are stored in


class Decoded:
    """A consumed record's event, decoded on first use and shared by every processor reading it
    (four read ``results`` straight from the topic): validating it once instead of four times."""

    __slots__ = ("message", "_item", "_in_place")

    def __init__(self, message: Any) -> None:
        self.message = message
        self._item: Event | InvalidEvent | None = None
        self._in_place: bool | None = None

    def item(self, topic: str) -> Event | InvalidEvent:
        if self._item is None:
            self._item = SYSTEM.decode_or_refusal(topic, self.message.value or b"")
        return self._item

    def in_place(self, topic: str, partitions: int) -> bool:
        """Whether the record sits in the partition our partitioner gives its event's key: where the
        state of that key lives. A record that does not decode counts as in place (it is dead-lettered
        there; it has no state)."""
        if self._in_place is None:
            event = self.item(topic)
            self._in_place = isinstance(event, InvalidEvent) or (
                partition_of(event.key.encode(), partitions) == self.message.partition
            )
        return self._in_place


FORWARDERS = "forwarders"  # the Table that holds the forwarders' positions


def internal_topic(settings: KafkaSettings, topic: str, field: str) -> str:
    """The internal topic carrying ``topic`` keyed by ``field`` (without the namespace): one per app,
    shared by every processor of the app that partitions ``topic`` by ``field``, so a record is
    forwarded once per field, not once per processor. Named after the app, as faust names the
    topics of its group_by: two apps on the same topics must not read each other's copies."""
    return f"{settings.app}-{topic}-by-{field}"


def repartition_topics(settings: KafkaSettings, processor: Processor) -> dict[str, str]:
    """Input topic -> the internal topic that carries it keyed by the processor's partition field."""
    return {topic: internal_topic(settings, topic, field) for topic, field in sorted(processor.partition_by.items())}


def misplaced_topics(settings: KafkaSettings, processor: Processor) -> dict[str, str]:
    """Input topic (read by its own key) -> the internal topic its misplaced records come back through."""
    return {
        topic: internal_topic(settings, topic, TOPICS[topic].KEY)
        for topic in processor.inputs
        if topic not in processor.partition_by
    }


def internal_topics(settings: KafkaSettings, processors: Iterable[Processor]) -> list[str]:
    """Every internal topic the processors' routes read, once each (the worker creates them before
    it starts)."""
    return sorted(
        {
            name
            for p in processors
            for name in (*repartition_topics(settings, p).values(), *misplaced_topics(settings, p).values())
        }
    )


def forwarder_route(topic: str, field: str) -> str:
    return f"forward:{topic}:by-{field}"


def route_names(settings: KafkaSettings, processor: Processor) -> list[tuple[str, str, str]]:
    """(route, wire topic it consumes, Table its positions are stored in) for each route a processor
    needs: the forwarders of the topics it repartitions or may receive misplaced (shared by the app),
    then its inputs, then the internal topics its misplaced records come back through."""
    rekeyed = repartition_topics(settings, processor)
    misplaced = misplaced_topics(settings, processor)
    fields = {**{t: TOPICS[t].KEY for t in misplaced}, **processor.partition_by}
    forwarders = [
        (forwarder_route(topic, field), settings.topic(topic), FORWARDERS) for topic, field in sorted(fields.items())
    ]
    inputs = [
        (f"{processor.name}:{topic}", settings.topic(rekeyed.get(topic, topic)), processor.name)
        for topic in processor.inputs
    ]
    returned = [
        (f"{processor.name}:{topic}:misplaced", settings.topic(internal), processor.name)
        for topic, internal in sorted(misplaced.items())
    ]
    return forwarders + inputs + returned


def colocated_writers(topic: str, processors: list[Processor]) -> tuple[str, ...]:
    """The writers of ``topic`` whose frontier its forwarder's markers carry: those whose outputs
    land in the partition they process (``System.colocated``), unless a reader of the topic reads
    them through a feedback pipe (a loop must not wait on itself)."""
    readers = [p.name for p in processors if topic in p.inputs]
    return tuple(
        w.name
        for w in processors
        if SYSTEM.colocated(w, topic) and not any((w.name, r) in SYSTEM.feedback for r in readers)
    )


def record_time(message: Any) -> int:
    """The time a record without an event time is ordered at: the one its producer gave it in a
    header (``fastci.runtime.kafka.broker.time_headers``), else its timestamp (its arrival)."""
    raw = header(message, TIME_HEADER)
    if raw is not None and raw.isdigit():  # another client's header that is not a time: ignored
        return int(raw)
    return round(message.timestamp * 1000) if message.timestamp else 0


def header(message: Any, name: str) -> bytes | None:
    headers = message.headers or {}
    pairs = headers.items() if isinstance(headers, dict) else headers
    return next((value for key, value in pairs if key == name), None)


def table_partition(key: str, partitions: int) -> int:
    """A position lives in the partition it describes; a compound state key in the partition of
    its owner, the partition key it starts with (where its input records are)."""
    partition = position_partition(key)
    return partition_of(owner_of(key).encode(), partitions) if partition is None else partition


def forwarder(
    settings: KafkaSettings, topic: str, field: str, internal: str, only_misplaced: bool
) -> Callable[[Any, Decoded], list[Send]]:
    """Forward ``topic`` to ``internal``, keyed by ``field`` (faust's group_by, spelled out so the
    bytes pass through untouched): every record, or (``only_misplaced``) those not in the partition
    of their key. An undecodable record is keyed by the field if its JSON has one, else keeps its
    key; the processors reading the internal topic dead-letter it."""
    sink = settings.topic(internal)
    partitions = settings.partitions

    def forward(message: Any, decoded: Decoded) -> list[Send]:
        if only_misplaced and decoded.in_place(topic, partitions):
            return []
        value = message.value or b""
        event = decoded.item(topic)  # decoded once for every route reading the record: no second parse
        found = _field_of(value, field) if isinstance(event, InvalidEvent) else getattr(event, field, None)
        key = found if isinstance(found, str) else None
        origin = f"{topic}/{message.partition}/{message.offset}".encode()
        raw_key = message.key if key is None else key.encode()
        # A record with no key at all (undecodable, from a producer that set none) keeps its
        # partition number: the processors reading that partition dead-letter it.
        partition = message.partition % partitions if raw_key is None else partition_of(raw_key, partitions)
        headers = [(ORIGIN_HEADER, origin)]
        if isinstance(event, InvalidEvent) or event.time_ms() is None:  # the time it is ordered at goes along
            headers.append((TIME_HEADER, str(record_time(message)).encode()))
        return [Send(sink, partition, raw_key, value, headers)]

    return forward


def origin_of(message: Any) -> Origin:
    """Where a forwarded record was first appended, from the header the forwarder set: a crash of
    the forwarder re-sends records at new offsets, but with the same origin."""
    raw = header(message, ORIGIN_HEADER)
    if raw is None:
        return Origin(f"{message.topic}/{message.partition}", message.offset)
    stream, _, offset = raw.decode().rpartition("/")
    return Origin(stream, int(offset))


def _field_of(value: bytes, field: str) -> str | None:
    try:
        found = orjson.loads(value).get(field)
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return found if isinstance(found, str) else None


@functools.lru_cache(maxsize=1 << 16)
def partition_of(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner (murmur2, as in Java and aiokafka) gives a key.
    Cached: aiokafka's murmur2 is pure Python, and the worker asks it for every changelog record,
    output and forwarded record, mostly about the same few thousand tests, repos and nodes."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
