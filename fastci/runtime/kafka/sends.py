"""The worker's sends: record batches built and produced through faust's own producer.

Outputs and changelog records go out as aiokafka record batches, one per partition, filled in order,
instead of one faust ``Topic.send`` per record (a message object, a future and callbacks each).
A changelog's batch goes whole: the broker appends a record batch entirely or not at all
(``fastci.runtime.contract``, the commit order).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import faust
from aiokafka.errors import MessageSizeTooLargeError
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.default_records import DefaultRecordBatch

from fastci.runtime.kafka.markers import Marker

PRODUCE_BATCH_BYTES = 512 * 1024  # under the broker's 1 MiB message.max.bytes
RECORD_OVERHEAD = 64  # bytes a record takes in a batch beyond its key, value and headers, at most
BROKER_BATCH_BYTES = 1_000_000  # the most a batch may be: Kafka's default message.max.bytes, less room


@dataclass(frozen=True)
class Send:
    """One record to produce: the wire topic, its partition, key, value and headers."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]] | None = None


async def send_batched(app: faust.App, sends: list[Send], whole: bool = False) -> dict[tuple[str, int], int]:
    """Produce ``sends`` and wait for the broker's acknowledgement of every one; return each
    partition's end offset after them.

    One aiokafka record batch per partition, filled in order (so each partition keeps the order of
    ``sends``), instead of one faust ``Topic.send`` per record (a message object, a future and
    callbacks each). The batches go through faust's own producer: its connection, acks=all and
    retries.

    ``whole``: each partition's records go in one record batch, gzip-compressed when they are more
    than the broker takes as they are. The broker appends a record batch entirely or not at all, so a crash
    during the send leaves none or all of a partition's records: a Table's changelog must, or a
    key's state could be durable without the marks that say which events made it, and on replay an
    earlier event would read what a later one wrote. A partition's records that compress to more
    than the broker takes in one batch are sent in several, with a warning."""
    if not sends:
        return {}
    producer = app.producer._ensure_producer()  # the aiokafka producer faust started
    if whole:
        per_partition: dict[tuple[str, int], list[Send]] = {}
        for send in sends:
            per_partition.setdefault((send.topic, send.partition), []).append(send)
        batches = [(*where, whole_batch(producer, records)) for where, records in per_partition.items()]
    else:
        batches = _fill(producer, sends)
    counts = [batch.record_count() for _, _, batch in batches]
    deliveries = [await producer.send_batch(batch, topic, partition=partition) for topic, partition, batch in batches]
    ends: dict[tuple[str, int], int] = {}
    delivered = await asyncio.gather(*deliveries, return_exceptions=True)
    for (topic, partition, _), count, metadata in zip(batches, counts, delivered, strict=True):
        if isinstance(metadata, MessageSizeTooLargeError) and whole:
            records = per_partition[(topic, partition)]
            app.log.warning(
                "%d records for %s[%d] are more than the broker takes in one batch (message.max.bytes), even "
                "compressed: sent in several, so a crash during this send can leave part of them durable",
                len(records),
                topic,
                partition,
            )
            ends.update(await send_batched(app, records))
            continue
        if isinstance(metadata, BaseException):
            raise metadata
        ends[(topic, partition)] = max(ends.get((topic, partition), 0), metadata.offset + count)
    return ends


def _fill(producer: Any, sends: list[Send]) -> list[tuple[str, int, Any]]:
    """The producer's record batches for ``sends``, a new one for a partition when its last is full."""
    batches: list[tuple[str, int, Any]] = []
    open_batch: dict[tuple[str, int], Any] = {}
    for send in sends:
        where = (send.topic, send.partition)
        batch = open_batch.get(where)
        if batch is None or batch.append(**_record(send)) is None:
            batch = open_batch[where] = producer.create_batch()
            batches.append((send.topic, send.partition, batch))
            _append(batch, send)
    return batches


def whole_batch(producer: Any, sends: list[Send]) -> Any:
    """One record batch holding all of ``sends`` (one partition's): the producer's own when they fit
    in one, else one sized for them, gzip-compressed only when the broker would refuse it as it is
    (its limit is on what it receives; aiokafka's gzip runs at level 9, about 10 ms per 250 KB)."""
    size = sum(len(s.key or b"") + len(s.value) + sum(len(k) + len(v) for k, v in s.headers or ()) for s in sends)
    size += RECORD_OVERHEAD * len(sends)
    if size <= PRODUCE_BATCH_BYTES:
        batch = producer.create_batch()
    else:
        codec = DefaultRecordBatch.CODEC_NONE if size <= BROKER_BATCH_BYTES else DefaultRecordBatch.CODEC_GZIP
        batch = BatchBuilder(2 * size, codec)
    for send in sends:
        _append(batch, send)
    return batch


def _record(send: Send) -> dict[str, Any]:
    return {"timestamp": None, "key": send.key, "value": send.value, "headers": send.headers or []}


def _append(batch: Any, send: Send) -> None:
    """Add ``send`` to a batch made to hold it (aiokafka takes any first record into an empty batch):
    never a record dropped silently."""
    if batch.append(**_record(send)) is None:
        raise RuntimeError(f"aiokafka refused a {len(send.value):,}-byte record for {send.topic}")


def marker_send(marker: Marker) -> Send:
    """A progress marker as a record: no key, no value, one header."""
    return Send(marker.topic, marker.partition, None, b"", [(marker.name, marker.header)])
