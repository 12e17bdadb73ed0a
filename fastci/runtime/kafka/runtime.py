"""The Kafka runtime: every processor on one faust app, state in faust Tables.

One agent reads every topic. Each record is decoded once for all the processors reading it and held
in the merge of each (``fastci.runtime.kafka.ordering``: the ordering rule, by event time across
topics); what the merges release goes through the processors' ``Driver``, the same driver the
other runtimes use. A batch then commits in the contract's order (``fastci.runtime.contract``):
outputs sent and acknowledged, then the Tables' changelog records, one record batch per changelog
partition, all durable or none, before faust commits the batch's offsets. With the offset marks and
dedup window in each Table value, applied-event markers and deterministic output ids, a crash
anywhere gives no lost state and no duplicate a consumer would keep.

Why one agent and not one per processor: with several agents subscribed to one topic, each record is
shared by several faust channels. A rebalance clears the channels' queues, so a record one agent had
taken and another had only queued was never acknowledged, and the revoke waited for it for minutes.
With one agent, every record has exactly one channel.

faust can still deliver a record past a range it skipped around a rebalance; every route keeps its
own position per partition (``fastci.runtime.kafka.positions``) and the worker seeks back when a
route sees a gap, or when a partition it has not finished stops delivering.
"""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import faust
from aiokafka.errors import KafkaError
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from fastci.core.codec import encode
from fastci.core.config import KafkaSettings
from fastci.core.processor import Processor
from fastci.core.system import System, merge_key
from fastci.runtime.collector import PauseControl
from fastci.runtime.contract import commit
from fastci.runtime.driver import Driver, Origin
from fastci.runtime.kafka.broker import TIME_HEADER
from fastci.runtime.kafka.markers import (
    MARK_HEADER,
    WRITER_HEADER,
    Forwarding,
    ForwardMarks,
    ScatteredWriter,
    WriterMarks,
    parse,
    parse_writer,
)
from fastci.runtime.kafka.ordering import HeldRecord, InputPaths, Ordering, Stalls, WireReading, describe
from fastci.runtime.kafka.positions import Positions, Verdict
from fastci.runtime.kafka.routes import (
    FORWARDERS,
    Decoded,
    Route,
    TableStore,
    colocated_writers,
    forwarder,
    forwarder_route,
    header,
    misplaced_topics,
    origin_of,
    partition_of,
    record_time,
    repartition_topics,
    table_partition,
)
from fastci.runtime.kafka.sends import Send, marker_send, send_batched
from fastci.topology import DEAD_LETTERS, SYSTEM, TOPICS

