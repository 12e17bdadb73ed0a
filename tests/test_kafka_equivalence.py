"""The same recorded log through the embedded runtime and through the faust worker on a real broker."""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict

import pytest
from aiokafka import AIOKafkaProducer
from kafka_helpers import read_events, start_worker, stop_worker, wait_until_consumed

from fastci.core.events import Event
from fastci.demo.history import Workload
from fastci.runtime.embedded import DataDir, EmbeddedRuntime
from fastci.runtime.kafka.broker import ensure_topics, publish
from fastci.runtime.publish import publish_embedded
from fastci.topology import SYSTEM, TOPICS
from fastci.views.refresh import refresh_embedded, refresh_kafka
from fastci.views.store import Views

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

UNDECODABLE = [
    (b"tests/x.py::t", b'{"test_id": "tests/x.py::t", "run_id": "r"}'),
    (b"tests/y.py::t", b"not json at all"),
]


def by_key(events: list[Event]) -> dict[str, list[str]]:
    """Output ids per key, in order: per-key order is what both runtimes must agree on."""
    ordered: dict[str, list[str]] = defaultdict(list)
    for event in events:
        ordered[event.key].append(event.id)
    return dict(ordered)


def view_rows(views_path, sql: str) -> list[tuple]:
    views = Views(views_path, read_only=True)
    try:
        return views.query(sql)[1]
    finally:
        views.close()


async def publish_raw(settings, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    producer = AIOKafkaProducer(**settings.client_options())
    await producer.start()
    try:
        for key, value in records:
            await producer.send_and_wait(settings.topic(topic), value=value, key=key)
    finally:
        await producer.stop()


def test_embedded_and_faust_worker_agree(kafka, tmp_path):
    recorded = Workload(commits=150, seed=11).events()

    embedded = tmp_path / "embedded"
    publish_embedded(embedded, recorded)
    DataDir(embedded).log.topic("results").append([value for _, value in UNDECODABLE], 0)
    runtime = EmbeddedRuntime(embedded, SYSTEM)
    runtime.run()
    runtime.close()
    embedded_views = embedded / "views.duckdb"
    views = Views(embedded_views)
    refresh_embedded(embedded, views)
    views.close()

    async def load_kafka() -> None:
        await ensure_topics(kafka, TOPICS)
        await publish(kafka, recorded)
        await publish_raw(kafka, "results", UNDECODABLE)

    asyncio.run(load_kafka())
    log = tmp_path / "worker.log"
    worker = start_worker(kafka, log, args=("--log-level", "info"))
    try:
        wait_until_consumed(kafka, worker, log)
    finally:
        stop_worker(worker)
    # stopping, the worker gives its account of where its batches' time went (bench/throughput.py prints it)
    told = r"batch times: ([\d,]+) batches, ([\d,]+) records; routing [\d.]+ s, applying ([\d.]+) s"
    account = re.search(told, log.read_text())
    assert account, log.read_text()[-4000:]
    assert int(account[2].replace(",", "")) >= len(recorded) and float(account[3]) > 0
    kafka_views = tmp_path / "kafka.duckdb"
    views = Views(kafka_views)
    asyncio.run(refresh_kafka(kafka, views))
    views.close()

    expected = [e for e in read_embedded(embedded, "test-status-changed")]
    got = read_events(kafka, "test-status-changed")
    assert len(expected) > 20
    assert sorted(e.model_dump_json() for e in got) == sorted(e.model_dump_json() for e in expected)
    assert by_key(got) == by_key(expected)

    expected_letters = [e.id for e in read_embedded(embedded, "dead-letters")]
    got_letters = [e.id for e in read_events(kafka, "dead-letters")]
    # once each: one processor of those reading results reports an undecodable record, in both runtimes
    assert len(expected_letters) == len(UNDECODABLE) and sorted(got_letters) == sorted(expected_letters)

    history = "SELECT * FROM test_history ORDER BY test_id"
    assert view_rows(kafka_views, history) == view_rows(embedded_views, history)
    assert len(view_rows(kafka_views, history)) == len(Workload().tests)
    results = "SELECT * EXCLUDE (_partition, _offset) FROM results ORDER BY id"
    assert view_rows(kafka_views, results) == view_rows(embedded_views, results)


def read_embedded(data_dir, topic: str) -> list[Event]:
    from fastci.topology import decode

    return [decode(topic, r.payload) for r in DataDir(data_dir).log.topic(topic).read()]
