"""Decisions are a function of the events, not of the process that makes them: Python salts string
hashes per process, so a set of test ids iterates in another order in each, and a float summed in
that order differs in its last bits (a selection's estimated seconds did, between the embedded
runtime and a Kafka worker)."""

from __future__ import annotations

import os
import subprocess
import sys

DIGESTS = """
import hashlib
from fastci.core.codec import encode
from fastci.demo.history import Workload
from fastci.runtime.memory import MemoryRuntime
from fastci.topology import SYSTEM

digests = {}
for event in MemoryRuntime(SYSTEM).publish(Workload(commits=30, seed=5).events()):
    digests.setdefault(event.TOPIC, hashlib.sha256()).update(encode(event))
for topic, digest in sorted(digests.items()):
    print(topic, digest.hexdigest())
"""


def decisions_under(hash_seed: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    run = subprocess.run([sys.executable, "-c", DIGESTS], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return dict(line.split() for line in run.stdout.splitlines())


def test_every_decision_is_byte_identical_under_other_string_hash_seeds():
    first = decisions_under("1")
    assert {"selection", "selection-audit", "test-plan", "schedule", "node-state-changed"} <= set(first)
    for seed in ("2", "3"):
        assert decisions_under(seed) == first, f"PYTHONHASHSEED={seed}"
