"""Progress markers: how a worker's merge knows what other workers may still send it.

A processor that reads a topic through the worker's own topic (repartitioned, or its misplaced
records) merges one stream per source partition. When this worker reads that source partition, it
knows how far its forwarder is (``fastci.runtime.kafka.ordering``). When another worker reads it, the records
still to be forwarded are invisible here: counting the stream complete once its forwarded records
ran out let a merge apply commits before results the other worker had yet to forward (two workers,
one SIGKILLed: docs/benchmarks.md, "The ordering rule: what each part fixed").

So each forwarder tells the readers of its worker topic, in every partition of it, where it is in
each source partition it reads: caught up through offset N (it has forwarded every record before N,
and N was that partition's high-water mark when it looked), or behind. A marker is sent after the
records it covers, in the same produce batch, so a reader that has read a marker has read every
record it covers. It is sent when that state changes, and again after every rebalance (a reader
resumes after its stored position, which may be past the last marker). A worker that reads every
partition of the worker topic sends none: its readers all know its forwarders already.

A caught-up marker also carries, when it can, the *writers' frontier* of that source partition:
the earliest time its writers may still emit a record at. Only writers that key their outputs by
what they partition by count (``System.colocated``: a partition's records come from that
partition's writer alone, which runs on the worker that forwards it). Without it, a reader on
another worker bounded a derived topic such as ``test-plan`` by the low watermark of *its own*
partitions' writers, and merged plans written elsewhere as they arrived. It is carried only when
the forwarder has forwarded every record this worker's writers produced into that partition, so a
reader that has read the marker has read everything the writers emitted before it.

A writer whose outputs go to any partition (node-state's reruns, keyed by test) gets *writer
markers* of its own: each worker tells the readers of the topic, in their worker topic, the earliest
time its partitions of the writer may still emit a record at, and where its records in each
partition of the topic end (acknowledged offsets). A reader bounds a stream of that topic by every
other worker's last writer marker once it has read the stream past the ends the marker names; until
a worker has told it, it waits.

Nothing here touches Kafka: the worker produces the markers and hands what it reads to ``Ordering``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MARK_HEADER = "fastci-forwarded"  # "<source partition>/<next offset>[/<writers' frontier>]", "<partition>/behind"
WRITER_HEADER = "fastci-writer"  # "<writer>/<its partitions on the sender>/<frontier>/<partition>:<end>,..."
BEHIND = "behind"
UNBOUNDED = ("inf", "-inf")  # a writers' frontier: they hold nothing; they may still emit anything


@dataclass(frozen=True, slots=True)
class Marker:
    """One marker: a record with no key and no value, in one partition of a worker topic."""

    topic: str  # the worker topic (its wire name)
    partition: int
    header: bytes
    name: str = MARK_HEADER


@dataclass(frozen=True, slots=True)
class ForwarderProgress:
    """What a marker says of one source partition."""

    partition: int
    through: int | None  # caught up: every record before this offset is forwarded; None: behind
    frontier: float | None = None  # the writers' frontier (ms, or infinite), when the marker carries it


def _frontier_text(earliest: float) -> str:
    return str(earliest) if abs(earliest) == float("inf") else str(int(earliest))


def parse(raw: bytes) -> ForwarderProgress | None:
    """A marker header -> what it says; None when it is not one this worker could have written (the
    reader ignores it, and keeps waiting)."""
    partition, _, rest = raw.decode(errors="replace").partition("/")
    where, _, frontier = rest.partition("/")
    if not partition.isdigit() or not (where == BEHIND or where.isdigit()):
        return None
    if frontier and (where == BEHIND or not (frontier in UNBOUNDED or frontier.isdigit())):
        return None
    told = float(frontier) if frontier else None
    return ForwarderProgress(int(partition), None if where == BEHIND else int(where), told)


@dataclass(frozen=True, slots=True)
class Forwarding:
    """One forwarder: the topic it reads, the worker topic it writes, and how far it has read."""

    source: str  # wire names
    sink: str
    positions: Any  # fastci.runtime.kafka.positions.Positions
    writers: tuple[str, ...] = ()  # the source topic's writers whose frontier its markers carry (colocated)


# (forwarding, source partition, the offset forwarded through) -> the earliest time the forwarding's
# writers may still emit a record at into that partition, or None when that is not known
Frontier = Callable[[Forwarding, int, int], float | None]


class ForwardMarks:
    """What each forwarder of this worker last told its readers, and the markers due now."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.forwardings: list[Forwarding] = []
        self.told: dict[tuple[str, int], str] = {}  # (sink, source partition) -> the state last sent

    def add(self, forwarding: Forwarding) -> None:
        self.forwardings.append(forwarding)

    def reset(self) -> None:
        """Partitions moved: tell every reader again."""
        self.told.clear()

    def due(
        self,
        assigned: set[tuple[str, int]],
        highwater: Callable[[str, int], int | None],
        tell: bool = True,
        frontier: Frontier | None = None,
    ) -> list[Marker]:
        """The markers whose state changed since they were last sent, for the source partitions
        this worker reads; ``highwater``: the last high-water mark fetched for a partition;
        ``frontier``: the writers' frontier in a source partition, or None when it cannot be told.
        With ``tell`` false, only looks: the markers stay due."""
        marks: list[Marker] = []
        for forwarding in self.forwardings:
            if all((forwarding.sink, q) in assigned for q in range(self.partitions)):
                continue  # every reader of the worker topic is here, and knows its forwarders
            for partition in (p for p in range(self.partitions) if (forwarding.source, p) in assigned):
                expected = forwarding.positions.expected(forwarding.source, partition)
                end = highwater(forwarding.source, partition)
                if expected is None or end is None:
                    continue  # not known yet: readers keep waiting
                state = str(expected) if expected >= end else BEHIND
                if state != BEHIND and forwarding.writers and frontier is not None:
                    earliest = frontier(forwarding, partition, expected)
                    if earliest is not None:
                        state += "/" + _frontier_text(earliest)
                if self.told.get((forwarding.sink, partition)) == state:
                    continue
                if tell:
                    self.told[(forwarding.sink, partition)] = state
                header = f"{partition}/{state}".encode()
                marks.extend(Marker(forwarding.sink, q, header) for q in range(self.partitions))
        return marks


