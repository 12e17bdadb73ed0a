"""Evidence collection: what it costs a test suite on each interpreter, and what sampling finds of
what tracing finds.

Runs each suite without evidence, with ``--fastci-evidence`` sampling and tracing on Python 3.11
(this interpreter: tracing on ``sys.setprofile``), and without evidence and tracing on 3.12
(``--python312``, default ``.venv312`` from ``make test-evidence-312``: tracing on
``sys.monitoring``). The runs are interleaved, repeated, and the fastest of each kept; each line is
one (suite, method) with its wall time and the ratio to the run without evidence on the same
interpreter. Recall of a run: the share of the (test, code unit) pairs 3.11's tracing found (every
frame of every stack counts) that it found too; precision: the share of its pairs that 3.11's
tracing found as well (mean over the repeats). 3.12's tracing should find exactly 3.11's pairs.

Suites: this project's fast unit tests (milliseconds each: the hard case for sampling); a generated
one whose tests each run two functions for about 10 to 80 ms (accelerator tests are longer);
more-itertools at a fixed commit (``--mirror``, cloned into the scratch directory: a real
repository's ~565 short tests of pure-Python functions); autograd (``pip download`` of its sdist
into the scratch directory, or ``--autograd-sdist``: short numeric tests on numpy running through
many small Python functions, the suite tracing on 3.11 cost most on).

    .venv/bin/python bench/evidence_overhead.py [--repeats 3] [--rates 200] [--blocking-rates 200 1000]
        [--suites fastci generated more-itertools autograd] [--python312 .venv312/bin/python] [--without-reads]
        [--mirror /work/.mirror/more-itertools+more-itertools/repo] [--autograd-sdist autograd-1.9.1.tar.gz]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
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
    git_commit(root)
    return ["tests"]


MORE_ITERTOOLS_BASE = "9a1168a13e38e35396d1f4722f4a204f585cdda1"  # the selection replay's base; runs on 3.11
DEFAULT_MIRROR = Path("/work/.mirror/more-itertools+more-itertools/repo")
AUTOGRAD = "autograd==1.9.1"
# About 300 of its 630 tests: the whole suite traced on 3.11 takes minutes per repeat.
AUTOGRAD_TESTS = [
    "tests/test_numpy.py",
    "tests/test_scalar_ops.py",
    "tests/test_binary_ops.py",
    "tests/test_wrappers.py",
    "tests/test_core.py",
    "tests/test_linalg.py",
]
TRACING = ["--fastci-evidence", "--fastci-evidence-method", "tracing"]
NO_READS = {"FASTCI_EVIDENCE_READS": "0"}
SUITES = ("fastci", "generated", "more-itertools", "autograd")


@dataclass(frozen=True)
class Suite:
    name: str
    cwd: Path
    args: list[str]  # the tests, and options the project's own pytest config needs


def git_commit(root: Path) -> None:
    for git in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.email=b@example.com", "-c", "user.name=b", "commit", "-q", "-m", "suite"],
    ):
        subprocess.run(["git", "-C", str(root), *git], check=True, capture_output=True)


def more_itertools(mirror: Path, scratch: Path) -> Suite:
    if not (mirror / "HEAD").exists() and not (mirror / ".git").exists():
        sys.exit(f"--mirror {mirror}: not a git repository (or leave more-itertools out of --suites)")
    checkout = scratch / "more-itertools"
    subprocess.run(["git", "clone", "-q", str(mirror), str(checkout)], check=True)
    subprocess.run(["git", "-C", str(checkout), "checkout", "-q", MORE_ITERTOOLS_BASE], check=True)
    return Suite(f"more-itertools {MORE_ITERTOOLS_BASE[:12]}", checkout, ["tests"])


def autograd(sdist: Path | None, scratch: Path) -> Suite:
    if sdist is None:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", AUTOGRAD]
            + ["-d", str(scratch / "sdist")],
            check=True,
        )
        [sdist] = (scratch / "sdist").glob("autograd-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(scratch / "autograd", filter="data")
    [root] = (scratch / "autograd").iterdir()
    git_commit(root)  # evidence names the commit under test
    # Its pytest config asks for pytest-cov and xdist (-n auto): neither is wanted here.
    return Suite(
        f"{root.name} ({len(AUTOGRAD_TESTS)} test files)",
        root,
        ["-o", "addopts=", "-o", "required_plugins="] + AUTOGRAD_TESTS,
    )


def run(python: str, suite: Suite, flags: list[str], data_dir: Path, extra_env: dict[str, str]) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FASTCI_")}
    env |= {"FASTCI_DATA_DIR": str(data_dir), "FASTCI_RUN_ID": "bench"} | extra_env
    started = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *flags, *suite.args],
        cwd=suite.cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(
            f"{suite.name}: {python} -m pytest {' '.join(flags)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
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


Config = tuple[str, list[str], dict[str, str]]  # interpreter, pytest flags, environment


def methods(python312: str, rates: list[float], blocking: list[float], without_reads: bool) -> dict[str, Config]:
    """Method label -> config; each interpreter's first is its baseline."""
    found: dict[str, Config] = {"3.11 no evidence": (sys.executable, [], {})}
    for rate in rates:
        found[f"3.11 sampling {rate:g} Hz"] = (
            sys.executable,
            ["--fastci-evidence", "--fastci-evidence-rate", f"{rate:g}"],
            {},
        )
    for rate in blocking:
        found[f"3.11 sampling {rate:g} Hz blocking"] = (
            sys.executable,
            ["--fastci-evidence", "--fastci-evidence-rate", f"{rate:g}", "--fastci-evidence-blocking"],
            {},
        )
    found["3.11 tracing, sys.setprofile"] = (sys.executable, TRACING, {})
    if without_reads:  # what recording the files each test reads adds to tracing
        found["3.11 tracing, reads off"] = (sys.executable, TRACING, NO_READS)
    found["3.12 no evidence"] = (python312, [], {})
    found["3.12 tracing, sys.monitoring"] = (python312, TRACING, {})
    if without_reads:
        found["3.12 tracing, reads off"] = (python312, TRACING, NO_READS)
    return found


