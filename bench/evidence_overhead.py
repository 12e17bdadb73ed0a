"""Evidence collection: what it costs a test suite, and what sampling finds of what tracing finds.

Runs the same pytest suite without evidence, with ``--fastci-evidence`` sampling at a few rates,
and with tracing; the runs are interleaved, repeated, and the fastest of each kept. Wall times
are printed as ratios against the baseline of this run. Recall of a sampling run: the share of
the (test, code unit) pairs tracing found (every frame of every stack counts) that it found too;
precision: the share of its pairs that tracing found as well (mean over the repeats).

Two suites: this project's fast unit tests (milliseconds each: the hard case for sampling), and
a generated one whose tests each run two functions for about 10 to 80 ms (accelerator tests
are longer).

    .venv/bin/python bench/evidence_overhead.py [--repeats 3] [--rates 100 200 1000] [--blocking-rates 200 1000]
                                                [--tests tests/test_x.py ...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fastci.evidence.stacks import units_of
from fastci.runtime.embedded import DataDir

DEFAULT_TESTS = [
    "tests/test_positions.py",
    "tests/test_driver.py",
    "tests/test_events.py",
    "tests/test_test_history.py",
    "tests/test_correctness_gates.py",
    "tests/test_owners.py",
    "tests/test_bisect.py",
]


def generated_suite(root: Path, tests: int = 40, functions: int = 20) -> list[str]:
    """A git work tree with ``work.py`` (functions that spin) and tests that call two of them."""
    (root / "tests").mkdir(parents=True)
    # Work counted in iterations, not time, so what evidence costs shows in the wall time
    # (about 40,000 iterations a millisecond on the machine this was written on).
    body = "def spin(ms):\n    total = 0\n    for i in range(ms * 40_000):\n        total += i\n    return total\n"
    body += "".join(f"\n\ndef f{i}(ms):\n    spin(ms)\n    return {i}\n" for i in range(functions))
    (root / "work.py").write_text(body)
    cases = "import work\n" + "".join(
        f"\n\ndef test_{i}():\n    assert work.f{i % functions}({10 + 10 * (i % 8)}) == {i % functions}\n"
        f"    assert work.f{(i * 7 + 3) % functions}(10) == {(i * 7 + 3) % functions}\n"
        for i in range(tests)
    )
    (root / "tests" / "test_work.py").write_text(cases)
    for git in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.email=b@example.com", "-c", "user.name=b", "commit", "-q", "-m", "suite"],
    ):
        subprocess.run(["git", "-C", str(root), *git], check=True, capture_output=True)
    return ["tests"]


def run(tests: list[str], flags: list[str], data_dir: Path, cwd: Path = ROOT) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FASTCI_")}
    env |= {"FASTCI_DATA_DIR": str(data_dir), "FASTCI_RUN_ID": "bench"}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *flags, *tests],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"pytest {' '.join(flags)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return elapsed


def pairs(data_dir: Path) -> tuple[set[tuple[str, str, str]], int]:
    """(test, relpath, qualname) pairs of the evidence in ``data_dir``, and how many tests have evidence."""
    found: set[tuple[str, str, str]] = set()
    tests = 0
    for record in DataDir(data_dir).log.topic("evidence").read():
        event = orjson.loads(record.payload)
        tests += 1
        for stack in event["stacks"]:
            found |= {(event["test_id"], path, qualname) for path, qualname in units_of(stack["stack"])}
    return found, tests


def bench(
    name: str, tests: list[str], cwd: Path, rates: list[float], blocking: list[float], repeats: int, scratch: Path
) -> None:
    configs: dict[str, list[str]] = {"no evidence": []}
    for rate in rates:
        configs[f"sampling {rate:g} Hz"] = ["--fastci-evidence", "--fastci-evidence-rate", f"{rate:g}"]
    for rate in blocking:
        configs[f"sampling {rate:g} Hz blocking"] = [
            "--fastci-evidence",
            "--fastci-evidence-rate",
            f"{rate:g}",
            "--fastci-evidence-blocking",
        ]
    configs["tracing"] = ["--fastci-evidence", "--fastci-evidence-method", "tracing"]

    times: dict[str, list[float]] = {config: [] for config in configs}
    for repeat in range(repeats):  # interleaved: drift of the machine hits every config alike
        for number, (config, flags) in enumerate(configs.items()):
            times[config].append(run(tests, flags, scratch / f"{name}-{number}-{repeat}", cwd))
    evidence = {
        config: [pairs(scratch / f"{name}-{number}-{r}") for r in range(repeats)]
        for number, config in enumerate(configs)
        if config != "no evidence"
    }

    exact, traced_tests = evidence["tracing"][0]
    base = min(times["no evidence"])
    print(f"\n{name}: {traced_tests} tests; best of {repeats} interleaved runs; {os.cpu_count()} cores")
    print(
        f"{'configuration':<30} {'wall s':>7} {'ratio':>6} {'tests w/ evidence':>18} {'pairs':>6} "
        f"{'recall':>7} {'precision':>9}"
    )
    for config in configs:
        best = min(times[config])
        row = f"{config:<30} {best:7.2f} {best / base:6.2f}"
        if config != "no evidence":
            runs = evidence[config]  # sampling varies run to run: means over the repeats
            recall = sum(len(found & exact) / len(exact) for found, _ in runs) / len(runs)
            precision = sum(len(found & exact) / len(found) if found else 1.0 for found, _ in runs) / len(runs)
            with_evidence = sum(tests for _, tests in runs) / len(runs)
            mean_pairs = sum(len(found) for found, _ in runs) / len(runs)
            row += f" {with_evidence:18.1f} {mean_pairs:6.0f} {recall:7.1%} {precision:9.1%}"
        print(row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", nargs="+", default=DEFAULT_TESTS, help="this project's test files to run")
    parser.add_argument("--rates", nargs="+", type=float, default=[100.0, 200.0, 1000.0], help="sampling rates (Hz)")
    parser.add_argument(
        "--blocking-rates",
        nargs="*",
        type=float,
        default=[200.0, 1000.0],
        help="rates also measured with --fastci-evidence-blocking (py-spy pauses the tests)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fastci-bench-evidence-") as scratch:
        bench(
            f"this project's unit tests ({len(args.tests)} files)",
            args.tests,
            ROOT,
            args.rates,
            args.blocking_rates,
            args.repeats,
            Path(scratch),
        )
        suite = Path(scratch) / "suite"
        bench(
            "generated suite (tests of 20-90 ms)",
            generated_suite(suite),
            suite,
            args.rates,
            args.blocking_rates,
            args.repeats,
            Path(scratch),
        )


if __name__ == "__main__":
    main()
