"""A pytest run with --fastci-results against a stopped broker spools every result, and a drain
publishes them all, exactly once, when the broker is back (integration test on a real broker).

The broker here is this test's own, on its own port and data dir: the shared one is never stopped."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest
from conftest import PrivateBroker
from kafka_helpers import read_events
from test_results_plugin import ENV, run_suite

from fastci.core.config import KafkaSettings

SUITE = "\n".join(
    [f"def test_ok_{n}(): pass" for n in range(10)]
    + ["def test_broken(): assert False", "import pytest", "@pytest.mark.skip(reason='x')", "def test_skipped(): pass"]
)


def free_port_pair() -> int:
    """A port whose successor is free too (the broker's controller listens on port + 1)."""
    for _ in range(200):
        port = random.randint(20000, 40000)
        try:
            for candidate in (port, port + 1):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", candidate))
        except OSError:
            continue
        return port
    raise AssertionError("no free port pair found")


@pytest.fixture
def own_broker(tmp_path) -> Iterator[PrivateBroker]:
    """A broker of this test's own, on a free port (concurrent test sessions must not collide)."""
    broker = PrivateBroker(free_port_pair(), tmp_path / "broker")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()  # quiet when it is already stopped


@pytest.mark.kafka
def test_results_spooled_while_the_broker_is_down_are_all_published_once_it_is_back(tmp_path, own_broker):
    namespace = f"t{uuid.uuid4().hex[:10]}-"
    settings = KafkaSettings(bootstrap=own_broker.bootstrap, namespace=namespace, partitions=4)
    own_broker.stop()

    spool = tmp_path / "spool"
    env = {**ENV, "FASTCI_KAFKA_BOOTSTRAP": own_broker.bootstrap, "FASTCI_KAFKA_NAMESPACE": namespace}
    run = run_suite(
        tmp_path,
        "--fastci-results",
        "--fastci-results-target",
        "kafka",
        "--fastci-results-spool",
        str(spool),
        suite=SUITE,
        **env,
    )
    assert run.returncode == 1, run.stdout + run.stderr  # one test fails on purpose; the suite finished
    assert "fastci: 12 result(s) of run nightly-42 spooled" in run.stdout, run.stdout
    assert f"Kafka at {own_broker.bootstrap}" in run.stdout

    own_broker.start()
    drain = [
        sys.executable,
        "-m",
        "fastci.cli",
        "--data-dir",
        str(tmp_path / "data"),
        "--bootstrap",
        own_broker.bootstrap,
        "--namespace",
        namespace,
        "spool",
        "drain",
        "--kafka",
        "--spool",
        str(spool),
    ]
    first = subprocess.run(
        drain, capture_output=True, text=True, timeout=120, env={**os.environ, "FASTCI_KAFKA_PARTITIONS": "4"}
    )
    assert first.returncode == 0, first.stderr
    assert "sent 12 event(s)" in first.stderr and "0 pending" in first.stderr

    events = read_events(settings, "results")
    assert len(events) == 12 and len({e.id for e in events}) == 12
    statuses = sorted(e.status for e in events)
    assert statuses == ["failed", *["passed"] * 10, "skipped"]
    assert {e.run_id for e in events} == {"nightly-42"} and {e.bundle.kernels for e in events} == {"2.3.1"}

    again = subprocess.run(
        drain, capture_output=True, text=True, timeout=120, env={**os.environ, "FASTCI_KAFKA_PARTITIONS": "4"}
    )
    assert again.returncode == 0 and "sent 0 event(s)" in again.stderr
    assert len(read_events(settings, "results")) == 12
