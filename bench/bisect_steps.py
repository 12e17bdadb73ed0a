"""Bisect to the culprit among 400 changes at 2% run-to-run noise, through the real processors.

Each trial: 10 stable nights, then 400 commits with one culprit (uniformly placed) that makes the
test 2% slower, then the first bad night. The detector confirms the drop, the planner lists the
400 changes, the bisect runs midpoints with the repeats it asks for (a seeded noise model answers
every run request), until it names a commit. Some trials also bump firmware in the bad night's
bundle (so the bisect must first attribute code vs bundle), and some make a driver bump the culprit.

    .venv/bin/python bench/bisect_steps.py [--trials 200] [--noise 0.02]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.contracts.regression_alerts import RegressionAlert
from fastci.contracts.runs import RunRequested
from fastci.regression.synthetic import REPO, Scenario, sha
from fastci.runtime.memory import MemoryRuntime
from fastci.shared.owners import parse_owner_file
from fastci.shared.perfstats import repeats_needed
from fastci.topology import SYSTEM

OWNERS = (
    "* @framework-team\n/fastlm/compiler/ @compiler-team\nlayer:driver @driver-team\nlayer:firmware @firmware-team\n"
)


def trial(seed: int, noise: float, kind: str) -> dict:
    rng_culprit = (seed * 7919) % 400
    if kind == "code":
        scenario = Scenario(noise=noise, culprit=rng_culprit, seed=seed, repeats=repeats_needed(noise) or 100)
    elif kind == "code+firmware":
        scenario = Scenario(
            noise=noise,
            culprit=rng_culprit,
            bumped={"firmware": "fw-8"},
            seed=seed,
            repeats=repeats_needed(noise) or 100,
        )
    else:  # the driver bump is the culprit, among 400 innocent commits and a firmware bump
        scenario = Scenario(
            noise=noise,
            culprit=None,
            bumped={"driver": "dr-545", "firmware": "fw-8"},
            culprit_component="driver",
            seed=seed,
            repeats=repeats_needed(noise) or 100,
        )
    pipeline = MemoryRuntime(SYSTEM, responders={RunRequested.TOPIC: scenario.run})
    pipeline.publish([parse_owner_file(OWNERS, repo=REPO), *scenario.commits()])
    pipeline.publish(scenario.nightly_results())
    final = [a for a in pipeline.of_topic(RegressionAlert.TOPIC) if a.stage in ("culprit", "unresolved")]
    if not final:
        return {"detected": False, "correct": False, "steps": 0, "runs": 0}
    alert = final[0]
    culprit = alert.culprit
    if kind == "driver":
        correct = culprit is not None and culprit.kind == "component" and culprit.component == "driver"
    else:
        correct = culprit is not None and culprit.commit == sha(scenario.first_change + rng_culprit)
    return {"detected": True, "correct": correct, "steps": len(alert.trail), "runs": alert.runs_used}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--noise", type=float, default=0.02)
    args = parser.parse_args()
    limit = math.ceil(math.log2(400)) + 1
    print(f"bisect among 400 changes, {args.noise:.0%} noise, 2% drop; step limit ceil(log2(400)) + 1 = {limit}")
    print("detected: the nightly gate and its confirmation caught the drop (nightly repeats from the power table);")
    print(
        "right culprit and <= limit are among detected regressions (the bisect's own success); 'both' is of all trials"
    )
    print(
        f"{'culprit':<16} {'trials':>6} {'detected':>9} {'right culprit':>14} {'<= limit':>9} "
        f"{'both':>7} {'steps mean':>10} {'max':>4} {'runs mean':>9} {'s/trial':>8}"
    )
    for kind in ("code", "code+firmware", "driver"):
        trials = args.trials if kind == "code" else max(20, args.trials // 4)
        started = time.perf_counter()
        rows = [trial(seed, args.noise, kind) for seed in range(trials)]
        elapsed = (time.perf_counter() - started) / trials
        detected = sum(r["detected"] for r in rows)
        correct = sum(r["correct"] for r in rows)
        within = sum(r["steps"] <= limit for r in rows if r["detected"])
        both = sum(r["correct"] and r["steps"] <= limit for r in rows)
        steps = [r["steps"] for r in rows if r["detected"]]
        runs = [r["runs"] for r in rows if r["detected"]]
        print(
            f"{kind:<16} {trials:>6} {detected / trials:>9.1%} {correct / max(detected, 1):>14.1%} "
            f"{within / max(detected, 1):>9.1%} "
            f"{both / trials:>7.1%} {statistics.mean(steps) if steps else 0:>10.2f} {max(steps, default=0):>4} "
            f"{statistics.mean(runs) if runs else 0:>9.2f} {elapsed:>8.2f}"
        )


if __name__ == "__main__":
    main()
