"""The worker's merge of a processor's input streams (``fastci.runtime.kafka.ordering``), logic only: which held
record goes when, given what each stream may still hold. The Kafka runs of the same rule are
``bench/kafka_views.py`` and the Kafka equivalence tests."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from fastci.core.system import FEEDBACK_LEAD_MS, LATENESS_MS
from fastci.runtime.driver import Origin
from fastci.runtime.kafka.markers import ForwarderProgress, Forwarding, WriterProgress
from fastci.runtime.kafka.ordering import (
    HeldRecord,
    InputPaths,
    Ordering,
    PartitionMerge,
    Stalls,
    Wait,
    WireReading,
    describe,
)
from fastci.runtime.ordering import ANYTHING, NOTHING_LEFT, limit_after


def held(time_ms: int, index: int, origin: str, name: str = "", offset: int = 0) -> HeldRecord:
    return HeldRecord((time_ms, index, name), lambda h: [], None, None, Origin(origin, offset))


def let_go(merge: PartitionMerge, limit) -> list[HeldRecord]:
    return [record for _, record in merge.release(limit)]


def fill(merge: PartitionMerge, *records: tuple[str, HeldRecord]) -> None:
    for topic, record in records:
        merge.stream(topic, record.origin.stream).push(record)


def test_the_least_head_goes_first_while_every_empty_stream_has_nothing_left():
    merge = PartitionMerge()
    fill(
        merge,
        ("results", held(30, 1, "results/0", "r30")),
        ("results", held(10, 1, "results/0", "r10")),  # out of time order in its stream: stays behind r30
        ("commits", held(20, 0, "commits/0", "c20")),
        ("commits", held(30, 0, "commits/0", "c30")),
    )
    released = [h.key[2] for h in let_go(merge, lambda stream: NOTHING_LEFT)]
    # each stream keeps its log order; across streams the least head, ties by topic order
    assert released == ["c20", "c30", "r30", "r10"]
    assert merge.held() == 0


def timed(time_ms: int, index: int, stream: str, offset: int) -> HeldRecord:
    return HeldRecord((time_ms, index, f"id{offset}", offset), lambda h: [], None, None, Origin(stream, offset))


def test_an_input_topic_is_released_in_time_order_within_the_lateness_bound():
    """A topic no processor writes (a producer's): its records go in time order, whatever their order in
    the log, once nothing still to come in the stream can sort before them; each goes with its stream's
    floor, the first offset not released yet (the driver's marks rely on it)."""
    merge = PartitionMerge(frozenset({"results"}))
    late = LATENESS_MS
    fill(
        merge,
        ("results", timed(30, 1, "results/0", 0)),
        ("results", timed(10, 1, "results/0", 1)),  # appended after r30, timed before it
        ("results", timed(20, 1, "results/0", 2)),
        ("commits", timed(15, 0, "commits/0", 0)),
    )
    read_to_end: set[str] = {"commits/0"}

    def limit(stream):  # an input stream not read to its end may still get records from its latest less the bound
        return NOTHING_LEFT if stream.origin in read_to_end else limit_after(stream.latest - late, 1)

    assert list(let_go(merge, limit)) == []  # anything from 30 less the bound on may still come in results/0
    assert merge.low_watermark(limit) == 30 - late
    fill(merge, ("results", timed(30 + late + 1, 1, "results/0", 3)))  # a record past the bound
    released = list(let_go(merge, limit))
    assert [(h.key[0], h.origin.offset, h.origin.floor) for h in released] == [
        (10, 1, 0),  # 0 (r30) is still held: the floor stays at it
        (15, 0, None),  # commits/0: in time order already (a stream's floor is its record's own then)
        (20, 2, 0),
        (30, 0, 3),  # r30 goes, and with it every offset before 3
    ]
    read_to_end.add("results/0")
    [last] = let_go(merge, limit)
    assert (last.origin.offset, last.origin.floor) == (3, 4) and merge.held() == 0


def test_a_stream_not_read_to_its_end_holds_back_everything_once_it_is_empty():
    merge = PartitionMerge()
    merge.stream("results", "results/0")  # known, nothing delivered yet
    fill(merge, ("commits", held(20, 0, "commits/0", "c20")))
    unread = {"results/0"}

    def limit(stream):
        return ANYTHING if stream.origin in unread else NOTHING_LEFT

    assert list(let_go(merge, limit)) == []
    assert merge.low_watermark(limit) == float("-inf")
    fill(merge, ("results", held(25, 1, "results/0", "r25")), ("commits", held(30, 0, "commits/0", "c30")))
    # results/0 has a head now: what is still to come in it comes after r25, so c20 and r25 go;
    # then results/0 is empty again and c30 waits
    assert [h.key[2] for h in let_go(merge, limit)] == ["c20", "r25"]
    unread.clear()  # results/0 read to its end
    assert [h.key[2] for h in let_go(merge, limit)] == ["c30"]


def test_a_derived_stream_lets_go_only_what_sorts_before_its_writers_low_watermark():
    merge = PartitionMerge()
    merge.stream("selection", "selection/0")
    fill(
        merge,
        ("results", held(10, 0, "results/0", "r10")),
        ("results", held(20, 0, "results/0", "r20")),
        ("commits", held(20, 2, "commits/0", "c20")),
    )
    # the writer may still emit selections timed 20 or later; selection is input 1 of this processor
    released = [
        h.key[2] for h in let_go(merge, lambda s: limit_after(20, 1) if s.topic == "selection" else NOTHING_LEFT)
    ]
    assert released == ["r10", "r20"]  # r20 (input 0) sorts before any selection at 20; c20 (input 2) does not
    assert merge.low_watermark(lambda s: limit_after(20, 1) if s.topic == "selection" else NOTHING_LEFT) == 20


class FakePositions:
    def __init__(self, expected: dict[tuple[str, int], int]) -> None:
        self.next = expected

    def expected(self, topic: str, partition: int) -> int | None:
        return self.next.get((topic, partition))


def ordering_of(highwaters: dict[tuple[str, int], int]) -> tuple[Ordering, FakePositions, FakePositions]:
    """A writer of 'selection' reading 'commits', and a reader of 'commits' and 'selection', with
    two partitions; every route's positions in one fake."""
    own = FakePositions({})
    back = FakePositions({})

    def feed(index: int, topic: str, writers: tuple[str, ...] = ()) -> InputPaths:
        return InputPaths(
            index, WireReading(own, topic), WireReading(back, f"{topic}-back"), WireReading(own, topic), writers
        )

    feeds = {
        "writer": {"commits": feed(0, "commits")},
        "reader": {"commits": feed(0, "commits"), "selection": feed(1, "selection", ("writer",))},
    }
    ordering = Ordering(["writer", "reader"], feeds, 2, lambda topic, partition: highwaters.get((topic, partition)))
    ordering.assign({(t, p) for t in ("commits", "commits-back", "selection", "selection-back") for p in (0, 1)})
    return ordering, own, back


def test_a_stream_is_read_to_its_end_at_its_high_water_mark_and_past_what_the_worker_sent():
    highwaters = {(t, p): 0 for t in ("commits", "commits-back", "selection", "selection-back") for p in (0, 1)}
    ordering, own, _ = ordering_of(highwaters)
    stream = ordering.merges["reader"][0].streams["commits/0"]
    assert ordering.limit("reader", 0, stream) == NOTHING_LEFT  # an empty topic
    highwaters[("commits", 0)] = 3
    assert ordering.limit("reader", 0, stream) == ANYTHING  # three records not taken yet
    own.next[("commits", 0)] = 3
    assert ordering.limit("reader", 0, stream) == NOTHING_LEFT
    ordering.sent({("commits", 0): 5})  # this worker wrote two more: not read until taken
    assert ordering.limit("reader", 0, stream) == ANYTHING
    own.next[("commits", 0)] = 5
    assert ordering.limit("reader", 0, stream) == NOTHING_LEFT
    assert ordering.limit("reader", 0, ordering.merges["reader"][0].streams["commits/1"]) == NOTHING_LEFT
    del highwaters[("commits-back", 0)]  # no fetch of the worker's own topic yet: not known
    assert ordering.limit("reader", 0, ordering.merges["reader"][0].streams["commits/1"]) == ANYTHING


def test_readers_wait_for_what_their_writer_still_holds_and_for_what_it_is_sending():
    highwaters = {(t, p): 0 for t in ("commits", "commits-back", "selection", "selection-back") for p in (0, 1)}
    ordering, own, _ = ordering_of(highwaters)
    highwaters[("commits", 0)] = 2
    own.next[("commits", 0)] = 2
    sent = []

    def writer_apply(h: HeldRecord) -> list:
        send = SimpleNamespace(topic="selection", partition=0, time=h.key[0])
        sent.append(send)
        return [send]

    ordering.hold("writer", 0, "commits", HeldRecord((20, 0, "c20"), writer_apply, None, None, Origin("commits/0", 0)))
    ordering.hold("reader", 0, "commits", held(20, 0, "commits/0", "c20"))
    ordering.hold("reader", 0, "commits", held(40, 0, "commits/0", "c40"))
    made = ordering.release([])
    assert [s.time for s in made] == [20] and ordering.frontier["writer"] == float("inf")
    # the writer's selection at 20 is on its way: the reader's selection stream is not read to its end
    assert ordering.merges["reader"][0].held() == 2
    ordering.sent({("selection", 0): 1})
    highwaters[("selection", 0)] = 1
    own.next[("selection", 0)] = 1  # read back...
    ordering.hold("reader", 0, "selection", held(20, 1, "selection/0", "s20"))
    ordering.release([])
    assert ordering.merges["reader"][0].held() == 0  # c20, s20, c40: in time order

    # a writer whose earliest record still to come is timed 30: its reader's selection stream,
    # read to its end, may yet hold selections timed 30 or later
    stream = ordering.merges["reader"][0].streams["selection/0"]
    ordering.frontier["writer"] = 30
    assert ordering.limit("reader", 0, stream) == limit_after(30, 1)
    highwaters[("selection", 0)] = 2  # one more selection on the broker, not taken yet
    assert ordering.limit("reader", 0, stream) == ANYTHING


def test_a_record_is_ordered_at_its_time_header_else_its_timestamp():
    from fastci.runtime.kafka.routes import record_time as _record_time

    def message(headers):
        return SimpleNamespace(headers=headers, timestamp=1_700_000_000.123)

    assert _record_time(message([("fastci-time", b"1690000000000")])) == 1_690_000_000_000
    assert _record_time(message([("fastci-time", b"yesterday")])) == 1_700_000_000_123  # another client's
    assert _record_time(message(None)) == 1_700_000_000_123


def test_a_rewind_goes_back_to_faust_s_committed_offset_when_it_is_earlier_even_at_zero():
    from faust.types import TP

    from fastci.runtime.kafka.runtime import _rewinds

    tp = TP("results", 0)

    class Route:
        positions = FakePositions({("results", 0): 833})

    route = Route()
    assert _rewinds({(tp, route)}, {tp: 500}) == {tp: 500}
    assert _rewinds({(tp, route)}, {tp: 0}) == {tp: 0}  # an offset, not "nothing committed"
    assert _rewinds({(tp, route)}, {}) == {tp: 833}


def test_a_source_partition_another_worker_forwards_is_read_to_its_end_when_its_marker_says_caught_up():
    highwaters = {(t, p): 0 for t in ("commits", "commits-back", "selection", "selection-back") for p in (0, 1)}
    ordering, _, _ = ordering_of(highwaters)
    ordering.assign({(t, p) for t in ("commits", "commits-back", "selection", "selection-back") for p in (0,)})
    stream = ordering.merges["reader"][0].streams["commits/1"]  # commits' partition 1: another worker forwards it
    # its forwarded records are all read here, but the forwarder may not have sent them all yet
    assert ordering.limit("reader", 0, stream) == ANYTHING
    ordering.forwarded("commits-back", 0, ForwarderProgress(1, None))
    assert ordering.limit("reader", 0, stream) == ANYTHING
    ordering.forwarded("commits-back", 0, ForwarderProgress(1, 0))
    assert ordering.limit("reader", 0, stream) == NOTHING_LEFT
    ordering.forwarded("commits-back", 1, ForwarderProgress(1, None))  # another partition's marker says nothing here
    assert ordering.limit("reader", 0, stream) == NOTHING_LEFT
    highwaters[("commits-back", 0)] = 4  # the marker's records are not all read yet
    assert ordering.limit("reader", 0, stream) == ANYTHING
    highwaters[("commits-back", 0)] = 0
    ordering.assign({(t, p) for t in ("commits", "commits-back", "selection", "selection-back") for p in (0,)})
    # after a rebalance the forwarders tell their readers again; until then, nothing is known
    assert ordering.limit("reader", 0, ordering.merges["reader"][0].streams["commits/1"]) == ANYTHING


def rekeyed_ordering(highwaters: dict[tuple[str, int], int]) -> tuple[Ordering, FakePositions]:
    """A planner writing 'test-plan' by repo (its outputs land in the partition it processes) and a
    pool reading 'test-plan' rekeyed by pool through 'plans-by-pool', with a second writer of the
    topic, 'other', whose outputs go anywhere; two partitions, this worker has partition 0."""
    positions = FakePositions({})
    plans = WireReading(positions, "test-plan")
    commits = InputPaths(
        0,
        WireReading(positions, "commits"),
        WireReading(positions, "commits-back"),
        WireReading(positions, "commits"),
        (),
    )
    feeds = {
        "planner": {"commits": commits},
        "other": {"commits": commits},
        "pool": {
            "test-plan": InputPaths(
                0, None, WireReading(positions, "plans-by-pool"), plans, ("planner", "other"), colocated=("planner",)
            )
        },
    }
    ordering = Ordering(["planner", "other", "pool"], feeds, 2, lambda t, p: highwaters.get((t, p)))
    ordering.assign({(t, 0) for t in ("commits", "commits-back", "test-plan", "plans-by-pool")})
    ordering.forwarded("commits-back", 0, ForwarderProgress(1, 0))  # the other worker's commits: all forwarded
    return ordering, positions


def test_a_stream_another_worker_forwards_is_bounded_by_what_that_worker_says_of_its_writers():
    highwaters = {(t, p): 0 for t in ("commits", "commits-back", "test-plan", "plans-by-pool") for p in (0, 1)}
    ordering, positions = rekeyed_ordering(highwaters)
    remote = ordering.merges["pool"][0].streams["test-plan/1"]  # its planner runs on the other worker
    ordering.frontier.update(planner=50, other=float("inf"))  # this worker's partitions of the writers
    ordering.forwarded("plans-by-pool", 0, ForwarderProgress(1, 7))
    # 'other' may write into any partition: its partition on the other worker has not said where it is
    assert ordering.limit("pool", 0, remote) == ANYTHING
    ordering.writer_marked("plans-by-pool", 0, WriterProgress("other", (1,), 60, {1: 9}))
    assert ordering.limit("pool", 0, remote) == ANYTHING  # what it wrote ends at 9; forwarded through 7
    ordering.forwarded("plans-by-pool", 0, ForwarderProgress(1, 9))
    assert ordering.limit("pool", 0, remote) == limit_after(50, 0)  # no planner frontier told: this worker's
    ordering.forwarded("plans-by-pool", 0, ForwarderProgress(1, 9, 20))
    assert ordering.limit("pool", 0, remote) == limit_after(20, 0)  # the planner there holds a plan at 20
    ordering.forwarded("plans-by-pool", 0, ForwarderProgress(1, 9, float("inf")))
    assert ordering.limit("pool", 0, remote) == limit_after(60, 0)  # 'other' there, at 60
    ordering.writer_marked("plans-by-pool", 0, WriterProgress("other", (1,), float("inf"), {1: 9}))
    assert ordering.limit("pool", 0, remote) == NOTHING_LEFT
    ordering.frontier["other"] = 30  # and 'other' here, at 30
    assert ordering.limit("pool", 0, remote) == limit_after(30, 0)
    # what this worker wrote into the other worker's partition must come back through its forwarder first
    ordering.sent({("test-plan", 1): 11})
    assert ordering.limit("pool", 0, remote) == ANYTHING
    ordering.forwarded("plans-by-pool", 0, ForwarderProgress(1, 11, float("inf")))
    assert ordering.limit("pool", 0, remote) == limit_after(30, 0)
    ordering.feeds["pool"]["test-plan"] = replace(ordering.feeds["pool"]["test-plan"], writers=("planner",))
    ordering.forwarded("plans-by-pool", 0, ForwarderProgress(1, 11, 25))
    assert ordering.limit("pool", 0, remote) == limit_after(25, 0)  # its only writer told there
    local = ordering.merges["pool"][0].streams["test-plan/0"]
    positions.next.update({("test-plan", 0): 0, ("plans-by-pool", 0): 0})
    ordering.frontier["planner"] = 40
    assert ordering.limit("pool", 0, local) == limit_after(40, 0)  # a local partition: its writer is here
    ordering.assign({(t, 0) for t in ("commits", "commits-back", "test-plan", "plans-by-pool")})
    assert ordering.writers_said == {} and ordering.forwarders_said == {}  # told again after a rebalance


def test_a_writer_marker_names_this_worker_s_partitions_of_the_writer_and_their_frontier():
    highwaters = {(t, p): 0 for t in ("commits", "commits-back", "test-plan", "plans-by-pool") for p in (0, 1)}
    ordering, positions = rekeyed_ordering(highwaters)
    positions.next[("commits", 0)] = 1
    highwaters[("commits", 0)] = 1
    ordering.hold("other", 0, "commits", held(80, 0, "commits/0", "c80"))
    assert ordering.writer_frontier("other") == ((0,), 80)
    ordering.in_flight.add(("test-plan", 1))  # outputs not acknowledged: their ends are not known
    assert ordering.writer_frontier("other") is None
    ordering.sent({("test-plan", 1): 4})
    assert ordering.writer_frontier("other") == ((0,), 80) and ordering.produced("test-plan", 1) == 4


def test_the_partition_frontier_a_marker_carries_counts_what_this_worker_sent_into_the_partition():
    highwaters = {(t, p): 0 for t in ("commits", "commits-back", "test-plan", "plans-by-pool") for p in (0, 1)}
    ordering, positions = rekeyed_ordering(highwaters)
    forwarding = Forwarding("test-plan", "plans-by-pool", positions, writers=("planner",))
    positions.next[("commits", 0)] = 1
    highwaters[("commits", 0)] = 1
    ordering.hold("planner", 0, "commits", held(70, 0, "commits/0", "c70"))
    assert ordering.partition_frontier(forwarding, 0, through=0) == 70  # its held commit, at 70
    ordering.sent({("test-plan", 0): 3})  # plans it made, not forwarded yet
    assert ordering.partition_frontier(forwarding, 0, through=2) is None
    assert ordering.partition_frontier(forwarding, 0, through=3) == 70
    ordering.in_flight.add(("test-plan", 0))
    assert ordering.partition_frontier(forwarding, 0, through=3) is None
    ordering.in_flight.clear()
    assert ordering.partition_frontier(forwarding, 1, through=0) is None  # its partition 1 runs elsewhere


def test_a_merge_that_waits_says_what_for():
    highwaters = {(t, p): 0 for t in ("commits", "commits-back", "test-plan", "plans-by-pool") for p in (0, 1)}
    ordering, positions = rekeyed_ordering(highwaters)
    ordering.frontier.update(planner=float("inf"), other=float("inf"))
    positions.next.update({("test-plan", 0): 0, ("plans-by-pool", 0): 0})
    assert ordering.waits() == []  # nothing held
    ordering.hold("pool", 0, "test-plan", held(70, 0, "test-plan/0", "p70"))
    ordering.forwarded("plans-by-pool", 0, ForwarderProgress(1, 0))
    # the other worker's partition of 'other' (which writes anywhere) has not said where it is
    (wait,) = ordering.waits()
    assert (wait.processor, wait.partition, wait.stream, wait.held, wait.head) == (
        "pool",
        0,
        "test-plan/1",
        1,
        (70, 0, "p70"),
    )
    assert "no writer marker yet from the worker holding partition 1 of other" in wait.reason
    assert "one version" in wait.reason
    assert [h.key[2] for h in ordering.merges["pool"][0].release(lambda s: ordering.limit("pool", 0, s))] == []
    ordering.writer_marked("plans-by-pool", 0, WriterProgress("other", (1,), 60, {1: 9}))
    (wait,) = ordering.waits()
    assert "not read yet (up to offset 9)" in wait.reason
    ordering.forwarded("plans-by-pool", 0, ForwarderProgress(1, 9))
    (wait,) = ordering.waits()  # told, read: 'other' there may still emit a plan at 60, before p70
    assert wait.reason == (
        "other on the worker holding its partition 1, which writes it, may still emit records timed from "
        "1970-01-01T00:00:00.060+00:00"
    )
    ordering.frontier["other"] = float("-inf")  # this worker's 'other' is stuck itself
    assert ordering.waits()[0].reason == "other, which writes it, waits itself"
    ordering.frontier["other"] = float("inf")
    ordering.writer_marked("plans-by-pool", 0, WriterProgress("other", (1,), float("inf"), {1: 9}))
    assert ordering.waits() == []
    highwaters[("plans-by-pool", 0)] = 5  # five forwarded plans not taken yet: either origin's, maybe
    (wait,) = ordering.waits()
    assert (wait.stream, wait.reason) == ("test-plan/1", "plans-by-pool/0 read up to offset 0 of 5")
    highwaters[("plans-by-pool", 0)] = 0
    ordering.forwarders_said.clear()  # the other worker's forwarder has not said it is caught up
    (wait,) = ordering.waits()
    assert wait.reason == "no progress marker yet from the worker forwarding test-plan/1"
    ordering.forwarded("plans-by-pool", 0, ForwarderProgress(1, None))
    assert ordering.waits()[0].reason == "the worker forwarding test-plan/1 says it is behind"
    assert str(ordering.waits()[0]).startswith("pool[0] holds 1, waiting on test-plan/1: ")


def test_a_stall_report_names_each_cause_once_with_the_partitions_it_holds():
    waits = [
        Wait("flaky-detector", 0, "baseline-exclusions/0", 64, "no writer marker"),
        Wait("flaky-detector", 2, "baseline-exclusions/2", 45, "no writer marker"),
        Wait("regression-detector", 0, "flaky-verdicts/0", 75, "flaky-detector, which writes it, waits itself"),
        Wait("regression-detector", 0, "flaky-verdicts/1", 75, "flaky-detector, which writes it, waits itself"),
        Wait("regression-detector", 2, "flaky-verdicts/1", 5, "flaky-detector, which writes it, waits itself"),
    ]
    assert describe(waits) == [
        "flaky-detector holds 109 in partitions 0, 2 (baseline-exclusions/0, baseline-exclusions/2): no writer marker",
        "regression-detector holds 80 in partitions 0, 2 (flaky-verdicts/0, flaky-verdicts/1): "
        "flaky-detector, which writes it, waits itself",
    ]


def test_a_wait_is_reported_once_it_has_stayed_then_again_while_it_stays():
    stalls = Stalls(after=30, every=300)
    stuck = Wait("pool", 0, "test-plan/1", 3, "no writer marker", (70, 0, "p70"))
    assert stalls.due([stuck], 0) == []
    assert stalls.due([stuck], 29) == []
    assert stalls.due([stuck], 30) == [stuck]
    assert stalls.due([stuck], 60) == []  # told already
    assert stalls.due([stuck], 330) == [stuck]  # still there
    moved = replace(stuck, head=(80, 0, "p80"))  # its head went, the next one waits: a new wait
    assert stalls.due([moved], 340) == []
    assert stalls.due([moved], 370) == [moved]
    assert stalls.due([], 380) == []  # released
    assert stalls.due([moved], 390) == []  # back: counted from now
    assert stalls.due([moved], 420) == [moved]


def test_a_feedback_stream_runs_at_most_the_lead_ahead_of_its_writer():
    highwaters = {(t, p): 0 for t in ("results", "results-back", "states", "states-back") for p in (0, 1)}
    positions = FakePositions({})

    def feed(index: int, topic: str, feedback: tuple[str, ...] = ()) -> InputPaths:
        consumed = WireReading(positions, topic)
        return InputPaths(index, consumed, WireReading(positions, f"{topic}-back"), consumed, (), (), feedback)

    feeds = {
        "guard": {"results": feed(0, "results"), "states": feed(1, "states", ("node-state",))},
        "node-state": {"results": feed(0, "results")},
    }
    ordering = Ordering(["guard", "node-state"], feeds, 2, lambda t, p: highwaters.get((t, p)))
    ordering.assign({(t, p) for t in ("results", "results-back", "states", "states-back") for p in (0, 1)})
    states = ordering.merges["guard"][0].streams["states/0"]
    ordering.hold("guard", 0, "results", held(1_000 + FEEDBACK_LEAD_MS - 1, 0, "results/0", "early"))
    ordering.hold("guard", 0, "results", held(1_000 + FEEDBACK_LEAD_MS + 1, 0, "results/0", "late"))
    assert ordering.limit("guard", 0, states) == ANYTHING  # node-state has not run here since the rebalance
    waits = ordering.waits()
    assert {w.stream for w in waits} == {"states/0", "states/1"}  # read to their ends, both
    assert all("node-state, which writes it through a feedback pipe, has not run here yet" == w.reason for w in waits)
    ordering.frontier["node-state"] = float("inf")  # it has nothing left
    assert ordering.limit("guard", 0, states) == NOTHING_LEFT
    ordering.frontier["node-state"] = 1_000
    assert ordering.limit("guard", 0, states) == limit_after(1_000 + FEEDBACK_LEAD_MS, 1)
    merge = ordering.merges["guard"][0]
    assert [h.key[2] for h in let_go(merge, lambda s: ordering.limit("guard", 0, s))] == ["early"]
    assert ordering.waits() and all(
        w.reason.startswith("node-state (a feedback pipe, plus its lead), which writes it, may still emit")
        for w in ordering.waits()
    )
    # what the guard may still emit is not bounded by the feedback pipe: node-state's watermark is bounded
    # by the guard's through the loop, and the two held each other at minus infinity (a worker stalled)
    ordering.frontier["node-state"] = float("-inf")
    assert ordering.limit("guard", 0, states) == limit_after(float("-inf"), 1)  # its release waits...
    assert ordering.writer_frontier("guard") == ((0, 1), 1_000 + FEEDBACK_LEAD_MS + 1)  # ...its watermark not
