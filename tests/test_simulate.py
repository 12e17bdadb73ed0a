"""The CI simulator: its inputs come from the real processors, its stream from the recording."""

from __future__ import annotations

from processor_helpers import Store, feed, of_topic
from test_selection import ATTN, commit, history, kept_ids

from fastci.selection.processor import SelectionProcessor


def select_with(processor: SelectionProcessor, change):
    (selection,) = of_topic(feed(processor, Store(), [*history(), change]), "selection")
    return selection


def test_the_ablation_switches_pruning_and_selection_off_in_the_real_processor():
    change = commit((*ATTN, "modified"))
    assert kept_ids(select_with(SelectionProcessor(), change)) == ["tests/test_model.py::test_forward"]
    unpruned = select_with(SelectionProcessor(pruning=False), change)
    assert sorted(kept_ids(unpruned)) == ["tests/test_model.py::test_backward", "tests/test_model.py::test_forward"]
    assert unpruned.pruned == () and unpruned.metrics.selected == 2
    everything = select_with(SelectionProcessor(run_everything=True), change)
    assert everything.run_all and everything.metrics.kept == everything.metrics.tests_known == 3


# ----- the simulator on a small synthetic recording (tests/sim_factories.py)

import math  # noqa: E402

import pytest  # noqa: E402
from sim_factories import recording  # noqa: E402

from fastci.simulate.ablation import unit_test_durations  # noqa: E402
from fastci.simulate.arrivals import Settings  # noqa: E402
from fastci.simulate.fleet_suite import Durations, choose_models, load_qualify_durations  # noqa: E402
from fastci.simulate.sim import VARIANTS, Simulation  # noqa: E402

SMALL = Settings(days=1, changes_per_day=120, faults_per_day=8, experiments_per_day=4, warmup_h=3.0, drain_days=0.5)
EVERYTHING, SELECTION, PRUNING, RISK, WORKLOAD = VARIANTS


def simulate(replay, variant=WORKLOAD, settings=SMALL):
    durations = Durations(load_qualify_durations(), unit_test_durations(replay))
    simulation = Simulation(
        replay, durations, variant, settings, models=choose_models(r.test_id for r in replay.base_results)
    )
    return simulation, simulation.run().report()


def selections_alone(replay) -> list:
    """The selection processor fed the recording directly, outside the simulator."""
    outputs = feed(
        SelectionProcessor(),
        Store(),
        [*replay.base_results, *replay.base_evidence, *(step.commit for step in replay.commits)],
    )
    return of_topic(outputs, "selection")


def test_selection_ratios_come_from_the_processor_on_the_recorded_evidence():
    sparse = recording()
    _, report = simulate(sparse)
    alone = selections_alone(sparse)
    expected = sum(s.metrics.kept for s in alone) / sum(s.metrics.tests_known for s in alone)
    assert 0 < report["kept_share"] < 0.2
    assert report["kept_share"] == pytest.approx(expected, rel=0.25)  # the day's changes are the recording's, looped
    # the same stream over evidence in which every test runs every function: every test is kept
    dense = recording(calls_of=lambda number, functions: range(functions))
    _, report = simulate(dense)
    assert report["kept_share"] == 1.0


def test_every_change_finishes_and_every_injected_fault_is_caught_with_every_part_on():
    simulation, report = simulate(recording())
    assert report["changes"] > 100 and report["unfinished"] == 0
    assert report["faults"] == 8 and report["caught"] == 8 and report["missed"] == []
    assert report["first_failure_p90_s"] <= report["ci_latency_p90_s"]
    assert not math.isnan(report["hardware_p90_s"]) and report["nightly_done_h"] is not None
    # every job the scheduler queued for a measured change completed, once
    stats = simulation.metrics.measured_changes()
    assert all(s.completed == s.jobs and s.done_s is not None for s in stats)
    assert not simulation.runner.active or simulation.loop.now >= simulation.loop.now
    assert set(simulation.runner.finished_attempts.values()) == {1}


def test_running_everything_keeps_every_test_and_costs_more_chips():
    _, everything = simulate(recording(), EVERYTHING)
    _, selected = simulate(recording(), SELECTION)
    assert everything["kept_share"] == 1.0 and selected["kept_share"] < 0.2
    assert everything["models_per_hardware_change"] == 60
    assert everything["presubmit_chip_hours"] > 3 * selected["presubmit_chip_hours"]
    assert everything["ci_latency_mean_s"] > selected["ci_latency_mean_s"]