HEADER = (
    f"{'suite':<36} {'method':<30} {'wall s':>7} {'ratio':>6} {'tests w/ evidence':>18} {'pairs':>6} "
    f"{'recall':>7} {'precision':>9}"
)


def bench(suite: Suite, configs: dict[str, Config], repeats: int, scratch: Path) -> None:
    times: dict[str, list[float]] = {config: [] for config in configs}
    data = {config: [scratch / f"{suite.cwd.name}-{n}-{r}" for r in range(repeats)] for n, config in enumerate(configs)}
    for repeat in range(repeats):  # interleaved: drift of the machine hits every config alike
        for config, (python, flags, extra_env) in configs.items():
            times[config].append(run(python, suite, flags, data[config][repeat], extra_env))
    evidence = {config: [pairs(d) for d in dirs] for config, dirs in data.items() if configs[config][1]}
    exact = evidence["3.11 tracing, sys.setprofile"][0][0]
    for config in configs:
        best = min(times[config])
        base = min(times[f"{config[:5]}no evidence"])  # the same interpreter's
        row = f"{suite.name:<36} {config:<30} {best:7.2f} {best / base:6.2f}"
        if config in evidence:
            runs = evidence[config]  # sampling varies run to run: means over the repeats
            recall = sum(len(found & exact) / len(exact) for found, _ in runs) / len(runs)
            precision = sum(len(found & exact) / len(found) if found else 1.0 for found, _ in runs) / len(runs)
            with_evidence = sum(tests for _, tests in runs) / len(runs)
            mean_pairs = sum(len(found) for found, _ in runs) / len(runs)
            row += f" {with_evidence:18.1f} {mean_pairs:6.0f} {recall:7.1%} {precision:9.1%}"
        print(row, flush=True)


def python312_of(path: str) -> str:
    probe = subprocess.run(
        [path, "-c", "import sys, fastci; print(sys.version_info >= (3, 12) and hasattr(sys, 'monitoring'))"],
        capture_output=True,
        text=True,
    )
    if probe.stdout.strip() != "True":
        sys.exit(f"--python312 {path}: not a Python 3.12+ with fastci installed (make test-evidence-312 makes one)")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", nargs="+", default=DEFAULT_TESTS, help="this project's test files to run")
    parser.add_argument("--rates", nargs="*", type=float, default=[200.0], help="sampling rates (Hz)")
    parser.add_argument(
        "--blocking-rates",
        nargs="*",
        type=float,
        default=[],
        help="rates also measured with --fastci-evidence-blocking (py-spy pauses the tests)",
    )
    parser.add_argument(
        "--without-reads",
        action="store_true",
        help="also trace with FASTCI_EVIDENCE_READS=0: what recording the files each test reads costs",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--suites", nargs="+", choices=SUITES, default=list(SUITES))
    parser.add_argument("--python312", default=str(ROOT / ".venv312" / "bin" / "python"))
    parser.add_argument("--mirror", type=Path, default=DEFAULT_MIRROR, help="a git mirror of more-itertools")
    parser.add_argument("--autograd-sdist", type=Path, help=f"a local sdist of {AUTOGRAD} (default: pip download)")
    args = parser.parse_args()
    configs = methods(python312_of(args.python312), args.rates, args.blocking_rates, args.without_reads)
    print(
        f"best of {args.repeats} interleaved runs; {os.cpu_count()} cores; ratio: to the same interpreter's plain run"
    )
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory(prefix="fastci-bench-evidence-") as scratch_dir:
        scratch = Path(scratch_dir)
        for name in args.suites:
            if name == "fastci":
                suite = Suite(f"this project's unit tests ({len(args.tests)} files)", ROOT, args.tests)
            elif name == "generated":
                suite = Suite(
                    "generated suite (tests of 20-90 ms)", scratch / "suite", generated_suite(scratch / "suite")
                )
            elif name == "more-itertools":
                suite = more_itertools(args.mirror, scratch)
            else:
                suite = autograd(args.autograd_sdist, scratch)
            bench(suite, configs, args.repeats, scratch)


if __name__ == "__main__":
    main()
