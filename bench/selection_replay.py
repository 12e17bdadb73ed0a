"""Replay a real repository's history through fastci's test selection and measure what it saves and misses.

For each first-parent commit C after a base commit (evidence is first collected at the base):

1. change analysis (``analyze_commit``, real git) and the selection for C from the evidence and
   results known so far, through the real ``Driver`` and ``SelectionProcessor``;
2. ground truth: the full suite at C, untraced, with ``--junitxml`` (each test's outcome and
   measured duration; the durations are fed back as ``results`` events);
3. the kept tests alone (``run_all``: the full run stands for them) -> whether C is still red;
   a *miss* is a test that failed in the full run and is not in the set;
4. fresh evidence: a traced full run at C (``--fastci-evidence --fastci-evidence-method tracing``,
   embedded target), its ``evidence`` events read back from the embedded log and fed (skipped when
   C changed no .py file: nothing the tests run changed);
5. mutants: for a commit that modifies or adds functions in the library (not tests), up to
   ``--mutants-per-commit`` mutants of those functions (``bench/replay_mutants.py``, seeded by the
   sha), each run with ``-x`` by the full suite, the kept set, the selected set (kept + pruned) and the
   file-level set; mutant score = killed by the set / killed by the full suite.

Compared in the same run: fastci (kept), fastci without pruning (selected = kept + pruned),
file-level selection (every test in a test file that imports a changed module or its package, plus
the tests of changed test files) and run-all. Test-time ratio = sum over commits of the full run's
measured durations of the set's tests / sum of all tests' durations.

Shortcuts, each exact: a set equal to the full suite reuses the full run's outcome instead of
running again; a set that contains the kept set is not rerun for a mutant the kept set killed.

``--record FILE`` also writes the replay's inputs and ground truth to a gzipped JSON-lines file
(``fastci.selection.replay`` reads it; CI has neither network nor mirror): the commits, results and
evidence events in the order they were fed to selection, what selection kept, and a fault matrix
(each mutant's full run is then made without ``-x``, so every test that fails on it is known; a test
still running 20 times as long as it took without the mutant counts as hung and failed,
``bench/hang_guard.py``; the run may use 6 GiB, so a runaway loop fails with MemoryError).

    .venv/bin/python bench/selection_replay.py [--mirror PATH] [--workdir /tmp/replay] [--commits 100]
        [--base SHA] [--mutants-per-commit 2] [--record fastci/data/replays/more-itertools.jsonl.gz]
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import os
import random
import resource
import shlex
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_mutants import Mutant, make_mutant

from fastci.inputs import (
    Bundle,
    CommitEvent,
    ResultEvent,
)
from fastci.runtime.driver import Driver
from fastci.runtime.log import TopicLog
from fastci.selection.changes import analyze_commit
from fastci.selection.processor import SelectionProcessor
from fastci.selection.replay import ReplayWriter as Recorder
from fastci.selection.units import (
    BODY,
    MODULE,
    is_test_file,
)
from fastci.topology import decode

REPO = "more-itertools/more-itertools"
DEFAULT_MIRROR = Path("/work/.mirror/more-itertools+more-itertools/repo")
DEFAULT_BASE = "9a1168a13e38e35396d1f4722f4a204f585cdda1"  # 2022-10-03; its suite runs on CPython 3.11
PACKAGE = "more_itertools"
PYTHON = sys.executable
BUNDLE = Bundle(
    compiler=f"cpython-{sys.version_info.major}.{sys.version_info.minor}",
    kernels="none",
    runtime=f"cpython-{sys.version.split()[0]}",
    driver="none",
    firmware="none",
)
FAILED = frozenset({"failed", "error"})
STRATEGIES = ("fastci", "selected", "file-level", "run-all")
BENCH_DIR = Path(__file__).resolve().parent
MUTANT_MEMORY_BYTES = 6 << 30  # a mutant's runaway loop fails its test with MemoryError, not the host


class BytesStore(dict):
    def get(self, key: str) -> bytes | None:
        return super().get(key)


# ----- running the suite


@dataclass
class SuiteRun:
    """One pytest run: outcome and duration by node id (setup + call + teardown as junitxml sums them)."""

    status: dict[str, str] = field(default_factory=dict)
    duration: dict[str, float] = field(default_factory=dict)
    returncode: int = 0
    wall_s: float = 0.0
    timed_out: bool = False

    @property
    def failed(self) -> set[str]:
        return {t for t, s in self.status.items() if s in FAILED}

    @property
    def red(self) -> bool:
        return self.timed_out or self.returncode not in (0, 5)  # 5: no tests collected


def pytest_env(checkout: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FASTCI_")}
    # The checkout first; a PYTHONPATH given to the replay stays behind it (a snapshot of fastci's own
    # source, so that editing the working tree does not change a replay under way).
    path = os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))
    env.update(PYTHONPATH=path, PYTHONDONTWRITEBYTECODE="1", **(extra or {}))
    return env


def run_pytest(
    checkout: Path,
    args: list[str],
    junit: Path | None = None,
    env: dict[str, str] | None = None,
    timeout_s: float | None = None,
    memory_limit: int | None = None,
) -> SuiteRun:
    command = [PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]
    if junit is not None:
        command += [f"--junitxml={junit}"]
    started = time.perf_counter()
    try:
        limit = (
            None
            if memory_limit is None
            else (lambda: resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit)))
        )
        done = subprocess.run(
            command,
            cwd=checkout,
            env=env or pytest_env(checkout),
            capture_output=True,
            timeout=timeout_s,
            preexec_fn=limit,
        )
        run = SuiteRun(returncode=done.returncode)
    except subprocess.TimeoutExpired:
        run = SuiteRun(returncode=-1, timed_out=True)
    run.wall_s = time.perf_counter() - started
    if junit is not None and junit.exists():
        read_junit(junit, checkout, run)
    return run


def node_id(classname: str, name: str, checkout: Path) -> str:
    """junitxml's ``tests.test_more.SomeTests`` + ``test_x`` -> ``tests/test_more.py::SomeTests::test_x``."""
    parts = classname.split(".") if classname else []
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if (checkout / path).is_file():
            return "::".join([path, *parts[cut:], name])
    return "::".join([*parts, name]) if parts else name