@dataclass(frozen=True, slots=True)
class WriterProgress:
    """What a writer marker says: the sending worker's partitions of ``writer``, the earliest time
    they may still emit a record at, and where its records end in each partition of the topic."""

    writer: str
    partitions: tuple[int, ...]
    frontier: float
    ends: dict[int, int]


def parse_writer(raw: bytes) -> WriterProgress | None:
    """A writer marker header -> what it says; None when this worker could not have written it."""
    fields = raw.decode(errors="replace").split("/")
    if len(fields) != 4:
        return None
    writer, partitions, frontier, ends = fields
    try:
        held = tuple(int(p) for p in partitions.split(",") if p)
        told = float(frontier) if frontier in UNBOUNDED else float(int(frontier))
        pairs = [pair.split(":") for pair in ends.split(",") if pair]
        at = {int(q): int(end) for q, end in pairs}
    except ValueError:
        return None
    return WriterProgress(writer, held, told, at) if writer else None


@dataclass(frozen=True, slots=True)
class ScatteredWriter:
    """A writer whose outputs to ``topic`` may land in any partition, read through ``sink``."""

    writer: str  # the processor
    topic: str  # wire names
    sink: str


# writer -> (this worker's partitions of it, the earliest time they may still emit a record at),
# or None when that is not known now
WriterFrontier = Callable[[str], tuple[tuple[int, ...], float] | None]


class WriterMarks:
    """What this worker last told the readers of each spread writer's topic, and the markers due."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self.spreads: set[ScatteredWriter] = set()
        self.told: dict[ScatteredWriter, str] = {}

    def add(self, spread: ScatteredWriter) -> None:
        self.spreads.add(spread)

    def reset(self) -> None:
        """Partitions moved: tell every reader again."""
        self.told.clear()

    def due(
        self,
        assigned: set[tuple[str, int]],
        frontier: WriterFrontier,
        ends: Callable[[str, int], int],
        tell: bool = True,
    ) -> list[Marker]:
        """The writer markers whose state changed since they were last sent, to the partitions of
        each worker topic that other workers read; ``ends``: where this worker's acknowledged
        records of a topic partition end. With ``tell`` false, only looks."""
        marks: list[Marker] = []
        for spread in sorted(self.spreads, key=lambda s: (s.writer, s.topic, s.sink)):
            elsewhere = [q for q in range(self.partitions) if (spread.sink, q) not in assigned]
            known = frontier(spread.writer) if elsewhere else None
            if known is None or not known[0]:
                continue  # every reader is here, or where this worker's writer stands is not known
            held, earliest = known
            at = ",".join(f"{q}:{end}" for q in range(self.partitions) if (end := ends(spread.topic, q)))
            state = f"{spread.writer}/{','.join(map(str, held))}/{_frontier_text(earliest)}/{at}"
            if self.told.get(spread) == state:
                continue
            if tell:
                self.told[spread] = state
            marks.extend(Marker(spread.sink, q, state.encode(), WRITER_HEADER) for q in elsewhere)
        return marks
