"""The ordering rule on Kafka: one history appended to the broker in three cross-topic orders, each
applied by one faust worker, gives the embedded runtime's views, decisions included: every view. So
does the first order applied by two workers, where a processor's inputs are written and forwarded
on the other worker too (the progress markers of ``streams.forwarded``).

The history's topics are each appended in time order (docs/topology.md says why a topic appended out
of order can be cut into streams differently by the two runtimes)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import pytest
from kafka_helpers import start_worker, stop_worker, wait_until_consumed

from fastci.core.events import Event
from fastci.demo.history import Workload, in_time_order, per_topic
from fastci.runtime.embedded import EmbeddedRuntime
from fastci.runtime.kafka_io import ensure_topics, publish
from fastci.runtime.publish import publish_embedded
from fastci.topology import SYSTEM, TOPICS, build_processors
from fastci.views.refresh import refreshed_kafka_views, refreshed_views
from streams.app import internal_topics

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def orders(events: list[Event]) -> dict[str, list[list[Event]]]:
    blocks = per_topic(events)
    return {"interleaved": [events], "per-topic blocks": blocks, "blocks reversed": blocks[::-1]}


def on_kafka(base, blocks: list[list[Event]], tmp_path, name: str, workers: int = 1) -> dict[str, list[tuple]]:
    settings = replace(base, namespace=f"{base.namespace}{uuid.uuid4().hex[:4]}-")

    async def load() -> None:
        await ensure_topics(settings, [*TOPICS, *internal_topics(settings, build_processors())])
        for block in blocks:  # each block acknowledged before the next: the blocks fix the order
            await publish(settings, block)

    asyncio.run(load())
    logs = [tmp_path / f"worker-{name}-{n}.log" for n in range(workers)]
    started = [start_worker(settings, log) for log in logs]
    try:
        for worker, log in [*zip(started, logs, strict=True), *zip(started, logs, strict=True)]:
            wait_until_consumed(settings, worker, log, timeout_s=300)  # twice: a rebalance may come between
    finally:
        for worker in started:
            stop_worker(worker)
    with refreshed_kafka_views(settings, tmp_path / f"kafka-{name}.duckdb") as views:
        return views.event_tables()


def test_every_cross_topic_order_gives_the_embedded_runtimes_views(kafka, tmp_path):
    events = in_time_order(Workload(commits=30, seed=5).events())
    publish_embedded(tmp_path / "embedded", events)
    runtime = EmbeddedRuntime(tmp_path / "embedded", SYSTEM, sync=False)
    runtime.run()
    runtime.close()
    with refreshed_views(tmp_path / "embedded") as views:
        expected = views.event_tables()
    decided = {t: len(expected[t]) for t in ("selection", "test_plan", "schedule", "baseline_exclusions")}
    assert all(decided.values()), f"the history must make these decisions, or the check says little: {decided}"

    runs = [(name, blocks, 1) for name, blocks in orders(events).items()]
    runs.append(("interleaved, two workers", [events], 2))
    for n, (name, blocks, workers) in enumerate(runs):
        got = on_kafka(kafka, blocks, tmp_path, str(n), workers)
        for table, rows in expected.items():
            missing = sorted({repr(r) for r in rows} - {repr(r) for r in got[table]})[:3]
            extra = sorted({repr(r) for r in got[table]} - {repr(r) for r in rows})[:3]
            assert got[table] == rows, f"{name}: {table} differs; missing {missing}; extra {extra}"
