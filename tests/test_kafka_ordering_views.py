"""The ordering rule on Kafka: one history appended to the broker in two cross-topic orders, each
applied by one faust worker, gives the embedded runtime's views, decisions included: every view. So
does the first order applied by two workers, where a processor's inputs are written and forwarded
on the other worker too (the progress markers of ``fastci.runtime.kafka.markers``), and the first order
published by librdkafka, whose partitioner cuts each topic into other partitions. And after a
SIGKILL mid-stream: of a lone worker, started again, and of one of two workers, with each producer.

The history appends a run's results when the run ends, out of time order (up to half an hour late):
each runtime applies an input topic in time order within ``LATENESS_MS``, whatever partition a record
is in (docs/topology.md, "Ordering rule")."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import pytest
from kafka_helpers import kill_mid_stream, load_with_librdkafka, start_worker, stop_worker, wait_until_consumed

from fastci.core.events import Event
from fastci.demo.history import Workload, in_time_order, per_topic
from fastci.runtime.embedded import EmbeddedRuntime
from fastci.runtime.kafka.broker import ensure_topics, publish
from fastci.runtime.kafka.routes import internal_topics
from fastci.runtime.publish import publish_embedded
from fastci.topology import SYSTEM, TOPICS, build_processors
from fastci.views.refresh import refreshed_kafka_views, refreshed_views

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def orders(events: list[Event]) -> dict[str, list[list[Event]]]:
    # Blocks reversed, and a crash between outputs and state: tests/test_runtime_contract.py, on Kafka too.
    return {"interleaved": [events], "per-topic blocks": per_topic(events)}


def on_kafka(
    base,
    blocks: list[list[Event]],
    tmp_path,
    name: str,
    workers: int = 1,
    producer: str = "aiokafka",
    kill: int = 0,
) -> dict[str, list[tuple]]:
    settings = replace(base, namespace=f"{base.namespace}{uuid.uuid4().hex[:4]}-")

    async def load() -> None:
        await ensure_topics(settings, [*TOPICS, *internal_topics(settings, build_processors())])
        for block in blocks if producer == "aiokafka" else ():  # each acknowledged before the next
            await publish(settings, block)

    asyncio.run(load())
    for block in blocks if producer == "librdkafka" else ():
        load_with_librdkafka(settings, block)
    logs = [tmp_path / f"worker-{name}-{n}.log" for n in range(workers)]
    started = [start_worker(settings, log) for log in logs]
    try:
        if kill:  # the first worker, between its first selection and its last schedule
            held = kill_mid_stream(settings, started[0], "selection", "schedule", kill)
            print(f"{name}: worker SIGKILLed with {held} of {kill} schedule records written")
            if workers == 1:
                started[0] = start_worker(settings, logs[0])  # as a supervisor would
            else:
                del started[0], logs[0]  # the other takes its partitions over
        for worker, log in [*zip(started, logs, strict=True), *zip(started, logs, strict=True)]:
            wait_until_consumed(settings, worker, log, timeout_s=300)  # twice: a rebalance may come between
    finally:
        for worker in started:
            stop_worker(worker)
    with refreshed_kafka_views(settings, tmp_path / f"kafka-{name}.duckdb") as views:
        return views.event_tables()


def embedded_views(events: list[Event], data) -> dict[str, list[tuple]]:
    """Every view's rows after the embedded runtime applied ``events``: what each Kafka run must give."""
    publish_embedded(data, events)
    runtime = EmbeddedRuntime(data, SYSTEM, sync=False)
    runtime.run()
    runtime.close()
    with refreshed_views(data) as views:
        return views.event_tables()


def test_every_cross_topic_order_gives_the_embedded_runtimes_views(kafka, tmp_path):
    events = Workload(commits=30, seed=5).events()
    assert events != in_time_order(events)  # results are appended run by run
    expected = embedded_views(events, tmp_path / "embedded")
    decided = {t: len(expected[t]) for t in ("selection", "test_plan", "schedule", "baseline_exclusions")}
    assert all(decided.values()), f"the history must make these decisions, or the check says little: {decided}"

    runs = [(name, blocks, 1, "aiokafka", 0) for name, blocks in orders(events).items()]
    runs.append(("interleaved, two workers", [events], 2, "aiokafka", 0))
    runs.append(("interleaved, librdkafka's partitioner", [events], 1, "librdkafka", 0))
    scheduled = len(expected["schedule"])
    runs.append(("interleaved, the worker SIGKILLed and restarted", [events], 1, "librdkafka", scheduled))
    runs.append(("interleaved, one of two workers SIGKILLed", [events], 2, "aiokafka", scheduled))
    runs.append(("interleaved, librdkafka, one of two workers SIGKILLed", [events], 2, "librdkafka", scheduled))
    for n, (name, blocks, workers, producer, kill) in enumerate(runs):
        got = on_kafka(kafka, blocks, tmp_path, str(n), workers, producer, kill)
        for table, rows in expected.items():
            missing = sorted({repr(r) for r in rows} - {repr(r) for r in got[table]})[:3]
            extra = sorted({repr(r) for r in got[table]} - {repr(r) for r in rows})[:3]
            assert got[table] == rows, f"{name}: {table} differs; missing {missing}; extra {extra}"
