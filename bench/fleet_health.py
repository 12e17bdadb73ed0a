"""A fleet of 16 nodes with three faulty ones and a software regression, through the real fleet processors.

One node throws XID errors (and crashes runs it hosts), one computes 10% slower (its runs pass: only
throughput shows it), one makes two-node runs time out (NCCL); the same nights qualify a candidate
bundle with the emulated stack's kernel-rounding-bug, which fails bf16 inference on every node.
Per seed: how many signals and runs (all runs it hosted; and of them, the passing throughput runs,
each one throughput ratio) each faulty node took to be suspect and quarantined, its failed
tests rerun on healthy nodes of its revision and their outcome, and what was misattributed: healthy
nodes made suspect or quarantined, attributions of the regression's failures left standing, nodes
blamed with them, tests marked flaky that are not. See fastci/simulate/fleet_faults.py for the fleet.

    .venv/bin/python bench/fleet_health.py [--seeds 3] [--first-seed 0] [--days 3] [--verbose] [--data-dir DIR]

With ``--data-dir``, the first seed's input events (results, signals, the owner map) are replayed
into an embedded log there an hour of simulated time at a time, running the embedded runtime (every
processor) after each hour; then ``fastci --data-dir DIR views refresh``, ``sql`` and ``report
nightly`` show the fleet's history.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.fleet.rules import RULES
from fastci.simulate.fleet_faults import (
    FleetConfig,
    FleetSimulation,
    detections,
    flake_rate,
    misattribution,
    replay_embedded,
    slow_false_suspects,
    throughput_noise,
)


def show(value) -> str:
    return "-" if value is None else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--days", type=int, default=3)
    parser.add_argument(
        "--root-cause-accuracy",
        type=float,
        default=1.0,
        help="how often a timed-out two-node run names the node that did not join (else its peer)",
    )
    parser.add_argument("--verbose", action="store_true", help="print every state change as it happens")
    parser.add_argument("--data-dir", type=Path, help="write the first seed's input events to an embedded log here")
    args = parser.parse_args()
    gate = RULES.slow
    print(
        f"fleet: 16 nodes x 8 chips, rev-a node-00..07, rev-b node-08..15, {args.days} days per seed; faults from hour "
        f"{FleetConfig().onset_h:g};"
    )
    print(
        "kernel-rounding-bug candidate bundle qualified from night 1. "
        "Thresholds: README 'Node health' table; throughput: "
        f"Wilcoxon p < {gate.suspect_p:g} (suspect) / {gate.quarantine_p:g} (quarantine) over >= {gate.min_runs} runs, "
        f"median ratio < {1 - gate.min_effect:g}, 95% CI top < {gate.suspect_ci_high:g} / {gate.quarantine_ci_high:g}"
    )
    header = (
        f"{'seed':>4} {'node':<8} {'fault':<14} {'suspect h':>9} {'quar. h':>7} {'signals s/q':>11} {'runs s/q':>9} "
        f"{'thr. runs':>9} {'quarantine rule':<20} {'reruns':>6} {'passed':>6} {'regr. reruns':>12} "
        f"{'failed again':>12} "
        f"{'back':>5}"
    )
    summary: dict[str, list] = {}
    misses: list[str] = []
    started = time.perf_counter()
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        config = FleetConfig(seed=seed, days=args.days, root_cause_accuracy=args.root_cause_accuracy)
        outcome = FleetSimulation(config, progress=print if args.verbose else None).run()
        if args.data_dir and seed == args.first_seed:
            hours = replay_embedded(outcome.inputs, args.data_dir)
            print(
                f"replayed {len(outcome.inputs):,} input events into {args.data_dir} through the embedded runtime "
                f"({hours} slices of an hour); try 'fastci --data-dir {args.data_dir} views refresh', then "
                f"'report nightly' or 'sql \"SELECT * FROM fleet_node_states\"'"
            )
        print(
            f"\nseed {seed}: {len(outcome.results):,} results, {len(outcome.outputs):,} processor outputs, "
            f"{outcome.seconds:.0f} s ({outcome.throughput_seconds:.0f} s in real throughput runs)"
        )
        print(header)
        for d in detections(outcome):
            print(
                f"{seed:>4} {d.node:<8} {d.fault:<14} {show(d.suspect_h):>9} {show(d.quarantined_h):>7} "
                f"{show(d.signals_to_suspect) + '/' + show(d.signals_to_quarantine):>11} "
                f"{show(d.runs_to_suspect) + '/' + show(d.runs_to_quarantine):>9} "
                f"{show(d.throughput_runs_to_quarantine):>9} "
                f"{show(d.quarantine_rule):<20} "
                f"{d.reruns:>6} {d.reruns_passed:>6} {d.regression_reruns:>12} {d.regression_reruns_failed:>12} "
                f"{'yes' if d.returned else 'no':>5}"
            )
            summary.setdefault(d.fault, []).append(d)
        wrong = misattribution(outcome)
        noise, ratios = throughput_noise(outcome)
        flaky, runs = flake_rate(outcome)
        print(
            f"     misattribution: healthy nodes suspect {wrong.healthy_nodes_suspect or 'none'} "
            f"(by the throughput rule: {slow_false_suspects(outcome) or 'none'}), quarantined "
            f"{wrong.healthy_nodes_quarantined or 'none'}; regression failures attributed and not withdrawn "
            f"{wrong.regression_attributions}, nodes blamed with them {wrong.regression_blamed_nodes or 'none'}"
        )
        print(
            f"     tests ever marked flaky {wrong.flaky_marked or 'none'} (wrongly: {wrong.wrongly_flaky or 'none'}; "
            f"verdicts withdrawn: {wrong.flaky_withdrawn or 'none'}); "
            f"hardware flake rate {flaky}/{runs} = {flaky / max(runs, 1):.2%}; healthy nodes' throughput "
            f"log-ratio noise (robust sd) {noise:.3f} over {ratios} runs"
        )
        misses.append(
            f"{len(wrong.healthy_nodes_suspect)}/{len(wrong.healthy_nodes_quarantined)}/"
            f"{wrong.regression_attributions}/{len(wrong.regression_blamed_nodes)}/{len(wrong.wrongly_flaky)}"
        )
    print(f"\nover {args.seeds} seed(s), {time.perf_counter() - started:.0f} s (a shared, loaded machine):")
    print(
        f"{'fault':<14} {'quarantined':>11} {'hours to suspect':>17} {'hours to quar.':>15} {'signals to quar.':>17} "
        f"{'runs to quar.':>14} {'throughput runs':>16} {'reruns passed':>14} {'regression reruns failed again':>31}"
    )
    for fault, rows in summary.items():
        caught = [d for d in rows if d.quarantined_h is not None]

        def spread(values) -> str:
            values = [v for v in values if v is not None]
            return (
                "-" if not values else f"{min(values)}-{max(values)}" if min(values) != max(values) else str(values[0])
            )

        print(
            f"{fault:<14} {len(caught):>5} of {len(rows):<3} {spread([d.suspect_h for d in rows]):>17} "
            f"{spread([d.quarantined_h for d in rows]):>15} {spread([d.signals_to_quarantine for d in rows]):>17} "
            f"{spread([d.runs_to_quarantine for d in rows]):>14} "
            f"{spread([d.throughput_runs_to_quarantine for d in rows]):>16} "
            f"{sum(d.reruns_passed for d in rows):>7} of {sum(d.reruns for d in rows):<4} "
            f"{sum(d.regression_reruns_failed for d in rows):>23} of {sum(d.regression_reruns for d in rows):<5}"
        )
    print(
        "misattribution per seed (healthy suspect / healthy quarantined / regression attributions standing / "
        f"nodes blamed for the regression / tests wrongly flaky): {', '.join(misses)}"
    )
    print(f"seconds per seed: {(time.perf_counter() - started) / args.seeds:.0f}")


if __name__ == "__main__":
    main()
