"""kill -9 the embedded runtime at random points; the end state must equal an uninterrupted run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from fastci.core.codec import encode
from fastci.demo.history import Workload
from fastci.runtime.embedded import DataDir

pytestmark = pytest.mark.slow

EVENTS = 12_000
KILLS = 12


def build_log(data_dir: Path, events: list[bytes]) -> None:
    log = DataDir(data_dir).log.topic("results")
    for start in range(0, len(events), 1000):
        log.append(events[start : start + 1000], start)


def recorded_events() -> list[bytes]:
    """Real-shaped results, plus duplicates and records no processor can decode."""
    results = [encode(e) for e in Workload(commits=1400, seed=3).events() if e.TOPIC == "results"][:EVENTS]
    assert len(results) == EVENTS
    mixed: list[bytes] = []
    for n, payload in enumerate(results):
        mixed.append(payload)
        if n % 997 == 0:
            mixed.append(payload)  # a producer retried: same id
        if n % 1499 == 0:
            mixed.append(b'{"test_id": "tests/x.py::t", "run_id": "bad-%d"}' % n)  # undecodable
    return mixed


def start_run(data_dir: Path) -> subprocess.Popen:
    # One processor: kills must land while it works (the runtime, not a processor, is under test here).
    # Three batches a commit: a kill also lands between batches whose outputs are appended and whose
    # state is not committed yet.
    command = [
        sys.executable,
        "-m",
        "fastci.cli",
        "--data-dir",
        str(data_dir),
        "run",
        "--batch",
        "100",
        "--commit-every",
        "300",
        "--processor",
        "test-history",
    ]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def snapshot(data_dir: Path) -> tuple[list[bytes], dict[str, dict]]:
    """Every output record (in log order) and every stored state entry."""
    data = DataDir(data_dir)
    produced = [r.payload for t in ("test-status-changed", "dead-letters") for r in data.log.topic(t).read()]
    checkpoint = data.checkpoint()
    try:
        state = {key: orjson.loads(value) for key, value in checkpoint.db.execute("SELECT key, value FROM state")}
    finally:
        checkpoint.close()
    return produced, state


def processed(data_dir: Path) -> int:
    checkpoint = DataDir(data_dir).checkpoint()
    try:
        return checkpoint.position("processor:test-history", "results").offset
    finally:
        checkpoint.close()


def wait_for_progress(data_dir: Path, before: int, process: subprocess.Popen) -> float:
    """Block until the run has committed past ``before`` (or ended); return when that was seen."""
    deadline = time.perf_counter() + 60
    while processed(data_dir) == before and process.poll() is None and time.perf_counter() < deadline:
        time.sleep(0.005)
    return time.perf_counter()


def test_sigkill_at_random_points_loses_nothing_and_duplicates_nothing(tmp_path):
    events = recorded_events()
    reference, crashed = tmp_path / "reference", tmp_path / "crashed"
    build_log(reference, events)
    build_log(crashed, events)

    uninterrupted = start_run(reference)
    began = wait_for_progress(reference, 0, uninterrupted)
    assert uninterrupted.wait(120) == 0, uninterrupted.stderr.read().decode()
    processing_s = time.perf_counter() - began

    rng = random.Random(20261202)
    interrupted_mid_stream = 0
    for _ in range(KILLS):
        before = processed(crashed)
        if before == len(events):
            break
        process = start_run(crashed)
        wait_for_progress(crashed, before, process)
        time.sleep(rng.uniform(0.0, processing_s / 6))
        os.kill(process.pid, signal.SIGKILL)
        process.wait(30)
        after = processed(crashed)
        interrupted_mid_stream += before < after < len(events)
    final = start_run(crashed)
    assert final.wait(120) == 0, final.stderr.read().decode()

    assert interrupted_mid_stream >= 3, "too few kills landed while events were being processed"
    expected_outputs, expected_state = snapshot(reference)
    got_outputs, got_state = snapshot(crashed)
    ids = [orjson.loads(p)["id"] for p in got_outputs]
    assert len(ids) == len(set(ids)), "an output was appended twice"
    assert got_outputs == expected_outputs
    assert got_state == expected_state
    assert processed(crashed) == len(events)
    assert sum(1 for p in expected_outputs if b'"source":"decode"' in p) == 9
