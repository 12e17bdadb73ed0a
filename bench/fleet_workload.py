"""Trace the qualification models at their presubmit smoke config, for the CI simulator's model tests.

    .venv/bin/python bench/fleet_workload.py [--out fastci/simulate/data/model_workload.json]

Per family (the four ``fastci qualify`` models), at the smoke config (a tenth of the nightly steps,
as ``bench/qualify_durations.py`` timed it): the declared shrinkable dimensions and validation scope
(``fastci.qualify.configs``), the cost model, and one real traced training run (tracing collector
with dimension points, reference backend): every unit it executed, and where the units that do not
run from the first step and layer first ran. The simulator gives each fleet model test the
declaration of its family, and each unit a change touches the first-execution points of one real
unit of that model (by hash), so a model test shrinks the way the real model's code allows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.qualify.backend import ReferenceBackend
from fastci.qualify.configs import COST, dimensions, scope, traced_training
from fastci.qualify.models import FAMILIES

SMOKE_FRACTION = 10
SEED = 1234


def smoke_values(name: str) -> dict[str, int]:
    return {
        d.name: (max(d.minimum, d.full // SMOKE_FRACTION) if d.name == "steps" else d.full) for d in dimensions(name)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("fastci/simulate/data/model_workload.json"))
    args = parser.parse_args()
    started = time.perf_counter()
    families = {}
    for name in FAMILIES:
        values = smoke_values(name)
        traced = traced_training(name, values, ReferenceBackend(), SEED)
        families[name] = {
            "smoke": values,
            "scope": scope(name, "bf16"),
            "dimensions": [
                {"name": d.name, "full": d.full, "minimum": d.minimum, "cost_exponent": d.cost_exponent}
                for d in dimensions(name, values)
            ],
            "fixed_share": COST[name]["fixed_share"],
            "units": sorted(traced.units),
            "first_executions": {unit: points for unit, points in sorted(traced.first.items())},
        }
        print(
            f"{name:17s} smoke {values}: {len(traced.units)} units, {len(traced.first)} first run past the start "
            f"({traced.seconds:.1f} s traced)",
            flush=True,
        )
    document = {
        "command": " ".join(["python", *sys.argv]),
        "seed": SEED,
        "families": families,
        "seconds": round(time.perf_counter() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
