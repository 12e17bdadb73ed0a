"""Workload declarations of the qualification models, configs built from them, and traced runs.

Each model's training check declares a validation scope (what it exists to check: the precision
it runs in, the LM's head count, the way tensor-parallel degree would be) and the dimensions that
may shrink for a presubmit run, with their minimums and how its duration grows with each
(``COST``: a fixed share and an exponent per dimension, from ``bench/workload_scaling.py``).
``configured`` builds a model at any
point of that space; its default point is the qualification set's, whose numbers the pinned
goldens hold.

Dimension-dependent code these runs have (real code paths, marked with
``fastci.evidence.dimensions.at``): the cosine phase of the learning-rate schedule starts after
warmup (10% of the steps); weights and optimizer moments are checkpointed every 100 steps; LM
blocks from the second on use a mixture of experts instead of a dense MLP.

``traced_training`` runs one training under the tracing collector with dimension points, and
``evidence_event`` turns it into the ``evidence`` event a CI run of the check would publish.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fastci.evidence.dimensions import first_executions
from fastci.evidence.first_calls import ProjectUnits, new_collector
from fastci.evidence.publish import encode_executed
from fastci.evidence.stacks import UnitsCache
from fastci.inputs import EvidenceEvent, FirstExecution, WorkloadDimension, WorkloadEvidence
from fastci.planning.shrink import Dimension
from fastci.qualify.backend import Backend
from fastci.qualify.models import FAMILIES, lm
from fastci.qualify.models.base import Family
from fastci.qualify.stack import RuntimeConfig
from fastci.qualify.train import train

PROJECT_ROOT = Path(__file__).resolve().parents[2]  # units are named relative to it, as change analysis names them
MIN_STEPS, MIN_BATCH = 20, 4
LM_MINIMUM = {"layers": 1, "width": 8, "context": 4}
# Measured by bench/workload_scaling.py (reference backend, CPU time, this machine): a fixed share
# of the full run, and the rest ~ prod((value / full) ** exponent); steps is 1 by construction.
COST: dict[str, dict] = {
    "lm-tiny": {
        "fixed_share": 0.01,
        "exponents": {"steps": 1.0, "batch": 0.43, "layers": 1.27, "width": 0.46, "context": 0.52},
    },
    "convnet-small": {"fixed_share": 0.04, "exponents": {"steps": 1.0, "batch": 0.6}},
    "speech-conv-attn": {"fixed_share": 0.12, "exponents": {"steps": 1.0, "batch": 0.66}},
    "dlrm-small": {"fixed_share": 0.08, "exponents": {"steps": 1.0, "batch": 0.14}},
}


def dimensions(name: str, full: dict[str, int] | None = None) -> list[Dimension]:
    """The shrinkable dimensions of a model's training check, at the full values given (default:
    the qualification set's config)."""
    family = FAMILIES[name]
    values = {"steps": family.steps, "batch": family.batch_size}
    minimum = {"steps": MIN_STEPS, "batch": MIN_BATCH}
    if name == "lm-tiny":
        values |= {"layers": lm.DEFAULT.layers, "width": lm.DEFAULT.width, "context": lm.DEFAULT.context}
        minimum |= LM_MINIMUM
    values |= full or {}
    unknown = sorted(set(values) - set(minimum))
    if unknown:
        raise ValueError(f"{name}: no shrinkable dimension {', '.join(unknown)} (it has {', '.join(minimum)})")
    exponents = COST[name]["exponents"]
    return [Dimension(d, values[d], min(minimum[d], values[d]), exponents[d]) for d in minimum]


def scope(name: str, precision: str) -> dict[str, str | int]:
    """What the check exists to validate: never shrunk."""
    return {"precision": precision, **({"heads": lm.DEFAULT.heads} if name == "lm-tiny" else {})}


def configured(name: str, values: dict[str, int]) -> tuple[Family, int]:
    """The model at a point of its dimensions (missing ones at their default) and its step count."""
    family = FAMILIES[name]
    if name == "lm-tiny":
        config = dataclasses.replace(
            lm.DEFAULT, **{k: values[k] for k in ("layers", "width", "context") if k in values}
        )
        family = lm.family(config)
    family = dataclasses.replace(family, batch_size=values.get("batch", family.batch_size))
    return family, values.get("steps", family.steps)


@dataclass(frozen=True)
class TracedRun:
    units: frozenset[str]  # every project unit the run executed ('path::qualname')
    first: dict[str, list[dict[str, int]]]  # units that first ran past the first index of a dimension
    executed: dict[str, list[tuple[str, ...]]]  # each unit with the contexts of its first calls
    seconds: float


def traced_training(
    name: str, values: dict[str, int], backend: Backend, seed: int, declared: set[str] | None = None
) -> TracedRun:
    """Train the model at ``values`` under the tracing collector, recording where each unit first ran
    along ``declared`` dimensions (default: all the model declares); its final eval included."""

    family, steps = configured(name, values)
    cache = UnitsCache()
    data = family.make_data(np.random.default_rng(seed))
    started = time.perf_counter()
    with new_collector(ProjectUnits(PROJECT_ROOT, PROJECT_ROOT, cache)) as tracer:
        tracer.dimensions = True
        tracer.begin_test()
        tracer.run(lambda: train(family, backend, seed, RuntimeConfig(), data=data, steps=steps))
        executed = tracer.end_test()
    seconds = time.perf_counter() - started
    names = declared if declared is not None else {d.name for d in dimensions(name)}
    first = first_executions(tracer.points, PROJECT_ROOT, cache, dimensions=names)
    return TracedRun(frozenset(executed), first, executed, seconds)


def workload_evidence(name: str, precision: str, full: dict[str, int], traced: TracedRun) -> WorkloadEvidence:
    return WorkloadEvidence(
        scope=scope(name, precision),
        dimensions=tuple(
            WorkloadDimension(name=d.name, full=d.full, minimum=d.minimum, cost_exponent=d.cost_exponent)
            for d in dimensions(name, full)
        ),
        fixed_share=COST[name]["fixed_share"],
        first_executions=tuple(FirstExecution(unit=unit, at=tuple(points)) for unit, points in traced.first.items()),
    )


def evidence_event(
    test_id: str,
    run_id: str,
    repo: str,
    commit: str,
    name: str,
    precision: str,
    full: dict[str, int],
    traced: TracedRun,
) -> EvidenceEvent:
    """The evidence a traced CI run of the training check publishes: its units and its workload."""
    units, calls = encode_executed(traced.executed)
    return EvidenceEvent(
        test_id=test_id,
        run_id=run_id,
        repo=repo,
        commit=commit,
        method="tracing",
        units=units,
        calls=calls,
        workload=workload_evidence(name, precision, full, traced),
    )
