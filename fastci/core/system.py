"""A system: the topics, the processors in the order they run, and the pipes between them.

``fastci/topology.py`` declares the one system fastci runs; the runtimes, the views and the
simulator take it as a value and know nothing of any capability (the eventsourcing library's
``System(pipes=...)`` is the model). The pipes are derived from what each processor reads and
writes, so they cannot drift from the code; the order is written down, and a pipe that runs
against it (from a later processor to an earlier one) must be declared as feedback, with the
reason: in the embedded runtime such an event reaches its reader in the next round.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fastci.core.codec import InvalidEvent, decode_as, unknown_topic
from fastci.core.dead_letters import DeadLetter
from fastci.core.events import Event
from fastci.core.processor import Processor

# How far (event time) a feedback pipe's reader may run ahead of its writer's low watermark. Without
# a bound, a backlog let baseline-guard run days ahead of node-state, and a late quarantine found the
# runs it reaches back over already forgotten (it keeps its lookback and this lead of a node's runs).
# Each turn of the loop moves this far: a short lead costs a backlog many turns (docs/benchmarks.md,
# "The ordering rule: what each part fixed").
FEEDBACK_LEAD_MS = 24 * 3600 * 1000

# How much earlier than the latest record before it an input topic's record may be timed and still be
# applied in event-time order (a producer that appends a run's results when the run ends is that late
# by the run's length). Runtimes release an input topic's records in time order within this bound,
# whatever their order in the log or their partition; a record later than that is applied when it
# arrives, as a record published after a run is (docs/topology.md, "Ordering rule").
LATENESS_MS = 6 * 3600 * 1000

SortKey = tuple  # (time in ms, the topic's index among the processor's inputs, event id or "", offset)


def merge_key(record_time_ms: int, index: int, item: Event | InvalidEvent, offset: int) -> SortKey:
    """Where a record goes in its processor's merge, in every runtime: its event's time (else the
    time its record carries), its topic's place among the processor's inputs, then, between records
    as early, the event's id where the event has a time of its own (a fact of the event, the same in
    every partition and runtime), else its place in the log it was appended to (an event without a
    time is ordered where it was published)."""
    if isinstance(item, InvalidEvent) or (time_ms := item.time_ms()) is None:
        return (record_time_ms, index, "", offset)
    return (time_ms, index, item.id, offset)


@dataclass(frozen=True)
class Pipe:
    """Events of ``topic`` that ``writer`` emits and ``reader`` consumes."""

    writer: str
    topic: str
    reader: str


def model_in(topics: Mapping[str, type[Event]], topic: str, raw: bytes = b"") -> type[Event]:
    """The event model ``topics`` names for ``topic``; ``InvalidEvent`` for a topic it does not name."""
    try:
        return topics[topic]
    except KeyError:
        raise unknown_topic(topic, topics, raw) from None


@dataclass(frozen=True)
class System:
    inputs: tuple[type[Event], ...]  # what producers append
    decisions: tuple[type[Event], ...]  # what processors emit
    processors: tuple[type[Processor], ...]  # in the order the embedded runtime runs them
    feedback: Mapping[tuple[str, str], str] = field(default_factory=dict)  # (writer, reader) -> why
    topics: Mapping[str, type[Event]] = field(init=False)
    input_topics: tuple[str, ...] = field(init=False)  # what producers publish to (checked per event)

    def __post_init__(self) -> None:
        models = {model.TOPIC: model for model in (*self.inputs, *self.decisions, DeadLetter)}
        object.__setattr__(self, "topics", models)
        object.__setattr__(self, "input_topics", tuple(model.TOPIC for model in self.inputs))

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(cls.name for cls in self.processors)

    def pipes(self) -> list[Pipe]:
        """Every (writer, topic, reader), in processor order."""
        return [
            Pipe(writer.name, topic, reader.name)
            for writer in self.processors
            for topic in writer.outputs
            for reader in self.processors
            if topic in reader.inputs
        ]

    def problems(self) -> list[str]:
        """What is wrong with the declaration: topics without a model, inputs nobody writes, pipes
        against the order that are not declared feedback, and feedback that is no pipe."""
        found: list[str] = []
        written = {topic for cls in self.processors for topic in cls.outputs}
        for cls in self.processors:
            for topic in (*cls.inputs, *cls.outputs):
                if topic not in self.topics:
                    found.append(f"{cls.name}: topic '{topic}' has no event model in the system")
            for topic in cls.inputs:
                if topic not in written and topic not in self.input_topics:
                    found.append(f"{cls.name}: reads '{topic}', which no processor writes and producers may not")
        position = {name: index for index, name in enumerate(self.order)}
        pipes = {(p.writer, p.reader) for p in self.pipes()}
        for pipe in self.pipes():
            if position[pipe.writer] >= position[pipe.reader] and (pipe.writer, pipe.reader) not in self.feedback:
                found.append(f"{pipe.writer} -> {pipe.reader} ('{pipe.topic}') runs against the order, undeclared")
        for writer, reader in self.feedback:
            if (writer, reader) not in pipes:
                found.append(f"feedback {writer} -> {reader} is declared, but no topic runs between them")
        if len(set(self.order)) != len(self.order):
            found.append("a processor is listed twice")
        return found

    @staticmethod
    def decode_reporters(processors: Iterable[Processor]) -> dict[str, frozenset[str]]:
        """Processor name -> the input topics whose undecodable records it dead-letters: for each
        topic, the first of ``processors`` (in their order) that reads it. Every reader refusing a
        bad record would put it on dead-letters once per reader."""
        reporter: dict[str, str] = {}
        for processor in processors:
            for topic in processor.inputs:
                reporter.setdefault(topic, processor.name)
        by_processor: dict[str, set[str]] = {}
        for topic, name in reporter.items():
            by_processor.setdefault(name, set()).add(topic)
        return {name: frozenset(topics) for name, topics in by_processor.items()}

    @staticmethod
    def written(processors: Iterable[Processor]) -> frozenset[str]:
        """The topics ``processors`` write. A runtime may append one of their events again after a
        crash, at a new offset: their readers mark them applied by id (``Driver(remember=...)``)."""
        return frozenset(topic for processor in processors for topic in processor.outputs)

    @staticmethod
    def in_time_order(topic: str, processors: Iterable[Processor]) -> bool:
        """Whether a merge releases ``topic`` in time order within ``LATENESS_MS``: a producer's
        topic, which none of ``processors`` writes. A topic they write leaves their merges in time
        order already, and is read in the order it was appended."""
        return topic not in System.written(processors)

    def merge_writers(self, reader: Processor, processors: Iterable[Processor]) -> dict[str, tuple[str, ...]]:
        """Per input topic of ``reader``, the names of the ``processors`` writing it that its
        event-time merge waits for: every writer but one whose pipe to it is feedback (which only
        bounds how far ahead it runs: waiting for it, the loop would wait on itself)."""
        return self._writers(reader, processors, feedback=False)

    def feedback_writers(self, reader: Processor, processors: Iterable[Processor]) -> dict[str, tuple[str, ...]]:
        """Per input topic of ``reader``, the names of the ``processors`` writing it through a
        feedback pipe: its merge runs at most ``FEEDBACK_LEAD_MS`` ahead of their low watermark."""
        return self._writers(reader, processors, feedback=True)

    def _writers(
        self, reader: Processor, processors: Iterable[Processor], feedback: bool
    ) -> dict[str, tuple[str, ...]]:
        chosen = list(processors)
        return {
            topic: tuple(
                w.name for w in chosen if topic in w.outputs and ((w.name, reader.name) in self.feedback) == feedback
            )
            for topic in reader.inputs
        }

    def partition_field(self, processor: Processor | type[Processor], topic: str) -> str:
        """The event field ``processor`` partitions ``topic`` by: its ``partition_by``, else the key."""
        return processor.partition_by.get(topic, self.topics[topic].KEY)

    def colocated(self, writer: Processor | type[Processor], topic: str) -> bool:
        """Whether ``writer`` keys its outputs on ``topic`` by the field it partitions every input by
        (node-state's node states, by node; not its reruns, by test). Its outputs then land in the
        partition it processes, so that partition's records of ``topic`` come from that partition's
        writer alone, wherever it runs (``tests/test_topology.py`` checks the keys agree)."""
        key = self.topics[topic].KEY
        return topic in writer.outputs and all(self.partition_field(writer, t) == key for t in writer.inputs)

    def build(self, names: Iterable[str] | None = None) -> list[Processor]:
        """Instances of the named processors (all when ``names`` is empty), in system order; unknown
        names are refused."""
        wanted = set(names or ())
        unknown = sorted(wanted - set(self.order))
        if unknown:
            raise ValueError(f"unknown processor(s) {', '.join(unknown)} (known: {', '.join(self.order)})")
        return [cls() for cls in self.processors if not wanted or cls.name in wanted]

    def model_for(self, topic: str, raw: bytes = b"") -> type[Event]:
        """The event model a topic carries; ``InvalidEvent`` for a topic the system does not name."""
        return model_in(self.topics, topic, raw)

    def decode(self, topic: str, raw: bytes) -> Event:
        """Parse and validate one record of ``topic``; raise ``InvalidEvent`` saying what is wrong."""
        return decode_as(self.model_for(topic, raw), raw)

    def decode_or_refusal(self, topic: str, raw: bytes) -> Event | InvalidEvent:
        try:
            return self.decode(topic, raw)
        except InvalidEvent as error:
            return error
