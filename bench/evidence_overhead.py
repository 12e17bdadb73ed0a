"""Evidence collection: what ``--fastci-evidence`` with its defaults costs a test suite, on each
interpreter, against the same suite without evidence; and that every collected test gets evidence.

Each suite runs without evidence and with ``--fastci-evidence`` (the default: exact, first calls per
unit per test) on 3.11 (``sys.setprofile``) and on 3.12 (``--python312``, default ``.venv312`` from
``make test-evidence-312``: ``sys.monitoring``), and with ``--fastci-evidence-method sampling`` (py-spy)
on 3.11 when ``--sampling`` is given. The runs are interleaved, repeated, and the fastest of each kept;
each line is one (suite, method) with its wall time, the ratio to the run without evidence on the same
interpreter, the tests with evidence of the tests collected, and the (test, unit) pairs found. 3.12's
pairs must equal 3.11's; sampling's recall is the share of them it finds too.

Each run has a fresh data dir and the user's cache (``fastci.core.config.cache_dir``: parses of source
files by content, the installed distributions' map) as a nightly keeps it from one run to the next;
the first, uncounted run of each config fills it (``--cold`` empties it before every run).

Suites: this project's fast unit tests (milliseconds each: the hard case for sampling); a generated
one whose tests each run two functions for about 10 to 80 ms (accelerator tests are longer);
more-itertools at a fixed commit (``--mirror``, cloned into the scratch directory: a real
repository's ~565 short tests of pure-Python functions); autograd (``pip download`` of its sdist
into the scratch directory, or ``--autograd-sdist``: short numeric tests on numpy running through
many small Python functions, the suite tracing cost most on); toolz at a fixed commit
(``--toolz-mirror``: a functional-programming library of 263 millisecond tests, doctests included, as
its CI runs them).

    .venv/bin/python bench/evidence_overhead.py [--repeats 3] [--sampling]
        [--suites fastci generated more-itertools autograd toolz] [--python312 .venv312/bin/python]
        [--mirror /work/.mirror/more-itertools+more-itertools/repo] [--autograd-sdist autograd-1.9.1.tar.gz]
        [--toolz-mirror /work/.mirror/pytoolz+toolz/repo] [--cold]
"""

from __future__ import annotations

import argparse
import os
import shutil
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
TOOLZ_BASE = "568c2b8"  # toolz 1.x, 2025: runs on 3.11 and 3.12
DEFAULT_TOOLZ_MIRROR = Path("/work/.mirror/pytoolz+toolz/repo")
AUTOGRAD = "autograd==1.9.1"
EVIDENCE = ["--fastci-evidence"]  # the defaults, as a newcomer types it
SAMPLING = ["--fastci-evidence", "--fastci-evidence-method", "sampling"]
SUITES = ("fastci", "generated", "more-itertools", "autograd", "toolz")


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


def checkout(mirror: Path, scratch: Path, name: str, commit: str) -> Path:
    if not (mirror / "HEAD").exists() and not (mirror / ".git").exists():
        sys.exit(f"{mirror}: not a git repository (fetch {name}, or leave it out of --suites)")
    work = scratch / name
    subprocess.run(["git", "clone", "-q", str(mirror), str(work)], check=True)
    subprocess.run(["git", "-C", str(work), "checkout", "-q", commit], check=True)
    return work


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
    return Suite(root.name, root, ["-o", "addopts=", "-o", "required_plugins=", "tests"])


