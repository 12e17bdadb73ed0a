"""How early the test-plan order finds faults: APFD and APFDc of the risk order against random and declared order.

Two histories, each through the real processors (Driver over an in-memory store):

1. **The recorded more-itertools replay** (``fastci.selection.replay``, 100 real commits): the selection
   processor answers each commit, the test-plan processor orders the kept tests; the faults are the
   recorded mutants of that commit (each detected by the tests that failed on it, from full runs
   without ``-x``), the costs the tests' measured durations at that commit. A fault counts for a set
   when a test of the set detects it. Also for the whole suite: the plan first, then every other
   test in declared order (what running everything riskiest-first would do).
2. **A synthetic CI history with red runs** (``fastci.demo.history.Workload``: a regression that breaks
   three tests for a stretch of commits, flaky tests, a sick node): at each commit the tests that
   ran, ordered by their history (the plan of a selection that keeps exactly them); the faults are
   that commit's failures, each detected by the test that failed.

Declared order: the order pytest collected the tests (junitxml's order at that commit; test id
order for the synthetic history). Random: the mean over ``--seeds`` shuffles.

APFD = 1 - sum(TF_i) / (n m) + 1 / (2 n), TF_i the position of the first test detecting fault i;
APFDc (Elbaum, Malishevsky and Rothermel 2001, equal fault severities) = sum over faults of (the
cost of the tests from TF_i on, minus half of test TF_i's) / (total cost x m). Both are averaged
over the commits where the set detects at least one fault; 1 is best.

    .venv/bin/python bench/apfd.py [--replay more-itertools] [--seeds 200] [--synthetic-commits 600]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.inputs import ResultEvent
from fastci.planning.processor import TestPlanProcessor
from fastci.runtime.driver import Driver
from fastci.selection.events import KeptTest, Selection, SelectionMetrics
from fastci.selection.replay import load
from fastci.simulate.replay_selection import replay_selections

FAILED = frozenset({"failed", "error"})


def apfd(order: Sequence[str], faults: Sequence[frozenset[str]]) -> float:
    n, position = len(order), {test: i + 1 for i, test in enumerate(order)}
    first = [min(position[t] for t in detecting if t in position) for detecting in faults]
    return 1 - sum(first) / (n * len(faults)) + 1 / (2 * n)


def apfdc(order: Sequence[str], faults: Sequence[frozenset[str]], cost: dict[str, float]) -> float:
    costs = [max(cost[t], 1e-6) for t in order]  # a 0-second test still takes its turn
    total = sum(costs)
    remaining = [0.0] * (len(order) + 1)
    for i in range(len(order) - 1, -1, -1):
        remaining[i] = remaining[i + 1] + costs[i]
    position = {test: i for i, test in enumerate(order)}
    score = 0.0
    for detecting in faults:
        i = min(position[t] for t in detecting if t in position)
        score += remaining[i] - costs[i] / 2
    return score / (total * len(faults))


@dataclass
class Case:
    """One commit's set of tests: the orders to compare, its faults and its costs."""

    risk: list[str]
    declared: list[str]
    faults: list[frozenset[str]]
    cost: dict[str, float]


def detected(faults: Iterable[frozenset[str]], tests: set[str]) -> list[frozenset[str]]:
    return [f & tests for f in faults if f & tests]


@dataclass
class Scores:
    apfd: list[float]
    apfdc: list[float]
    first_failure_share: list[float]  # share of the set's cost spent before the first failing test ends


def score(cases: list[Case], orders: str, seeds: int) -> Scores:
    result = Scores([], [], [])
    for index, case in enumerate(cases):
        if orders == "random":
            rng = random.Random(index)
            shuffles = [rng.sample(case.declared, len(case.declared)) for _ in range(seeds)]
            result.apfd.append(statistics.fmean(apfd(o, case.faults) for o in shuffles))
            result.apfdc.append(statistics.fmean(apfdc(o, case.faults, case.cost) for o in shuffles))
            result.first_failure_share.append(statistics.fmean(first_failure(o, case) for o in shuffles))
        else:
            order = case.risk if orders == "risk" else case.declared
            result.apfd.append(apfd(order, case.faults))
            result.apfdc.append(apfdc(order, case.faults, case.cost))
            result.first_failure_share.append(first_failure(order, case))
    return result


def first_failure(order: Sequence[str], case: Case) -> float:
    failing = set().union(*case.faults)
    spent, total = 0.0, sum(max(case.cost[t], 1e-6) for t in order)
    for test in order:
        spent += max(case.cost[test], 1e-6)
        if test in failing:
            return spent / total
    return 1.0


# ----- the recorded replay


