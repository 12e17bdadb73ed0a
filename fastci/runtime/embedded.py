"""The embedded runtime: processors over the local durable log, no broker needed.

Per batch, for each processor: read on in its input topics, merge what it holds
by event time (a producer's topic in time order within ``LATENESS_MS``, a
processor's in log order), decode it (a bad record becomes a dead letter), run
it through the processor's driver and append the outputs to their topic logs
(fsync). Once it has nothing it may apply now, or has applied ``commit_every``
records since its last commit, commit its state writes and input positions (the
first record not applied, and the offsets applied past it) in one SQLite
transaction. So a run that catches up (an imported history) commits every
``COMMIT_EVERY`` records, and a key many of them write (a test with a result
every night) is encoded and stored once per commit, not once per batch; a run
following a live log commits as soon as it has caught up.

Crash safety (kill -9 anywhere): outputs are appended before the commit. On
restart the runtime reads the ids of outputs appended after the last commit and
does not append them again when reprocessing regenerates them, so every output
appears exactly once; what was applied since the last commit is applied again.
"""

from __future__ import annotations

import fcntl
import functools
import itertools
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from fastci.core.codec import InvalidEvent, encode
from fastci.core.config import COMMIT_EVERY, DEFAULT_BATCH
from fastci.core.dead_letters import DeadLetter
from fastci.core.events import Event
from fastci.core.processor import Processor
from fastci.core.system import FEEDBACK_LEAD_MS, LATENESS_MS, SortKey, System, merge_key
from fastci.runtime.checkpoint import Checkpoint
from fastci.runtime.collector import PauseControl
from fastci.runtime.contract import commit
from fastci.runtime.driver import Driver, Origin
from fastci.runtime.log import Log, LogRecord, Position
from fastci.runtime.ordering import Merge, Stream, lateness_limit, writers_limit
from fastci.runtime.publish import publish_embedded

Progress = Callable[[str, int, int], None]  # (processor, events done, events pending at start)


