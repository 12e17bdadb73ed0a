"""Measure how long the qualification models take to run, for the CI simulator's duration model.

    .venv/bin/python bench/qualify_durations.py [--repeats 3] [--out fastci/simulate/data/qualify_durations.json]

Per model (the four families of ``fastci qualify``) and precision (bf16, fp8), ``--repeats`` times:
the inference check and the training check at the pinned number of steps (the nightly
configuration), and training at a tenth of the steps (the presubmit smoke configuration). The
simulator samples these seconds and scales them to fleet-size runs (``fastci.simulate.fleet_suite``);
the file records the host's load average so the spread can be read with it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.qualify import golden
from fastci.qualify.models import FAMILIES
from fastci.qualify.runner import check_inference, check_training, make_backend
from fastci.qualify.stack import HEALTHY

SMOKE_FRACTION = 10  # the presubmit smoke run trains for steps // 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("fastci/simulate/data/qualify_durations.json"))
    args = parser.parse_args()
    started = time.perf_counter()
    measured: dict[str, dict] = {}
    for name, family in FAMILIES.items():
        pinned = golden.load(family)
        smoke_steps = max(1, pinned.steps // SMOKE_FRACTION)
        entry = measured[name] = {"steps": pinned.steps, "smoke_steps": smoke_steps, "runs": []}
        for repeat in range(args.repeats):
            for precision in ("bf16", "fp8"):
                backend = make_backend("emulated", HEALTHY, precision)  # type: ignore[arg-type]
                inference = check_inference(family, backend, pinned)
                training = check_training(family, backend, pinned)
                smoke = check_training(family, backend, pinned, steps=smoke_steps)
                entry["runs"].append(
                    {
                        "precision": precision,
                        "inference_s": round(inference.seconds, 4),
                        "training_s": round(training.seconds, 4),
                        "smoke_training_s": round(smoke.seconds, 4),
                    }
                )
                print(
                    f"{name:17s} {precision} #{repeat + 1}: inference {inference.seconds:5.2f} s, "
                    f"training {training.seconds:5.2f} s ({pinned.steps} steps), "
                    f"smoke {smoke.seconds:5.2f} s ({smoke_steps} steps)",
                    flush=True,
                )
    document = {
        "command": " ".join(["python", *sys.argv]),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
        "seconds": round(time.perf_counter() - started, 1),
        "models": measured,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"wrote {args.out} in {document['seconds']} s (load average {document['load_average']})")


if __name__ == "__main__":
    main()
