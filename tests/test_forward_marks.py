"""The forwarders' progress markers (``fastci.runtime.kafka.markers``): what a worker tells the readers of its
own topics about the source partitions it forwards, and when. The merge that reads them is tested
in ``test_kafka_ordering.py``; the two-worker kill they exist for in ``bench/kafka_views.py``."""

from __future__ import annotations

from fastci.runtime.kafka.markers import (
    WRITER_HEADER,
    ForwarderProgress,
    Forwarding,
    ForwardMarks,
    ScatteredWriter,
    WriterMarks,
    WriterProgress,
    parse,
    parse_writer,
)


class FakePositions:
    def __init__(self) -> None:
        self.next: dict[tuple[str, int], int] = {}

    def expected(self, topic: str, partition: int) -> int | None:
        return self.next.get((topic, partition))


def marks_of() -> tuple[ForwardMarks, FakePositions]:
    positions = FakePositions()
    marks = ForwardMarks(partitions=2)
    marks.add(Forwarding("results", "results-by-repo", positions))
    return marks, positions


def at(highwaters: dict[tuple[str, int], int]):
    return lambda topic, partition: highwaters.get((topic, partition))


def told(marks: list) -> set[tuple[str, int, int, bool]]:
    said = [(m, parse(m.header)) for m in marks]
    return {(m.topic, m.partition, s.partition, s.through is not None) for m, s in said if s is not None}


def test_a_forwarder_tells_every_partition_of_its_topic_when_it_is_caught_up_or_falls_behind():
    marks, positions = marks_of()
    assigned = {("results", 0), ("results-by-repo", 0)}  # another worker reads partition 1 of both
    highwaters = {("results", 0): 5}
    assert marks.due(assigned, at(highwaters)) == []  # where the forwarder is: not known yet
    positions.next[("results", 0)] = 3
    assert told(marks.due(assigned, at(highwaters))) == {("results-by-repo", q, 0, False) for q in (0, 1)}
    assert marks.due(assigned, at(highwaters)) == []  # still behind: said already
    positions.next[("results", 0)] = 5
    assert marks.due(assigned, at(highwaters), tell=False)  # only looking...
    assert told(marks.due(assigned, at(highwaters))) == {("results-by-repo", q, 0, True) for q in (0, 1)}
    assert marks.due(assigned, at(highwaters)) == []
    highwaters[("results", 0)] = 7  # two more records: caught up through 5 no longer holds
    assert told(marks.due(assigned, at(highwaters))) == {("results-by-repo", q, 0, False) for q in (0, 1)}
    positions.next[("results", 0)] = 7
    assert [m.header for m in marks.due(assigned, at(highwaters))] == [b"0/7", b"0/7"]
    marks.reset()  # a rebalance: readers resume past the last marker, so they are told again
    assert [m.header for m in marks.due(assigned, at(highwaters))] == [b"0/7", b"0/7"]


def test_no_marker_when_every_reader_of_the_topic_is_on_this_worker():
    marks, positions = marks_of()
    positions.next.update({("results", 0): 0, ("results", 1): 0})
    highwaters = {("results", 0): 0, ("results", 1): 0}
    whole = {(t, p) for t in ("results", "results-by-repo") for p in (0, 1)}
    assert marks.due(whole, at(highwaters)) == []
    # a worker reading every source partition but not every partition of the worker topic still tells
    sources_only = {("results", 0), ("results", 1), ("results-by-repo", 0)}
    assert {(m.partition, m.header) for m in marks.due(sources_only, at(highwaters))} == {
        (q, f"{p}/0".encode()) for q in (0, 1) for p in (0, 1)
    }


def test_a_marker_header_this_worker_could_not_have_written_is_ignored():
    assert parse(b"3/120") == ForwarderProgress(3, 120)
    assert parse(b"3/behind") == ForwarderProgress(3, None)
    assert parse(b"3/120/1700000000000") == ForwarderProgress(3, 120, 1_700_000_000_000)
    assert parse(b"3/120/inf") == ForwarderProgress(3, 120, float("inf"))
    assert parse(b"3/120/-inf") == ForwarderProgress(3, 120, float("-inf"))
    for raw in (b"", b"3", b"x/120", b"3/later", b"\xff/1", b"3/behind/12", b"3/120/soon"):
        assert parse(raw) is None, raw


