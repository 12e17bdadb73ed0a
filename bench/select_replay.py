"""Replay a real repository's history through ``pytest --fastci-select`` itself, as CI jobs run it.

Not the replay's internal selection call (``bench/selection_replay.py``): here every decision goes
through the product's own door, the pytest plugin, its plan request and the embedded runtime in a
data dir of the replay. At the base commit a nightly job collects evidence; then, for each
first-parent commit C:

1. the presubmit job at C: ``pytest --fastci-select --fastci-results --junitxml`` (what it ran and
   deselected, its wall time, its summary line);
2. mutants (``--mutants-per-commit``, of the library functions C changed, ``bench/replay_mutants.py``):
   each amended into C (parent C^, so the job sees C's change with the fault in it), then
   ``pytest --fastci-select -x`` (does the job fail?) and ``pytest -x`` (does the full suite?);
3. the nightly job at C: ``pytest --fastci-select --fastci-select-mode shadow --fastci-results
   --fastci-evidence --fastci-evidence-method tracing --junitxml``: every test (ground truth and
   durations), fresh evidence for the next commit, and each result marked kept or not, from which
   fastci's own audit finds the misses.

Share of suite time per commit = the nightly's measured durations of the tests the presubmit job
ran / all of them. A miss = a test that failed in the nightly and was deselected by the presubmit
job; the audit's own count (``selection_audit``) is printed beside it.

Other repositories: ``--mirror`` (a git directory), ``--base``, ``--package`` (where mutants go),
``--repo-name``, ``--python`` (an interpreter with the repository's test dependencies and fastci
installed) and ``--pytest-arg`` (repeatable, e.g. ``-o addopts=``). For a commit that changes a data
file, ``--data-mutants`` also runs a mutant of it: one number on a line the commit changed, altered.

Run-all commits are also counted by the rule before files were judged by kind and part (every
changed file that was neither Python nor documentation ran everything), from the same commits.

    .venv/bin/python bench/select_replay.py [--mirror PATH] [--workdir /tmp/select-replay]
        [--commits 100] [--base SHA] [--mutants-per-commit 2] [--data-mutants]
"""

from __future__ import annotations

import argparse
import csv
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from selection_replay import (
    DEFAULT_BASE,
    DEFAULT_MIRROR,
    MUTANT_MEMORY_BYTES,
    SuiteRun,
    commit_range,
    git,
    mutants_for,
    pytest_env,
    run_pytest,
)

from fastci.runtime.embedded import DataDir
from fastci.selection.changes import analyze_commit
from fastci.topology import decode

REPO = "more-itertools"
HANG_FACTOR = 5  # a run taking five times the base suite's wall time is hung: the mutant is killed
SUMMARY = re.compile(r"^fastci: (?:commit|\d+ commits) .*$", re.MULTILINE)  # the --fastci-select line


@dataclass
class Row:
    sha: str
    title: str
    ran: set[str] = field(default_factory=set)
    deselected: int = 0
    run_all: bool = False
    line: str = ""
    job_s: float = 0.0
    nightly_s: float = 0.0
    mutants_s: float = 0.0
    share: float = 1.0
    misses: list[str] = field(default_factory=list)
    mutants: list[tuple[str, bool, bool]] = field(default_factory=list)  # (description, job killed, full killed)
    old_rule_run_all: bool = False


SETTINGS: dict[str, object] = {"python": sys.executable, "pytest_args": [], "repo": REPO}