def read_junit(junit: Path, checkout: Path, run: SuiteRun) -> None:
    for case in ET.parse(junit).getroot().iter("testcase"):
        test = node_id(case.get("classname", ""), case.get("name", ""), checkout)
        tags = {child.tag for child in case}
        status = (
            "failed"
            if "failure" in tags
            else "error"
            if "error" in tags
            else "skipped"
            if "skipped" in tags
            else "passed"
        )
        if run.status.get(test) not in FAILED:  # a test reported twice (a failing subtest...) stays failed
            run.status[test] = status
        run.duration[test] = max(run.duration.get(test, 0.0), float(case.get("time") or 0.0))


def run_tests(
    checkout: Path,
    tests: list[str],
    junit: Path | None = None,
    stop_first: bool = False,
    env: dict[str, str] | None = None,
    timeout_s: float | None = None,
) -> SuiteRun:
    """Run exactly ``tests`` (node ids); nothing when the list is empty."""
    if not tests:
        return SuiteRun(returncode=5)
    return run_pytest(checkout, (["-x"] if stop_first else []) + sorted(tests), junit, env, timeout_s)


def traced_evidence(checkout: Path, sha: str, data_dir: Path) -> list:
    """Evidence events of a traced full run at the checked-out commit, read back from the embedded log."""
    shutil.rmtree(data_dir, ignore_errors=True)
    env = pytest_env(checkout, {"FASTCI_DATA_DIR": str(data_dir), "FASTCI_REPO": REPO, "FASTCI_COMMIT": sha})
    run_pytest(
        checkout,
        [
            "--fastci-evidence",
            "--fastci-evidence-method",
            "tracing",
            "--fastci-evidence-root",
            str(checkout),
            "--fastci-evidence-target",
            "embedded",
        ],
        env=env,
    )
    events = [decode("evidence", record.payload) for record in TopicLog(data_dir / "log", "evidence").read()]
    shutil.rmtree(data_dir, ignore_errors=True)
    return events


# ----- git


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def prepare_checkouts(mirror: Path, workdir: Path) -> tuple[Path, Path]:
    """A clone of the mirror (the tests run here) and a second work tree of it for mutants."""
    checkout, mutant_tree = workdir / "more-itertools", workdir / "mutant"
    if not (checkout / ".git").exists():
        subprocess.run(["git", "clone", "-q", str(mirror), str(checkout)], check=True)
    if not (mutant_tree / ".git").exists():
        shutil.rmtree(mutant_tree, ignore_errors=True)
        git(checkout, "worktree", "prune")
        git(checkout, "worktree", "add", "-q", "--detach", str(mutant_tree), "HEAD")
    return checkout, mutant_tree