def test_a_caught_up_marker_carries_the_writers_frontier_when_it_can_tell_it():
    positions = FakePositions()
    marks = ForwardMarks(partitions=2)
    marks.add(Forwarding("test-plan", "test-plan-by-pool", positions, writers=("test-planner",)))
    assigned = {("test-plan", 0), ("test-plan-by-pool", 0)}
    highwaters = {("test-plan", 0): 4}
    frontiers: dict[int, float | None] = {0: None}
    asked = []

    def frontier(forwarding: Forwarding, partition: int, through: int) -> float | None:
        asked.append((forwarding.writers, partition, through))
        return frontiers[partition]

    positions.next[("test-plan", 0)] = 2
    assert [m.header for m in marks.due(assigned, at(highwaters), frontier=frontier)] == [b"0/behind"] * 2
    assert asked == []  # behind: what the writers may still do is not worth telling yet
    positions.next[("test-plan", 0)] = 4
    assert [m.header for m in marks.due(assigned, at(highwaters), frontier=frontier)] == [b"0/4"] * 2
    assert asked == [(("test-planner",), 0, 4)]
    frontiers[0] = 1_000  # the writers hold a record timed 1,000: a new state, told again
    assert [m.header for m in marks.due(assigned, at(highwaters), frontier=frontier)] == [b"0/4/1000"] * 2
    assert marks.due(assigned, at(highwaters), frontier=frontier) == []
    frontiers[0] = float("inf")
    assert [parse(m.header) for m in marks.due(assigned, at(highwaters), frontier=frontier)] == [
        ForwarderProgress(0, 4, float("inf"))
    ] * 2
    # a forwarding with no colocated writer is never asked
    plain, plain_positions = marks_of()
    plain_positions.next[("results", 0)] = 0
    assert plain.due({("results", 0)}, at({("results", 0): 0}), frontier=frontier)
    assert len(asked) == 4


def test_a_writer_whose_outputs_go_anywhere_tells_the_other_workers_its_frontier_and_ends():
    marks = WriterMarks(partitions=3)
    marks.add(ScatteredWriter("node-state", "run-requested", "run-requested-by-pool"))
    assigned = {("run-requested-by-pool", 0)}  # partitions 1 and 2 of the readers are elsewhere
    known: dict[str, tuple[tuple[int, ...], float] | None] = {"node-state": None}
    ends = {("run-requested", 2): 12}

    def due(tell: bool = True) -> list:
        return marks.due(assigned, known.get, lambda topic, q: ends.get((topic, q), 0), tell)

    assert due() == []  # not known yet (outputs on their way)
    known["node-state"] = ((0,), 1_500.0)
    made = due()
    assert [(m.topic, m.partition, m.name) for m in made] == [
        ("run-requested-by-pool", q, WRITER_HEADER) for q in (1, 2)
    ]
    assert parse_writer(made[0].header) == WriterProgress("node-state", (0,), 1_500, {2: 12})
    assert due() == []  # said already
    ends[("run-requested", 0)] = 3
    assert due(tell=False) and parse_writer(due()[0].header).ends == {0: 3, 2: 12}
    known["node-state"] = ((0,), float("inf"))
    assert parse_writer(due()[0].header).frontier == float("inf")
    marks.reset()
    assert len(due()) == 2
    assigned.update({("run-requested-by-pool", 1), ("run-requested-by-pool", 2)})
    known["node-state"] = ((0, 1, 2), 9.0)
    assert due() == []  # every reader is here


def test_a_writer_marker_this_worker_could_not_have_written_is_ignored():
    assert parse_writer(b"node-state/0,2/-inf/") == WriterProgress("node-state", (0, 2), float("-inf"), {})
    for raw in (b"", b"node-state/0/5", b"/0/5/", b"node-state/x/5/", b"node-state/0/soon/", b"node-state/0/5/1"):
        assert parse_writer(raw) is None, raw
