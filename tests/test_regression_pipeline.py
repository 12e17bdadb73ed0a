"""The whole chain on the embedded runtime: nightly results -> gates/baselines -> confirmation ->
plan -> bisect runs -> culprit alert, with a runner answering run requests between runs."""

from __future__ import annotations

from datetime import UTC

from fastci.contracts.baseline_exclusions import BaselineExclusion
from fastci.contracts.node_states import NodeStateChanged
from fastci.contracts.regression_alerts import RegressionAlert
from fastci.contracts.runs import RunRequested
from fastci.core.events import Event
from fastci.regression.synthetic import REPO, Scenario, sha
from fastci.runtime.embedded import DataDir, EmbeddedRuntime, ProcessorStats
from fastci.runtime.memory import MemoryRuntime
from fastci.runtime.publish import publish_embedded
from fastci.shared.owners import parse_owner_file
from fastci.topology import SYSTEM, build_processors, decode

OWNERS = "* @framework-team\n/fastlm/kernels/ @kernels-team\nlayer:driver @driver-team\n"


def read(data_dir, topic: str) -> list[Event]:
    return [decode(topic, r.payload) for r in DataDir(data_dir).log.topic(topic).read()]


def run_until_quiet(data_dir, scenario: Scenario, rounds: int = 40) -> int:
    """Run the processors; answer new run requests as a runner would; repeat until none are left."""
    answered: set[str] = set()
    for round_ in range(rounds):
        runtime = EmbeddedRuntime(data_dir, SYSTEM, sync=False)
        try:
            runtime.run()
        finally:
            runtime.close()
        new = [r for r in read(data_dir, RunRequested.TOPIC) if r.id not in answered]
        if not new:
            return round_
        for request in new:
            answered.add(request.id)
            publish_embedded(data_dir, scenario.run(request))
    raise AssertionError("the bisect did not converge")


def test_nightly_regression_to_culprit_on_the_embedded_runtime(tmp_path):
    scenario = Scenario(culprit=77, changes=120, seed=11, repeats=120)
    publish_embedded(tmp_path, [parse_owner_file(OWNERS, repo=REPO), *scenario.commits()])
    publish_embedded(tmp_path, scenario.nightly_results())
    rounds = run_until_quiet(tmp_path, scenario)
    alerts = read(tmp_path, RegressionAlert.TOPIC)
    assert [a.stage for a in alerts] == ["detected", "culprit"]
    assert alerts[1].culprit.commit == sha(10 + 77) and alerts[1].regression_id == alerts[0].regression_id
    assert rounds == alerts[1].runs_used + 1  # the confirmation, then one round per bisect run

    # the same events through the in-memory pipeline give the same outputs, ids included
    memory = MemoryRuntime(SYSTEM, build_processors(), responders={RunRequested.TOPIC: scenario.run})
    memory.publish([parse_owner_file(OWNERS, repo=REPO), *scenario.commits()])
    memory.publish(scenario.nightly_results())
    assert [a.id for a in memory.of_topic(RegressionAlert.TOPIC)] == [a.id for a in alerts]


def test_a_quarantined_nodes_results_are_excluded_through_the_runtime(tmp_path):
    scenario = Scenario(culprit=None, changes=4, seed=12, repeats=20)
    nights = scenario.nightly_results()
    publish_embedded(tmp_path, nights[:5])
    node = nights[3].node_id
    state = NodeStateChanged(node_id=node, state="quarantined", reason="ECC errors", time=scenario_time(nights[3]))
    DataDir(tmp_path).log.topic(NodeStateChanged.TOPIC).append([state.model_dump_json().encode()], 0)
    runtime = EmbeddedRuntime(tmp_path, SYSTEM, sync=False)
    try:
        runtime.run()
    finally:
        runtime.close()
    excluded = read(tmp_path, BaselineExclusion.TOPIC)
    assert [e.result_id for e in excluded] == [nights[3].id]


def scenario_time(result):
    from datetime import datetime

    return result.time or datetime(2026, 11, 2, tzinfo=UTC)


def test_a_processor_with_several_inputs_reads_each_record_under_its_own_topic(tmp_path):
    """The embedded runtime once labelled every input's records with its last input topic."""
    from fastci.regression.baseline_guard import BaselineGuardProcessor

    scenario = Scenario(culprit=None, changes=2, seed=13, repeats=3)
    nights = scenario.nightly_results()
    publish_embedded(tmp_path, nights[:3])
    state = NodeStateChanged(node_id=nights[1].node_id, state="suspect", time=scenario_time(nights[1]))
    DataDir(tmp_path).log.topic(NodeStateChanged.TOPIC).append([state.model_dump_json().encode()], 10**13)
    runtime = EmbeddedRuntime(tmp_path, SYSTEM, [BaselineGuardProcessor()], sync=False)
    try:  # bounded steps, not run(): with the bug, mislabelled positions made run() loop for ever
        for _ in range(3):
            runtime.runners[0].step(False, ProcessorStats())
    finally:
        runtime.close()
    checkpoint = DataDir(tmp_path).checkpoint()
    try:
        positions = {
            t: checkpoint.position("processor:baseline-guard", t).offset for t in ("results", "node-state-changed")
        }
    finally:
        checkpoint.close()
    assert positions == {"results": 3, "node-state-changed": 1}
    assert [e.result_id for e in read(tmp_path, BaselineExclusion.TOPIC)] == [nights[1].id]