def check_out(tree: Path, sha: str) -> None:
    git(tree, "checkout", "-q", "--detach", "--force", sha)
    git(tree, "clean", "-q", "-fdx")


def commit_range(checkout: Path, base: str, count: int) -> list[str]:
    tip = git(checkout, "rev-parse", "origin/HEAD")
    shas = git(checkout, "rev-list", "--first-parent", "--reverse", f"{base}..{tip}").split()
    if len(shas) < count:
        raise SystemExit(f"only {len(shas)} first-parent commits after {base}")
    return shas[:count]


# ----- feeding fastci


def result_events(run: SuiteRun, sha: str) -> list[ResultEvent]:
    """The run's results, in the order pytest collected the tests (junitxml's order)."""
    return [
        ResultEvent(
            test_id=test,
            run_id=f"replay-{sha[:12]}",
            repo=REPO,
            commit=sha,
            bundle=BUNDLE,
            node_id="localhost",
            hardware_revision="cpu",
            trigger="presubmit",
            status=status,
            duration_s=run.duration.get(test, 0.0),
        )
        for test, status in run.status.items()
    ]


def feed_results(driver: Driver, store: BytesStore, run: SuiteRun, sha: str) -> None:
    for event in result_events(run, sha):
        driver.handle(event)
    store.update(driver.drain_writes())


def feed_evidence(driver: Driver, store: BytesStore, events: list) -> None:
    for event in events:
        driver.handle(event)
    store.update(driver.drain_writes())


def select(driver: Driver, store: BytesStore, commit: CommitEvent):
    (selection,) = driver.handle(commit)
    store.update(driver.drain_writes())
    if selection.TOPIC != "selection":
        raise SystemExit(f"selection for {commit.sha} failed: {selection}")
    return selection


# ----- the baseline and the mutants


def file_level_tests(checkout: Path, commit: CommitEvent, all_tests: set[str]) -> set[str]:
    """Tests in test files that import a changed library module (or its package), and in changed test files."""
    changed = [f.path for f in commit.changed_files if f.path.endswith(".py")]
    modules = {p[:-3].replace("/", ".").removesuffix(".__init__") for p in changed if not is_test_file(p)}
    names = modules | {m.rsplit(".", 1)[0] for m in modules if "." in m}
    files = {p for p in changed if is_test_file(p)}
    for test_file in sorted((checkout / "tests").glob("*.py")):
        if names & imported_modules(test_file):
            files.add(str(test_file.relative_to(checkout)))
    return {t for t in all_tests if t.split("::", 1)[0] in files}


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def mutants_for(tree: Path, commit: CommitEvent, count: int) -> list[Mutant]:
    targets = sorted(
        {
            (f.path, f.qualname)
            for f in commit.changed_functions
            if f.change in ("modified", "added")
            and f.path.startswith(f"{PACKAGE}/")
            and f.path.endswith(".py")
            and f.qualname != MODULE
            and not f.qualname.endswith(BODY)
        }
    )
    rng = random.Random(int(commit.sha[:16], 16))
    rng.shuffle(targets)
    mutants: list[Mutant] = []
    for path, qualname in targets:
        if len(mutants) == count:
            break
        mutant = make_mutant((tree / path).read_bytes(), path, qualname, rng)
        if mutant is not None:
            mutants.append(mutant)
    return mutants


