"""How a qualification model's training time scales with each shrinkable dimension: the cost model its
workload declaration carries (``fastci.qualify.configs.COST``).

The model: a share ``fixed`` of the full run does not shrink (data generation, the final eval,
setup), the rest scales as ``prod((value / full) ** exponent)``. Each training step does the same
work, so the steps exponent is 1 and the steps dimension alone gives the fixed share:
``t(steps = s) / t(full) = fixed + (1 - fixed) * s / S``. Each other dimension at its minimum, the
others full, gives its exponent on the part that shrinks. Then the check: each model shrunk to its
rule's config (``fastci.planning.shrink`` on the full run's evidence, so every unit still runs),
measured against the estimate.

Times: the training check, untraced, reference backend, BLAS on one thread; CPU time of the process
(other tenants of a shared host do not count), best of ``--repeats``.

    .venv/bin/python bench/workload_scaling.py [--repeats 3] [--models lm-tiny,...]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from fastci.planning.shrink import smallest_config
from fastci.qualify.backend import ReferenceBackend
from fastci.qualify.configs import COST, configured, dimensions, traced_training
from fastci.qualify.golden import SEED
from fastci.qualify.models import FAMILIES
from fastci.qualify.stack import RuntimeConfig
from fastci.qualify.train import train


def cpu_seconds(name: str, values: dict[str, int], repeats: int) -> float:
    family, steps = configured(name, values)
    best = math.inf
    for _ in range(repeats):
        started = time.process_time()
        train(
            family,
            ReferenceBackend(),
            SEED,
            RuntimeConfig(),
            data=family.make_data(np.random.default_rng(SEED)),
            steps=steps,
        )
        best = min(best, time.process_time() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", default=",".join(FAMILIES))
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"{'model':18s} {'dimension':10s} {'full':>5s} {'min':>5s} {'time ratio':>10s}   measured   declared")
    checks = []
    for name in args.models.split(","):
        full_dims = dimensions(name, {"layers": 2} if name == "lm-tiny" else None)
        full = {d.name: d.full for d in full_dims}
        base = cpu_seconds(name, full, args.repeats)
        declared = COST[name]
        fixed = 0.0
        for d in full_dims:  # steps first: it gives the fixed share the others are measured against
            ratio = cpu_seconds(name, {**full, d.name: d.minimum}, args.repeats) / base
            share = d.minimum / d.full
            if d.name == "steps":
                fixed = max(0.0, (ratio - share) / (1 - share))
                found, was = f"fixed {fixed:.2f}", f"fixed {declared['fixed_share']:.2f}"
            else:
                variable = max(ratio - fixed, 1e-9) / (1 - fixed)
                found = f"exp {max(0.0, math.log(variable) / math.log(share)):.2f}"
                was = f"exp {declared['exponents'][d.name]:.2f}"
            print(f"{name:18s} {d.name:10s} {d.full:5d} {d.minimum:5d} {ratio:10.3f}   {found:>9s}  {was:>9s}")
        traced = traced_training(name, full, ReferenceBackend(), SEED)
        shrink = smallest_config(
            full_dims, {unit: traced.first.get(unit, []) for unit in traced.units}, declared["fixed_share"]
        )
        measured = cpu_seconds(name, shrink.values, args.repeats) / base
        checks.append((name, shrink.values, shrink.scale, measured, base))
    print("\nshrunk by the rule (every unit of the full run still runs): the declaration's estimate vs measured")
    for name, values, estimated, measured, base in checks:
        print(f"{name:18s} {values}  full {base:.2f} s CPU; estimated {estimated:.3f}, measured {measured:.3f} of it")
    print(f"\n{time.perf_counter() - started:.0f} s wall (a shared host: CPU times are the process's own)")


if __name__ == "__main__":
    main()
