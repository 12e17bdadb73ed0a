"""The driver both runtimes share: dedup window, buffered writes, processor failures."""

from __future__ import annotations

import random
from typing import ClassVar

from factories import result

from fastci.core.dead_letters import DeadLetter
from fastci.core.events import Event
from fastci.core.processor import Processor, Step, compound_key
from fastci.fleet.test_history import TestHistory, TestHistoryProcessor
from fastci.inputs import ResultEvent
from fastci.runtime.driver import (
    SEEN_ID_CHARS,
    Driver,
    Entry,
    Origin,
    applied_key,
    decode_entry,
    encode_entry,
    is_applied_mark,
)
from fastci.topology import SYSTEM


class DictStore(dict):
    def get(self, key: str) -> bytes | None:  # the Store protocol (fastci.runtime.contract)
        return super().get(key)


def persist(driver: Driver, store: DictStore) -> None:
    store.update(driver.drain_writes())


def test_a_redelivered_event_changes_nothing_and_emits_nothing():
    store = DictStore()
    driver = Driver(TestHistoryProcessor(), store)
    driver.handle(result(run_id="r1", status="passed"))
    flip = driver.handle(result(run_id="r2", status="failed"))
    persist(driver, store)
    assert len(flip) == 1
    assert driver.handle(result(run_id="r2", status="failed")) == []  # same id: already applied
    fresh = Driver(TestHistoryProcessor(), store)  # as after a restart: the window is in the store
    assert fresh.handle(result(run_id="r1", status="passed")) == []
    persist(fresh, store)
    assert decode_entry(TestHistory, store["tests/test_a.py::test_x"]).state.runs == 2


def test_the_window_is_bounded_per_key():
    store = DictStore()
    driver = Driver(TestHistoryProcessor(), store)
    for n in range(40):
        driver.handle(result(run_id=f"r{n}"))
    persist(driver, store)
    entry = decode_entry(TestHistory, store["tests/test_a.py::test_x"])
    assert len(entry.seen) == TestHistoryProcessor.dedup_window
    assert entry.seen[-1] == result(run_id="r39").id[:SEEN_ID_CHARS]


def test_a_decision_appended_again_far_past_the_window_is_dropped_by_its_marker():
    """A writer that crashed between its outputs and its state appends them again at new offsets;
    by then the reader's key may have applied more events than ``seen`` holds."""
    key = "tests/test_a.py::test_x"
    first = result(run_id="r0")
    later = [result(run_id=f"r{n}") for n in range(1, 40)]

    def replayed(remember: frozenset[str]) -> tuple[list[Event], int]:
        store = DictStore()
        driver = Driver(TestHistoryProcessor(), store, remember=remember)
        for offset, event in enumerate([first, *later]):
            driver.handle(event, Origin("results/0", offset))
        persist(driver, store)
        restarted = Driver(TestHistoryProcessor(), store, remember=remember)
        outputs = restarted.handle(first, Origin("results/0", 40))  # the same event, a new offset
        persist(restarted, store)
        return outputs, decode_entry(TestHistory, store[key]).state.runs

    assert replayed(frozenset()) == ([], 41)  # only the window: applied twice
    assert replayed(frozenset({"results"})) == ([], 40)

    store = DictStore()
    driver = Driver(TestHistoryProcessor(), store, remember=frozenset({"results"}))
    driver.handle(first, Origin("results/0", 0))
    writes = list(driver.drain_writes())
    assert writes == [key, applied_key(key, first.id)]  # after the entry it stands for
    assert is_applied_mark(writes[1]) and not is_applied_mark(key)


def test_writes_are_buffered_until_drained():
    store = DictStore()
    driver = Driver(TestHistoryProcessor(), store)
    driver.handle(result(run_id="r1"))
    assert store == {}
    writes = driver.drain_writes()
    assert list(writes) == ["tests/test_a.py::test_x"] and driver.drain_writes() == {}


class Exploding(Processor[TestHistory]):
    name: ClassVar[str] = "exploding"
    inputs: ClassVar[tuple[str, ...]] = ("results",)
    outputs: ClassVar[tuple[str, ...]] = ()
    state_model = TestHistory

    def process(self, state, event: Event) -> Step[TestHistory]:
        assert isinstance(event, ResultEvent)
        if event.status == "failed":
            raise ZeroDivisionError("bug in the processor")
        before = state.get(event.test_id) or TestHistory()
        return Step(writes={event.test_id: before.model_copy(update={"runs": before.runs + 1})})


