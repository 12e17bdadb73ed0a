"""Wire every processor to Kafka: one agent reads every topic, state lives in faust Tables.

Nothing here decides anything: the agent holds each record in the merge of every
processor that reads its topic (``streams.ordering``: the ordering rule, by event time
across topics) and hands what the merges release to the processors' ``Driver`` (the
same driver the embedded runtime uses), then moves what comes back. Per batch: each
record is decoded once for all the processors reading it, every processor's writes
are taken, outputs are sent and acknowledged, then the Tables are written and their
changelog records acknowledged, one record batch per changelog partition, all durable or
none (before faust commits the batch's offsets). With the offset marks and dedup window in
each Table value, applied-event markers and deterministic output ids, a crash anywhere
gives no lost state and no duplicate a consumer would keep (see
``fastci.runtime.driver``).

Why one agent and not one per processor: with several agents subscribed to one
topic, each record is shared by several faust channels. A rebalance clears the
channels' queues, so a record one agent had taken and another had only queued
was never acknowledged, and the revoke waited for it for minutes (the two-worker
fault test hung in ``wait_empty``). With one agent,
every record has exactly one channel.

faust can still deliver a record past a range it skipped around a rebalance; every
route keeps its own position per partition (``fastci.runtime.positions``) and the agent
seeks back when a route sees a gap.

No producer's partitioner is assumed. A key's state lives in the changelog partition our own
partitioner (murmur2, as Java's and aiokafka's) gives its owner, so a record is applied where it
is consumed only when it sits in that partition. A record another partitioner put elsewhere
(librdkafka's default, consistent_random, does for most keys) is forwarded to the worker's own
topic for that input, keyed by the field its processors partition by, and applied from there; a
topic its processors partition by another field is forwarded whole, as faust's ``group_by`` does.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import faust
import orjson
from aiokafka.errors import KafkaError, MessageSizeTooLargeError
from aiokafka.partitioner import murmur2
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.record.default_records import DefaultRecordBatch
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from fastci.core.codec import InvalidEvent, encode
from fastci.core.config import KafkaSettings, data_dir
from fastci.core.events import Event
from fastci.core.processor import Processor, owner_of
from fastci.core.system import System, merge_key
from fastci.runtime.collector import PauseControl
from fastci.runtime.driver import Driver, Origin
from fastci.runtime.kafka_io import TIME_HEADER
from fastci.runtime.positions import Positions, Verdict, position_partition
from fastci.topology import DEAD_LETTERS, SYSTEM, TOPICS, build_processors
from streams.forwarded import (
    MARK_HEADER,
    WRITER_HEADER,
    Forwarding,
    ForwardMarks,
    Mark,
    Spread,
    WriterMarks,
    parse,
    parse_writer,
)
from streams.ordering import Consumed, Feed, Held, Ordering, Stalls, describe

AGENT = "fastci"
BATCH = 2000  # records per take; one Table write per key per batch
WITHIN_S = 0.05  # longest a record waits for its batch to fill (bounds latency when traffic is light)
# faust hands records to a take() buffer one at a time and stops while the batch is processed; deeper
# buffers and bigger polls keep it fed (the figures: docs/benchmarks.md, "Throughput").
STREAM_BUFFER = 16_384
ORIGIN_HEADER = "fastci-origin"  # on repartitioned records: "<topic>/<partition>/<offset>" they came from
MAX_POLL_RECORDS = 10_000
RELEASE_INTERVAL_S = 0.05  # how often held records are looked at again when no batch comes
COLLECTOR_CHECK_S = 60.0  # how often an idle worker looks whether its hourly full collection is due
# A partition with records some route has not applied, of which nothing was delivered for this long,
# is sought back: records held when a rebalance took their partition, or a crash, were acknowledged
# to faust, which committed past them, and at the end of a partition no later record shows the gap.
STALL_S = 5.0
WAIT_REPORT_S = 30.0  # a merge whose least held record has not moved this long is reported, with why
WAIT_REPEAT_S = 300.0  # and again this often while it stays
# A fault the tests inject: the worker SIGKILLs itself once a batch's outputs to this topic are
# durable, before the state that made them is (the window a crash replays outputs from).
CRASH_AFTER_OUTPUTS_TO = "FASTCI_TEST_CRASH_AFTER_OUTPUTS_TO"
PRODUCE_BATCH_BYTES = 512 * 1024  # under the broker's 1 MiB message.max.bytes
RECORD_OVERHEAD = 64  # bytes a record takes in a batch beyond its key, value and headers, at most
BROKER_BATCH_BYTES = 1_000_000  # the most a batch may be: Kafka's default message.max.bytes, less room


@dataclass
class BatchTimes:
    """Where a worker's batches spent its time, in seconds: logged when it stops (at info), so what
    the Kafka path costs beside the processors can be read off any run (``bench/throughput.py``
    prints it next to the embedded runtime's time for the same events)."""

    batches: int = 0
    records: int = 0  # delivered, internal topics' included
    routing: float = 0.0  # decoding each record once, admitting it by position, holding or forwarding it
    applying: float = 0.0  # the merges' releases: the processors at work
    outputs_acked: float = 0.0  # building the outputs' record batches, sending them, awaiting the acknowledgements
    state_acked: float = 0.0  # the same for the state's changelog records
    in_batches: float = 0.0
    first: float | None = None  # when the first batch began (time.monotonic)
    last_work: float | None = None  # when the last batch that routed, applied or sent anything ended

    def summary(self, now: float) -> str:
        running = 0.0 if self.first is None else now - self.first
        busy = 0.0 if self.first is None or self.last_work is None else self.last_work - self.first
        other = self.in_batches - self.routing - self.applying - self.outputs_acked - self.state_acked
        return (
            f"batch times: {self.batches:,} batches, {self.records:,} records; routing {self.routing:.2f} s, "
            f"applying {self.applying:.2f} s, outputs sent and acknowledged {self.outputs_acked:.2f} s, "
            f"state sent and acknowledged {self.state_acked:.2f} s, the rest of the batches {other:.2f} s; "
            f"outside batches (faust delivering records, timers, idle) {running - self.in_batches:.2f} s "
            f"of {running:.2f} s since the first batch; the last batch with work ended {busy:.2f} s after it"
        )


class TableStore:
    """A faust Table seen as the driver's raw key-value store (keys as UTF-8 bytes)."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def get(self, key: str) -> bytes | None:
        return self.table.get(key.encode())


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


@dataclass(frozen=True, eq=False)
class Route:
    """One consumer of a wire topic: a processor's input, or a forwarder to a repartitioned topic."""

    handle: Callable[[Any, Decoded], list[Send]]  # a consumed faust message -> the records it makes
    positions: Positions
    table: Any  # the Table its positions are stored in


def create_app(settings: KafkaSettings, processors: list[Processor] | None = None) -> faust.App:
    # faust's own directory (tables are in memory; it still makes one), under fastci's data dir
    # rather than beside wherever the worker was started. faust makes only its last level.
    faust_dir = data_dir() / "faust"
    faust_dir.mkdir(parents=True, exist_ok=True)
    app = faust.App(
        settings.app_id,
        broker=[f"kafka://{host}" for host in settings.bootstrap.split(",")],
        broker_credentials=_credentials(settings),
        store="memory://",
        datadir=str(faust_dir / "{conf.name}"),
        web_enabled=False,
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=min(3.0, settings.session_timeout_s / 3),
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        # A batch's outputs and changelog records go out together, then the batch waits for them:
        # bigger produce requests (faust's default is 16 KiB, no linger) cost less per record.
        # Measured on 30,000 events, one worker: 2,012-2,226 -> 1,744-2,012 us CPU per event.
        producer_max_batch_size=PRODUCE_BATCH_BYTES,
        producer_linger_ms=2,
        table_cleanup_interval=3600.0,
        stream_buffer_maxsize=STREAM_BUFFER,
        broker_max_poll_records=MAX_POLL_RECORDS,
    )
    app.transport.Consumer = GaplessConsumer  # before anything makes the app's consumer
    routes: dict[str, list[Route]] = {}
    tables: list[tuple[Driver, Any]] = []
    forwarders: dict[str, Route] = {}
    log_starts: dict[tuple[str, int], int] = {}  # (wire topic, partition) -> first offset the log holds
    every_processor = processors or build_processors()
    forwarder_table = _raw_table(app, settings, FORWARDERS) if any(p.partition_by for p in every_processor) else None
    reporters = System.decode_reporters(every_processor)
    feeds: dict[str, dict[str, Feed]] = {}
    highwater = _highwater_of(app)
    ordering = Ordering([p.name for p in every_processor], feeds, settings.partitions, highwater)
    marks = ForwardMarks(settings.partitions)
    spreads = WriterMarks(settings.partitions)
    for processor in every_processor:
        reports = reporters.get(processor.name, frozenset())
        wired = _wire(
            app,
            settings,
            processor,
            routes,
            forwarders,
            forwarder_table,
            reports,
            log_starts,
            ordering,
            marks,
            spreads,
            every_processor,
        )
        tables.append(wired)

    every_route = [route for topic_routes in routes.values() for route in topic_routes]
    pauses = PauseControl(automatic=False)  # freeze per batch, a full collection hourly, nothing between

    def freeze_and_collect() -> None:
        full = pauses.after_batch()
        if full is not None:
            app.log.info("full garbage collection: %d unreachable objects, %.2f s", full.unreachable, full.seconds)

    turn = asyncio.Lock()  # the agent's batches and the release timer take turns

    delivered: dict[tuple[str, int], float] = {}  # wire partition -> when a record of it last came
    crash_after = settings.topic(os.environ[CRASH_AFTER_OUTPUTS_TO]) if os.environ.get(CRASH_AFTER_OUTPUTS_TO) else None

    times = BatchTimes()

    async def process(batch: list[Any]) -> None:
        sends: list[Send] = []
        gaps: set[Any] = set()
        now = time.monotonic()
        if times.first is None:
            times.first = now
        times.batches += 1
        times.records += len(batch)
        for item in batch:
            message = item.message
            delivered[(message.topic, message.partition)] = now
            decoded = Decoded(message)  # one decode per record, however many processors read it
            for route in routes[message.topic]:
                verdict = route.positions.admit(message.topic, message.partition, message.offset)
                if verdict is Verdict.NEXT:
                    sends.extend(route.handle(message, decoded))
                elif verdict is Verdict.GAP:
                    gaps.add((message.tp, route))
        # after what they cover, in the same produce batch: the other workers' readers rely on it
        due = marks.due(ordering.assigned, highwater, frontier=ordering.partition_frontier)
        sends.extend(_marker(mark) for mark in due)
        routed = time.monotonic()
        times.routing += routed - now
        sends.extend(ordering.release(sends))  # what each processor's merge lets go
        times.applying += time.monotonic() - routed
        # Taken before the first await: a rebalance signal may clear the caches meanwhile. State
        # first, then positions: one changelog partition keeps them in that order.
        writes = [(table, driver.drain_writes()) for driver, table in tables]
        writes += [(route.table, route.positions.drain_writes()) for route in every_route]
        rewinds = _rewinds(gaps, app.consumer._committed_offset)  # faust has no public getter
        sending = time.monotonic()
        ordering.sent(await send_batched(app, sends))  # outputs durable before the state that produced them
        times.outputs_acked += time.monotonic() - sending
        if crash_after is not None and any(send.topic == crash_after for send in sends):
            os.kill(os.getpid(), signal.SIGKILL)
        # Each value goes to the Table's store and to its changelog, and the batch waits for the
        # broker's acknowledgements, in drain order (one partition keeps them in order). Setting
        # table[key] instead queues each changelog record in faust's producer buffer, which
        # stops the stream for a flush every 100 records, a fraction of a second each. (The
        # Tables are in memory: there is no store offset to record, which faust's own write adds.)
        changelog = []
        for table, changed in writes:
            topic = table.changelog_topic.get_topic_name()
            for key, value in changed.items():
                raw_key = key.encode()
                table.data[raw_key] = value
                changelog.append(Send(topic, table.partition_for_key(raw_key), raw_key, value))
        # The writers' markers name where their acknowledged outputs end, so they can go now, with the
        # state, rather than wait for the next batch: a reader on another worker waits for them.
        changelog += [_marker(m) for m in spreads.due(ordering.assigned, ordering.writer_frontier, ordering.produced)]
        sending = time.monotonic()
        await send_batched(app, changelog, whole=True)  # per partition, all of it durable or none
        times.state_acked += time.monotonic() - sending
        if rewinds:
            app.log.warning("records skipped before they were applied, seeking back to %s", rewinds)
            await app.consumer.seek_wait(rewinds)  # in the consumer's thread, where aiokafka lives
        freeze_and_collect()
        ended = time.monotonic()
        times.in_batches += ended - now
        if batch or sends or changelog:
            times.last_work = ended

    async def run(stream: Any) -> None:
        async for batch in stream.take_events(BATCH, within=WITHIN_S):
            async with turn:
                await process(batch)

    app.agent(app.topic(*routes, schema=RAW), name=AGENT)(run)

    @app.timer(interval=RELEASE_INTERVAL_S)
    async def _release_held() -> None:
        # A held record may wait for what arrives in no record of its own: a high-water mark, the
        # acknowledgement of what the last batch sent. faust yields no empty batch to look again.
        if (
            ordering.held()
            or marks.due(ordering.assigned, highwater, False, ordering.partition_frontier)
            or spreads.due(ordering.assigned, ordering.writer_frontier, ordering.produced, tell=False)
        ):
            async with turn:
                await process([])

    @app.timer(interval=COLLECTOR_CHECK_S)
    async def _collect_when_idle() -> None:
        # Nothing collects between batches (collector.py), and an idle worker still makes garbage
        # (heartbeats, reconnects through a broker outage): its hourly full collection must not wait
        # for the next batch.
        freeze_and_collect()

    @app.timer(interval=1.0)
    async def _seek_stalled() -> None:
        now = time.monotonic()
        rewinds: dict[Any, int] = {}
        for wire, partition in ordering.assigned:
            end = highwater(wire, partition)
            if end is None or now - delivered.get((wire, partition), now) < STALL_S:
                continue
            tp = TP(wire, partition)
            expected = {route: route.positions.expected(wire, partition) for route in routes[wire]}
            behind = {(tp, route) for route, e in expected.items() if e is not None and e < end}
            if behind:
                rewinds.update(_rewinds(behind, app.consumer._committed_offset))
                delivered[(wire, partition)] = now  # the seek's records get their time to come
        if rewinds:
            async with turn:
                app.log.warning("records not applied, none delivered for %.0f s: seeking back to %s", STALL_S, rewinds)
                await app.consumer.seek_wait(rewinds)

    stalls = Stalls(WAIT_REPORT_S, WAIT_REPEAT_S)

    @app.timer(interval=WAIT_REPORT_S / 6)
    async def _report_waits() -> None:
        # A merge that waits for ever must say what for: the decisions behind it are not being made.
        stalled = stalls.due(ordering.waits(), time.monotonic())
        if stalled:
            app.log.warning(
                "held records not released for %.0f s or more, reported every %.0f s while they stay (the decisions "
                "they lead to wait too):\n  %s",
                WAIT_REPORT_S,
                WAIT_REPEAT_S,
                "\n  ".join(describe(stalled)),
            )

    @app.on_before_shutdown.connect
    async def _report_times(sender: Any, **kwargs: Any) -> None:
        app.log.info("%s", times.summary(time.monotonic()))

    @app.on_partitions_revoked.connect
    async def _drop_held(sender: Any, revoked: Any, **kwargs: Any) -> None:
        ordering.clear()  # their positions make the consumer deliver them again, wherever they go

    @app.on_partitions_assigned.connect
    async def _forget_caches(sender: Any, assigned: Any, **kwargs: Any) -> None:
        await _read_log_starts(app, {tp for tp in assigned if tp.topic in routes}, log_starts)
        for driver, _ in tables:  # partitions moved: the Tables, not our caches, are the truth now
            driver.forget_cache()
        for route in every_route:
            route.positions.forget()
        ordering.assign({(tp.topic, tp.partition) for tp in assigned if tp.topic in routes})
        marks.reset()
        spreads.reset()
        now = time.monotonic()
        delivered.update({where: now for where in ordering.assigned})  # the stall clock starts now

    return app


def _highwater_of(app: faust.App) -> Callable[[str, int], int | None]:
    """The high-water mark the consumer last fetched for a partition (None before its first fetch
    or when the partition is not assigned here): no broker call."""

    def highwater(topic: str, partition: int) -> int | None:
        try:
            return app.consumer.highwater(TP(topic, partition))
        except (AssertionError, AttributeError):
            return None

    return highwater


async def _read_log_starts(app: faust.App, tps: set[Any], log_starts: dict[tuple[str, int], int]) -> None:
    """Where each partition's log starts now, read when partitions are assigned (never from the
    agent's batch loop: a broker call there waited on the consumer thread while a rebalance waited on
    the agent, and the two-worker fault test hung). When the broker does not say, a partition not
    known yet starts at 0: a route then never takes a later record as its start."""
    if not tps:
        return
    try:
        starts = await app.consumer.earliest_offsets(*tps)
    except KafkaError as error:
        app.log.warning("could not read where %d partitions start (%s): assuming 0 for new ones", len(tps), error)
        starts = {tp: 0 for tp in tps if (tp.topic, tp.partition) not in log_starts}
    log_starts.update({(tp.topic, tp.partition): offset for tp, offset in starts.items()})


class GaplessConsumer(faust_aiokafka.Consumer):
    """faust's consumer, except that a jump in offsets is not recorded as a gap to commit past.

    faust treats a jump as records that legitimately do not exist (compaction, transaction
    markers) and adds their offsets to the acknowledged ones at commit time. Our inputs have no
    such holes: a jump is records skipped around a rebalance, which the routes seek back for, and
    faust then acknowledges them a second time. Counted twice, they cut its runs of consecutive
    offsets to one or two, so its commit advances about one offset per commit interval and falls
    behind by minutes (docs/kafka.md, "Guarantees on Kafka").
    Without the gap, faust commits up to the first record not yet acknowledged, which is exact.
    """

    async def _add_gap(self, tp: Any, offset_from: int, offset_to: int) -> None:
        return None


def _rewinds(gaps: set[tuple[Any, Route]], committed: Mapping[Any, int | None]) -> dict[Any, int]:
    """Per partition, where to seek: the earliest offset a route that saw a gap expects, or faust's
    committed offset when that is earlier (faust commits nothing more until every record after its
    committed offset has been delivered and acknowledged; those records are duplicates to us)."""
    rewinds: dict[Any, int] = {}
    for tp, route in gaps:
        expected = route.positions.expected(tp.topic, tp.partition)
        if expected is not None:
            done = committed.get(tp)  # None: faust has committed nothing there yet (0 is an offset)
            rewinds[tp] = min(expected, rewinds.get(tp, expected), expected if done is None else done)
    return rewinds


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


RAW = faust.Schema(key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")


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


def _raw_table(app: faust.App, settings: KafkaSettings, name: str) -> Any:
    # key_type/value_type bytes make faust pick the raw codec for the Table and its changelog (with
    # no types it falls back to json, and recovery cannot parse what was written). Passing a Schema
    # that also sets the types left the agent idle on faust 0.15.3 (records fetched, none delivered).
    table = app.Table(name, partitions=settings.partitions, use_partitioner=True, key_type=bytes, value_type=bytes)
    table.partition_for_key = lambda key: _table_partition(key.decode(), settings.partitions)
    return table


def _wire(
    app: faust.App,
    settings: KafkaSettings,
    processor: Processor,
    routes: dict[str, list[Route]],
    forwarders: dict[str, Route],
    forwarder_table: Any,
    reports: frozenset[str],
    log_starts: dict[tuple[str, int], int],
    ordering: Ordering,
    marks: ForwardMarks,
    spreads: WriterMarks,
    every_processor: list[Processor],
) -> tuple[Driver, Any]:
    """Add the processor's routes (its inputs, and the forwarders of topics it repartitions, unless
    another processor added them) and its feeds, and return its driver with the Table it persists
    to. Its routes hold what they take in its merge; what the merge releases is applied."""
    rekeyed = repartition_topics(settings, processor)
    misplaced = misplaced_topics(settings, processor)
    sinks = {t: settings.topic(t) for t in (*processor.outputs, DEAD_LETTERS)}
    table = _raw_table(app, settings, processor.name)
    store = TableStore(table)
    driver = Driver(processor, store, reports, System.written(every_processor))
    forwarded = {t: (TOPICS[t].KEY, internal, True) for t, internal in misplaced.items()}
    forwarded |= {t: (field, rekeyed[t], False) for t, field in processor.partition_by.items()}
    for topic, (field, internal, only_misplaced) in sorted(forwarded.items()):
        name = forwarder_route(topic, field)
        if name not in forwarders:
            handle = _forwarder(settings, topic, field, internal, only_misplaced)
            read = Positions(name, TableStore(forwarder_table), log_starts)
            forwarders[name] = Route(handle, read, forwarder_table)
            routes.setdefault(settings.topic(topic), []).append(forwarders[name])
            writers = () if only_misplaced else _colocated_writers(topic, every_processor)
            marks.add(Forwarding(settings.topic(topic), settings.topic(internal), read, writers))

    partitions = settings.partitions
    feeds = ordering.feeds.setdefault(processor.name, {})
    writers = SYSTEM.merge_writers(processor, every_processor)
    feedback = SYSTEM.feedback_writers(processor, every_processor)

    def drive(held: Held, topic: str) -> list[Send]:
        sends = []
        for output in driver.handle_decoded(held.decoded.item(topic), held.origin):
            key = output.key.encode()
            # An output happened when its cause did, unless it says otherwise (as in the embedded log).
            headers = None if output.time_ms() is not None else [(TIME_HEADER, str(held.key[0]).encode())]
            sends.append(Send(sinks[output.TOPIC], partition_of(key, partitions), key, encode(output), headers))
        return sends

    def applier(positions: Positions, topic: str) -> Callable[[Held], list[Send]]:
        def apply(held: Held) -> list[Send]:
            message = held.message
            positions.release(message.topic, message.partition, message.offset)
            return drive(held, topic)

        return apply

    def holder(positions: Positions, topic: str, index: int, from_origin: bool) -> Callable[[Any, Decoded], list[Send]]:
        apply = applier(positions, topic)

        def hold(message: Any, decoded: Decoded) -> list[Send]:
            if from_origin and (mark := _header(message, MARK_HEADER)) is not None:
                said = parse(mark)
                if said is not None:
                    ordering.forwarded(message.topic, message.partition, said)
                return []  # a forwarder's progress, not an event
            if from_origin and (mark := _header(message, WRITER_HEADER)) is not None:
                told = parse_writer(mark)
                if told is not None:
                    ordering.writer_marked(message.topic, message.partition, told)
                return []  # another worker's writers' progress, not an event
            if not from_origin and not decoded.in_place(topic, partitions):
                return []  # its forwarder sends it where its key's state is
            origin = _origin(message) if from_origin else Origin(f"{topic}/{message.partition}", message.offset)
            positions.hold(message.topic, message.partition, message.offset)
            held = Held(
                merge_key(_record_time(message), index, decoded.item(topic), origin.offset),
                apply,
                message,
                decoded,
                origin,
            )
            ordering.hold(processor.name, message.partition, topic, held)
            return []

        return hold

    def spread(topic: str, sink: str, colocated: tuple[str, ...]) -> None:
        """Its writers whose outputs may land in any partition tell it, through ``sink``, where they are."""
        for writer in writers[topic]:
            if writer not in colocated:
                spreads.add(Spread(writer, settings.topic(topic), sink))

    for index, topic in enumerate(processor.inputs):
        field = processor.partition_by.get(topic, TOPICS[topic].KEY)
        timed = System.in_time_order(topic, every_processor)  # a producer's topic
        colocated = _colocated_writers(topic, every_processor)
        source = Consumed(forwarders[forwarder_route(topic, field)].positions, settings.topic(topic))
        if topic in rekeyed:  # every record comes through the worker's own topic, keyed by the field
            wire = settings.topic(rekeyed[topic])
            positions = Positions(f"{processor.name}:{topic}", store, log_starts)
            routes.setdefault(wire, []).append(Route(holder(positions, topic, index, True), positions, table))
            feeds[topic] = Feed(
                index,
                None,
                Consumed(positions, wire),
                source,
                writers[topic],
                colocated,
                feedback[topic],
                timed,
            )
            spread(topic, wire, colocated)
            continue
        own = Positions(f"{processor.name}:{topic}", store, log_starts)
        back = Positions(f"{processor.name}:{topic}:misplaced", store, log_starts)
        back_wire = settings.topic(misplaced[topic])
        routes.setdefault(settings.topic(topic), []).append(Route(holder(own, topic, index, False), own, table))
        routes.setdefault(back_wire, []).append(Route(holder(back, topic, index, True), back, table))
        direct = Consumed(own, settings.topic(topic))
        feeds[topic] = Feed(
            index, direct, Consumed(back, back_wire), source, writers[topic], colocated, feedback[topic], timed
        )
        spread(topic, back_wire, colocated)
    return driver, table


def _marker(mark: Mark) -> Send:
    return Send(mark.topic, mark.partition, None, b"", [(mark.name, mark.header)])


def _colocated_writers(topic: str, processors: list[Processor]) -> tuple[str, ...]:
    """The writers of ``topic`` whose frontier its forwarder's markers carry: those whose outputs
    land in the partition they process (``System.colocated``), unless a reader of the topic reads
    them through a feedback pipe (a loop must not wait on itself)."""
    readers = [p.name for p in processors if topic in p.inputs]
    return tuple(
        w.name
        for w in processors
        if SYSTEM.colocated(w, topic) and not any((w.name, r) in SYSTEM.feedback for r in readers)
    )


def _record_time(message: Any) -> int:
    """The time a record without an event time is ordered at: the one its producer gave it in a
    header (``fastci.runtime.kafka_io.time_headers``), else its timestamp (its arrival)."""
    raw = _header(message, TIME_HEADER)
    if raw is not None and raw.isdigit():  # another client's header that is not a time: ignored
        return int(raw)
    return round(message.timestamp * 1000) if message.timestamp else 0


def _header(message: Any, name: str) -> bytes | None:
    headers = message.headers or {}
    pairs = headers.items() if isinstance(headers, dict) else headers
    return next((value for key, value in pairs if key == name), None)


def _table_partition(key: str, partitions: int) -> int:
    """A position lives in the partition it describes; a compound state key in the partition of
    its owner, the partition key it starts with (where its input records are)."""
    partition = position_partition(key)
    return partition_of(owner_of(key).encode(), partitions) if partition is None else partition


def _forwarder(
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
            headers.append((TIME_HEADER, str(_record_time(message)).encode()))
        return [Send(sink, partition, raw_key, value, headers)]

    return forward


def _origin(message: Any) -> Origin:
    """Where a forwarded record was first appended, from the header the forwarder set: a crash of
    the forwarder re-sends records at new offsets, but with the same origin."""
    raw = _header(message, ORIGIN_HEADER)
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


def _credentials(settings: KafkaSettings) -> Any:
    ssl_context = settings.client_options().get("ssl_context")
    if not settings.sasl_mechanism:
        return faust.SSLCredentials(ssl_context) if ssl_context else None
    return faust.SASLCredentials(
        username=settings.username,
        password=settings.password,
        mechanism=settings.sasl_mechanism,
        ssl_context=ssl_context,
    )