AGENT = "fastci"
BATCH = 2000  # records per take; one Table write per key per batch
WITHIN_S = 0.05  # longest a record waits for its batch to fill (bounds latency when traffic is light)
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
RAW = faust.Schema(key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")


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

    def begin(self, now: float, records: int) -> None:
        if self.first is None:
            self.first = now
        self.batches += 1
        self.records += records

    def end(self, started: float, now: float, worked: bool) -> None:
        self.in_batches += now - started
        if worked:
            self.last_work = now

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


class KafkaRuntime:
    """The processors on one faust app: their routes and merges, each batch in named steps (route,
    release, commit), and what the worker does between batches and when partitions move.
    ``install`` hands it to the app; nothing runs before faust starts the app."""

    def __init__(self, app: faust.App, settings: KafkaSettings, processors: list[Processor]) -> None:
        self.app = app
        self.settings = settings
        self.processors = processors
        self.routes: dict[str, list[Route]] = {}  # wire topic -> its consumers
        self.forwarders: dict[str, Route] = {}  # shared by the app's processors
        self.log_starts: dict[tuple[str, int], int] = {}  # (wire topic, partition) -> first offset the log holds
        self.highwater = _highwater_of(app)
        self.ordering = Ordering([p.name for p in processors], {}, settings.partitions, self.highwater)
        self.marks = ForwardMarks(settings.partitions)
        self.spreads = WriterMarks(settings.partitions)
        needs_forwarders = any(p.partition_by for p in processors)
        self.forwarder_table = raw_table(app, settings, FORWARDERS) if needs_forwarders else None
        reporters = System.decode_reporters(processors)
        self.tables = [self._wire(p, reporters.get(p.name, frozenset())) for p in processors]
        self.every_route = [route for wire_routes in self.routes.values() for route in wire_routes]
        self.pauses = PauseControl(automatic=False)  # freeze per batch, a full collection hourly, nothing between
        self.turn = asyncio.Lock()  # the agent's batches and the timers take turns
        self.delivered: dict[tuple[str, int], float] = {}  # wire partition -> when a record of it last came
        crash_topic = os.environ.get(CRASH_AFTER_OUTPUTS_TO)
        self.crash_after = settings.topic(crash_topic) if crash_topic else None
        self.times = BatchTimes()
        self.stalls = Stalls(WAIT_REPORT_S, WAIT_REPEAT_S)

    # -- wiring: each processor's routes, feeds and store

    def _wire(self, processor: Processor, reports: frozenset[str]) -> tuple[Driver, Any]:
        """Add the processor's routes (its inputs, and the forwarders of topics it repartitions or may
        receive misplaced, unless another processor added them) and its feeds; return its driver with
        the Table it persists to. Its routes hold what they take in its merge; the merge releases."""
        table = raw_table(self.app, self.settings, processor.name)
        store = TableStore(table)
        driver = Driver(processor, store, reports, System.written(self.processors))
        self._add_forwarders(processor)
        writers = SYSTEM.merge_writers(processor, self.processors)
        feedback = SYSTEM.feedback_writers(processor, self.processors)
        rekeyed = repartition_topics(self.settings, processor)
        misplaced = misplaced_topics(self.settings, processor)
        sinks = {t: self.settings.topic(t) for t in (*processor.outputs, DEAD_LETTERS)}
        feeds = self.ordering.feeds.setdefault(processor.name, {})
        for index, topic in enumerate(processor.inputs):
            field = processor.partition_by.get(topic, TOPICS[topic].KEY)
            colocated = colocated_writers(topic, self.processors)
            source = WireReading(self.forwarders[forwarder_route(topic, field)].positions, self.settings.topic(topic))
            apply = functools.partial(self._apply, driver, sinks, topic)
            own = Positions(f"{processor.name}:{topic}", store, self.log_starts)
            if topic in rekeyed:  # every record comes through the worker's own topic, keyed by the field
                wire, direct, back = self.settings.topic(rekeyed[topic]), None, own
            else:  # straight from the topic; its misplaced records come back through the worker's topic
                wire = self.settings.topic(misplaced[topic])
                back = Positions(f"{processor.name}:{topic}:misplaced", store, self.log_starts)
                direct = WireReading(own, self.settings.topic(topic))
                self._route(direct.wire, self._holder(processor, own, topic, index, False, apply), own, table)
            self._route(wire, self._holder(processor, back, topic, index, True, apply), back, table)
            timed = System.in_time_order(topic, self.processors)  # a producer's topic
            feeds[topic] = InputPaths(
                index, direct, WireReading(back, wire), source, writers[topic], colocated, feedback[topic], timed
            )
            for writer in writers[topic]:  # writers whose outputs may land in any partition say where they are
                if writer not in colocated:
                    self.spreads.add(ScatteredWriter(writer, self.settings.topic(topic), wire))
        return driver, table

    def _add_forwarders(self, processor: Processor) -> None:
        rekeyed = repartition_topics(self.settings, processor)
        forwarded = {
            t: (TOPICS[t].KEY, internal, True) for t, internal in misplaced_topics(self.settings, processor).items()
        }
        forwarded |= {t: (field, rekeyed[t], False) for t, field in processor.partition_by.items()}
        for topic, (field, internal, only_misplaced) in sorted(forwarded.items()):
            name = forwarder_route(topic, field)
            if name in self.forwarders:
                continue
            handle = forwarder(self.settings, topic, field, internal, only_misplaced)
            read = Positions(name, TableStore(self.forwarder_table), self.log_starts)
            self.forwarders[name] = self._route(self.settings.topic(topic), handle, read, self.forwarder_table)
            writers = () if only_misplaced else colocated_writers(topic, self.processors)
            self.marks.add(Forwarding(self.settings.topic(topic), self.settings.topic(internal), read, writers))

    def _route(
        self, wire: str, handle: Callable[[Any, Decoded], list[Send]], positions: Positions, table: Any
    ) -> Route:
        route = Route(handle, positions, table)
        self.routes.setdefault(wire, []).append(route)
        return route

    def _holder(
        self,
        processor: Processor,
        positions: Positions,
        topic: str,
        index: int,
        from_origin: bool,
        apply: Callable[[Positions, HeldRecord], list[Send]],
    ) -> Callable[[Any, Decoded], list[Send]]:
        """A route's handler: a record goes into the processor's merge (a marker read through the
        worker's topic goes to the ordering's knowledge instead)."""
        partitions = self.settings.partitions
        release = functools.partial(apply, positions)

        def hold(message: Any, decoded: Decoded) -> list[Send]:
            if from_origin and self._read_marker(message):
                return []  # another worker's progress, not an event
            if not from_origin and not decoded.in_place(topic, partitions):
                return []  # its forwarder sends it where its key's state is
            origin = origin_of(message) if from_origin else Origin(f"{topic}/{message.partition}", message.offset)
            positions.hold(message.topic, message.partition, message.offset)
            key = merge_key(record_time(message), index, decoded.item(topic), origin.offset)
            self.ordering.hold(
                processor.name, message.partition, topic, HeldRecord(key, release, message, decoded, origin)
            )
            return []

        return hold

    def _read_marker(self, message: Any) -> bool:
        """Whether ``message`` is a progress marker (a forwarder's or a writer's): if so, the ordering
        learns what it says."""
        if (mark := header(message, MARK_HEADER)) is not None:
            said = parse(mark)
            if said is not None:
                self.ordering.forwarded(message.topic, message.partition, said)
            return True
        if (mark := header(message, WRITER_HEADER)) is not None:
            told = parse_writer(mark)
            if told is not None:
                self.ordering.writer_marked(message.topic, message.partition, told)
            return True
        return False

    def _apply(
        self, driver: Driver, sinks: dict[str, str], topic: str, positions: Positions, held: HeldRecord
    ) -> list[Send]:
        """A released record through its processor: its outputs, as records to send."""
        message = held.message
        positions.release(message.topic, message.partition, message.offset)
        sends = []
        for output in driver.handle_decoded(held.decoded.item(topic), held.origin):
            key = output.key.encode()
            # An output happened when its cause did, unless it says otherwise (as in the embedded log).
            headers = None if output.time_ms() is not None else [(TIME_HEADER, str(held.key[0]).encode())]
            partition = partition_of(key, self.settings.partitions)
            sends.append(Send(sinks[output.TOPIC], partition, key, encode(output), headers))
        return sends

    # -- a batch: route, release, commit

    async def process(self, batch: list[Any]) -> None:
        """One batch of delivered records (none: a timer looking at what is held)."""
        started = time.monotonic()
        self.times.begin(started, len(batch))
        sends, gaps = self._route_batch(batch, started)
        # after what they cover, in the same produce batch: the other workers' readers rely on it
        due = self.marks.due(self.ordering.assigned, self.highwater, frontier=self.ordering.partition_frontier)
        sends.extend(marker_send(mark) for mark in due)
        routed = time.monotonic()
        self.times.routing += routed - started
        sends.extend(self.ordering.release(sends))  # what each processor's merge lets go
        self.times.applying += time.monotonic() - routed
        rewinds = _rewinds(gaps, self.app.consumer._committed_offset)  # faust has no public getter
        drains = [(table, driver) for driver, table in self.tables]
        drains += [(route.table, route.positions) for route in self.every_route]  # positions after state
        changelog: list[Send] = []
        for step in commit(sends, drains, self._send_outputs, functools.partial(self._send_state, changelog)):
            await step
        if rewinds:
            self.app.log.warning("records skipped before they were applied, seeking back to %s", rewinds)
            await self.app.consumer.seek_wait(rewinds)  # in the consumer's thread, where aiokafka lives
        self.collect()
        self.times.end(started, time.monotonic(), worked=bool(batch or sends or changelog))

    def _route_batch(self, batch: list[Any], now: float) -> tuple[list[Send], set[tuple[Any, Route]]]:
        """Each record to every route reading its wire topic, once its position admits it; returns
        what the forwarders send and the gaps seen."""
        sends: list[Send] = []
        gaps: set[tuple[Any, Route]] = set()
        for item in batch:
            message = item.message
            self.delivered[(message.topic, message.partition)] = now
            decoded = Decoded(message)  # one decode per record, however many processors read it
            for route in self.routes[message.topic]:
                verdict = route.positions.admit(message.topic, message.partition, message.offset)
                if verdict is Verdict.NEXT:
                    sends.extend(route.handle(message, decoded))
                elif verdict is Verdict.GAP:
                    gaps.add((message.tp, route))
        return sends, gaps

    async def _send_outputs(self, sends: list[Send]) -> None:
        """The commit's outputs: sent and acknowledged."""
        sending = time.monotonic()
        self.ordering.sent(await send_batched(self.app, sends))
        self.times.outputs_acked += time.monotonic() - sending
        if self.crash_after is not None and any(send.topic == self.crash_after for send in sends):
            os.kill(os.getpid(), signal.SIGKILL)

    async def _send_state(self, changelog: list[Send], writes: list[tuple[Any, Mapping[str, bytes]]]) -> None:
        """The commit's state: each value to its Table and its changelog, and the batch waits for the
        broker's acknowledgements, in drain order (one partition keeps them in order). Setting
        table[key] instead queues each changelog record in faust's producer buffer, which stops the
        stream for a flush every 100 records. (The Tables are in memory: there is no store offset to
        record, which faust's own write adds.)"""
        for table, changed in writes:
            topic = table.changelog_topic.get_topic_name()
            for key, value in changed.items():
                raw_key = key.encode()
                table.data[raw_key] = value
                changelog.append(Send(topic, table.partition_for_key(raw_key), raw_key, value))
        # The writers' markers name where their acknowledged outputs end, so they can go now, with the
        # state, rather than wait for the next batch: a reader on another worker waits for them.
        ordering = self.ordering
        due = self.spreads.due(ordering.assigned, ordering.writer_frontier, ordering.produced)
        changelog += [marker_send(m) for m in due]
        sending = time.monotonic()
        await send_batched(self.app, changelog, whole=True)  # per partition, all of it durable or none
        self.times.state_acked += time.monotonic() - sending

    def collect(self) -> None:
        full = self.pauses.after_batch()
        if full is not None:
            self.app.log.info("full garbage collection: %d unreachable objects, %.2f s", full.unreachable, full.seconds)

    # -- between batches

    async def release_held(self) -> None:
        """A held record may wait for what arrives in no record of its own: a high-water mark, the
        acknowledgement of what the last batch sent. faust yields no empty batch to look again."""
        ordering = self.ordering
        if (
            ordering.held()
            or self.marks.due(ordering.assigned, self.highwater, False, ordering.partition_frontier)
            or self.spreads.due(ordering.assigned, ordering.writer_frontier, ordering.produced, tell=False)
        ):
            async with self.turn:
                await self.process([])

    async def seek_stalled(self) -> None:
        """Seek back in partitions with records not applied of which nothing came for ``STALL_S``."""
        now = time.monotonic()
        rewinds: dict[Any, int] = {}
        for wire, partition in self.ordering.assigned:
            end = self.highwater(wire, partition)
            if end is None or now - self.delivered.get((wire, partition), now) < STALL_S:
                continue
            tp = TP(wire, partition)
            expected = {route: route.positions.expected(wire, partition) for route in self.routes[wire]}
            behind = {(tp, route) for route, e in expected.items() if e is not None and e < end}
            if behind:
                rewinds.update(_rewinds(behind, self.app.consumer._committed_offset))
                self.delivered[(wire, partition)] = now  # the seek's records get their time to come
        if rewinds:
            async with self.turn:
                self.app.log.warning(
                    "records not applied, none delivered for %.0f s: seeking back to %s", STALL_S, rewinds
                )
                await self.app.consumer.seek_wait(rewinds)

    def report_waits(self) -> None:
        """A merge that waits for ever must say what for: the decisions behind it are not being made."""
        stalled = self.stalls.due(self.ordering.waits(), time.monotonic())
        if stalled:
            self.app.log.warning(
                "held records not released for %.0f s or more, reported every %.0f s while they stay (the decisions "
                "they lead to wait too):\n  %s",
                WAIT_REPORT_S,
                WAIT_REPEAT_S,
                "\n  ".join(describe(stalled)),
            )

    # -- partitions moving

    def revoked(self) -> None:
        self.ordering.clear()  # their positions make the consumer deliver them again, wherever they go

    async def assigned(self, assigned: set[Any]) -> None:
        """Partitions moved: the Tables, not our caches, are the truth now."""
        mine = {tp for tp in assigned if tp.topic in self.routes}
        await _read_log_starts(self.app, mine, self.log_starts)
        for driver, _ in self.tables:
            driver.forget_cache()
        for route in self.every_route:
            route.positions.forget()
        self.ordering.assign({(tp.topic, tp.partition) for tp in mine})
        self.marks.reset()
        self.spreads.reset()
        now = time.monotonic()
        self.delivered.update({where: now for where in self.ordering.assigned})  # the stall clock starts now

    def install(self) -> None:
        """The agent, timers and signal handlers on the app."""
        app = self.app

        async def run(stream: Any) -> None:
            async for batch in stream.take_events(BATCH, within=WITHIN_S):
                async with self.turn:
                    await self.process(batch)

        app.agent(app.topic(*self.routes, schema=RAW), name=AGENT)(run)
        app.timer(interval=RELEASE_INTERVAL_S, name="release_held")(self.release_held)
        # Nothing collects between batches (collector.py), and an idle worker still makes garbage
        # (heartbeats, reconnects through a broker outage): its hourly full collection must not wait.
        app.timer(interval=COLLECTOR_CHECK_S, name="collect_when_idle")(_coroutine(self.collect))
        app.timer(interval=1.0, name="seek_stalled")(self.seek_stalled)
        app.timer(interval=WAIT_REPORT_S / 6, name="report_waits")(_coroutine(self.report_waits))

        async def report_times(sender: Any, **kwargs: Any) -> None:
            app.log.info("%s", self.times.summary(time.monotonic()))

        async def drop_held(sender: Any, revoked: Any, **kwargs: Any) -> None:
            self.revoked()

        async def forget_caches(sender: Any, assigned: Any, **kwargs: Any) -> None:
            await self.assigned(assigned)

        app.on_before_shutdown.connect(report_times)
        app.on_partitions_revoked.connect(drop_held)
        app.on_partitions_assigned.connect(forget_caches)


def _coroutine(step: Callable[[], None]) -> Callable[[], Any]:
    async def run() -> None:
        step()

    run.__name__ = step.__name__
    return run


def raw_table(app: faust.App, settings: KafkaSettings, name: str) -> Any:
    # key_type/value_type bytes make faust pick the raw codec for the Table and its changelog (with
    # no types it falls back to json, and recovery cannot parse what was written). Passing a Schema
    # that also sets the types left the agent idle on faust 0.15.3 (records fetched, none delivered).
    table = app.Table(name, partitions=settings.partitions, use_partitioner=True, key_type=bytes, value_type=bytes)
    table.partition_for_key = lambda key: table_partition(key.decode(), settings.partitions)
    return table


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
