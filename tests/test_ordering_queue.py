"""The queue both runtimes release a stream's records from (``fastci.runtime.ordering``)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from fastci.runtime.ordering import ANYTHING, NOTHING_LEFT, ReleaseQueue, merged


@dataclass(slots=True)
class Record:
    key: tuple
    offset: int
    released: bool = False


def test_in_time_order_the_least_key_goes_first_and_the_floor_is_the_first_offset_waiting():
    rng = random.Random(7)
    for _ in range(200):
        queue: ReleaseQueue[Record] = ReleaseQueue(in_time_order=True)
        waiting: dict[int, Record] = {}
        offset = 0
        for _ in range(rng.randrange(1, 60)):
            if waiting and rng.random() < 0.4:
                gone = queue.pop()
                assert gone.key == min(r.key for r in waiting.values())
                del waiting[gone.offset]
            else:  # mostly in time order, now and then a record earlier than some before it
                time = offset * 10 - (rng.randrange(50) if rng.random() < 0.2 else 0)
                record = Record((time, 0, "", offset), offset)
                queue.push(record)
                waiting[offset] = record
                offset += 1
            assert len(queue) == len(waiting)
            first = queue.first()
            assert (first.offset if first else None) == (min(waiting) if waiting else None)


def test_in_log_order_records_go_as_appended_whatever_their_keys():
    queue: ReleaseQueue[Record] = ReleaseQueue(in_time_order=False)
    for offset, time in enumerate((30, 10, 20)):
        queue.push(Record((time, 0, "", offset), offset))
    assert [queue.pop().offset for _ in range(3)] == [0, 1, 2]
    assert queue.first() is None and len(queue) == 0


def test_a_record_sent_twice_goes_twice_in_arrival_order():
    queue: ReleaseQueue[Record] = ReleaseQueue(in_time_order=True)
    first, again, earlier = Record((20, 0, "a", 1), 1), Record((20, 0, "a", 1), 1), Record((10, 0, "b", 0), 0)
    for record in (first, again, earlier):  # the earlier record turns the queue into a heap
        queue.push(record)
    popped = [queue.pop() for _ in range(3)]
    assert popped[0] is earlier and popped[1] is first and popped[2] is again
    assert queue.first() is None


class Source(ReleaseQueue[Record]):
    __slots__ = ("name",)

    def __init__(self, name: str, in_time_order: bool, times: list[int]) -> None:
        super().__init__(in_time_order)
        self.name = name
        for offset, time in enumerate(times):
            self.push(Record((time, 0, name, offset), offset))


def test_the_merge_goes_least_first_and_stops_where_a_log_order_source_runs_dry():
    produced = Source("results", True, [10, 40, 20])  # a producer's topic, out of order
    written = Source("selection", False, [15, 30])  # a processor's, in log order

    def released(limit) -> list[tuple[str, int]]:
        return [(source.name, record.key[0]) for source, record in merged([produced, written], NOTHING_LEFT, limit)]

    # selection may still be given anything once its two records have gone: the merge stops there
    assert released(lambda source: ANYTHING) == [("results", 10), ("selection", 15), ("results", 20), ("selection", 30)]
    assert len(produced) == 1  # 40 waits for what selection brings next
    # read to its end, selection holds nothing more: the rest goes
    assert released(lambda source: NOTHING_LEFT) == [("results", 40)]


def test_the_merge_holds_what_sorts_at_or_after_its_bound():
    produced = Source("results", True, [10, 20, 30])
    going = merged([produced], (20,), lambda source: NOTHING_LEFT)
    assert [record.key[0] for _, record in going] == [10]
    assert produced.head()[0] == 20 and len(produced) == 2
