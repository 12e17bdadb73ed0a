"""The inputs every variant shares, and one variant's run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastci.selection.replay import load
from fastci.simulate.arrivals import Settings
from fastci.simulate.fleet_suite import Durations, FleetModel, choose_models, load_qualify_durations
from fastci.simulate.models import shrink_ratio, smoke_config, workload_evidence
from fastci.simulate.sim import Simulation, Variant


@dataclass
class Inputs:
    replay: Any
    durations: Durations
    models: list[FleetModel]


def unit_test_durations(replay: Any) -> dict[str, list[float]]:
    """Each test's measured seconds, one per full run the recording made (base and every commit)."""
    samples: dict[str, list[float]] = {}
    for result in replay.base_results:
        samples.setdefault(result.test_id, []).append(result.duration_s)
    for step in replay.commits:
        for result in step.results:
            samples.setdefault(result.test_id, []).append(result.duration_s)
    return samples


def load_inputs(name: str = "more-itertools") -> Inputs:

    replay = load(name)
    durations = Durations(load_qualify_durations(), unit_test_durations(replay))
    return Inputs(replay, durations, choose_models(r.test_id for r in replay.base_results))


def build(
    replay: Any, durations: Durations, variant: Variant, settings: Settings, models: list[FleetModel] | None = None
) -> Simulation:
    """A simulation whose model tests declare their family's workload (``fastci.simulate.models``)."""
    return Simulation(
        replay,
        durations,
        variant,
        settings,
        models=models,
        shrink_ratio=shrink_ratio,
        workload_evidence=workload_evidence,
        smoke_config=smoke_config,
    )


def simulate_variant(inputs: Inputs, variant: Variant, settings: Settings) -> dict[str, Any]:
    simulation = build(inputs.replay, inputs.durations, variant, settings, inputs.models)
    return simulation.run().report()
