"""``fastci simulate``: the fleet-scale CI simulator's ablation, one command."""

from __future__ import annotations

import argparse
import math
import os
import time
from typing import Any

from fastci.cli.base import PathArgument, UsageError, console, out, print_rows, uses_data_dir

PAPER_LATENCY_CUT = 0.775  # FastCI (Qiao et al.): CI latency -77.5%
PAPER_CHIP_CUT = 0.639  # and GPU usage -63.9%, against running everything
PRESUBMIT_P90_TARGET_MIN = 45  # the targets: presubmit hardware result p90, nightly done by 08:00
NIGHTLY_TARGET_H = 8.0


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "simulate",
        help="simulate the CI on the shared pool: the ablation from run-everything to every part on",
        description="Replay a recorded repository's change stream, scaled to --changes-per-day, through the real "
        "selection, test-plan and pool-scheduler processors on a 16 x 8-chip pool with nightly qualification, "
        "developer experiments and injected faults; print the ablation table.",
    )
    parser.add_argument("--replay", default="more-itertools", help="a packaged replay or a replay file")
    parser.add_argument("--days", type=int, default=1, help="measured days, after --warmup-hours")
    parser.add_argument(
        "--warmup-hours",
        type=float,
        default=12.0,
        help="simulated before the first measured day's 00:00, so it starts with a working day's queues",
    )
    parser.add_argument("--changes-per-day", type=float, default=400.0)
    parser.add_argument("--hardware-share", type=float, default=0.6, help="share of changes on the hardware path")
    parser.add_argument(
        "--hardware-path",
        choices=("library", "random"),
        default="library",
        help="library: only changes touching library code are on it; random: any change may be",
    )
    parser.add_argument("--faults-per-day", type=int, default=20)
    parser.add_argument("--experiments-per-day", type=int, default=20)
    parser.add_argument("--variant", action="append", help="run only this variant (repeatable); default: all five")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="variants simulated at once, one process each (default: one per CPU, at most five)",
    )
    parser.add_argument("--json", type=PathArgument("output"), help="also write the figures to this file")
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown (for the README)")
    parser.set_defaults(func=run)
    uses_data_dir(parser, "none")


