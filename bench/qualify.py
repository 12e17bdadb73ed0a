"""The nightly qualification set: its wall time, its throughput noise, and what the performance gate
sees, all measured in one run on this host.

    python bench/qualify.py [--models lm-tiny,...] [--repeats 3]

1. The nightly set (every model, bf16 and fp8) on the healthy emulated bundle, and the same models
   on the fp32 reference backend (the baseline of the time ratio).
2. Throughput noise: the coefficient of variation of each model's samples in that run, and the
   spread between runs of the same bundle (the median of each run, relative to the first).
3. Interleaved comparisons (``--repeats`` each, step by step on this host): healthy against
   healthy (what the gate must not flag) and the 3%-extra-work kernel against healthy (what it must
   flag), with the median throughput ratio, the per-window spread, how often the first pair was
   undecided and pooled a second, how often the first comparison flagged a drop and how often the
   confirming second one agreed (the gate's verdict).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.qualify import golden
from fastci.qualify.backend import ReferenceBackend
from fastci.qualify.models import FAMILIES
from fastci.qualify.runner import check_training, make_backend, qualify
from fastci.qualify.stack import HEALTHY, with_defect


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(FAMILIES))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    models = args.models.split(",")

    print("1. nightly set, healthy bundle", HEALTHY.model_dump())
    reference = qualify(ReferenceBackend(), models)
    runs = {p: qualify(make_backend("emulated", HEALTHY, p), models) for p in ("bf16", "fp8")}  # type: ignore[arg-type]
    total = sum(q.seconds for q in runs.values())
    print(f"   reference fp32: {reference.seconds:6.1f} s (baseline)")
    for precision, q in runs.items():
        verdicts = sum(m.inference.status == m.training.status == "passed" for m in q.models)
        print(
            f"   emulated {precision}:  {q.seconds:6.1f} s = {q.seconds / reference.seconds:.2f}x reference; "
            f"{verdicts}/{len(q.models)} models pass every gate"
        )
    print(
        f"   nightly set (bf16 + fp8): {total:.1f} s; "
        "with the interleaved performance baseline about twice the training time"
    )

    print("2. throughput samples (items per second of kernel time, one per 5 steps after 5 warmup steps)")
    for precision, q in runs.items():
        for m in q.models:
            t = m.training
            print(
                f"   {precision} {m.family.name:17s} {len(t.throughput):4d} samples, "
                f"median {np.median(t.throughput):10.0f} "
                f"{m.family.item_unit}/s, CV {t.throughput_cv:.1%}"
            )
    family = FAMILIES[models[0]]
    medians = []
    for _ in range(args.repeats):
        run = check_training(family, make_backend("emulated", HEALTHY), golden.load(family))
        medians.append(float(np.median(run.throughput)))
    spread = [m / medians[0] for m in medians]
    print(
        f"   {family.name}, {args.repeats} separate runs of the same bundle: median throughput relative to the first "
        + ", ".join(f"{s:.3f}" for s in spread)
    )

    print("3. performance gate, interleaved step by step with a healthy baseline")
    for label, bundle in (
        ("healthy vs healthy", HEALTHY),
        ("3% extra work vs healthy", with_defect("kernel-extra-work")),
    ):
        for name in models:
            fam = FAMILIES[name]
            verdicts = [
                check_training(
                    fam, make_backend("emulated", bundle), golden.load(fam), baseline=make_backend("emulated", HEALTHY)
                ).performance
                for _ in range(args.repeats)
            ]
            pooled = sum(v.pairs > 1 for v in verdicts)  # type: ignore[union-attr]
            first = sum(v.significant_drop for v in verdicts)  # type: ignore[union-attr]
            confirmed = sum(v.regressed for v in verdicts)  # type: ignore[union-attr]
            print(
                f"   {label:26s} {name:17s} ratio "
                + " ".join(f"{v.ratio:.3f}" for v in verdicts)  # type: ignore[union-attr]
                + f"  spread {np.mean([v.spread for v in verdicts]):.1%}"  # type: ignore[union-attr]
                + f"  undecided and pooled {pooled}/{len(verdicts)}, flagged {first}/{len(verdicts)},"
                + f" confirmed {confirmed}/{len(verdicts)}"
            )


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"bench took {time.perf_counter() - started:.0f} s")
