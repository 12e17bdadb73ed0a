"""faust's commit bookkeeping, on faust's own Consumer: what a jump in offsets does to the commits,
with faust's gap handling and with ours (streams.app.no_gaps_to_commit_past). No broker: the
consumer is built, never started, and driven through the methods its fetch loop and acks call."""

from __future__ import annotations

import asyncio

import faust
from faust.types import TP

from streams.app import no_gaps_to_commit_past

TP0 = TP("results", 0)
COMMITTED = 100


def consumer(no_gaps: bool):
    app = faust.App("gap-test", broker="kafka://127.0.0.1:1", store="memory://", web_enabled=False)
    made = app.consumer
    if no_gaps:
        no_gaps_to_commit_past(made)
    made._committed_offset[TP0] = COMMITTED
    return made


def ack(made, offsets) -> None:
    """What faust's ``ack`` does for records at or past the committed offset, once per offset."""
    for offset in offsets:
        if offset not in made._acked_index[TP0]:
            made._acked_index[TP0].add(offset)
            made._acked[TP0].append(offset)


def commit_rounds(made, rounds: int) -> list[int]:
    """The committed offset after each of ``rounds`` commit intervals."""
    committed = []
    for _ in range(rounds):
        new = made._new_offset(TP0)
        if new is not None and made._should_commit(TP0, new):
            made._committed_offset[TP0] = new
        committed.append(made._committed_offset[TP0])
    return committed


def skipped_then_sought_back(made) -> None:
    """Around a rebalance faust delivers 100-102, then 200: its fetch loop reports the jump. The
    route that expects 103 seeks back; 103-299 are delivered and acknowledged."""
    ack(made, range(100, 103))
    asyncio.run(made._add_gap(TP0, 103, 199))
    ack(made, [200])
    ack(made, range(103, 300))


def test_faust_s_own_gap_handling_makes_its_commits_crawl():
    made = consumer(no_gaps=False)
    skipped_then_sought_back(made)
    # The gap's offsets are acknowledged twice; every duplicate ends a run of consecutive offsets.
    assert commit_rounds(made, 5) == [104, 105, 106, 107, 108]


def test_without_gaps_one_commit_covers_everything_applied():
    made = consumer(no_gaps=True)
    skipped_then_sought_back(made)
    assert commit_rounds(made, 2) == [300, 300]


def test_without_gaps_a_commit_never_passes_records_not_yet_delivered():
    made = consumer(no_gaps=True)
    ack(made, range(100, 103))
    asyncio.run(made._add_gap(TP0, 103, 199))
    ack(made, range(200, 300))  # 103-199 not delivered (yet)
    assert commit_rounds(made, 3) == [103, 103, 103]
    ack(made, range(103, 200))  # the seek back delivers them
    assert commit_rounds(made, 1) == [300]


def test_faust_s_own_gap_handling_commits_past_records_never_delivered():
    made = consumer(no_gaps=False)
    ack(made, range(100, 103))
    asyncio.run(made._add_gap(TP0, 103, 199))
    ack(made, range(200, 300))
    assert commit_rounds(made, 1) == [300]  # 103-199 were never applied: lost on a restart
