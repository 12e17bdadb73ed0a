"""faust's commit bookkeeping, on faust's own Consumer: what a jump in offsets does to the commits,
with faust's gap handling and without it (fastci.runtime.kafka.runtime.GaplessConsumer). No broker: the consumer is
built, never started, and driven through the methods its fetch loop and acks call."""

from __future__ import annotations

import asyncio

import faust
from faust.types import TP

from fastci.core.config import KafkaSettings
from fastci.runtime.kafka.runtime import GaplessConsumer
from streams.app import create_app

TP0 = TP("results", 0)
COMMITTED = 100


def consumer(no_gaps: bool):
    app = faust.App("gap-test", broker="kafka://127.0.0.1:1", store="memory://", web_enabled=False)
    if no_gaps:
        app.transport.Consumer = GaplessConsumer
    made = app.consumer
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


def skipped(made) -> None:
    """Around a rebalance faust delivers 100-102, then 200-299: its fetch loop reports the jump."""
    ack(made, range(100, 103))
    asyncio.run(made._add_gap(TP0, 103, 199))
    ack(made, range(200, 300))


def skipped_then_sought_back(made) -> None:
    """The route that expects 103 seeks back; 103-199 are delivered and acknowledged."""
    skipped(made)
    ack(made, range(103, 200))


def test_the_worker_s_app_makes_a_gapless_consumer():
    assert type(create_app(KafkaSettings(bootstrap="127.0.0.1:1")).consumer) is GaplessConsumer


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
    skipped(made)  # 103-199 not delivered (yet)
    assert commit_rounds(made, 3) == [103, 103, 103]
    ack(made, range(103, 200))  # the seek back delivers them
    assert commit_rounds(made, 1) == [300]


def test_faust_s_own_gap_handling_commits_past_records_never_delivered():
    made = consumer(no_gaps=False)
    skipped(made)
    assert commit_rounds(made, 1) == [300]  # 103-199 were never applied: lost on a restart