def test_a_failing_processor_dead_letters_the_event_and_keeps_state():
    store = DictStore()
    driver = Driver(Exploding(), store)
    driver.handle(result(run_id="r1"))
    outputs = driver.handle(result(run_id="r2", status="failed"), Origin("results/0", 17))
    persist(driver, store)
    assert len(outputs) == 1 and isinstance(outputs[0], DeadLetter)
    letter = outputs[0]
    assert letter.source == "processor:exploding" and letter.offset == 17
    assert "ZeroDivisionError: bug in the processor" in letter.error
    assert decode_entry(TestHistory, store["tests/test_a.py::test_x"]).state.runs == 1


def test_undecodable_records_become_dead_letters_from_decode():
    driver = Driver(TestHistoryProcessor(), DictStore())
    refused = SYSTEM.decode_or_refusal("results", b'{"test_id": "t"}')
    [letter] = driver.handle_decoded(refused, Origin("results/0", 3))
    assert isinstance(letter, DeadLetter) and letter.source == "decode" and letter.offset == 3
    assert driver.drain_writes() == {}


def test_a_replay_of_many_records_after_a_crash_changes_nothing():
    """More redelivered records per key than the id window holds: the offset marks catch them."""
    store = DictStore()
    driver = Driver(TestHistoryProcessor(), store)
    events = [result(run_id=f"r{n}", status=("passed", "failed")[n % 3 == 0]) for n in range(100)]
    flips = [out for n, e in enumerate(events) for out in driver.handle(e, Origin("results/2", 1000 + n))]
    persist(driver, store)
    restarted = Driver(TestHistoryProcessor(), store)
    assert [restarted.handle(e, Origin("results/2", 1000 + n)) for n, e in enumerate(events)] == [[]] * 100
    persist(restarted, store)
    assert decode_entry(TestHistory, store["tests/test_a.py::test_x"]).state.runs == 100
    fresh = restarted.handle(result(run_id="r100", status="passed"), Origin("results/2", 1100))
    assert len(flips) > 10 and len(fresh) == 1  # a new record still counts (and here flips back)


class RunIndex(Processor[TestHistory]):
    """Counts a test's runs under its own key and indexes each run under a compound key it owns."""

    name: ClassVar[str] = "run-index"
    inputs: ClassVar[tuple[str, ...]] = ("results",)
    outputs: ClassVar[tuple[str, ...]] = ()
    state_model = TestHistory

    def process(self, state, event: Event) -> Step[TestHistory]:
        assert isinstance(event, ResultEvent)
        before = state.get(event.test_id) or TestHistory()
        run = TestHistory(runs=1, last_run_id=event.run_id, last_status=event.status)
        return Step(
            writes={
                compound_key(event.test_id, "run", event.run_id): run,
                event.test_id: before.model_copy(update={"runs": before.runs + 1}),
            }
        )


def test_a_crash_part_way_through_persisting_a_batch_loses_no_write():
    """The Kafka runtime writes a batch's entries one changelog record at a time, in drain order; a
    crash can persist any prefix. Marks come last, so replaying the batch over any prefix ends in
    the state of an uninterrupted run."""
    events = [result(run_id=f"r{n}", test_id=f"tests/test_a.py::test_{n % 3}") for n in range(12)]
    clean = DictStore()
    driver = Driver(RunIndex(), clean)
    for n, event in enumerate(events):
        driver.handle(event, Origin("results/0", n))
    writes = list(driver.drain_writes().items())
    clean.update(writes)
    owners = {e.test_id for e in events}
    assert {key for key, _ in writes[-len(owners) :]} == owners  # the keys holding marks come last
    for persisted in range(len(writes) + 1):
        store = DictStore(writes[:persisted])
        replay = Driver(RunIndex(), store)
        for n, event in enumerate(events):
            replay.handle(event, Origin("results/0", n))
        persist(replay, store)
        assert store == clean, f"crash after {persisted} of {len(writes)} writes"


def runs(store: DictStore) -> int:
    return decode_entry(TestHistory, store["tests/test_a.py::test_x"]).state.runs


