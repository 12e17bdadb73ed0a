"""Faults against a real broker: each run must end with the DuckDB views of an uninterrupted run.

faust's own exactly-once does not survive a crash (outputs get duplicated); these tests show that
deterministic ids, the per-key dedup window and idempotent views make the end state exact anyway.
The workers run with a 10 s session timeout (FASTCI_KAFKA_SESSION_TIMEOUT_S), so a dead worker's
partitions move after at most ~10 s.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import replace

import pytest
from kafka_helpers import (
    committed,
    load_with_librdkafka,
    start_worker,
    stop_worker,
    wait_for_committed,
    wait_until_consumed,
)

from fastci.demo.history import Workload
from fastci.runtime.embedded import EmbeddedRuntime
from fastci.runtime.kafka.broker import ensure_topics, publish, read_to_end
from fastci.runtime.publish import publish_embedded
from fastci.topology import SYSTEM, TOPICS
from fastci.views.refresh import refreshed_kafka_views, refreshed_views

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

COMPARED = {
    "test_history": "SELECT * FROM test_history ORDER BY test_id",
    "test_status_changed": "SELECT * EXCLUDE (_partition, _offset) FROM test_status_changed ORDER BY id",
    "results": "SELECT id, test_id, status FROM results ORDER BY id",
}


def recorded():
    return [e for e in Workload(commits=1800, seed=9).events() if e.TOPIC == "results"]


def reference_views(tmp_path, events) -> dict[str, list]:
    data = tmp_path / "reference"
    publish_embedded(data, events)
    runtime = EmbeddedRuntime(data, SYSTEM)
    runtime.run()
    runtime.close()
    with refreshed_views(data) as views:
        return {name: views.query(sql)[1] for name, sql in COMPARED.items()}


def kafka_views(tmp_path, settings) -> dict[str, list]:
    with refreshed_kafka_views(settings, tmp_path / "kafka.duckdb") as views:
        return {name: views.query(sql)[1] for name, sql in COMPARED.items()}


def assert_same_views(got: dict[str, list], expected: dict[str, list]) -> None:
    for table, rows in expected.items():
        missing = sorted(set(rows) - set(got[table]))[:5]
        extra = sorted(set(got[table]) - set(rows))[:5]
        assert got[table] == rows, f"{table}: {len(got[table])} rows vs {len(rows)}; missing {missing}; extra {extra}"


def raw_outputs(settings) -> tuple[int, int]:
    """(records, distinct ids) on the test-status-changed topic: duplicates the views must absorb."""
    import orjson

    async def collect() -> list[bytes]:
        return [r.value async for r in read_to_end(settings, "test-status-changed")]

    values = asyncio.run(collect())
    return len(values), len({orjson.loads(v)["id"] for v in values})


def load(settings, events) -> None:
    async def go() -> None:
        await ensure_topics(settings, TOPICS)
        await publish(settings, events)

    asyncio.run(go())


def test_worker_killed_mid_stream_and_restarted(kafka, tmp_path, report_figure):
    events = recorded()
    expected = reference_views(tmp_path, events)
    load(kafka, events)
    log = tmp_path / "worker.log"
    worker = start_worker(kafka, log)
    wait_for_committed(kafka, ["results"], 1)  # the first commit: mid-stream, state in the changelog
    os.kill(worker.pid, signal.SIGKILL)
    killed_at, before = time.perf_counter(), committed(kafka, ["results"])
    worker.wait(30)
    assert before < len(events), "the worker finished before it could be killed"
    worker = start_worker(kafka, log)
    try:
        resumed = wait_for_committed(kafka, ["results"], before + 1)
        wait_until_consumed(kafka, worker, log)
    finally:
        stop_worker(worker)
    assert_same_views(kafka_views(tmp_path, kafka), expected)
    records, distinct = raw_outputs(kafka)
    report_figure(
        f"worker SIGKILL at {before}/{len(events)} committed: processing resumed {resumed - killed_at:.1f} s after "
        f"the kill (session timeout {kafka.session_timeout_s:g} s); output records {records}, distinct {distinct}"
    )


def test_two_workers_share_partitions_then_one_dies(kafka, tmp_path, report_figure):
    events = recorded()
    expected = reference_views(tmp_path, events)
    load(kafka, events)
    log_a, log_b = tmp_path / "worker-a.log", tmp_path / "worker-b.log"
    first, second = start_worker(kafka, log_a), start_worker(kafka, log_b)
    try:
        wait_for_committed(kafka, ["results"], 1)
        os.kill(second.pid, signal.SIGKILL)
        killed_at, before = time.perf_counter(), committed(kafka, ["results"])
        second.wait(30)
        resumed = wait_for_committed(kafka, ["results"], before + 1)
        wait_until_consumed(kafka, first, log_a)
    finally:
        stop_worker(first)
        stop_worker(second)
    assert_same_views(kafka_views(tmp_path, kafka), expected)
    report_figure(
        f"one of two workers SIGKILLed at {before}/{len(events)} committed: the survivor resumed "
        f"{resumed - killed_at:.1f} s after (session timeout {kafka.session_timeout_s:g} s)"
    )


def test_broker_restarted_mid_stream(private_broker, tmp_path, report_figure):
    settings = replace(
        __import__("fastci.core.config", fromlist=["KafkaSettings"]).KafkaSettings(),
        bootstrap=private_broker.bootstrap,
        namespace="restart-",
    )
    events = recorded()
    expected = reference_views(tmp_path, events)
    load(settings, events)
    log = tmp_path / "worker.log"
    worker = start_worker(settings, log)
    try:
        wait_for_committed(settings, ["results"], 1)
        private_broker.stop()
        stopped_at = time.perf_counter()
        private_broker.start()
        back_at = time.perf_counter()
        before = committed(settings, ["results"])
        resumed = wait_for_committed(settings, ["results"], before + 1, timeout_s=180)
        wait_until_consumed(settings, worker, log, timeout_s=240)
    finally:
        stop_worker(worker)
    assert_same_views(kafka_views(tmp_path, settings), expected)
    report_figure(
        f"broker restarted at {before}/{len(events)} committed: down {back_at - stopped_at:.1f} s, "
        f"the worker resumed {resumed - back_at:.1f} s after the broker was back"
    )


def test_producer_whose_broker_disappears_and_comes_back(private_broker, tmp_path, report_figure):
    """A CI producer keeps publishing while its broker is down: everything is spooled, sent once the
    broker is back, and the worker's views equal an uninterrupted run's."""
    from fastci.core.config import KafkaSettings
    from fastci.producer.client import Producer, RetryPolicy
    from fastci.producer.spool import Spool
    from fastci.producer.targets import KafkaTarget

    settings = KafkaSettings(bootstrap=private_broker.bootstrap, namespace="outage-", partitions=4)
    events = recorded()[:12_000]
    expected = reference_views(tmp_path, events)
    producer = Producer(
        KafkaTarget(settings, timeout_s=5.0),
        Spool(tmp_path / "spool"),
        batch_size=1000,
        retry=RetryPolicy(attempts=2, first_backoff_s=0.2, cooldown_s=0.5),
    )
    for event in events[:4000]:
        producer.publish(event)
    assert producer.flush().pending == 0
    private_broker.stop()
    for event in events[4000:8000]:  # while the broker is down: spooled, sends fail and back off
        producer.publish(event)
    down = producer.flush()
    assert down.error and down.pending >= 4000
    private_broker.start()
    back_at = time.perf_counter()
    for event in events[8000:]:
        producer.publish(event)
    report = producer.flush()
    drained_s = time.perf_counter() - back_at
    assert report.error is None and report.pending == 0

    log = tmp_path / "worker.log"
    worker = start_worker(settings, log)
    try:
        wait_until_consumed(settings, worker, log)
    finally:
        stop_worker(worker)
    assert_same_views(kafka_views(tmp_path, settings), expected)
    report_figure(
        f"producer outage: {down.pending} events spooled while the broker was down; all 12,000 acknowledged "
        f"{drained_s:.1f} s after it was back"
    )


def test_two_workers_with_a_librdkafka_producer_then_one_dies(kafka, tmp_path, report_figure):
    """State does not depend on the producer's partitioner: records librdkafka placed elsewhere than
    murmur2 are applied where their key's state lives, through the worker's own topic."""
    events = recorded()
    expected = reference_views(tmp_path, events)
    misplaced = load_with_librdkafka(kafka, events)
    assert misplaced > len(events) // 4  # most keys land elsewhere than murmur2 puts them
    log_a, log_b = tmp_path / "worker-a.log", tmp_path / "worker-b.log"
    first, second = start_worker(kafka, log_a), start_worker(kafka, log_b)
    try:
        wait_for_committed(kafka, ["results"], 1)
        os.kill(second.pid, signal.SIGKILL)
        before = committed(kafka, ["results"])
        second.wait(30)
        wait_until_consumed(kafka, first, log_a)
    finally:
        stop_worker(first)
        stop_worker(second)
    assert_same_views(kafka_views(tmp_path, kafka), expected)
    report_figure(
        f"librdkafka producer ({misplaced} of {len(events)} records outside murmur2's partition), two workers, "
        f"one SIGKILLed at {before} committed: every view equal to the embedded run"
    )
