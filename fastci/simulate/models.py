"""How the simulated fleet's model tests declare their workload, and what a shrunk config costs.

From ``data/model_workload.json`` (``bench/fleet_workload.py``: the four qualification models traced
at their presubmit smoke config): each fleet model test declares its family's validation scope and
shrinkable dimensions (steps, batch, and for the language model layers, width and context) with
their minimums and the measured cost model. Its evidence says where its units first ran: each unit
the stand-in test executes takes the first-execution points of one real unit of the family's traced
run, chosen by hash, so the share of changed code that only runs late (past warmup, in a later
layer...) is the real model's. A shrunk config's duration is the cost model's: a fixed share plus
the rest scaled by ``prod((value / full) ** exponent)``.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from fastci.inputs import FirstExecution, WorkloadDimension, WorkloadEvidence
from fastci.selection.graph import parse_frame
from fastci.simulate.fleet_suite import DATA, FleetModel

MODEL_WORKLOAD = DATA / "model_workload.json"


@lru_cache(maxsize=4)
def families(path: Path = MODEL_WORKLOAD) -> dict[str, dict[str, Any]]:
    return orjson.loads(path.read_bytes())["families"]


def smoke_config(model: FleetModel) -> dict[str, int]:
    """The presubmit (smoke) config of a model: its family's, as timed and traced."""
    return dict(families()[model.family]["smoke"])


def shrink_ratio(model: FleetModel, config: dict) -> float:
    """Duration of ``config`` relative to the smoke config, by the family's measured cost model."""
    family = families()[model.family]
    scale = 1.0
    for dimension in family["dimensions"]:
        value = config.get(dimension["name"], dimension["full"])
        if isinstance(value, (int, float)) and value > 0:
            scale *= (min(value, dimension["full"]) / dimension["full"]) ** dimension["cost_exponent"]
    fixed = family["fixed_share"]
    return fixed + (1 - fixed) * scale


def real_unit(family: dict[str, Any], unit: str) -> str:
    units = family["units"]
    return units[int(hashlib.sha256(unit.encode()).hexdigest()[:8], 16) % len(units)]


def workload_evidence(model: FleetModel, event: Any) -> Any:
    """The workload block a traced run of the model test would carry, for its own units."""
    family = families()[model.family]
    units = {
        f"{p}::{q}"
        for stack in event.stacks
        for frame in stack.stack.split(";")
        if (parsed := parse_frame(frame))
        for p, q in [parsed]
    }
    late = family["first_executions"]
    first = []
    for unit in sorted(units):
        points = late.get(real_unit(family, unit))
        if points:
            first.append(FirstExecution(unit=unit, at=tuple(points)))
    return WorkloadEvidence(
        scope=family["scope"],
        dimensions=tuple(WorkloadDimension(**d) for d in family["dimensions"]),
        fixed_share=family["fixed_share"],
        first_executions=tuple(first),
    )