def run_mutant(
    tree: Path,
    mutant: Mutant,
    sets: dict[str, list[str]],
    all_tests: set[str],
    timeout_s: float,
    junit: Path | None = None,
    baseline_s: dict[str, float] | None = None,
) -> tuple[dict[str, bool], SuiteRun]:
    """Killed (a failure, an error or a hang) by each strategy's set, with the mutant in place; and
    the full suite's run on it. With ``junit`` that run goes on past the first failure (so every
    test that fails on the mutant is known), otherwise it stops at the first (``-x``)."""
    target = tree / mutant.path
    original = target.read_bytes()
    target.write_bytes(mutant.source)
    try:
        env = pytest_env(tree)
        if junit is None:
            full_run = run_pytest(tree, ["-x"], env=env, timeout_s=timeout_s)
        else:  # a test that hangs fails alone (bench/hang_guard.py) and the run goes on to the others
            baseline = junit.with_suffix(".baseline.json")
            baseline.write_text(json.dumps(baseline_s))
            guarded = {
                **env,
                "PYTHONPATH": os.pathsep.join((env["PYTHONPATH"], str(BENCH_DIR))),
                "FASTCI_HANG_BASELINE": str(baseline),
            }
            full_run = run_pytest(
                tree,
                ["-p", "hang_guard"],
                junit,
                env=guarded,
                timeout_s=max(120.0, 8 * timeout_s),
                memory_limit=MUTANT_MEMORY_BYTES,
            )
        full = full_run.red
        killed = {"run-all": full}
        kept_killed = False
        for strategy in ("fastci", "selected", "file-level"):
            tests = sets[strategy]
            if set(tests) >= all_tests:
                killed[strategy] = full
            elif kept_killed and strategy != "fastci" and set(tests) >= set(sets["fastci"]):
                killed[strategy] = True
            else:
                killed[strategy] = run_tests(tree, tests, stop_first=True, env=env, timeout_s=timeout_s).red
            kept_killed = kept_killed or (strategy == "fastci" and killed[strategy])
        return killed, full_run
    finally:
        target.write_bytes(original)


# ----- one commit


@dataclass
class Row:
    index: int
    sha: str
    title: str
    py_changed: bool
    changed_units: int
    run_all: bool
    run_all_reason: str
    tests: int
    kept: int
    selected: int
    file_level: int
    stale_kept: int
    full_wall_s: float
    full_test_s: float
    kept_s: float
    selected_s: float
    file_level_s: float
    full_failures: int
    misses_fastci: int
    misses_selected: int
    misses_file_level: int
    kept_red: bool
    full_red: bool
    mutants: int
    killed_run_all: int
    killed_fastci: int
    killed_selected: int
    killed_file_level: int
    evidence_refreshed: bool
    selection_ms: float
    missed_tests: str


def replay_commit(
    index: int,
    sha: str,
    args,
    driver: Driver,
    store: BytesStore,
    checkout: Path,
    mutant_tree: Path,
    out: Path,
    mutant_log: list[dict],
    recorder: Recorder | None = None,
) -> Row:
    commit = analyze_commit(checkout, sha, repo_name=REPO)
    started = time.perf_counter()
    selection = select(driver, store, commit)
    selection_ms = (time.perf_counter() - started) * 1e3
    if recorder is not None:
        recorder.event(commit)

    check_out(checkout, sha)
    full = run_pytest(checkout, [], out / f"full-{sha[:12]}.xml")
    all_tests = set(full.status)
    kept = all_tests if selection.run_all else {k.test_id for k in selection.kept} & all_tests
    stale = 0 if selection.run_all else len({k.test_id for k in selection.kept} - all_tests)
    selected = all_tests if selection.run_all else (kept | {p.test_id for p in selection.pruned}) & all_tests
    file_level = file_level_tests(checkout, commit, all_tests)
    sets = {"fastci": sorted(kept), "selected": sorted(selected), "file-level": sorted(file_level)}
    py_changed = any(f.path.endswith(".py") for f in commit.changed_files)

    def kept_run() -> SuiteRun:
        return full if kept == all_tests else run_tests(checkout, sorted(kept), out / f"kept-{sha[:12]}.xml")

    def mutant_runs() -> list[tuple[Mutant, dict[str, bool]]]:
        check_out(mutant_tree, sha)
        mutants = mutants_for(mutant_tree, commit, args.mutants_per_commit)
        timeout_s = max(15.0, 5 * full.wall_s)  # a mutant that hangs is killed (CI times out)
        runs = []
        for number, m in enumerate(mutants):
            junit = out / f"mutant-{sha[:12]}-{number}.xml" if recorder is not None else None
            runs.append((m, *run_mutant(mutant_tree, m, sets, all_tests, timeout_s, junit, full.duration)))
        return runs

    with ThreadPoolExecutor(2) as pool:  # the traced run and the mutants' runs share the 2 cores
        evidence = pool.submit(traced_evidence, checkout, sha, out / "evidence-data") if py_changed else None
        kept_outcome = kept_run()
        mutants = mutant_runs()
        events = evidence.result() if evidence is not None else []
    feed_results(driver, store, full, sha)
    feed_evidence(driver, store, events)
    if recorder is not None:
        recorder.selection(selection, kept, sum(full.duration[t] for t in kept), sum(full.duration.values()))
        recorder.results(result_events(full, sha))
        recorder.evidence(events, present=all_tests)
        for mutant, _, run in mutants:
            recorder.fault(sha, mutant, run.failed, run.timed_out)
        recorder.flush()

    for mutant, killed, _ in mutants:
        mutant_log.append(
            {
                "sha": sha,
                "path": mutant.path,
                "qualname": mutant.qualname,
                "operator": mutant.operator,
                "line": mutant.line,
                "change": mutant.description,
                **{f"killed_{s}": killed[s] for s in STRATEGIES},
            }
        )
    duration = full.duration
    failures = full.failed
    missed = failures - kept
    return Row(
        index=index,
        sha=sha,
        title=commit.title[:60],
        py_changed=py_changed,
        changed_units=len(commit.changed_functions),
        run_all=selection.run_all,
        run_all_reason=selection.run_all_reason,
        tests=len(all_tests),
        kept=len(kept),
        selected=len(selected),
        file_level=len(file_level),
        stale_kept=stale,
        full_wall_s=full.wall_s,
        full_test_s=sum(duration.values()),
        kept_s=sum(duration[t] for t in kept),
        selected_s=sum(duration[t] for t in selected),
        file_level_s=sum(duration[t] for t in file_level),
        full_failures=len(failures),
        misses_fastci=len(missed),
        misses_selected=len(failures - selected),
        misses_file_level=len(failures - file_level),
        kept_red=bool(kept_outcome.failed) or kept_outcome.red,
        full_red=full.red,
        mutants=len(mutants),
        **{f"killed_{s.replace('-', '_')}": sum(k[s] for _, k, _ in mutants) for s in STRATEGIES},
        evidence_refreshed=bool(events),
        selection_ms=selection_ms,
        missed_tests=" ".join(sorted(missed))[:2000],
    )


