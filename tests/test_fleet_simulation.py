"""The fleet simulation's harness, with the real-time throughput runs stubbed out (bench/fleet_health.py
runs the real ones): the three faulty nodes are quarantined, their failures rerun and passed elsewhere,
and nothing is blamed on a healthy node or on the software regression."""

from __future__ import annotations

import pytest

from fastci.contracts.node_states import NodeStateChanged
from fastci.simulate import fleet_faults as simulation
from fastci.simulate.fleet_faults import (
    FleetConfig,
    FleetSimulation,
    detections,
    flake_rate,
    misattribution,
    revision_of,
)


class SteadyRig:
    """Throughput without timing noise: a chip's samples are its nominal rate over (1 + slowdown)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def samples(self, model: str, precision: str, slowdown: float):
        return tuple(1000.0 / (1 + slowdown) for _ in range(self.steps - 5)), "images"


@pytest.fixture(scope="module")
def outcome(monkeypatch_module):
    monkeypatch_module.setattr(simulation, "ThroughputRig", SteadyRig)
    return FleetSimulation(FleetConfig(seed=3, days=2)).run()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_every_faulty_node_is_quarantined_and_returns_only_after_passing_diagnostics(outcome):
    rows = {d.node: d for d in detections(outcome)}
    assert set(rows) == {"node-03", "node-06", "node-12"}
    assert all(row.quarantined_h is not None for row in rows.values())
    assert rows["node-03"].returned and rows["node-06"].returned  # repaired 12 h after quarantine
    slow = outcome.nodes["node-12"]  # quarantined on day 2: not repaired yet, its diagnostics keep failing
    assert not rows["node-12"].returned and slow.state in ("quarantined", "diagnosing")
    assert [c.rule for c in slow.transitions if c.state == "quarantined"][1:] == ["diagnostics-failed"] * (
        sum(c.state == "quarantined" for c in slow.transitions) - 1
    )
    assert rows["node-03"].signals_to_quarantine <= 3 and rows["node-06"].signals_to_quarantine <= 3
    assert rows["node-12"].quarantine_rule == "throughput-slow" and rows["node-12"].signals_to_quarantine == 0
    assert 7 <= rows["node-12"].throughput_runs_to_quarantine <= 12


def test_failed_tests_are_rerun_on_healthy_nodes_of_the_same_revision_and_pass(outcome):
    reruns = [r for r in outcome.reruns if r.failed.bundle != outcome.bad_bundle]
    assert reruns and all(r.result is not None for r in reruns)
    for rerun in reruns:
        (sick,) = rerun.request.avoid_nodes
        assert rerun.result.node_id != sick and rerun.result.trigger == "rerun"
        assert revision_of(rerun.result.node_id, 16) == revision_of(sick, 16) == rerun.request.hardware_revision
        assert rerun.result.status in ("passed", "flaky")
    regression = [r for r in outcome.reruns if r.failed.bundle == outcome.bad_bundle and r.result is not None]
    assert all(r.result.status == "failed" for r in regression)  # a software regression fails anywhere


def test_nothing_is_blamed_on_healthy_nodes_or_on_the_regression(outcome):
    wrong = misattribution(outcome)
    assert wrong.healthy_nodes_suspect == [] and wrong.healthy_nodes_quarantined == []
    assert wrong.regression_attributions == 0 and wrong.regression_blamed_nodes == []
    assert wrong.wrongly_flaky == []
    bad = [r for r in outcome.results if r.bundle == outcome.bad_bundle and r.status == "failed"]
    assert len({r.node_id for r in bad}) >= 10  # the candidate bundle failed on most of the fleet
    flaky, runs = flake_rate(outcome)
    assert runs > 500 and flaky / runs < 0.01
    assert all(
        c.node_id in ("node-03", "node-06", "node-12") for c in outcome.outputs if isinstance(c, NodeStateChanged)
    )
