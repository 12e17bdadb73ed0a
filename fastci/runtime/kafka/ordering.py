"""The ordering rule on Kafka: a processor's input streams merged by event time, per partition.

The embedded runtime merges each processor's input topics by the time each record carries
(``fastci.runtime.embedded``): it takes the least head among its topics, every topic being read to
its end. faust delivers partitions in fetch order instead, so the worker holds what it is given
and releases the same merge: per processor and partition, one stream per input topic and origin
partition (a repartitioned topic interleaves its source partitions in delivery order, so each
source partition is its own stream), and the least head goes first, but only while every stream
that is empty, or released in time order, is known to hold nothing still to come that would sort
before it. A topic processors write is released in log order (its writers append it in time
order); a producer's topic in time order within ``LATENESS_MS`` (``fastci.runtime.ordering``: the
queue and the merge both runtimes use). What a stream may still hold is its *limit*, given by the
runtime: nothing when it has been read to its end and its writer has nothing left; only records
after its writer's low watermark when the writer still holds some; for a producer's topic not read
to its end, records from its latest time less the bound on; and anything at all while any other
stream has not been read to its end (the merge waits for it).

Nothing here touches Kafka: the worker (``streams.app``) says what is complete.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fastci.core.system import FEEDBACK_LEAD_MS, LATENESS_MS, SortKey
from fastci.runtime.kafka.markers import ForwarderProgress, Forwarding, WriterProgress
from fastci.runtime.ordering import ANYTHING, Merge, Stream, lateness_limit, writers_limit


@dataclass(slots=True)
class HeldRecord:
    """A delivered record waiting for its turn."""

    key: SortKey
    apply: Callable[[HeldRecord], list[Any]]  # applies it; returns the records to send
    message: Any
    decoded: Any
    origin: Any  # a ``fastci.runtime.driver.Origin``; its stream's floor is set when it is released
    released: bool = False


class OriginStream(Stream[HeldRecord]):
    """One input topic's records from one origin partition (a repartitioned topic interleaves its
    source partitions in delivery order, so each is a stream of its own)."""

    def __init__(self, topic: str, origin: str, in_time_order: bool = False) -> None:
        super().__init__(in_time_order)
        self.topic = topic
        self.origin = origin  # "<topic>/<partition>" where the records were first appended

    def push(self, held: HeldRecord) -> None:
        self.waiting.push(held)
        if self.in_time_order:
            self.saw(held.key[0])

    def pop(self) -> HeldRecord:
        """The least record; in time order, its origin given the stream's floor: the first offset not
        released yet (in log order, the floor is its own offset)."""
        held = self.waiting.pop()
        if self.in_time_order:
            first = self.waiting.first()
            floor = first.origin.offset if first is not None else held.origin.offset + 1
            held.origin = held.origin._replace(floor=floor)
        return held


@dataclass(frozen=True, slots=True)
class Wait:
    """A merge that holds records back, and the empty stream it waits for."""

    processor: str
    partition: int
    stream: str  # "<topic>/<origin partition>"
    held: int  # records the merge holds
    reason: str
    head: SortKey = ()  # the least held record's sort key: a wait is a stall while it stays the same

    def __str__(self) -> str:
        return f"{self.processor}[{self.partition}] holds {self.held}, waiting on {self.stream}: {self.reason}"


class Stalls:
    """Which waits to report: a merge whose least held record has stayed the same for ``after``
    seconds, then again every ``every`` seconds while it stays (the caller gives the time)."""

    def __init__(self, after: float, every: float) -> None:
        self.after = after
        self.every = every
        self._since: dict[tuple[str, int, str], tuple[SortKey, float]] = {}  # a wait -> (its head, since when)
        self._told: dict[tuple[str, int, str], float] = {}  # a wait -> when it was last reported

    def due(self, waits: list[Wait], now: float) -> list[Wait]:
        since: dict[tuple[str, int, str], tuple[SortKey, float]] = {}
        due = []
        for wait in waits:
            where = (wait.processor, wait.partition, wait.stream)
            head, start = self._since.get(where, (wait.head, now))
            if head != wait.head:  # it moved: a new wait
                start = now
                self._told.pop(where, None)
            since[where] = (wait.head, start)
            told = self._told.get(where)
            if now - start >= self.after and (told is None or now - told >= self.every):
                due.append(wait)
                self._told[where] = now
        self._since = since
        self._told = {where: when for where, when in self._told.items() if where in since}
        return due


def describe(waits: list[Wait]) -> list[str]:
    """A stall report: one line per processor and reason, with the partitions and streams it holds
    back (the topology's order, so a writer that waits comes before the readers waiting on it)."""
    grouped: dict[tuple[str, str], dict[int, tuple[int, list[str]]]] = {}
    for wait in waits:
        partitions = grouped.setdefault((wait.processor, wait.reason), {})
        held, streams = partitions.setdefault(wait.partition, (wait.held, []))
        streams.append(wait.stream)
    lines = []
    for (processor, reason), partitions in grouped.items():
        held = sum(count for count, _ in partitions.values())
        where = ", ".join(str(p) for p in partitions)
        streams = ", ".join(sorted({s for _, names in partitions.values() for s in names}))
        noun = "partitions" if len(partitions) > 1 else "partition"
        lines.append(f"{processor} holds {held} in {noun} {where} ({streams}): {reason}")
    return lines


def _when(time_ms: float) -> str:
    return datetime.fromtimestamp(time_ms / 1000, UTC).isoformat(timespec="milliseconds")


class PartitionMerge(Merge[OriginStream]):
    """One processor's input streams in one partition, by origin partition."""

    def __init__(self, in_time_order: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.in_time_order = in_time_order  # the topics whose streams are released in time order

    def stream(self, topic: str, origin: str) -> OriginStream:
        found = self.streams.get(origin)
        if found is None:
            found = self.streams[origin] = OriginStream(topic, origin, topic in self.in_time_order)
        return found

    def clear(self) -> None:
        self.streams.clear()


class WireReading:
    """A route's reading of one wire topic: its positions (``fastci.runtime.kafka.positions``), which say
    how far it has read each partition."""

    __slots__ = ("positions", "wire")

    def __init__(self, positions: Any, wire: str) -> None:
        self.positions = positions
        self.wire = wire


@dataclass(frozen=True, slots=True)
class InputPaths:
    """Where one processor reads one input topic from: straight from the topic (records in the
    partition of their key) and/or through the worker's own topic, fed by a forwarder of the topic."""

    index: int  # the topic's place among the processor's inputs: ties in time go by it
    direct: WireReading | None  # the topic itself, when the processor reads it by its own key
    internal: WireReading  # the worker's topic the topic's (misplaced or rekeyed) records come back through
    source: WireReading  # the forwarder reading the topic
    writers: tuple[str, ...]  # the processors writing the topic (not through a feedback pipe)
    colocated: tuple[str, ...] = ()  # those of them whose frontier a forwarder's marker carries
    feedback: tuple[str, ...] = ()  # the processors writing it through a feedback pipe (run after it)
    in_time_order: bool = False  # a producer's topic (``System.in_time_order``)


class Ordering:
    """Every processor's merges on one worker, and what it knows of each stream's completeness.

    A stream (a topic's records from one origin partition, for one processor partition) is read to
    its end when every route it comes through has taken every record the broker holds in its
    partition (its high-water mark) and every record this worker has produced there; what the
    worker is sending now counts as not read. Then its limit is its writers' low watermark (an input
    topic has no writer: nothing left). A source partition another worker reads is read to its end
    when that worker's forwarder said, in the last progress marker read here, that it was caught up
    past every record this worker produced there (``fastci.runtime.kafka.markers``); the marker's writers'
    frontier, when it carries one, stands for the writers of that partition, which run there. A
    writer whose outputs land in any partition counts as far as every other worker holding a
    partition of it has said, in its last writer marker, once the stream is read past what that
    worker wrote into it."""

    def __init__(
        self,
        order: list[str],
        feeds: dict[str, dict[str, InputPaths]],
        partitions: int,
        highwater: Callable[[str, int], int | None],
    ) -> None:
        self.order = order  # writers before readers (the topology's processor order)
        self.feeds = feeds
        self.partitions = partitions
        self.highwater = highwater
        self.merges: dict[str, dict[int, PartitionMerge]] = {name: {} for name in order}
        self.frontier: dict[str, float] = {}  # processor -> its low watermark over this worker's partitions
        self.produced_end: dict[tuple[str, int], int] = {}
        self.in_flight: set[tuple[str, int]] = set()
        self.assigned: set[tuple[str, int]] = set()
        # (worker topic, partition, source partition) -> what the last marker read there said of it
        self.forwarders_said: dict[tuple[str, int, int], ForwarderProgress] = {}
        # (worker topic, partition, writer) -> per partition of the writer elsewhere, its last writer marker
        self.writers_said: dict[tuple[str, int, str], dict[int, WriterProgress]] = {}

    def assign(self, assigned: set[tuple[str, int]]) -> None:
        """Partitions moved: forget what was held (its positions make the consumer deliver it again)
        and merge anew in the partitions this worker now reads."""
        self.assigned = set(assigned)
        self.forwarders_said.clear()  # every forwarder tells its readers again after a rebalance
        self.writers_said.clear()
        local = sorted({partition for _, partition in assigned})
        self.frontier.clear()
        for name, merges in self.merges.items():
            merges.clear()
            for partition in local:
                merge = merges[partition] = self._merge(name)
                for topic in self.feeds[name]:
                    for origin in range(self.partitions):
                        merge.stream(topic, f"{topic}/{origin}")

    def clear(self) -> None:
        for merges in self.merges.values():
            for merge in merges.values():
                merge.clear()

    def hold(self, name: str, partition: int, topic: str, held: HeldRecord) -> None:
        merges = self.merges[name]
        merge = merges.get(partition)
        if merge is None:
            merge = merges[partition] = self._merge(name)
        merge.stream(topic, held.origin.stream).push(held)

    def _merge(self, name: str) -> PartitionMerge:
        """A merge for processor ``name``: the topics no processor writes are released in time order."""
        return PartitionMerge(frozenset(topic for topic, feed in self.feeds[name].items() if feed.in_time_order))

    def held(self) -> int:
        return sum(merge.held() for merges in self.merges.values() for merge in merges.values())

    def forwarded(self, wire: str, partition: int, said: ForwarderProgress) -> None:
        """A forwarder's progress marker, read in ``partition`` of the worker topic ``wire``."""
        self.forwarders_said[(wire, partition, said.partition)] = said

    def writer_marked(self, wire: str, partition: int, said: WriterProgress) -> None:
        """Another worker's writer marker, read in ``partition`` of the worker topic ``wire``."""
        told = self.writers_said.setdefault((wire, partition, said.writer), {})
        for held in said.partitions:
            told[held] = said

    def writer_frontier(self, writer: str) -> tuple[tuple[int, ...], float] | None:
        """For a writer marker: this worker's partitions of ``writer`` and the earliest time they may
        still emit a record at; None while what they emitted is not acknowledged yet."""
        merges = self.merges[writer]
        if self.in_flight or not merges:
            return None
        return tuple(sorted(merges)), min(self._watermark(writer, p, m) for p, m in merges.items())

    def produced(self, topic: str, partition: int) -> int:
        """Where this worker's acknowledged records in a partition end (0: it wrote none)."""
        return self.produced_end.get((topic, partition), 0)

    def partition_frontier(self, forwarding: Forwarding, partition: int, through: int) -> float | None:
        """For a marker of ``forwarding``: the earliest time its writers may still emit a record at
        into the source ``partition`` (they run here), once the forwarder has forwarded everything
        this worker produced there (``through``, the offset it has forwarded up to); else None."""
        where = (forwarding.source, partition)
        if where in self.in_flight or self.produced(*where) > through:
            return None
        earliest = float("inf")
        for writer in forwarding.writers:
            merge = self.merges[writer].get(partition)
            if merge is None:
                return None  # not this worker's partition of the writer: not known here
            earliest = min(earliest, self._watermark(writer, partition, merge))
        return earliest

    def release(self, sending: list[Any]) -> list[Any]:
        """Release what the rule lets go, processor by processor in the topology's order (a writer's
        new outputs, counted as being sent, hold back its readers); ``sending``: what the batch sends
        already. Returns the records the released ones make."""
        self.in_flight = {(send.topic, send.partition) for send in sending}
        made: list[Any] = []
        for name in self.order:
            produced: list[Any] = []
            merges = self.merges[name]
            for partition, merge in merges.items():
                limit = functools.partial(self.limit, name, partition)
                for _, held in merge.release(limit):
                    produced.extend(held.apply(held))
            self.in_flight.update((send.topic, send.partition) for send in produced)
            self.frontier[name] = min((self._watermark(name, p, m) for p, m in merges.items()), default=float("inf"))
            made.extend(produced)
        return made

    def _watermark(self, name: str, partition: int, merge: PartitionMerge) -> float:
        """The low watermark of processor ``name``'s merge in ``partition``. Not bounded by what it
        reads through a feedback pipe, as in the embedded runtime: the writer's watermark is bounded
        by this one's through the loop, and the two would hold each other at minus infinity."""
        return merge.low_watermark(functools.partial(self._limit, name, partition, None, False))

    def sent(self, ends: dict[tuple[str, int], int]) -> None:
        """The broker acknowledged the batch's records: each partition's end after them."""
        for where, end in ends.items():
            if end > self.produced(*where):
                self.produced_end[where] = end
        self.in_flight.clear()

    def limit(self, name: str, partition: int, stream: OriginStream) -> SortKey:
        """What an empty stream of processor ``name`` in ``partition`` may still hold."""
        return self._limit(name, partition, None, True, stream)

    def waits(self) -> list[Wait]:
        """Why held records are not released: for every merge holding some, the empty streams whose
        limit stops its least head, each with the reason (for a stall report, not the hot path)."""
        found: list[Wait] = []
        for name in self.order:
            for partition, merge in self.merges[name].items():
                heads = [s.head() for s in merge.streams.values() if len(s)]
                if not heads:
                    continue
                least = min(heads)
                for stream in merge.streams.values():
                    if len(stream) and not stream.in_time_order:
                        continue
                    why: list[str] = []
                    if self._limit(name, partition, why, True, stream) <= least:
                        reason = why[0] if why else "its writers"
                        found.append(Wait(name, partition, stream.origin, merge.held(), reason, least))
        return found

    def _limit(self, name: str, partition: int, why: list[str] | None, lead: bool, stream: OriginStream) -> SortKey:
        """``limit``; with ``why``, the reason it stops a merge is appended there; without ``lead``, not
        bounded by the writers of a feedback pipe (for a low watermark)."""
        feed = self.feeds[name][stream.topic]
        origin = int(stream.origin.rpartition("/")[2])
        if not self._read_to_end(feed, partition, origin, why):
            limit = lateness_limit(stream, feed.index)
            if why is not None and limit != ANYTHING:
                minutes = LATENESS_MS // 60_000
                why.append(f"records up to {minutes} minutes earlier than {_when(stream.latest)} may still come")
            return limit
        earliest, bound_by = float("inf"), ""
        for writer in feed.feedback if lead else ():  # it runs at most FEEDBACK_LEAD_MS ahead of them (here too)
            if writer not in self.frontier:
                if why is not None:
                    why.append(f"{writer}, which writes it through a feedback pipe, has not run here yet")
                return ANYTHING
            ahead = self.frontier[writer] + FEEDBACK_LEAD_MS
            if ahead < earliest:
                earliest, bound_by = ahead, f"{writer} (a feedback pipe, plus its lead)"
        writers = feed.writers
        said = self._remote(feed, partition, origin)
        if said is not None and said.frontier is not None:  # its colocated writers run there
            writers = tuple(w for w in writers if w not in feed.colocated)
            if said.frontier < earliest:
                earliest, bound_by = said.frontier, f"{'/'.join(feed.colocated)} on the worker forwarding it"
        for writer in writers:
            here = self.frontier.get(writer, float("inf"))
            if here < earliest:
                earliest, bound_by = here, writer
            if writer in feed.colocated or (feed.direct is not None and origin != partition):
                continue  # its records here come from this worker or the marker's partition (misplaced: none)
            told = self.writers_said.get((feed.internal.wire, partition, writer), {})
            for elsewhere in range(self.partitions):
                if elsewhere in self.merges[writer]:
                    continue
                marked = told.get(elsewhere)
                if marked is None or not self._read_through(feed, partition, origin, marked.ends.get(origin, 0)):
                    if why is not None:
                        why.append(
                            f"no writer marker yet from the worker holding partition {elsewhere} of {writer} "
                            "(a worker of an older fastci sends none: a group must run one version)"
                            if marked is None
                            else f"the records {writer} wrote there on the worker holding its partition "
                            f"{elsewhere} are not read yet (up to offset {marked.ends.get(origin, 0)})"
                        )
                    return ANYTHING  # that worker has not said, or what it wrote here is not read yet
                if marked.frontier < earliest:
                    earliest, bound_by = marked.frontier, f"{writer} on the worker holding its partition {elsewhere}"
        if why is not None and earliest != float("inf"):
            why.append(
                f"{bound_by}, which writes it, waits itself"
                if earliest == float("-inf")
                else f"{bound_by}, which writes it, may still emit records timed from {_when(earliest)}"
            )
        return writers_limit(earliest, feed.index)

    def _read_through(self, feed: InputPaths, partition: int, origin: int, end: int) -> bool:
        """Whether this processor's stream of ``origin`` has been read past every record before
        ``end`` in that partition of the topic (the stream being read to its end already)."""
        if not end:
            return True
        if feed.direct is not None and origin == partition:
            return (feed.direct.positions.expected(feed.direct.wire, partition) or 0) >= end
        if (feed.source.wire, origin) in self.assigned:
            return (feed.source.positions.expected(feed.source.wire, origin) or 0) >= end
        said = self._remote(feed, partition, origin)
        return said is not None and said.through is not None and said.through >= end

    def _read_to_end(self, feed: InputPaths, partition: int, origin: int, why: list[str] | None = None) -> bool:
        """Whether the stream of ``origin`` is read to its end; if not, with ``why``, the reason."""
        if feed.direct is not None and origin == partition:
            return self._complete(feed.direct, partition, why)
        if not self._complete(feed.internal, partition, why):
            return False
        if (feed.source.wire, origin) in self.assigned:  # what is still to be forwarded from it
            return self._complete(feed.source, origin, why)
        said = self._remote(feed, partition, origin)
        where = (feed.source.wire, origin)
        if said is None or said.through is None:
            if why is not None:
                forwarder = f"the worker forwarding {feed.source.wire}/{origin}"
                why.append(
                    f"no progress marker yet from {forwarder}" if said is None else f"{forwarder} says it is behind"
                )
            return False
        if where in self.in_flight:
            if why is not None:
                why.append(f"{feed.source.wire}/{origin}: this worker's records there are not acknowledged yet")
            return False
        if said.through < self.produced(*where):  # what this worker wrote there has not come back
            if why is not None:
                why.append(
                    f"the worker forwarding {feed.source.wire}/{origin} has forwarded up to offset {said.through}, "
                    f"short of the {self.produced(*where)} this worker wrote there"
                )
            return False
        return True

    def _remote(self, feed: InputPaths, partition: int, origin: int) -> ForwarderProgress | None:
        """What the last marker read said of a source partition another worker forwards."""
        if (feed.direct is not None and origin == partition) or (feed.source.wire, origin) in self.assigned:
            return None
        return self.forwarders_said.get((feed.internal.wire, partition, origin))

    def _complete(self, consumed: WireReading, partition: int, why: list[str] | None = None) -> bool:
        where = (consumed.wire, partition)
        if where in self.in_flight:
            if why is not None:
                why.append(f"{consumed.wire}/{partition}: this worker's records there are not acknowledged yet")
            return False
        highwater = self.highwater(consumed.wire, partition)
        if highwater is None:
            if why is not None:
                why.append(f"{consumed.wire}/{partition}: its high-water mark is not fetched yet")
            return False
        expected = consumed.positions.expected(consumed.wire, partition) or 0
        end = max(highwater, self.produced(*where))
        if expected < end and why is not None:
            why.append(f"{consumed.wire}/{partition} read up to offset {expected} of {end}")
        return expected >= end