def run(args: argparse.Namespace) -> int:
    import orjson

    from fastci.simulate.ablation import load_inputs
    from fastci.simulate.arrivals import Settings
    from fastci.simulate.sim import VARIANTS

    if args.days < 1:
        raise UsageError("--days must be at least 1")
    if not 0 <= args.hardware_share <= 1:
        raise UsageError("--hardware-share must be between 0 and 1")
    if args.changes_per_day <= 0:
        raise UsageError("--changes-per-day must be positive")
    known = {v.name: v for v in VARIANTS}
    wanted = args.variant or list(known)
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise UsageError(f"unknown variant(s) {', '.join(unknown)} (known: {', '.join(known)})")
    if args.warmup_hours < 0:
        raise UsageError("--warmup-hours must not be negative")
    settings = Settings(
        changes_per_day=args.changes_per_day,
        hardware_share=args.hardware_share,
        days=args.days,
        warmup_h=args.warmup_hours,
        hardware_path=args.hardware_path,
        faults_per_day=args.faults_per_day,
        experiments_per_day=args.experiments_per_day,
        seed=args.seed,
    )
    try:
        inputs = load_inputs(args.replay)
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    except (OSError, ValueError, EOFError) as error:  # not gzip, not JSON lines, cut short
        raise UsageError(f"--replay {args.replay}: not a replay file ({error})") from None
    console.print(
        f"replay {args.replay}: {len(inputs.replay.commits)} commits, "
        f"{len(inputs.replay.base_results)} tests; {args.days} measured day(s) "
        f"after a {args.warmup_hours:g} h warm-up, "
        f"{args.changes_per_day:g} changes/day"
    )
    jobs = args.jobs or min(len(wanted), os.cpu_count() or 1)
    started = time.perf_counter()
    reports = run_variants(inputs, [known[name] for name in wanted], settings, jobs)
    console.print(f"{len(wanted)} variant(s) in {time.perf_counter() - started:.0f} s ({jobs} at a time)")
    print_table(reports, markdown=args.markdown)
    if args.json:
        with open(args.json, "wb") as file:
            file.write(orjson.dumps(reports, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    return 0


def run_variants(inputs: Any, variants: list, settings: Any, jobs: int) -> dict[str, dict[str, Any]]:
    """Each variant's report, in the order asked; ``jobs`` > 1 simulates them in forked processes
    (each variant is independent: its own processors, bus and stream, from the same seed)."""
    from fastci.simulate.ablation import simulate_variant

    def done(name: str, report: dict[str, Any]) -> None:
        console.print(f"  {name}: done in {report['wall_s']:.0f} s")

    if jobs <= 1:
        reports = {}
        for variant in variants:
            console.print(f"simulating {variant.name} ...")
            reports[variant.name] = _timed(simulate_variant, inputs, variant, settings)
            done(variant.name, reports[variant.name])
        return reports
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    global _INPUTS
    _INPUTS = inputs  # inherited by the forked workers, not pickled
    console.print(f"simulating {', '.join(v.name for v in variants)} ...")
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {v.name: pool.submit(_simulate_forked, v, settings) for v in variants}
        reports = {}
        for name, future in futures.items():
            reports[name] = future.result()
            done(name, reports[name])
    return reports


_INPUTS: Any = None


def _simulate_forked(variant: Any, settings: Any) -> dict[str, Any]:
    from fastci.simulate.ablation import simulate_variant

    return _timed(simulate_variant, _INPUTS, variant, settings)


def _timed(simulate: Any, inputs: Any, variant: Any, settings: Any) -> dict[str, Any]:
    started = time.perf_counter()
    report = simulate(inputs, variant, settings)
    report["wall_s"] = time.perf_counter() - started
    return report


def minutes(seconds: float | None) -> str:
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    return f"{seconds / 60:.1f}"


def cut(value: float, baseline: float) -> str:
    return "" if not baseline or math.isnan(value) or math.isnan(baseline) else f"-{1 - value / baseline:.1%}"


def tables(reports: dict[str, dict[str, Any]]) -> list[tuple[list[str], list[list[str]]]]:
    """The ablation as two tables: latency and cost; the pool, nightly and faults."""
    baseline = reports.get("run-everything")
    first, second = [], []
    for name, r in reports.items():
        base_latency = baseline["ci_latency_mean_s"] if baseline and name != "run-everything" else 0.0
        base_chips = baseline["presubmit_chip_hours"] if baseline and name != "run-everything" else 0.0
        first.append(
            [
                name,
                f"{r['kept_share']:.1%}",
                f"{r['models_per_hardware_change']:.1f}",
                f"{minutes(r['ci_latency_mean_s'])} / {minutes(r['ci_latency_p90_s'])}",
                cut(r["ci_latency_mean_s"], base_latency),
                f"{minutes(r['hardware_p50_s'])} / {minutes(r['hardware_p90_s'])}",
                f"{r['presubmit_chip_hours']:,.0f}",
                cut(r["presubmit_chip_hours"], base_chips),
                f"{r['unfinished']} of {r['changes']}",
            ]
        )
        nightly = "not done" if r["nightly_done_h"] is None else f"{r['nightly_done_h']:.1f} h"
        waits = ", ".join(f"{k} {minutes(r['waits_p50_s'][k])}/{minutes(v)}" for k, v in r["waits_p90_s"].items())
        caught = f"{r['caught']} of {r['faults']}" + (f" ({r['pending']} pending)" if r["pending"] else "")
        second.append(
            [
                name,
                nightly,
                waits,
                caught,
                f"{minutes(r['first_failure_p50_s'])} / {minutes(r['first_failure_p90_s'])}",
                ", ".join(f"{k} {v}" for k, v in sorted(r["preemptions"].items())) or "0",
            ]
        )
    return [
        (
            [
                "variant",
                "tests kept",
                "models per hw change",
                "CI latency mean / p90 (min)",
                "vs run-everything",
                "hw result p50 / p90 (min)",
                "presubmit chip-h",
                "vs run-everything",
                "unfinished",
            ],
            first,
        ),
        (
            [
                "variant",
                "nightly done (from 00:00)",
                "queue wait p50/p90 by class (min)",
                "faults caught",
                "first failure p50 / p90 (min)",
                "preemptions",
            ],
            second,
        ),
    ]


def print_table(reports: dict[str, dict[str, Any]], markdown: bool = False) -> None:
    for columns, rows in tables(reports):
        if markdown:
            out.print("| " + " | ".join(columns) + " |", markup=False)
            out.print("|" + "---|" * len(columns), markup=False)
            for row in rows:
                out.print("| " + " | ".join(row) + " |", markup=False)
            out.print("", markup=False)
        else:
            print_rows(columns, [tuple(row) for row in rows])
    baseline, final = reports.get("run-everything"), reports.get("+workload optimisation")
    if baseline and final:
        latency = 1 - final["ci_latency_mean_s"] / baseline["ci_latency_mean_s"]
        chips = 1 - final["presubmit_chip_hours"] / baseline["presubmit_chip_hours"]
        console.print(
            f"every part on vs run-everything: CI latency -{latency:.1%} (paper -{PAPER_LATENCY_CUT:.1%}), "
            f"presubmit chip-hours -{chips:.1%} (paper -{PAPER_CHIP_CUT:.1%}); presubmit hardware result p90 "
            f"{minutes(final['hardware_p90_s'])} min (target {PRESUBMIT_P90_TARGET_MIN}); nightly done "
            + ("never" if final["nightly_done_h"] is None else f"{final['nightly_done_h']:.1f} h after 00:00")
            + f" (target {NIGHTLY_TARGET_H:g} h); faults caught {final['caught']} of {final['faults']}"
        )
