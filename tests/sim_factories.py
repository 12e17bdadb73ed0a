"""A small synthetic recording with the shape of ``fastci.selection.replay.Replay``, for simulator tests.

A library of ``functions`` functions, ``tests`` tests each calling two of them directly, and
``commits`` commits an hour apart each modifying one or two functions; every commit carries one
mutant that the tests calling its first changed function detect. Deterministic for a seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from fastci.inputs import Bundle, CommitEvent, EvidenceEvent, ResultEvent

REPO = "acme/lib"
LIB = "lib/core.py"
TESTS = "tests/test_lib.py"
BUNDLE = Bundle(compiler="cpython", kernels="none", runtime="cpython", driver="none", firmware="none")
T0 = datetime(2026, 10, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Fault:
    sha: str
    failing: frozenset[str]
    timed_out: bool = False
    name: str = ""


@dataclass
class Step:
    index: int
    commit: CommitEvent
    results: list[ResultEvent] = field(default_factory=list)
    evidence: list[EvidenceEvent] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)


@dataclass
class Recording:
    header: dict
    base_results: list[ResultEvent]
    base_evidence: list[EvidenceEvent]
    commits: list[Step]


def test_id(number: int) -> str:
    return f"{TESTS}::test_{number:03d}"


def calls(number: int, functions: int) -> tuple[int, int]:
    return number % functions, (number * 7 + 3) % functions


def recording(tests: int = 100, functions: int = 40, commits: int = 30, seed: int = 3, calls_of=calls) -> Recording:
    rng = random.Random(seed)
    durations = {test_id(n): round(rng.uniform(0.05, 0.5), 3) for n in range(tests)}
    base_sha = f"{rng.getrandbits(160):040x}"
    base_results = [
        ResultEvent(
            test_id=t,
            run_id="base",
            repo=REPO,
            commit=base_sha,
            bundle=BUNDLE,
            node_id="localhost",
            hardware_revision="cpu",
            trigger="presubmit",
            status="passed",
            duration_s=d,
        )
        for t, d in durations.items()
    ]
    callers: dict[int, list[str]] = {}
    base_evidence = []
    for n in range(tests):
        called = sorted(set(calls_of(n, functions)))
        for f in called:
            callers.setdefault(f, []).append(test_id(n))
        stacks = [{"stack": f"test_{n:03d} ({TESTS}:1);f{f:02d} ({LIB}:1)", "count": 1} for f in called]
        base_evidence.append(
            EvidenceEvent(
                test_id=test_id(n), run_id="base", repo=REPO, commit=base_sha, method="tracing", stacks=stacks
            )
        )
    steps = []
    for index in range(commits):
        sha = f"{rng.getrandbits(160):040x}"
        changed = rng.sample(range(functions), rng.choice((1, 1, 2)))
        commit = CommitEvent(
            repo=REPO,
            sha=sha,
            author="dev",
            time=T0 + timedelta(hours=index),
            title=f"change {index}",
            changed_files=[{"path": LIB, "change": "modified"}],
            changed_functions=[{"path": LIB, "qualname": f"f{f:02d}", "change": "modified"} for f in changed],
        )
        failing = frozenset(callers.get(changed[0], ()))
        steps.append(Step(index + 1, commit, faults=[Fault(sha, failing, name=f"{sha[:10]} f{changed[0]:02d}")]))
    return Recording({"repo": REPO}, base_results, base_evidence, steps)
