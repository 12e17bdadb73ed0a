"""Detection probability and false alarms of the nightly performance gate, by noise and repeats.

A model-night: the baseline is built as the detector builds it from the 10 previous nights (each
night kept as a sketch of at most 256 order statistics, the newest nights up to 1,024 samples); the
night carries ``repeats`` samples after warmup with multiplicative run-to-run noise; a night that
fails the gate (one-sided Mann-Whitney p < 0.01 and the 95%
bootstrap interval of the median ratio below 0.99) gets a confirmation run with the same repeats,
and only a second failure is an alert - the detector's rule (fastci/regression/detector.py).

- detection: the night (and its rerun) is 2% slower; an alert is a detection;
- false alarm: nothing changed; an alert is a false alarm;
- noisy night: the night alone is 3% slower (a night-level disturbance), its rerun is not.

A last table runs the same nights through the real ``regression-detector`` processor (with the
seeded runner of fastci.regression.synthetic answering its confirmation requests) to check that the
processor detects what the model says. Also printed: the power table (repeats needed per noise
level for >= 95% detection, by the normal
approximation, checked by simulation with more trials), and the cost of the fast bootstrap against
scipy.stats.bootstrap measured in the same run. Noise is a seeded model (this is a detection
benchmark); 2% of samples are outliers 10-30% slow, as GC pauses and preemptions make them.

    .venv/bin/python bench/regression_detection.py [--trials 300] [--check-trials 1000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.contracts.regression_alerts import RegressionAlert
from fastci.contracts.runs import RunRequested
from fastci.regression.detector import NIGHT_SAMPLES, POOL_SAMPLES, RegressionDetectorProcessor
from fastci.regression.synthetic import Scenario
from fastci.runtime.memory import MemoryRuntime
from fastci.shared.perfstats import PerfGate, compare, median_ratio_interval, repeats_needed, sketch
from fastci.topology import SYSTEM

GATE = PerfGate()
NOISES = (0.01, 0.02, 0.03, 0.04, 0.05)
REPEATS = (10, 30, 100, 300, 1000)
BASELINE_NIGHTS, POOL = 10, POOL_SAMPLES
OUTLIERS = 0.02


def draw(rng: np.random.Generator, level: float, noise: float, n: int) -> np.ndarray:
    x = level * (1 + noise * rng.standard_normal(n))
    slow = rng.random(n) < OUTLIERS
    x[slow] *= 1 - rng.uniform(0.1, 0.3, slow.sum())
    return x


def night(seed: int, noise: float, repeats: int, night_drop: float, rerun_drop: float) -> bool:
    """One model-night; True when it raises an alert."""
    rng = np.random.default_rng(seed)
    nights = [sketch(draw(rng, 1000, noise, repeats), NIGHT_SAMPLES) for _ in range(BASELINE_NIGHTS)]
    pool: list[float] = []
    for kept in reversed(nights):  # newest first, as the detector's pool
        room = POOL - len(pool)
        if room <= 0:
            break
        pool.extend(kept if len(kept) <= room else sketch(kept, room))
    baseline = np.asarray(pool)
    first = compare(baseline, draw(rng, 1000 * (1 - night_drop), noise, repeats), "higher", GATE, seed)
    if not first.regression:
        return False
    return compare(baseline, draw(rng, 1000 * (1 - rerun_drop), noise, repeats), "higher", GATE, seed + 1).regression


def rate(trials: int, offset: int, **kwargs) -> float:
    return sum(night(offset + t, **kwargs) for t in range(trials)) / trials


def through_processor(trials: int, noise: float, repeats: int, drop: float) -> float:
    """Share of model-nights the real processor alerts on (nights and confirmation runs from Scenario)."""
    alerts = 0
    for seed in range(trials):
        scenario = Scenario(
            noise=noise,
            drop=drop,
            repeats=repeats,
            changes=1,
            culprit=0,
            seed=60_000 + seed,
            baseline_nights=BASELINE_NIGHTS,
        )
        pipeline = MemoryRuntime(SYSTEM, [RegressionDetectorProcessor()], responders={RunRequested.TOPIC: scenario.run})
        pipeline.publish(scenario.nightly_results())
        alerts += any(a.stage == "detected" for a in pipeline.of_topic(RegressionAlert.TOPIC))
    return alerts / trials


def stable_history_alerts(trials: int, noise: float, repeats: int, nights: int = 60) -> float:
    """Alerts per model-night over long stable histories through the processor: the change-point path
    alerts without a confirmation run, so its false alarms are measured here."""
    alerts = 0
    for seed in range(trials):
        scenario = Scenario(
            noise=noise, repeats=repeats, changes=1, culprit=None, seed=70_000 + seed, baseline_nights=nights
        )
        pipeline = MemoryRuntime(SYSTEM, [RegressionDetectorProcessor()], responders={RunRequested.TOPIC: scenario.run})
        pipeline.publish(scenario.nightly_results())
        alerts += sum(a.stage == "detected" for a in pipeline.of_topic(RegressionAlert.TOPIC))
    return alerts / (trials * (nights + 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=300, help="model-nights per cell of the grid")
    parser.add_argument("--check-trials", type=int, default=1000, help="model-nights per power-table check")
    parser.add_argument("--processor-trials", type=int, default=200, help="model-nights per processor check")
    args = parser.parse_args()
    started = time.perf_counter()

    print(
        "Detection of a 2% drop (alert = night and confirmation rerun both fail the gate), "
        f"{args.trials} model-nights per cell"
    )
    print("noise  " + "".join(f"{f'{r} rep':>12}" for r in REPEATS))
    for noise in NOISES:
        cells = [rate(args.trials, 10_000, noise=noise, repeats=r, night_drop=0.02, rerun_drop=0.02) for r in REPEATS]
        print(f"{noise:>4.0%}   " + "".join(f"{c:>12.1%}" for c in cells))
    print(f"\nFalse alarms with no change, {args.trials} model-nights per cell")
    print("noise  " + "".join(f"{f'{r} rep':>12}" for r in REPEATS))
    for noise in NOISES:
        cells = [rate(args.trials, 20_000, noise=noise, repeats=r, night_drop=0.0, rerun_drop=0.0) for r in REPEATS]
        print(f"{noise:>4.0%}   " + "".join(f"{c:>12.1%}" for c in cells))

    print("\nPower table: repeats per run for >= 95% detection of a 2% drop (night + rerun). 'model' is the normal")
    print(f"approximation (perfstats.repeats_needed); 'measured' raises it by 10% steps until {args.check_trials}")
    print("simulated model-nights detect >= 95%; false alarms and noisy-night alerts are measured at that count")
    print(f"{'noise':>5} {'model':>6} {'measured':>9} {'detected':>9} {'false alarms':>13} {'noisy night alerts':>19}")
    measured: dict[float, int] = {}
    for noise in NOISES:
        model = repeats_needed(noise, baseline_size=POOL) or 0
        repeats = model
        while True:
            detected = rate(args.check_trials, 30_000, noise=noise, repeats=repeats, night_drop=0.02, rerun_drop=0.02)
            if detected >= 0.95 or repeats > 20 * model:
                break
            repeats = int(repeats * 1.1) + 1
        false = rate(args.check_trials, 40_000, noise=noise, repeats=repeats, night_drop=0.0, rerun_drop=0.0)
        noisy = rate(args.check_trials // 4, 50_000, noise=noise, repeats=repeats, night_drop=0.03, rerun_drop=0.0)
        print(f"{noise:>5.0%} {model:>6} {repeats:>9} {detected:>9.1%} {false:>13.2%} {noisy:>19.2%}")
        measured[noise] = repeats

    print(
        "\nThrough the regression-detector processor at those repeats (no outliers), "
        f"{args.processor_trials} model-nights each"
    )
    print(f"{'noise':>5} {'repeats':>8} {'detected':>9} {'false alarms':>13}")
    for noise in NOISES:
        detected = through_processor(args.processor_trials, noise, measured[noise], 0.02)
        false = through_processor(args.processor_trials, noise, measured[noise], 0.0)
        print(f"{noise:>5.0%} {measured[noise]:>8} {detected:>9.1%} {false:>13.2%}")

    print(
        f"\nFalse alarms per model-night over 60 stable nights through the processor (gate + change points), "
        f"{max(10, args.processor_trials // 20)} histories each"
    )
    print(f"{'noise':>5} " + "".join(f"{f'{r} rep':>10}" for r in (5, 30, 100)))
    for noise in (0.01, 0.03, 0.05):
        cells = [stable_history_alerts(max(10, args.processor_trials // 20), noise, r) for r in (5, 30, 100)]
        print(f"{noise:>5.0%} " + "".join(f"{c:>10.2%}" for c in cells))

    rng = np.random.default_rng(1)
    base, cand = draw(rng, 1000, 0.02, POOL), draw(rng, 980, 0.02, 110)
    t0 = time.perf_counter()
    for i in range(20):
        median_ratio_interval(base, cand, 0.95, 2000, i)
    fast = (time.perf_counter() - t0) / 20
    t0 = time.perf_counter()
    for i in range(3):
        stats.bootstrap(
            (base, cand),
            lambda b, c, axis=-1: np.median(c, axis=axis) / np.median(b, axis=axis),
            vectorized=True,
            paired=False,
            n_resamples=2000,
            method="percentile",
            rng=np.random.default_rng(i),
        )
    slow = (time.perf_counter() - t0) / 3
    print(
        f"\nbootstrap of the median ratio (1,024 + 110 samples, 2,000 resamples): exact-order-statistic draw "
        f"{fast * 1000:.1f} ms, scipy.stats.bootstrap {slow * 1000:.1f} ms: {slow / fast:.0f}x faster (same run)"
    )
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