def test_records_released_out_of_offset_order_are_each_applied_once():
    """A stream released in time order within a lateness bound: the key remembers the offsets it applied
    past its stream's floor, so none is taken for a redelivery and every redelivery is recognised."""
    store = DictStore()
    driver = Driver(TestHistoryProcessor(), store)
    events = {n: result(run_id=f"r{n}") for n in range(6)}
    # Released 0, 3, 1, 5 (2 and 4 still held: floors 1, 1, 2, 2), then 2 and 4.
    for offset, floor in ((0, 1), (3, 1), (1, 2), (5, 2)):
        driver.handle(events[offset], Origin("results/0", offset, floor))
    persist(driver, store)
    entry = decode_entry(TestHistory, store["tests/test_a.py::test_x"])
    assert entry.state.runs == 4 and entry.marks == {"results/0": 1} and entry.past == {"results/0": [3, 5]}
    for offset, floor in ((2, 4), (4, 6)):
        driver.handle(events[offset], Origin("results/0", offset, floor))
    persist(driver, store)
    entry = decode_entry(TestHistory, store["tests/test_a.py::test_x"])
    assert entry.state.runs == 6 and entry.marks == {"results/0": 5} and entry.past == {}
    # A crash replays from the first record held; the ids' window is cleared so that the offsets alone tell.
    restarted = Driver(TestHistoryProcessor(), store)
    for offset in range(6):
        restarted._entry("tests/test_a.py::test_x").seen.clear()
        assert restarted.handle(events[offset], Origin("results/0", offset, 2)) == []
    persist(restarted, store)
    assert runs(store) == 6


def test_a_crash_with_records_held_replays_only_what_was_not_applied():
    store = DictStore()
    driver = Driver(TestHistoryProcessor(), store)
    events = {n: result(run_id=f"r{n}") for n in range(4)}
    driver.handle(events[0], Origin("results/0", 0, 1))
    driver.handle(events[2], Origin("results/0", 2, 1))  # 1 held (timed later than 2)
    persist(driver, store)
    restarted = Driver(TestHistoryProcessor(), store)
    for offset in (1, 2, 3):  # redelivered from the stored position, the first record held
        restarted._entry("tests/test_a.py::test_x").seen.clear()
        restarted.handle(events[offset], Origin("results/0", offset, offset))
    persist(restarted, store)
    entry = decode_entry(TestHistory, store["tests/test_a.py::test_x"])
    assert entry.state.runs == 4 and entry.marks == {"results/0": 3} and entry.past == {}


def test_a_key_remembers_exactly_what_was_released_however_far_out_of_order():
    """Offsets released in a random order with up to 500 held back, the entry encoded and decoded
    (a batch persisted) every 97: at every point an offset counts as applied exactly when it was
    released, and once all are, the mark is the last offset and nothing is left past it."""
    rng = random.Random(3)
    count = 5_000
    order = sorted(range(count), key=lambda offset: offset + rng.uniform(0, 500))
    entry, released, floor = Entry(None), set(), 0
    for n, offset in enumerate(order):
        released.add(offset)
        while floor in released:
            floor += 1
        entry.mark(Origin("results/0", offset, floor))
        if n % 97 == 0:
            entry = decode_entry(TestHistory, encode_entry(entry))
            probes = rng.sample(range(count), 50)
            assert [entry.applied(Origin("results/0", p)) for p in probes] == [p in released for p in probes]
    assert entry.marks == {"results/0": count - 1} and entry.past == {}


def test_an_entry_is_encoded_as_its_models_dump_of_fields():
    """Entries are written from the models' fields without ``model_dump`` (its nested dicts cost more
    than the rest of the encoding): the bytes are what ``model_dump`` and orjson give, nested records,
    tuples and times included; a record built by ``trusted`` from more than its fields writes only them."""
    import orjson

    from fastci.fleet.flaky_detector import HeldOutcome, HeldOutcomes, TestFlakiness

    statuses = ("passed", "failed", "failed", "error", "flaky")
    held = tuple(
        HeldOutcome(result_id=f"{n:032x}", node_id=f"node-{n % 3}", status=status, trigger="ci")
        for n, status in enumerate(statuses)
    )
    states = [
        HeldOutcomes(outcomes=held),
        TestFlakiness(flaky=True, rule="retries", statuses=("flaky", "passed"), groups=("ab",)),
        TestHistory(runs=3, passed=2, failed=1, health="failing", last_status="failed", last_run_id="r3"),
    ]
    for state in states:
        entry = Entry(state, seen=["0123456789abcdef"], marks={"results/0": 7})
        dumped = orjson.dumps({"state": state.model_dump(), "seen": entry.seen, "marks": entry.marks})
        assert encode_entry(entry) == dumped
        assert decode_entry(type(state), encode_entry(entry)).state == state

    extra = TestHistory.trusted({**TestHistory(runs=1).__dict__, "stray": 1})
    assert orjson.loads(encode_entry(Entry(extra)))["state"] == TestHistory(runs=1).model_dump()
