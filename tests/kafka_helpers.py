"""Driving the faust worker from tests: start it, wait until it has consumed everything, stop it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fastci.config import KafkaSettings
from fastci.events import decode
from fastci.runtime.kafka_io import group_lag, read_to_end


def start_worker(settings: KafkaSettings, log_path: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "FASTCI_KAFKA_BOOTSTRAP": settings.bootstrap,
        "FASTCI_KAFKA_NAMESPACE": settings.namespace,
        "FASTCI_KAFKA_PARTITIONS": str(settings.partitions),
    }
    log = open(log_path, "ab")
    return subprocess.Popen(
        [sys.executable, "-m", "fastci.cli", "worker"], env=env, stdout=log, stderr=subprocess.STDOUT
    )


def wait_until_consumed(settings: KafkaSettings, topics: list[str], worker: subprocess.Popen, log_path: Path, timeout_s: float = 180) -> float:
    """Block until the worker's group has committed every record of ``topics``; return the seconds it took."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        if worker.poll() is not None:
            raise AssertionError(f"worker exited with {worker.returncode}:\n{log_path.read_text()[-4000:]}")
        if asyncio.run(group_lag(settings, settings.app_id, topics)) == 0:
            return time.perf_counter() - started
        time.sleep(0.5)
    raise AssertionError(f"worker did not catch up in {timeout_s} s:\n{log_path.read_text()[-4000:]}")


def stop_worker(worker: subprocess.Popen, hard: bool = False) -> None:
    if worker.poll() is None:
        worker.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
        try:
            worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(30)


def read_events(settings: KafkaSettings, topic: str) -> list:
    async def collect() -> list:
        return [decode(topic, r.value) async for r in read_to_end(settings, topic)]

    return asyncio.run(collect())
