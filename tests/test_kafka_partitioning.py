"""A processor partitioned by a field other than its topic's key: the Kafka runtime repartitions
the topic, keeps compound state keys with their owner, and still agrees with the embedded runtime."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import orjson
import pytest
from kafka_helpers import stop_worker, wait_until_consumed

from fastci.core.events import Event, Record
from fastci.core.processor import Processor, Step, compound_key, owner_of
from fastci.demo.history import Workload
from fastci.inputs import ResultEvent
from fastci.runtime.driver import decode_entry
from fastci.runtime.embedded import DataDir, EmbeddedRuntime
from fastci.runtime.kafka.broker import ensure_topics, publish, read_to_end
from fastci.runtime.kafka.positions import position_partition
from fastci.runtime.kafka.routes import partition_of
from fastci.runtime.publish import publish_embedded
from fastci.topology import SYSTEM, TOPICS

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


class Tally(Record):
    runs: int = 0
    last_status: str = ""


class NodeTally(Processor[Tally]):
    """Runs per node, and the last status of each test on each node (a compound key)."""

    name: ClassVar[str] = "node-tally"
    inputs: ClassVar[tuple[str, ...]] = ("results",)
    outputs: ClassVar[tuple[str, ...]] = ()
    state_model = Tally
    partition_by = {"results": "node_id"}

    def process(self, state, event: Event) -> Step[Tally]:
        assert isinstance(event, ResultEvent)
        node = state.get(event.node_id) or Tally()
        return Step(
            writes={
                event.node_id: node.model_copy(update={"runs": node.runs + 1}),
                compound_key(event.node_id, event.test_id): Tally(runs=0, last_status=event.status),
            }
        )


WORKER = """
import sys
sys.path.insert(0, {tests!r})
from fastci.core.config import KafkaSettings
from streams.worker import run_processors
from test_kafka_partitioning import NodeTally
from fastci.topology import SYSTEM
run_processors(KafkaSettings.from_env(), [NodeTally()])
"""


def test_repartitioned_state_is_colocated_and_equal_to_embedded(kafka, tmp_path):
    recorded = [e for e in Workload(commits=80, seed=5).events() if e.TOPIC == "results"]

    publish_embedded(tmp_path, recorded)
    runtime = EmbeddedRuntime(tmp_path, SYSTEM, [NodeTally()])
    runtime.run()
    runtime.close()
    checkpoint = DataDir(tmp_path).checkpoint()
    expected = {
        key: decode_entry(Tally, value).state.model_dump()
        for key, value in checkpoint.db.execute("SELECT key, value FROM state WHERE processor = 'node-tally'")
    }
    checkpoint.close()

    asyncio.run(ensure_topics(kafka, TOPICS))
    asyncio.run(publish(kafka, recorded))
    env = {
        **os.environ,
        "FASTCI_KAFKA_BOOTSTRAP": kafka.bootstrap,
        "FASTCI_KAFKA_NAMESPACE": kafka.namespace,
        "FASTCI_KAFKA_PARTITIONS": str(kafka.partitions),
    }
    log = tmp_path / "worker.log"
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER.format(tests=str(Path(__file__).parent))],
        env=env,
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until_consumed(kafka, worker, log, processors=[NodeTally()])
    finally:
        stop_worker(worker)

    async def changelog() -> list:
        name = kafka.changelog_topic("node-tally")
        return [r async for r in read_to_end(kafka, name, namespaced=False)]

    latest: dict[str, dict] = {}
    for record in asyncio.run(changelog()):
        key = record.key.decode()
        if position_partition(key) is not None:  # a route's position lives in the partition it describes
            assert record.partition == position_partition(key), key
            continue
        assert record.partition == partition_of(owner_of(key).encode(), kafka.partitions), key
        entry = orjson.loads(record.value)
        latest[key] = entry["state"]
        if "\x1f" not in key:  # the marks name the original topic partition, from the forwarder's header
            assert entry["marks"] and all(stream.startswith("results/") for stream in entry["marks"]), entry["marks"]
    assert latest == expected
    assert sum(v["runs"] for k, v in latest.items() if "\x1f" not in k) == len(recorded)
