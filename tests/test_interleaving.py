"""The ordering guarantee (docs/topology.md), checked on the embedded runtime: the same events appended in
cross-topic interleavings unlike the one ``publish_embedded`` writes lose nothing, duplicate nothing, and
leave every single-stream output and every per-key input order equal."""

from __future__ import annotations

from collections import defaultdict

import pytest

from fastci.core.codec import encode
from fastci.core.events import Event
from fastci.demo.history import Workload
from fastci.runtime.embedded import DataDir, EmbeddedRuntime
from fastci.topology import SYSTEM
from fastci.views.refresh import refresh_embedded
from fastci.views.store import Views

# Outputs of processors that read one input topic only: equal for any cross-topic interleaving.
SINGLE_STREAM = ("test_status_changed", "dead_letters")


def append(data_dir, blocks: list[list[Event]]) -> None:
    """Each block appended with its own, increasing timestamp: the embedded runtime merges its inputs by
    append time, so the blocks fix the cross-topic interleaving."""
    log = DataDir(data_dir).log
    for timestamp, block in enumerate(blocks, start=1):
        by_topic: dict[str, list[bytes]] = defaultdict(list)
        for event in block:
            by_topic[event.TOPIC].append(encode(event))
        for topic, payloads in by_topic.items():
            log.topic(topic).append(payloads, timestamp * 1000)


def interleavings(events: list[Event]) -> dict[str, list[list[Event]]]:
    topics = list(dict.fromkeys(e.TOPIC for e in events))
    per_topic = [[e for e in events if e.TOPIC == t] for t in topics]
    return {
        "as generated, one event per block": [[e] for e in events],
        "per-topic blocks": per_topic,
        "per-topic blocks, reversed": per_topic[::-1],
    }


def run(data_dir) -> dict[str, list[tuple]]:
    runtime = EmbeddedRuntime(data_dir, SYSTEM, sync=False)
    try:
        runtime.run()
    finally:
        runtime.close()
    views = Views(data_dir / "views.duckdb")
    try:
        refresh_embedded(data_dir, views)
        tables = {}
        for topic in SYSTEM.topics:
            name = topic.replace("-", "_")
            columns = [c for c in views.query(f'SELECT * FROM "{name}" LIMIT 0')[0] if not c.startswith("_")]
            listed = ", ".join(f'"{c}"' for c in columns)
            tables[name] = views.query(f'SELECT {listed} FROM "{name}" ORDER BY id')[1]
        tables["test_history"] = views.query("SELECT * FROM test_history ORDER BY test_id")[1]
        return tables
    finally:
        views.close()


@pytest.mark.slow
def test_any_cross_topic_interleaving_loses_nothing_and_keeps_single_stream_outputs(tmp_path):
    events = Workload(commits=40, seed=5).events()
    results = {}
    for index, (name, blocks) in enumerate(interleavings(events).items()):
        data_dir = tmp_path / f"order-{index}"
        append(data_dir, blocks)
        results[name] = run(data_dir)
    baseline_name, baseline = next(iter(results.items()))
    inputs = {model.TOPIC.replace("-", "_") for model in SYSTEM.inputs}
    for name, tables in results.items():
        for table, rows in tables.items():
            ids = [row[0] for row in rows] if table != "test_history" else []
            assert len(ids) == len(set(ids)), f"{name}: duplicate ids in {table}"
        for table in inputs:  # no loss: every input event is there, whatever the order
            assert tables[table] == baseline[table], f"{name}: {table} differs from {baseline_name}"
        for table in (*SINGLE_STREAM, "test_history"):
            assert tables[table] == baseline[table], f"{name}: {table} differs from {baseline_name}"
        assert tables["test_status_changed"], "the history must flip some tests, or the check says nothing"