def _nothing(outputs: list) -> None:
    """Outputs already durable."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass
class ProcessorStats:
    events: int = 0
    outputs: int = 0
    dead_letters: int = 0
    seconds: float = 0.0  # in its batches: reading, processing, appending outputs, committing


@dataclass
class RunStats:
    by_processor: dict[str, ProcessorStats] = field(default_factory=dict)
    decode_seconds: float = 0.0  # validating input records, once per record for every processor
    stopped_early: bool = False  # the deadline came with records still to apply (committed so far)

    @property
    def events(self) -> int:
        return sum(s.events for s in self.by_processor.values())


class RuntimeBusy(RuntimeError):
    """Another process is running the embedded runtime over the same data dir."""


class DataDir:
    """Where the embedded runtime keeps everything: ``log/`` per topic and ``state.sqlite``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.log = Log(self.root / "log")
        self.checkpoint_path = self.root / "state.sqlite"

    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self.checkpoint_path)

    @contextmanager
    def processing(self) -> Iterator[None]:
        """Hold the data dir's runtime lock: one runtime at a time applies events to its state (two
        would both apply a batch). Raises ``RuntimeBusy`` at once when another process holds it."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "runtime.lock", "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RuntimeBusy(
                    f"another fastci runtime is processing {self.root} (a 'fastci run --follow'?): "
                    "it will process what is published; wait for it or stop it"
                ) from None
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


class _Round:
    """What one round reads, shared by every processor reading the same topic from the same
    position: the records (read from disk and checked once, not once per processor) and their
    decoded events (most processors read ``results``: each record is validated once)."""

    def __init__(self, log: Log, system: System) -> None:
        self.log = log
        self.system = system
        self._records: dict[tuple[str, int, int], list[LogRecord]] = {}
        self._decoded: dict[tuple[str, int], tuple[Event | InvalidEvent, SortKey]] = {}
        self.decode_seconds = 0.0
        self.steps = 0  # processor steps so far: a low watermark holds until the next one

    def records(self, topic: str, start: Position, limit: int) -> list[LogRecord]:
        key = (topic, start.offset, limit)
        records = self._records.get(key)
        if records is None:
            records = self._records[key] = list(self.log.topic(topic).read(start, limit=limit))
        return records

    def decoded(self, topic: str, record: LogRecord) -> tuple[Event | InvalidEvent, SortKey]:
        """A record's event (or why it did not decode) and its ``sort_key`` as its topic's first input
        (``index`` 0), decoded once for every processor reading it."""
        key = (topic, record.offset)
        found = self._decoded.get(key)
        if found is None:
            started = time.perf_counter()
            item = self.system.decode_or_refusal(topic, record.payload)
            self.decode_seconds += time.perf_counter() - started
            found = self._decoded[key] = (item, sort_key(record, 0, item))
        return found

    def appended(self, topic: str) -> None:
        """Records were appended to ``topic``: a read that came to its end would now find more."""
        for key in [key for key in self._records if key[0] == topic]:
            del self._records[key]

    def clear(self, floors: dict[str, int] | None = None) -> None:
        """Forget what was read; with ``floors`` (topic -> the least offset a processor still has to
        apply), keep the decoded events from there on: a processor held back by its writers reads
        them again in the next round."""
        self._records.clear()
        if floors is None:
            self._decoded.clear()
        else:
            self._decoded = {key: found for key, found in self._decoded.items() if key[1] >= floors.get(key[0], 0)}


def sort_key(record: LogRecord, index: int, item: Event | InvalidEvent) -> SortKey:
    """``merge_key`` of a record of the log (its timestamp is its event's time, or its publisher's)."""
    return merge_key(record.timestamp_ms, index, item, record.offset)


@dataclass(slots=True)
class _Pending:
    """A record read and not applied yet."""

    key: SortKey
    record: LogRecord
    start: Position  # where it starts: the runner's position while it is the first not applied
    item: Event | InvalidEvent  # its event, decoded
    released: bool = False


class _Window(Stream[_Pending]):
    """One input topic of a runner, a stream of its merge: what it has read past its position and not
    applied, kept from one step to the next (an input topic released in time order within
    ``LATENESS_MS``, a topic its writers append in their own order in log order)."""

    def __init__(self, topic: str, index: int, start: Position, released: set[int], in_time_order: bool) -> None:
        super().__init__(in_time_order)
        self.topic = topic
        self.stream = f"{topic}/0"  # the driver's name for it (the embedded log has one partition)
        self.index = index
        self.position = start  # the first record not applied: what the checkpoint stores
        self.released = released  # offsets from the position on applied already (out of log order)
        self.next = start  # where reading goes on
        self.at_end = False
        self.moved = False  # applied a record since the last step
        self.unsaved = False  # its position moved since the last commit

    def fill(self, shared: _Round, size: int) -> None:
        """Read on until ``size`` records wait and, in time order, one of them is final (earlier than
        the latest read less the lateness bound), or to the end of the log."""
        self.at_end = False
        waiting, topic, index, released = self.waiting, self.topic, self.index, self.released
        while len(waiting) < size or (self.in_time_order and waiting.head()[0] >= self.latest - LATENESS_MS):
            records = shared.records(topic, self.next, size)
            for record in records:
                start, self.next = self.next, record.next
                self.saw(record.timestamp_ms)
                if record.offset not in released:
                    item, key = shared.decoded(topic, record)
                    if index:
                        key = (key[0], index, key[2], key[3])
                    waiting.push(_Pending(key, record, start, item))
            if len(records) < size:
                self.at_end = True
                return

    def pop(self) -> _Pending:
        pending = self.waiting.pop()
        self.released.add(pending.record.offset)
        self.moved = True
        return pending

    def floor(self) -> Position:
        """The first record not applied (the position to store)."""
        first = self.waiting.first()
        return first.start if first is not None else self.next


class _ProcessorRunner:
    """One processor's consumer: its positions, its driver, its crash recovery."""

    def __init__(
        self,
        processor: Processor,
        data: DataDir,
        checkpoint: Checkpoint,
        shared: _Round,
        reports: frozenset[str],
        batch_size: int,
        commit_every: int,
        in_time_order: frozenset[str],
        written: frozenset[str],
    ) -> None:
        self.processor = processor
        self.shared = shared
        self.log = data.log
        self.checkpoint = checkpoint
        self.batch_size = batch_size
        self.commit_every = commit_every
        self.uncommitted = 0  # records applied since the last commit
        self.produced: dict[tuple[str, str], Position] = {}  # output topics' ends since the last commit
        self.store = checkpoint.store(processor.name)
        self.driver = Driver(processor, self.store, reports, written)
        self.consumer = f"processor:{processor.name}"
        self.producer = f"produced:{processor.name}"
        # Per input topic, the runners writing it (not through a feedback pipe): this runner's merge
        # goes no further than what they may still append.
        self.writers: dict[str, list[_ProcessorRunner]] = {topic: [] for topic in processor.inputs}
        # and the runners writing it through a feedback pipe: it runs at most FEEDBACK_LEAD_MS ahead of them
        self.feedback: dict[str, list[_ProcessorRunner]] = {topic: [] for topic in processor.inputs}
        self._watermark: tuple[int, float] | None = None  # (the round's step it was computed at, value)
        self.in_time_order = in_time_order  # its input topics released in time order (producers')
        self.reload()

    def reload(self) -> None:
        """Positions and state as the checkpoint holds them now (another process may have moved them
        since this runner last ran)."""
        self.merge: Merge[_Window] = Merge()
        self.windows = self.merge.streams = {
            topic: _Window(
                topic,
                index,
                self.checkpoint.position(self.consumer, topic),
                self.checkpoint.released(self.consumer, topic),
                topic in self.in_time_order,
            )
            for index, topic in enumerate(self.processor.inputs)
        }
        # Outputs already appended by a run that crashed before committing: never append them twice.
        self.recovered: dict[str, set[str]] = {
            topic: self._ids_after(topic, self.checkpoint.position(self.producer, topic))
            for topic in (*self.processor.outputs, DeadLetter.TOPIC)
        }
        self.driver.forget_cache()
        self.store.refresh()
        self.uncommitted = 0
        self.produced = {}

    @property
    def positions(self) -> dict[str, Position]:
        return {topic: window.position for topic, window in self.windows.items()}

    def pending(self) -> int:
        return sum(
            self.log.topic(t).end().offset - w.position.offset - len(w.released) for t, w in self.windows.items()
        )

    def step(self, sync: bool, stats: ProcessorStats) -> int:
        """Process up to a batch of records; return how many."""
        outputs: dict[str, list[tuple[Event, int]]] = defaultdict(list)  # with their times
        count = 0
        handle = self.driver.handle_decoded
        for window, pending, floor in self._merged():
            record = pending.record
            for output in handle(pending.item, Origin(window.stream, record.offset, floor)):
                # An output happened when its cause did, unless it says otherwise.
                time_ms = output.time_ms()
                outputs[output.TOPIC].append((output, record.timestamp_ms if time_ms is None else time_ms))
            count += 1
        if not count:
            if self.uncommitted:
                self.commit()
            return 0
        self.shared.steps += 1  # positions move, outputs are appended: low watermarks are stale
        for topic, timed in outputs.items():
            fresh = [(encode(e), time_ms) for e, time_ms in timed if not self._already_appended(topic, e.id)]
            if fresh:
                payloads, times = zip(*fresh, strict=True)
                self.produced[(self.producer, topic)] = self.log.topic(topic).append(payloads, times, sync)
                self.shared.appended(topic)
            stats.outputs += len(timed)
        stats.dead_letters += len(outputs.get(DeadLetter.TOPIC, ()))
        stats.events += count
        for window in self.windows.values():
            if window.moved:
                window.moved = False
                window.unsaved = True
                position = window.position = window.floor()
                window.released = {offset for offset in window.released if offset >= position.offset}
        self.uncommitted += count
        if self.uncommitted >= self.commit_every:
            self.commit()
        return count

    def commit(self) -> None:
        """Persist what was applied since the last commit: state, positions and outputs' ends at once."""
        positions: dict[tuple[str, str], Position] = {}
        released: dict[tuple[str, str], set[int]] = {}
        for topic, window in self.windows.items():
            if window.unsaved:
                window.unsaved = False
                positions[(self.consumer, topic)] = window.position
                released[(self.consumer, topic)] = window.released
        # The outputs were appended (and synced) at each step: nothing is left to make durable.
        for _ in commit([], [(self.processor.name, self.driver)], _nothing, self._persist(positions, released)):
            pass
        self.produced = {}
        self.uncommitted = 0

    def _persist(
        self, positions: dict[tuple[str, str], Position], released: dict[tuple[str, str], set[int]]
    ) -> Callable[[list[tuple[str, Mapping[str, bytes]]]], None]:
        """The commit's last step: the state, positions and outputs' ends in one checkpoint transaction."""

        def persist(writes: list[tuple[str, Mapping[str, bytes]]]) -> None:
            state = writes[0][1] if writes else {}
            self.checkpoint.commit(self.processor.name, state, {**positions, **self.produced}, released)

        return persist

    def _merged(self) -> Iterator[tuple[_Window, _Pending, int]]:
        """Up to a batch of input records in the ordering rule's order, each with its topic's first
        offset not applied once it goes (``fastci.runtime.ordering``: what this runner adds is how
        far its merge may go, ``_limit``)."""
        for window in self.windows.values():
            window.fill(self.shared, self.batch_size)
        released = self.merge.release(functools.partial(self._limit, True))
        for window, pending in itertools.islice(released, self.batch_size):
            yield window, pending, window.floor().offset

    def _limit(self, lead: bool, window: _Window) -> SortKey:
        """What ``window`` may still be given: read to its end, what its writers may still append, or
        (with ``lead``) its feedback writers plus their lead; else what the lateness bound allows."""
        if not window.at_end:
            return lateness_limit(window, window.index)
        earliest = min((writer.low_watermark() for writer in self.writers[window.topic]), default=float("inf"))
        if lead and self.feedback[window.topic]:
            lead_ms = min(writer.low_watermark() for writer in self.feedback[window.topic]) + FEEDBACK_LEAD_MS
            earliest = min(earliest, lead_ms)
        return writers_limit(earliest, window.index)

    def low_watermark(self) -> float:
        """The earliest time this processor may still apply a record at, so the earliest its outputs
        to come can be timed (infinite when it has nothing left); not bounded by what it reads
        through a feedback pipe (the writer's is bounded by this one's through the loop). Kept until
        a runner steps."""
        if self._watermark is not None and self._watermark[0] == self.shared.steps:
            return self._watermark[1]
        for window in self.windows.values():
            window.fill(self.shared, self.batch_size)
        earliest = self.merge.low_watermark(functools.partial(self._limit, False))
        self._watermark = (self.shared.steps, earliest)
        return earliest

    def _already_appended(self, topic: str, event_id: str) -> bool:
        recovered = self.recovered.get(topic)
        if recovered and event_id in recovered:
            recovered.discard(event_id)
            return True
        return False

    def _ids_after(self, topic: str, start: Position) -> set[str]:
        return {orjson.loads(record.payload)["id"] for record in self.log.topic(topic).read(start)}