# ----- reporting


def progress_line(row: Row, total: int, elapsed_s: float) -> str:
    how = f"run_all ({row.run_all_reason})" if row.run_all else f"kept {row.kept}/{row.selected} sel/{row.tests}"
    ratio = row.kept_s / row.full_test_s if row.full_test_s else 1.0
    return (
        f"[{row.index:3d}/{total}] {row.sha[:10]} {row.title[:38]:38s} units={row.changed_units:3d} {how:42s} "
        f"time={ratio:6.1%} fail={row.full_failures} miss={row.misses_fastci} mut={row.killed_fastci}/"
        f"{row.killed_run_all}/{row.mutants} ev={'y' if row.evidence_refreshed else '-'} {elapsed_s:6.0f}s"
    )


def write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        return
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def final_table(rows: list[Row]) -> str:
    full_s = sum(r.full_test_s for r in rows)
    killed_full = sum(r.killed_run_all for r in rows)
    columns = {
        "fastci (selected+pruned)": ("kept_s", "misses_fastci", "killed_fastci"),
        "fastci without pruning": ("selected_s", "misses_selected", "killed_selected"),
        "file-level": ("file_level_s", "misses_file_level", "killed_file_level"),
        "run-all": ("full_test_s", None, "killed_run_all"),
    }
    lines = [
        f"{'strategy':26s} {'test-time ratio':>15s} {'time saved':>12s} {'misses':>7s} {'red commits missed':>19s} "
        f"{'mutants killed':>15s}"
    ]
    red = [r for r in rows if r.full_failures]
    for label, (time_field, miss_field, kill_field) in columns.items():
        selected_s = sum(getattr(r, time_field) for r in rows)
        misses = sum(getattr(r, miss_field) for r in rows) if miss_field else 0
        missed_red = (
            sum(1 for r in red if not r.kept_red)
            if label.startswith("fastci (")
            else (sum(1 for r in red if miss_field and getattr(r, miss_field) == r.full_failures) if miss_field else 0)
        )
        killed = sum(getattr(r, kill_field) for r in rows)
        score = f"{killed}/{killed_full}" + (f" ({killed / killed_full:.0%})" if killed_full else "")
        lines.append(
            f"{label:26s} {selected_s / full_s:15.1%} {full_s - selected_s:10.1f} s {misses:7d} "
            f"{missed_red:>11d} of {len(red):<4d} {score:>15s}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=DEFAULT_MIRROR, help="git directory of more-itertools")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/replay"))
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--base", default=DEFAULT_BASE, help="evidence is collected here first; replay starts after it")
    parser.add_argument("--mutants-per-commit", type=int, default=2)
    parser.add_argument(
        "--record",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the replay's events and fault matrix here (gzipped JSON lines)",
    )
    args = parser.parse_args()

    started = time.perf_counter()
    args.workdir.mkdir(parents=True, exist_ok=True)
    checkout, mutant_tree = prepare_checkouts(args.mirror, args.workdir)
    base = git(checkout, "rev-parse", args.base)
    shas = commit_range(checkout, base, args.commits)
    out = args.workdir / f"out-{time.strftime('%Y%m%dT%H%M%S')}"
    out.mkdir()
    store = BytesStore()
    driver = Driver(SelectionProcessor(), store)
    recorder = (
        Recorder(
            args.record,
            repo=REPO,
            base=base,
            shas=shas,
            mutants_per_commit=args.mutants_per_commit,
            python=sys.version.split()[0],
        )
        if args.record
        else None
    )

    check_out(checkout, base)
    base_run = run_pytest(checkout, [], out / "full-base.xml")
    feed_results(driver, store, base_run, base)
    base_evidence = traced_evidence(checkout, base, out / "evidence-data")
    feed_evidence(driver, store, base_evidence)
    if recorder is not None:
        recorder.results(result_events(base_run, base))
        recorder.evidence(base_evidence, present=set(base_run.status))
        recorder.flush()
    print(
        f"base {base[:10]}: {len(base_run.status)} tests, {len(base_run.failed)} failing, "
        f"full run {base_run.wall_s:.1f} s; "
        f"evidence of {len(base_evidence)} tests (tracing) in {time.perf_counter() - started:.0f} s",
        flush=True,
    )

    rows: list[Row] = []
    mutant_log: list[dict] = []
    rows_csv, mutants_csv = args.workdir / "selection_replay.csv", args.workdir / "selection_replay_mutants.csv"
    for index, sha in enumerate(shas, 1):
        rows.append(replay_commit(index, sha, args, driver, store, checkout, mutant_tree, out, mutant_log, recorder))
        print(progress_line(rows[-1], len(shas), time.perf_counter() - started), flush=True)
        write_csv(rows_csv, [vars(r) for r in rows])
        write_csv(mutants_csv, mutant_log)

    wall = time.perf_counter() - started
    if recorder is not None:
        recorder.close()
    run_all = [r for r in rows if r.run_all]
    reasons: dict[str, int] = {}
    for r in run_all:
        reasons[r.run_all_reason] = reasons.get(r.run_all_reason, 0) + 1
    print()
    print(f"repository: {REPO} ({args.mirror})")
    print(f"commits: {len(rows)} first-parent commits {shas[0][:12]}..{shas[-1][:12]} (base {base[:12]})")
    print(
        f"tests per commit: {min(r.tests for r in rows)}-{max(r.tests for r in rows)}; full suite summed test time "
        f"{sum(r.full_test_s for r in rows):.1f} s, "
        f"full-run wall {sum(r.full_wall_s for r in rows):.1f} s over the range"
    )
    print(
        f"run_all: {len(run_all)} of {len(rows)} commits ({len(run_all) / len(rows):.0%})"
        + "".join(f"\n  {n:3d} x {reason}" for reason, n in sorted(reasons.items(), key=lambda x: -x[1]))
    )
    print(
        f"red commits (full run failed): {sum(1 for r in rows if r.full_failures)}; commits with mutants: "
        f"{sum(1 for r in rows if r.mutants)}, mutants: {sum(r.mutants for r in rows)}"
    )
    print()
    print(final_table(rows))
    print()
    print(f"per-commit rows: {rows_csv}\nmutants: {mutants_csv}\nwall time: {wall / 60:.1f} min")
    if recorder is not None:
        print(f"recorded: {args.record} ({args.record.stat().st_size / 1e6:.2f} MB; {recorder.summary()})")
    print(
        "reproduce: .venv/bin/python bench/selection_replay.py "
        + shlex.join(
            [
                "--mirror",
                str(args.mirror),
                "--workdir",
                str(args.workdir),
                "--commits",
                str(args.commits),
                "--base",
                base,
                "--mutants-per-commit",
                str(args.mutants_per_commit),
                *(["--record", str(args.record)] if args.record else []),
            ]
        )
    )


if __name__ == "__main__":
    main()