def run(python: str, suite: Suite, flags: list[str], data_dir: Path, cache: Path, cold: bool) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FASTCI_")}
    env |= {"FASTCI_DATA_DIR": str(data_dir), "FASTCI_RUN_ID": "bench", "FASTCI_CACHE_DIR": str(cache)}
    if cold:
        shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(data_dir, ignore_errors=True)
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
    if done.returncode not in (0, 1):  # a suite with a failing test still measures; a usage error does not
        sys.exit(
            f"{suite.name}: {python} -m pytest {' '.join(flags)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return elapsed


def collected(python: str, suite: Suite) -> set[str]:
    done = subprocess.run(
        [python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:fastci", *suite.args],
        cwd=suite.cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return {line.strip() for line in done.stdout.splitlines() if "::" in line}


def pairs(data_dir: Path) -> tuple[set[tuple[str, str]], set[str], int]:
    """(test, unit) pairs of the evidence in ``data_dir``, the tests with evidence, and its bytes."""
    found: set[tuple[str, str]] = set()
    tests: set[str] = set()
    size = 0
    for record in DataDir(data_dir).log.topic("evidence").read():
        size += len(record.payload)
        event = orjson.loads(record.payload)
        if event["kind"] != "test":
            continue
        tests.add(event["test_id"])
        found |= {(event["test_id"], unit) for unit in event.get("units", ())}
        for stack in event["stacks"]:
            found |= {(event["test_id"], f"{path}::{qualname}") for path, qualname in units_of(stack["stack"])}
    return found, tests, size


Config = tuple[str, list[str]]  # interpreter, pytest flags


def methods(python312: str, sampling: bool, contexts: list[int]) -> dict[str, Config]:
    """Method label -> config; each interpreter's first is its baseline."""
    found: dict[str, Config] = {
        "3.11 no evidence": (sys.executable, []),
        "3.11 --fastci-evidence": (sys.executable, EVIDENCE),
    }
    if sampling:
        found["3.11 sampling 200 Hz"] = (sys.executable, SAMPLING)
    found["3.12 no evidence"] = (python312, [])
    found["3.12 --fastci-evidence"] = (python312, EVIDENCE)
    for k in contexts:  # what more contexts per unit cost (--fastci-evidence-contexts)
        for version, python in (("3.11", sys.executable), ("3.12", python312)):
            found[f"{version} {k} contexts a unit"] = (python, [*EVIDENCE, "--fastci-evidence-contexts", str(k)])
    return found


HEADER = (
    f"{'suite':<32} {'method':<24} {'wall s':>7} {'ratio':>6} {'tests w/ evidence':>18} {'pairs':>7} "
    f"{'recall':>7} {'evidence KB':>11}"
)


def bench(suite: Suite, configs: dict[str, Config], repeats: int, scratch: Path, cold: bool) -> None:
    cache = scratch / "cache"
    times: dict[str, list[float]] = {config: [] for config in configs}
    data = {config: scratch / f"{suite.cwd.name}-{n}" for n, config in enumerate(configs)}
    for python, flags in configs.values():  # warm-up, not counted: fills the cache a nightly keeps
        run(python, suite, flags, scratch / "warm-up", cache, cold)
    for _ in range(repeats):  # interleaved: drift of the machine hits every config alike
        for config, (python, flags) in configs.items():
            times[config].append(run(python, suite, flags, data[config], cache, cold))
    tests = {python: collected(python, suite) for python, _ in configs.values()}
    evidence = {config: pairs(data[config]) for config, (_, flags) in configs.items() if flags}
    exact = evidence["3.11 --fastci-evidence"][0]
    for config, (python, flags) in configs.items():
        best = min(times[config])
        base = min(times[f"{config[:5]}no evidence"])  # the same interpreter's
        row = f"{suite.name:<32} {config:<24} {best:7.2f} {best / base:6.2f}"
        if flags:
            found, with_evidence, size = evidence[config]
            recall = len(found & exact) / len(exact) if exact else 1.0
            share = f"{len(with_evidence & tests[python])}/{len(tests[python])}"
            row += f" {share:>18} {len(found):7d} {recall:7.1%} {size / 1024:11.0f}"
        print(row, flush=True)
    one, two = evidence["3.11 --fastci-evidence"][0], evidence["3.12 --fastci-evidence"][0]
    if one != two:  # the collectors record the same units; the interpreters may not run the same code
        print(f"{'':<32} 3.11 and 3.12 differ in {len(one ^ two)} (test, unit) pairs, e.g. {sorted(one ^ two)[:3]}")


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
    parser.add_argument("--sampling", action="store_true", help="also py-spy sampling at 200 Hz on 3.11")
    parser.add_argument("--contexts", nargs="*", type=int, default=[], help="also these contexts per unit")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--suites", nargs="+", choices=SUITES, default=list(SUITES))
    parser.add_argument("--python312", default=str(ROOT / ".venv312" / "bin" / "python"))
    parser.add_argument("--mirror", type=Path, default=DEFAULT_MIRROR, help="a git mirror of more-itertools")
    parser.add_argument("--toolz-mirror", type=Path, default=DEFAULT_TOOLZ_MIRROR, help="a git mirror of toolz")
    parser.add_argument("--autograd-sdist", type=Path, help=f"a local sdist of {AUTOGRAD} (default: pip download)")
    parser.add_argument("--cold", action="store_true", help="empty the cache before every run")
    args = parser.parse_args()
    configs = methods(python312_of(args.python312), args.sampling, args.contexts)
    print(
        f"best of {args.repeats} interleaved runs after one warm-up each; {os.cpu_count()} cores; "
        f"{'cold' if args.cold else 'warm'} cache; ratio: to the same interpreter's run without evidence"
    )
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory(prefix="fastci-bench-evidence-") as scratch_dir:
        scratch = Path(scratch_dir)
        for name in args.suites:
            if name == "fastci":
                suite = Suite(f"fastci ({len(args.tests)} test files)", ROOT, args.tests)
            elif name == "generated":
                suite = Suite("generated (tests of 20-90 ms)", scratch / "suite", generated_suite(scratch / "suite"))
            elif name == "more-itertools":
                work = checkout(args.mirror, scratch, "more-itertools", MORE_ITERTOOLS_BASE)
                suite = Suite(f"more-itertools {MORE_ITERTOOLS_BASE[:10]}", work, ["tests"])
            elif name == "toolz":
                work = checkout(args.toolz_mirror, scratch, "toolz", TOOLZ_BASE)
                suite = Suite(f"toolz {TOOLZ_BASE}", work, ["--doctest-modules", "toolz"])  # as its CI runs it
            else:
                suite = autograd(args.autograd_sdist, scratch)
            bench(suite, configs, args.repeats, scratch, args.cold)


if __name__ == "__main__":
    main()
