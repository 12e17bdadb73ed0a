"""fastci's change-point detector against Apache Otava, MongoDB's signal-processing-algorithms and
ruptures (PELT), on the same seeded nightly series.

Series are nightly medians (60 nights; per-night noise of the median 0.5% or 1%):
- sustained: a 2% drop at night 40, cut k nights after it (k = 1..5): is a change found at 40 +- 1?
- stable: no change: is any change point reported (a false alarm over 60 nights)?
- noisy night: one night 4% low at night 30, the rest stable: is a change point reported?
The other libraries run in their own venvs (bench/setup_cpd_venvs.sh) as subprocesses reading the
same series; a tool whose venv is missing is skipped. Timing is per series, in the same run.

    bench/setup_cpd_venvs.sh .bench-venvs
    .venv/bin/python bench/changepoint_compare.py [--venvs .bench-venvs] [--trials 200]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.regression.changepoint import change_points

NIGHTS, CHANGE_AT, DROP = 60, 40, 0.02

RUNNERS = {
    "otava": """
from otava.analysis import compute_change_points
def detect(series):
    points, _ = compute_change_points(series, window_len=50, max_pvalue=0.001, min_magnitude=0.01)
    return [int(p.index) for p in points]
""",
    "spa": """
import numpy as np
from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive
def detect(series):
    np.random.seed(0)
    return sorted(int(i) for i in e_divisive(series, pvalue=0.01, permutations=100))
""",
    "ruptures": """
import numpy as np, ruptures
def detect(series):
    x = np.asarray(series)
    sigma = np.median(np.abs(np.diff(x) - np.median(np.diff(x)))) / 0.6745 / np.sqrt(2)
    ends = ruptures.Pelt(model="l2", min_size=2, jump=1).fit(x).predict(pen=2 * sigma**2 * np.log(len(x)) * 2)
    return [int(e) for e in ends if e < len(x)]
""",
}
DRIVER = """
import json, sys, time
{runner}
series = json.load(open(sys.argv[1]))
started = time.perf_counter()
found = [detect(s) for s in series]
json.dump({{"found": found, "seconds": time.perf_counter() - started}}, sys.stdout)
"""


def ours(series: list[float]) -> list[int]:
    return [p.index for p in change_points(series, min_size=2, max_p=0.001, min_effect=0.01)]


def make(kind: str, noise: float, seed: int, cut: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    x = 1000 * (1 + noise * rng.standard_normal(NIGHTS))
    if kind == "sustained":
        x[CHANGE_AT:] *= 1 - DROP
        x = x[: CHANGE_AT + cut]
    elif kind == "noisy":
        x[30] *= 0.96
    return x.tolist()


def score(kind: str, found: list[int]) -> bool:
    if kind == "sustained":
        return any(abs(i - CHANGE_AT) <= 1 for i in found)
    return bool(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venvs", type=Path, default=Path(".bench-venvs"))
    parser.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    cases = [("sustained", noise, cut) for noise in (0.005, 0.01) for cut in (1, 2, 3, 5)]
    cases += [("stable", noise, 0) for noise in (0.005, 0.01)] + [("noisy", noise, 0) for noise in (0.005, 0.01)]
    tools = {"fastci": None}
    for name in RUNNERS:
        python = args.venvs / name / "bin" / "python"
        if python.exists():
            tools[name] = python
        else:
            print(f"({name}: no venv at {python}; run bench/setup_cpd_venvs.sh {args.venvs})")
    rows: dict[tuple, dict[str, float]] = {}
    seconds: dict[str, float] = {t: 0.0 for t in tools}
    count = 0
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases:
            kind, noise, cut = case
            series = [make(kind, noise, 1000 * i + cut, cut) for i in range(args.trials)]
            count += len(series)
            path = Path(tmp) / "series.json"
            path.write_text(json.dumps(series))
            rows[case] = {}
            for tool, python in tools.items():
                if python is None:
                    started = time.perf_counter()
                    found = [ours(s) for s in series]
                    seconds[tool] += time.perf_counter() - started
                else:
                    run = subprocess.run(
                        [str(python), "-c", DRIVER.format(runner=RUNNERS[tool]), str(path)],
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    answer = json.loads(run.stdout)
                    found, seconds[tool] = answer["found"], seconds[tool] + answer["seconds"]
                rows[case][tool] = sum(score(kind, f) for f in found) / len(found)
    names = list(tools)
    print(f"{args.trials} series per row; 'sustained' = change found at night 40 +- 1 (higher is better),")
    print("'stable' and 'noisy' = any change point reported over 60 nights (lower is better)")
    print(f"{'series':<34}" + "".join(f"{n:>10}" for n in names))
    for (kind, noise, cut), cells in rows.items():
        label = f"{kind} {noise:.1%} noise" + (f", {cut} night(s) after" if kind == "sustained" else "")
        print(f"{label:<34}" + "".join(f"{cells[n]:>10.1%}" for n in names))
    base = seconds["fastci"] / count
    print(
        f"{'ms per series (ratio to fastci)':<34}"
        + "".join(
            f"{seconds[n] / count * 1000:>5.2f} {seconds[n] / count / base:>3.1f}x"
            if n != "fastci"
            else f"{base * 1000:>10.2f}"
            for n in names
        )
    )


if __name__ == "__main__":
    main()