def replay_cases(name: str) -> tuple[list[Case], list[Case], dict]:
    replay = load(name)
    store: dict[str, bytes] = {}
    planner = Driver(TestPlanProcessor(), store)

    def feed(events: Iterable) -> list:
        outputs = [out for event in events for out in planner.handle(event)]
        store.update(planner.drain_writes())
        return outputs

    feed(replay.base_results)
    feed(replay.base_evidence)
    kept_cases, suite_cases = [], []
    info = {"commits": 0, "faults": 0, "faults_detected": 0, "faults_unknown": 0}
    for step, selection in replay_selections(replay):
        plans = feed([step.commit, selection])
        order = [e.test_id for p in sorted(plans, key=lambda p: p.page) for e in p.entries]
        durations = step.durations  # measured at this commit, in collection order
        present = set(durations)
        info["commits"] += 1
        info["faults"] += len(step.faults)
        info["faults_unknown"] += sum(1 for f in step.faults if not f.failing)
        faults = [f.failing for f in step.faults if f.failing]
        info["faults_detected"] += len(faults)
        kept = [t for t in order if t in present]
        declared_kept = [t for t in durations if t in set(kept)]
        if found := detected(faults, set(kept)):
            kept_cases.append(Case(kept, declared_kept, found, durations))
        rest = [t for t in durations if t not in set(kept)]
        if found := detected(faults, present):
            suite_cases.append(Case(kept + rest, list(durations), found, durations))
        feed(step.results)
        feed(step.evidence)
    return kept_cases, suite_cases, info


# ----- the synthetic history with red runs


def synthetic_cases(commits: int) -> tuple[list[Case], dict]:
    from fastci.demo.history import Workload

    workload = Workload(commits=commits, seed=7)
    store: dict[str, bytes] = {}
    planner = Driver(TestPlanProcessor(), store)
    pending: list[ResultEvent] = []
    cases: list[Case] = []
    info = {"commits": 0, "failures": 0}

    def close_commit() -> None:
        if not pending:
            return
        ran = sorted({r.test_id for r in pending})
        commit = pending[0].commit
        selection = Selection(
            commit_id=f"synthetic-{commit}",
            repo=pending[0].repo,
            sha=commit,
            run_all=False,
            kept=tuple(KeptTest(test_id=t, reason="executes-changed-code", estimated_s=1.0) for t in ran),
            metrics=SelectionMetrics(
                tests_known=len(ran),
                selected=len(ran),
                kept=len(ran),
                pruned=0,
                skipped=0,
                selection_ratio=1.0,
                estimated_s_all=0,
                estimated_s_kept=0,
                saved_s=0,
                saved_gpu_s=0,
                changed_units=0,
                pairs_covered_by_all=0,
                pairs_covered_by_kept=0,
                coverage_retention=1.0,
            ),
        )
        (plan,) = planner.handle(selection)  # ordered before this commit's results are known
        order = [e.test_id for e in plan.entries]
        failing = [frozenset({r.test_id}) for r in pending if r.status in FAILED]
        info["commits"] += 1
        info["failures"] += len(failing)
        if failing:
            cases.append(Case(order, ran, failing, {r.test_id: r.duration_s for r in pending}))
        for result in pending:
            planner.handle(result)
        store.update(planner.drain_writes())
        pending.clear()

    for event in workload.events():
        if isinstance(event, ResultEvent):
            if pending and event.commit != pending[0].commit:
                close_commit()
            pending.append(event)
    close_commit()
    return cases, info


# ----- report


def table(title: str, cases: list[Case], seeds: int) -> str:
    lines = [title, f"{'order':22s} {'APFD':>6s} {'APFDc':>6s} {'cost to first failure':>22s}   ({len(cases)} commits)"]
    for orders in ("risk", "declared", "random"):
        s = score(cases, orders, seeds)
        label = {"risk": "risk (test-plan)", "declared": "declared (collection)"}.get(
            orders, f"random (mean of {seeds})"
        )
        lines.append(
            f"{label:22s} {statistics.fmean(s.apfd):6.3f} {statistics.fmean(s.apfdc):6.3f} "
            f"{statistics.fmean(s.first_failure_share):22.1%}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replay", default="more-itertools", help="a packaged recording or a file")
    parser.add_argument("--seeds", type=int, default=200, help="random orders per commit")
    parser.add_argument("--synthetic-commits", type=int, default=600)
    args = parser.parse_args()
    started = time.perf_counter()

    kept, suite, info = replay_cases(args.replay)
    print(
        f"recorded replay {args.replay}: {info['commits']} commits, {info['faults']} mutants "
        f"({info['faults_detected']} detected by the full suite, {info['faults_unknown']} by none)"
    )
    print(table("\nthe kept tests of each selection, in plan order:", kept, args.seeds))
    print(table("\nthe whole suite (the plan first, then the rest in declared order):", suite, args.seeds))
    cases, synthetic = synthetic_cases(args.synthetic_commits)
    print(
        f"\nsynthetic history (fastci.demo.history.Workload, seed 7): {synthetic['commits']} commits, "
        f"{synthetic['failures']} failed runs"
    )
    print(table("the tests each commit ran, ordered by their history:", cases, args.seeds))
    print(f"\n{time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