def job(
    checkout: Path,
    data: Path,
    trigger: str,
    args: list[str],
    junit: Path | None = None,
    timeout_s: float | None = None,
    transcript: Path | None = None,
) -> tuple[SuiteRun, str]:
    """One pytest job in ``checkout``; ``transcript`` keeps its output (a mutant's job that fails
    where the full suite passes needs it to be understood)."""
    env = pytest_env(
        checkout, {"FASTCI_DATA_DIR": str(data), "FASTCI_REPO": str(SETTINGS["repo"]), "FASTCI_TRIGGER": trigger}
    )
    command = [str(SETTINGS["python"]), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA"]
    command += [*SETTINGS["pytest_args"], *args]  # type: ignore[misc]
    if junit is not None:
        command.append(f"--junitxml={junit}")
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:  # a mutant that hangs the suite: killed, as a CI timeout would
        if transcript is not None:
            transcript.write_text(f"$ {' '.join(command)}\ntimed out after {timeout_s:.0f} s\n")
        return SuiteRun(returncode=-1, timed_out=True, wall_s=time.perf_counter() - started), ""
    run = SuiteRun(returncode=done.returncode, wall_s=time.perf_counter() - started)
    if transcript is not None:
        transcript.write_text(f"$ {' '.join(command)}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}")
    if junit is not None and junit.exists():
        from selection_replay import read_junit

        read_junit(junit, checkout, run)
    line = (SUMMARY.findall(done.stdout) or [""])[-1]
    return run, line


def nightly(checkout: Path, data: Path, junit: Path) -> tuple[SuiteRun, str]:
    return job(
        checkout,
        data,
        "nightly",
        [
            "--fastci-select",
            "--fastci-select-mode",
            "shadow",
            "--fastci-results",
            "--fastci-evidence",
            "--fastci-evidence-method",
            "tracing",
        ],
        junit,
    )


OLD_INERT_SUFFIXES = (".md", ".rst", ".pyi")
OLD_INERT_DIRS = ("docs/", "doc/", ".github/ISSUE_TEMPLATE/")
OLD_INERT_NAMES = ("LICENSE", "LICENSE.txt", "AUTHORS", "CHANGELOG", ".gitignore", ".gitattributes", ".mailmap")
OLD_INERT_NAMES += (".readthedocs.yaml", ".readthedocs.yml")


def ran_all_by_the_old_rule(commit) -> bool:
    """Whether the rule before files were judged by kind and part ran everything for this commit."""
    for changed in commit.changed_files:
        path = changed.path
        name = path.rsplit("/", 1)[-1]
        if not (path.endswith(".py") or path.endswith(OLD_INERT_SUFFIXES) or path.startswith(OLD_INERT_DIRS)):
            if name not in OLD_INERT_NAMES:
                return True
    return False


NUMBER = re.compile(rb"(?<![\w.])(\d+)(?![\w])")


def data_mutant(checkout: Path, sha: str, commit) -> tuple[str, bytes, str] | None:
    """(path, mutated content, description) changing one number on a line ``sha`` added to a data
    file, or None when the commit changed no data file with a number on an added line."""
    from fastci.selection.files import effect_of

    for changed in commit.changed_files:
        if effect_of(changed)[0] != "readers" or changed.change == "deleted":
            continue
        diff = subprocess.run(
            ["git", "-C", str(checkout), "diff", "-U0", f"{sha}^", sha, "--", changed.path],
            capture_output=True,
            check=True,
        ).stdout
        added = [line[1:] for line in diff.splitlines() if line.startswith(b"+") and not line.startswith(b"+++")]
        for line in added:
            match = NUMBER.search(line)
            if match is None:
                continue
            content = (checkout / changed.path).read_bytes()
            mutated_line = line[: match.start()] + str(int(match[1]) + 1).encode() + line[match.end() :]
            if line in content:
                where = f"{changed.path}: {line.decode(errors='replace').strip()[:60]}"
                return changed.path, content.replace(line, mutated_line, 1), f"data value +1 in {where}"
    return None


def amend_with(checkout: Path, path: str, source: bytes) -> None:
    (checkout / path).write_bytes(source)
    git(
        checkout,
        "-c",
        "user.name=replay",
        "-c",
        "user.email=replay@example.com",
        "commit",
        "-q",
        "-a",
        "--amend",
        "--no-edit",
    )


def interpreter(given: str) -> str:
    """An absolute path: the jobs run in the checkout, where a relative one names nothing."""
    found = shutil.which(given)
    if found is None:
        raise argparse.ArgumentTypeError(f"{given}: no such interpreter")
    return str(Path(found).absolute())  # not resolve(): a venv's python is a link to its base interpreter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", type=Path, default=DEFAULT_MIRROR)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/select-replay"))
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--base", default=DEFAULT_BASE)
    parser.add_argument("--mutants-per-commit", type=int, default=2)
    parser.add_argument("--data-mutants", action="store_true", help="also mutate a value of a changed data file")
    parser.add_argument("--package", default="more_itertools", help="the library's package (mutants go there)")
    parser.add_argument("--repo-name", default=REPO)
    parser.add_argument(
        "--python", type=interpreter, default=sys.executable, help="interpreter with the repo's test deps and fastci"
    )
    parser.add_argument("--pytest-arg", action="append", default=[], help="passed to every pytest run")
    args = parser.parse_args()
    import selection_replay

    selection_replay.PACKAGE, selection_replay.PYTHON = args.package, args.python
    SETTINGS.update(python=args.python, pytest_args=args.pytest_arg, repo=args.repo_name)

    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    checkout, data, out = args.workdir / "checkout", args.workdir / "data", args.workdir / "out"
    out.mkdir()
    subprocess.run(["git", "clone", "-q", str(args.mirror), str(checkout)], check=True)
    base = git(checkout, "rev-parse", args.base)
    shas = commit_range(checkout, base, args.commits)
    started = time.perf_counter()
    git(checkout, "checkout", "-q", base)
    base_run, _ = nightly(checkout, data, out / "nightly-base.xml")
    print(f"base {base[:12]}: nightly of {len(base_run.status)} tests in {base_run.wall_s:.1f} s", flush=True)

    rows: list[Row] = []
    for number, sha in enumerate(shas, 1):
        git(checkout, "checkout", "-q", sha)
        title = git(checkout, "log", "-1", "--format=%s")
        row = Row(sha, title)
        presubmit, row.line = job(
            checkout, data, "presubmit", ["--fastci-select", "--fastci-results"], out / f"{sha}-job.xml"
        )
        row.ran = set(presubmit.status)
        row.job_s = presubmit.wall_s
        row.run_all = "running all" in row.line
        commit = analyze_commit(checkout, sha, args.repo_name)
        row.old_rule_run_all = ran_all_by_the_old_rule(commit)
        mutated = time.perf_counter()
        seeded = [(m.path, m.source, m.description) for m in mutants_for(checkout, commit, args.mutants_per_commit)]
        if args.data_mutants and (found := data_mutant(checkout, sha, commit)) is not None:
            seeded.append(found)
        for number, (path, source, description) in enumerate(seeded, 1):
            git(checkout, "checkout", "-q", "-B", "mutant", sha)
            amend_with(checkout, path, source)
            limit = HANG_FACTOR * base_run.wall_s
            transcript = out / f"{sha}-mutant-{number}.txt"
            killed_by_job = job(checkout, data, "dev", ["--fastci-select", "-x"], None, limit, transcript)[0].red
            full = run_pytest(checkout, [*args.pytest_arg, "-x"], timeout_s=limit, memory_limit=MUTANT_MEMORY_BYTES)
            row.mutants.append((description, killed_by_job, full.red))
            git(checkout, "checkout", "-q", "-f", sha)
        row.mutants_s = time.perf_counter() - mutated
        truth, _ = nightly(checkout, data, out / f"{sha}-nightly.xml")
        row.nightly_s = truth.wall_s
        total = sum(truth.duration.values()) or 1.0
        row.share = sum(truth.duration.get(t, 0.0) for t in row.ran) / total
        row.deselected = len(set(truth.status) - row.ran)
        row.misses = sorted(truth.failed - row.ran)
        rows.append(row)
        print(
            f"{number:3d} {sha[:10]} share {row.share:6.1%} ran {len(row.ran):3d} "
            f"misses {len(row.misses)} mutants {sum(j for _, j, _ in row.mutants)}/{sum(k for *_, k in row.mutants)} "
            f"job {row.job_s:4.1f} s, mutants {row.mutants_s:4.1f} s, nightly {row.nightly_s:4.1f} s "
            f"| {row.line[len('fastci: ') :][:100]}",
            flush=True,
        )

    audits = [decode("selection-audit", r.payload) for r in DataDir(data).log.topic("selection-audit").read()]
    with open(out / "commits.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["sha", "share", "ran", "deselected", "run_all", "misses", "mutants_job", "mutants_full", "line"]
        )
        for r in rows:
            writer.writerow(
                [
                    r.sha,
                    f"{r.share:.4f}",
                    len(r.ran),
                    r.deselected,
                    r.run_all,
                    len(r.misses),
                    sum(j for _, j, _ in r.mutants),
                    sum(k for *_, k in r.mutants),
                    r.line,
                ]
            )
    killed_full = sum(k for r in rows for *_, k in r.mutants)
    killed_job = sum(j for r in rows for _, j, k in r.mutants if k)
    shares = [r.share for r in rows]
    suite = sum(1 for r in rows if r.run_all)
    print()
    span = f"{shas[0][:12]}..{shas[-1][:12]} (base {base[:12]})"
    print(f"repository: {args.repo_name}, {len(rows)} first-parent commits {span}")
    print(f"replay took {time.perf_counter() - started:.0f} s; per-commit table in {out / 'commits.csv'}")
    print()
    print(
        "| strategy | share of the suite's test time | misses (full-run failures not run) "
        "| mutants killed / killed by the full suite |"
    )
    print("|---|---|---|---|")
    mutants = f"{killed_job} / {killed_full} ({killed_job / killed_full:.0%})" if killed_full else "-"
    print(
        f"| pytest --fastci-select | {statistics.fmean(shares):.1%} (median {statistics.median(shares):.1%}) "
        f"| {sum(len(r.misses) for r in rows)} | {mutants} |"
    )
    print(f"| run-all | 100% | 0 | {killed_full} / {killed_full} |")
    print()
    before = sum(1 for r in rows if r.old_rule_run_all)
    print(f"run-all commits: {suite} of {len(rows)} now, {before} by the rule before files were judged by kind")
    print(
        f"commits that ran the whole suite: {suite} of {len(rows)}; median wall time of the presubmit job "
        f"{statistics.median(r.job_s for r in rows):.1f} s, of the traced shadow nightly "
        f"{statistics.median(r.nightly_s for r in rows):.1f} s"
    )
    print(
        f"the audit (selection_audit): {sum(a.kind == 'audited' for a in audits)} commits audited, "
        f"{sum(a.kind == 'miss' for a in audits)} misses"
    )
    for r in rows:
        for missed in r.misses:
            print(f"miss: {r.sha[:10]} {missed}")
        for description, job_killed, full_killed in r.mutants:
            if full_killed and not job_killed:
                print(f"mutant survived the job: {r.sha[:10]} {description}")


if __name__ == "__main__":
    main()
