"""The regression chain on the faust worker against the real broker: the repo-keyed planner and
node-keyed guard get their inputs through the repartition topics, and the outputs equal the
embedded runtime's (same ids) for the same inputs and runner answers."""

from __future__ import annotations

import asyncio
import time

import pytest
from kafka_helpers import read_events, start_worker, stop_worker

from fastci.contracts.baseline_exclusions import BaselineExclusion
from fastci.contracts.node_states import NodeStateChanged
from fastci.contracts.regression_alerts import RegressionAlert
from fastci.contracts.runs import RunRequested
from fastci.regression.events import BisectStep
from fastci.regression.synthetic import REPO, Scenario, sha
from fastci.runtime.kafka.broker import ensure_topics, publish
from fastci.runtime.memory import MemoryRuntime
from fastci.shared.owners import parse_owner_file
from fastci.topology import SYSTEM, TOPICS, build_processors

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def test_regression_to_culprit_on_the_faust_worker(kafka, tmp_path):
    scenario = Scenario(culprit=21, changes=40, seed=41, repeats=120)
    inputs = [parse_owner_file("* @framework-team\nlayer:driver @driver-team\n", repo=REPO), *scenario.commits()]
    nights = scenario.nightly_results()
    quarantine = NodeStateChanged(node_id="node-99", state="quarantined", reason="XID 79", time="2026-11-02T00:00:00Z")
    # a presubmit run on a node quarantined later: excluded through the node-keyed guard
    stray = scenario._result("stray", sha(3), nights[0].bundle, "presubmit", 5, node="node-99", seed=None)

    expected = MemoryRuntime(SYSTEM, build_processors(), responders={RunRequested.TOPIC: scenario.run})
    expected.publish([*inputs, stray, quarantine, *nights])

    asyncio.run(ensure_topics(kafka, TOPICS))
    asyncio.run(publish(kafka, [*inputs, stray]))
    asyncio.run(publish(kafka, [quarantine]))
    asyncio.run(publish(kafka, nights))
    log = tmp_path / "worker.log"
    worker = start_worker(kafka, log)
    answered: set[str] = set()
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            alerts = read_events(kafka, RegressionAlert.TOPIC)
            if any(a.stage in ("culprit", "unresolved") for a in alerts):
                break
            new = [r for r in read_events(kafka, RunRequested.TOPIC) if r.id not in answered]
            for request in new:
                answered.add(request.id)
                asyncio.run(publish(kafka, scenario.run(request)))
            if worker.poll() is not None:
                raise AssertionError(log.read_text()[-4000:])
            time.sleep(0.5)
        else:
            raise AssertionError(f"no culprit within 240 s:\n{log.read_text()[-4000:]}")
    finally:
        stop_worker(worker)

    alerts = read_events(kafka, RegressionAlert.TOPIC)
    (final,) = [a for a in alerts if a.stage == "culprit"]
    assert final.culprit.commit == sha(10 + 21) and final.owners == ("framework-team",)
    assert sorted(a.id for a in alerts) == sorted(a.id for a in expected.of_topic(RegressionAlert.TOPIC))
    steps = read_events(kafka, BisectStep.TOPIC)
    assert sorted(s.id for s in steps) == sorted(s.id for s in expected.of_topic(BisectStep.TOPIC))
    assert [e.result_id for e in read_events(kafka, BaselineExclusion.TOPIC)] == [stray.id]
