"""fastci's topics on the cluster: created before producers write, checked, and a topic made with
another partition count (an outside producer's, created on first use) is a clear error, not a traceback."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from fastci.cli.main import main
from fastci.core.config import KafkaSettings
from fastci.runtime.kafka.broker import drop_namespace, topic_partitions

pytestmark = pytest.mark.kafka


def args(kafka) -> list[str]:
    return ["--bootstrap", kafka.bootstrap, "--namespace", kafka.namespace]


def create(kafka, name: str, partitions: int) -> None:
    async def go() -> None:
        admin = AIOKafkaAdminClient(**kafka.client_options())
        await admin.start()
        try:
            await admin.create_topics([NewTopic(kafka.topic(name), num_partitions=partitions, replication_factor=1)])
        finally:
            await admin.close()

    asyncio.run(go())


def test_topics_are_listed_created_and_a_wrong_partition_count_is_named(kafka, capsys, monkeypatch):
    monkeypatch.setenv("FASTCI_KAFKA_PARTITIONS", str(kafka.partitions))
    assert main([*args(kafka), "kafka", "topics"]) == 1  # nothing exists yet
    assert "topic(s) missing: 'fastci kafka topics --apply'" in capsys.readouterr().err
    assert main([*args(kafka), "kafka", "topics", "--apply"]) == 0
    created = asyncio.run(topic_partitions(kafka, [kafka.topic("results"), kafka.topic("fastci-results-by-repo")]))
    assert len(created) == 2 * kafka.partitions
    assert main([*args(kafka), "kafka", "topics"]) == 0


def test_a_topic_with_another_partition_count_stops_the_worker_with_what_to_do(kafka, tmp_path):
    create(kafka, "results", 1)  # what a broker creating topics on first use makes for an outside producer
    env = {
        "FASTCI_KAFKA_BOOTSTRAP": kafka.bootstrap,
        "FASTCI_KAFKA_NAMESPACE": kafka.namespace,
        "FASTCI_KAFKA_PARTITIONS": str(kafka.partitions),
        "PATH": "/usr/bin:/bin",
    }
    worker = subprocess.run(
        [sys.executable, "-m", "fastci.cli", "worker"], env=env, capture_output=True, text=True, timeout=120
    )
    assert worker.returncode == 2, worker.stderr
    assert f"topic {kafka.topic('results')} has 1 partitions but FASTCI_KAFKA_PARTITIONS is 4" in worker.stderr
    assert "recreate the topic" in worker.stderr and "Traceback" not in worker.stderr
    listing = subprocess.run(
        [sys.executable, "-m", "fastci.cli", "kafka", "topics"], env=env, capture_output=True, text=True, timeout=120
    )
    assert listing.returncode == 1 and "1 partitions, not 4" in listing.stdout
    assert "1 topic(s) with another partition count than FASTCI_KAFKA_PARTITIONS (4)" in listing.stderr


def test_dropping_a_namespace_deletes_its_topics_and_no_other(kafka):
    neighbour = replace(kafka, namespace=f"other-{kafka.namespace}")
    create(kafka, "results", 2)
    create(kafka, "fastci-results-by-repo", 2)
    create(neighbour, "results", 2)

    async def existing() -> set[str]:
        admin = AIOKafkaAdminClient(**kafka.client_options())
        await admin.start()
        try:
            return set(await admin.list_topics())
        finally:
            await admin.close()

    dropped = asyncio.run(drop_namespace(kafka))
    assert sorted(dropped) == sorted([kafka.topic("results"), kafka.topic("fastci-results-by-repo")])
    deadline = time.monotonic() + 30  # deletion reaches the metadata a little after the answer
    while set(dropped) & asyncio.run(existing()) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = asyncio.run(existing())
    assert not set(dropped) & left
    assert neighbour.topic("results") in left
    asyncio.run(drop_namespace(neighbour))


def test_dropping_without_a_namespace_is_refused_before_anything_is_deleted():
    with pytest.raises(ValueError, match="needs a namespace"):
        asyncio.run(drop_namespace(KafkaSettings(bootstrap="127.0.0.1:1", namespace="")))
