"""The queue both runtimes release a stream's records from (``fastci.runtime.release``)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from fastci.runtime.release import ReleaseQueue


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
