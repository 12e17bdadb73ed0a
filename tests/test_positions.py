"""Per-partition positions: a route applies each record of a partition once, in offset order,
however the consumer skips ahead or redelivers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from fastci.runtime.kafka.positions import Positions, Verdict, position_key, position_partition


class DictStore(dict):
    def get(self, key: str) -> bytes | None:
        return super().get(key)


def test_the_first_record_starts_the_partition_then_order_is_enforced():
    positions = Positions("test-history:results", DictStore())
    assert positions.expected("results", 2) is None
    assert positions.admit("results", 2, 40) is Verdict.NEXT  # a log may start past 0 (retention)
    assert positions.admit("results", 2, 41) is Verdict.NEXT
    assert positions.admit("results", 2, 41) is Verdict.DUPLICATE
    assert positions.admit("results", 2, 7) is Verdict.DUPLICATE
    assert positions.admit("results", 2, 43) is Verdict.GAP  # 42 was never delivered
    assert positions.expected("results", 2) == 42
    assert positions.admit("results", 2, 42) is Verdict.NEXT
    assert positions.admit("results", 3, 0) is Verdict.NEXT  # partitions are independent


def test_with_nothing_stored_a_route_expects_the_start_of_the_log_not_the_first_record_delivered():
    starts = {("results", 2): 0}
    positions = Positions("test-history:results:misplaced", DictStore(), starts)
    assert positions.expected("results", 2) == 0
    # After a rebalance faust delivered a worker's own topic from offset 833: a gap, not the start.
    assert positions.admit("results", 2, 833) is Verdict.GAP
    assert positions.admit("results", 2, 0) is Verdict.NEXT
    starts[("results", 3)] = 40  # retention deleted 0..39: the log starts at 40
    assert positions.admit("results", 3, 40) is Verdict.NEXT


def test_a_stored_position_retention_has_passed_gives_way_to_the_start_of_the_log():
    store = DictStore()
    positions = Positions("r", store)
    positions.admit("t", 0, 0)
    store.update(positions.drain_writes())
    starts: dict[tuple[str, int], int] = {}
    restarted = Positions("r", store, starts)
    assert restarted.expected("t", 0) == 1
    starts[("t", 0)] = 500  # records 1..499 are gone: seeking back to 1 would find nothing
    assert restarted.expected("t", 0) == 500
    assert restarted.admit("t", 0, 500) is Verdict.NEXT


def test_positions_survive_a_restart_through_the_store():
    store = DictStore()
    positions = Positions("test-history:results", store)
    for offset in range(5):
        positions.admit("results", 0, offset)
    store.update(positions.drain_writes())
    assert positions.drain_writes() == {}  # nothing changed since
    restarted = Positions("test-history:results", store)
    assert restarted.admit("results", 0, 9) is Verdict.GAP  # faust committed past records we never applied
    assert restarted.expected("results", 0) == 5
    other_route = Positions("baseline-guard:forward:results", store)
    assert other_route.expected("results", 0) is None  # every route keeps its own position


def test_forget_drops_the_cache_and_unsaved_advances():
    store = DictStore()
    positions = Positions("r", store)
    positions.admit("t", 0, 0)
    store.update(positions.drain_writes())
    positions.admit("t", 0, 1)
    positions.forget()  # a rebalance: the store, recovered from the changelog, is the truth
    assert positions.expected("t", 0) == 1
    assert positions.drain_writes() == {}


def test_position_keys_name_their_partition_and_no_state_key_looks_like_one():
    assert position_partition(position_key("test-history:results", "ns-results", 3)) == 3
    assert position_partition("tests/test_a.py::test_x") is None
    assert position_partition("repo\x1fsha") is None


# One step of an unreliable consumer: deliver the next record, skip ahead, or jump back.
steps = st.lists(st.one_of(st.just(("next", 0)), st.tuples(st.sampled_from(["skip", "back"]), st.integers(1, 30))))


@given(steps, st.integers(1, 120), st.integers(0, 200))
def test_records_are_applied_once_each_in_order_whatever_the_consumer_delivers(plan, length, crash_at):
    store = DictStore()
    positions = Positions("r", store)
    applied: list[int] = []
    cursor = 0
    for turn, (kind, distance) in enumerate([*plan, *[("next", 0)] * (2 * length + len(plan) * 30)]):
        if turn == crash_at:  # persisted positions only; the consumer restarts somewhere ahead
            positions = Positions("r", store)
            cursor += distance
        if kind == "skip":
            cursor += distance
        elif kind == "back":
            cursor = max(0, cursor - distance)
        if cursor >= length:
            expected = positions.expected("t", 0)
            if expected is not None and expected >= length:
                break
            cursor = expected or 0  # past the end: the consumer resets to what is still missing
        verdict = positions.admit("t", 0, cursor)
        if verdict is Verdict.NEXT:
            applied.append(cursor)
            store.update(positions.drain_writes())
            cursor += 1
        elif verdict is Verdict.GAP:
            cursor = positions.expected("t", 0)  # the runtime seeks back
        else:
            cursor += 1
    assert applied and applied == list(range(applied[0], length))  # from the first taken, each once, in order


def test_the_stored_position_stays_at_the_first_record_still_held():
    """Records held for the event-time merge are released out of offset order (they come from
    several origins); a crash must replay from the first one not applied."""
    store = DictStore()
    positions = Positions("test-selection:results", store)
    for offset in (5, 6, 7):
        assert positions.admit("results-by-repo", 1, offset) is Verdict.NEXT
        positions.hold("results-by-repo", 1, offset)
    key = position_key("test-selection:results", "results-by-repo", 1)
    positions.release("results-by-repo", 1, 6)
    assert positions.drain_writes() == {key: b"5"}
    positions.release("results-by-repo", 1, 5)
    assert positions.drain_writes() == {key: b"7"}
    positions.release("results-by-repo", 1, 7)
    assert positions.drain_writes() == {key: b"8"}
    assert positions.expected("results-by-repo", 1) == 8  # admission goes on past what is held