class EmbeddedRuntime:
    def __init__(
        self,
        data_dir: Path,
        system: System,
        processors: Sequence[Processor] | None = None,
        batch_size: int = DEFAULT_BATCH,
        sync: bool = True,
        commit_every: int = COMMIT_EVERY,
    ) -> None:
        if batch_size < 1 or commit_every < 1:
            raise ValueError(f"batch_size {batch_size} and commit_every {commit_every}: each at least 1")
        self.data = DataDir(data_dir)
        self.checkpoint = self.data.checkpoint()
        self.batch_size = batch_size
        self.sync = sync
        self.shared = _Round(self.data.log, system)
        chosen = list(processors or system.build())
        reporters = System.decode_reporters(chosen)
        written = System.written(chosen)
        self.runners = [
            _ProcessorRunner(
                p,
                self.data,
                self.checkpoint,
                self.shared,
                reporters.get(p.name, frozenset()),
                batch_size,
                commit_every,
                frozenset(topic for topic in p.inputs if System.in_time_order(topic, chosen)),
                written,
            )
            for p in chosen
        ]
        by_name = {runner.processor.name: runner for runner in self.runners}
        for reader in self.runners:
            for topic, names in system.merge_writers(reader.processor, chosen).items():
                reader.writers[topic].extend(by_name[name] for name in names)
            for topic, names in system.feedback_writers(reader.processor, chosen).items():
                reader.feedback[topic].extend(by_name[name] for name in names)

    def close(self) -> None:
        self.checkpoint.close()

    # The contract's ``Runtime`` (fastci.runtime.contract): what a caller that only publishes and reads uses.

    def publish(self, events: Iterable[Event]) -> None:
        """Append ``events`` to the log, as ``fastci publish`` does."""
        publish_embedded(self.data.root, list(events))

    def apply(self) -> None:
        """Apply everything published so far, and what it causes."""
        self.run()

    def events(self, topic: str) -> list[Event]:
        """Every event of ``topic``, in log order."""
        return [self.shared.system.decode(topic, record.payload) for record in self.data.log.topic(topic).read()]

    def pending(self) -> int:
        """Records still to apply, summed over the processors (each reads its inputs)."""
        return sum(runner.pending() for runner in self.runners)

    def backlog(self) -> int:
        """The records the processor furthest behind has still to apply."""
        return max((runner.pending() for runner in self.runners), default=0)

    def _floors(self) -> dict[str, int]:
        floors: dict[str, int] = {}
        for runner in self.runners:
            for topic, position in runner.positions.items():
                floors[topic] = min(floors.get(topic, position.offset), position.offset)
        return floors

    def run(
        self,
        follow: bool = False,
        poll_s: float = 0.5,
        progress: Progress | None = None,
        deadline: float | None = None,
    ) -> RunStats:
        """Process everything available (and keep following new events when ``follow``). With a
        ``deadline`` (``time.monotonic()``), stop at the first round that ends after it, committing
        what was applied: a caller with a time budget (a CI job asking for its plan) is not held for
        the hours a backlog can take (an imported history nobody has applied yet)."""
        with self.data.processing():
            for runner in self.runners:  # what they read before the lock may be stale: another process may have run
                runner.reload()
            stats = RunStats({r.processor.name: ProcessorStats() for r in self.runners})
            pending = {r.processor.name: r.pending() for r in self.runners} if progress else {}
            pauses = PauseControl(automatic=False)  # the hourly full collection only (collector.py)
            pauses.start()
            try:
                return self._run(stats, pending, pauses, follow, poll_s, progress, deadline)
            finally:
                pauses.stop()

    def _run(
        self,
        stats: RunStats,
        pending: dict[str, int],
        pauses: PauseControl,
        follow: bool,
        poll_s: float,
        progress: Progress | None,
        deadline: float | None,
    ) -> RunStats:
        while True:
            progressed = False
            # Rounds of one batch per processor, producers before consumers: processors reading the
            # same topic move together and share its decoded records, and chains settle as they go.
            self.shared.clear(self._floors())
            for runner in self.runners:
                own = stats.by_processor[runner.processor.name]
                started, decoding = time.perf_counter(), self.shared.decode_seconds
                stepped = runner.step(self.sync, own)
                # The round's decoding is counted apart: the first processor to read a record pays it.
                decoded = self.shared.decode_seconds - decoding
                own.seconds += time.perf_counter() - started - decoded
                stats.decode_seconds += decoded
                if stepped:
                    progressed = True
                    if progress:
                        progress(runner.processor.name, own.events, pending[runner.processor.name])
            pauses.after_batch()
            if progressed and deadline is not None and time.monotonic() >= deadline and self.pending():
                for runner in self.runners:
                    if runner.uncommitted:
                        runner.commit()
                stats.stopped_early = True
                return stats
            if not progressed:
                if not follow:
                    return stats
                time.sleep(poll_s)
