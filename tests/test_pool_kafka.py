"""The pool scheduler on the faust worker against the real broker: its inputs arrive through the
pool-keyed repartition topics, and, fed step by step, it decides exactly what the processor alone
decides (same ids)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from kafka_helpers import read_events, start_worker, stop_worker, wait_until_consumed
from processor_helpers import Store, feed
from test_pool_embedded import CONFIG, T0, request, results_of, running_now

from fastci.runtime.kafka.broker import ensure_topics, publish
from fastci.scheduling.events import ClockTick, ScheduleEvent
from fastci.scheduling.processor import PoolSchedulerProcessor
from fastci.topology import TOPICS

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_the_scheduler_places_preempts_and_completes_on_the_faust_worker(kafka, tmp_path):
    asyncio.run(ensure_topics(kafka, TOPICS))
    log = tmp_path / "worker.log"
    worker = start_worker(kafka, log)
    fed = []

    def step(*events) -> list[ScheduleEvent]:
        # one step at a time: Kafka orders records within a partition, not across topics
        fed.extend(events)
        asyncio.run(publish(kafka, list(events)))
        wait_until_consumed(kafka, worker, log, processors=[PoolSchedulerProcessor()])
        return read_events(kafka, "schedule")

    try:
        step(CONFIG)
        step(ClockTick(time=T0))
        for i in range(5):
            step(request(f"night{i}", "nightly"))
        step(ClockTick(time=T0 + timedelta(minutes=25)))
        schedule = step(request("release-small", "release"))
        assert [e.action for e in schedule].count("preempted") == 1
        step(ClockTick(time=T0 + timedelta(minutes=90)))
        for result in results_of(running_now(schedule), 90):  # results of several tests span partitions
            schedule = step(result)
    finally:
        stop_worker(worker)
    assert [e.action for e in schedule].count("completed") == 4
    expected = feed(PoolSchedulerProcessor(), Store(), fed)
    assert [e.id for e in schedule] == [e.id for e in expected]
