"""How noisy a throughput run's ratio to its peers is on this host, and what the slow-node gate makes of it.

1. Real runs: the fleet simulation's throughput test (convnet-small bf16, 12 steps, interleaved step
   by step with a reference chip) on a healthy chip and on a chip 10% slower (``KernelClock``'s
   slowdown), ``--runs`` each. Printed: the spread of log(run level / healthy median) for the run
   statistics the attribution could use (median of the samples, 20%-trimmed mean, ratio of sums).
2. The gate (``fastci.fleet.slowness``), judged the way ``node-state`` judges it (after every new
   ratio, over the newest 24): how often a healthy node is ever called suspect or quarantined in
   ``--looks`` runs, and after how many runs a node that turns 10% slower is, with each run's log-ratio drawn
   from a Student t (3 degrees of freedom: heavy tails, as the host's bursts give) scaled to a noise
   level (the measured one and a few others). This part draws its noise: it calibrates the statistic,
   while the fleet simulation (bench/fleet_health.py) measures the whole path on real runs.

    .venv/bin/python bench/fleet_slow_gate.py [--runs 15] [--trials 400] [--looks 16]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.fleet.failure_attribution import TRIM
from fastci.fleet.slowness import SlowGate, judge
from fastci.simulate.fleet_faults import FleetConfig, ThroughputRig

HEALTHY_FIRST = 4  # runs a slow node had before it turned slow (about the fleet simulation's 12 h)


def robust_sd(x: np.ndarray) -> float:
    return float(1.4826 * np.median(np.abs(x - np.median(x))))


def measure(runs: int) -> float:
    rig = ThroughputRig(FleetConfig().throughput_steps)
    statistics: dict[str, dict[float, list[float]]] = {"median": {}, "trimmed mean": {}}
    for _ in range(runs):
        for slowdown in (0.0, 0.1):
            samples, _ = rig.samples("convnet-small", "bf16", slowdown)
            statistics["median"].setdefault(slowdown, []).append(float(np.median(samples)))
            statistics["trimmed mean"].setdefault(slowdown, []).append(float(stats.trim_mean(samples, TRIM)))
    print(f"{'run statistic':<14} {'healthy: robust sd of log':>26} {'sd':>6} {'slow: mean log ratio':>21} {'sd':>6}")
    noise = 0.0
    for name, by_slowdown in statistics.items():
        healthy, slow = np.log(by_slowdown[0.0]), np.log(by_slowdown[0.1])
        reference = np.median(healthy)
        print(
            f"{name:<14} {robust_sd(healthy - reference):>26.3f} {np.std(healthy):>6.3f} "
            f"{np.mean(slow - reference):>+21.3f} {np.std(slow):>6.3f}"
        )
        if name == "trimmed mean":
            noise = robust_sd(healthy - reference)
    return noise


def calibrate(noise_levels: list[float], trials: int, looks: int, gate: SlowGate) -> None:
    print(
        f"\ngate: >= {gate.min_runs} runs, Wilcoxon p < {gate.suspect_p:g} / {gate.quarantine_p:g}, median < "
        f"{1 - gate.min_effect:g}, 95% CI top < {gate.suspect_ci_high:g} / {gate.quarantine_ci_high:g}; "
        f"{trials} healthy node histories of {looks} runs and {trials // 4} of nodes that turn 10% slower after "
        f"{HEALTHY_FIRST} healthy runs (runs counted from the first slow one) per noise level"
    )
    print(
        f"{'noise (sd of log ratio)':>24} {'healthy ever suspect':>21} {'ever quarantined':>17} "
        f"{'slow: suspect by run (median, 90%)':>35} {'quarantined by run':>19} {'caught in 24':>13}"
    )
    for sigma in noise_levels:
        rng = np.random.default_rng(round(sigma * 1000))
        healthy = [_history(gate, sigma, 1.0, looks, rng) for _ in range(trials)]
        slow = [_history(gate, sigma, 0.9, 24, rng, healthy_first=HEALTHY_FIRST) for _ in range(trials // 4)]
        suspect = [s for s, _ in slow if s]
        quarantine = [q for _, q in slow if q]
        print(
            f"{sigma:>24.3f} {np.mean([s is not None for s, _ in healthy]):>21.1%} "
            f"{np.mean([q is not None for _, q in healthy]):>17.1%} "
            f"{np.median(suspect) if suspect else float('nan'):>28.0f}, "
            f"{np.quantile(suspect, 0.9) if suspect else float('nan'):>4.0f} "
            f"{np.median(quarantine) if quarantine else float('nan'):>19.0f} {len(quarantine) / len(slow):>13.0%}"
        )


def _history(
    gate: SlowGate, sigma: float, level: float, looks: int, rng, healthy_first: int = 0
) -> tuple[int | None, int | None]:
    """Runs until suspect and until quarantined, counted from the first slow run (after ``healthy_first``
    healthy ones, which stay in the judged window as they would for a node that turns slow)."""
    ratios: list[float] = []
    suspect = quarantine = None
    for i in range(healthy_first + looks):
        shift = 1.0 if i < healthy_first else level
        ratios.append(shift * float(np.exp(rng.standard_t(3) * sigma / np.sqrt(3))))  # t3 scaled to sd sigma
        verdict = judge(ratios[-gate.max_runs :], i, gate)
        after = i + 1 - healthy_first
        if suspect is None and verdict.level in ("suspect", "quarantine") and after > 0:
            suspect = after
        if quarantine is None and verdict.level == "quarantine" and after > 0:
            quarantine = after
    return suspect, quarantine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--looks", type=int, default=16, help="runs of a healthy node judged (about 3 days of the sim)")
    args = parser.parse_args()
    started = time.perf_counter()
    noise = measure(args.runs) if args.runs else 0.05
    print(f"({2 * args.runs} real interleaved runs in {time.perf_counter() - started:.0f} s)")
    calibrate(sorted({round(noise, 3), 0.03, 0.06, 0.09}), args.trials, args.looks, SlowGate())


if __name__ == "__main__":
    main()
