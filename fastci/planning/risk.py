"""How likely a test is to fail on a change, and the order that finds failures soonest per unit of cost.

A test's own history: each run is a Bernoulli trial (failed or error = 1, passed or flaky = 0;
skipped says nothing). Recent runs count more: the run k places back weighs ``DECAY ** k``. With a
Beta prior of mean ``PRIOR_FAILURE`` and weight ``PRIOR_RUNS`` runs, the posterior mean failure
rate is ``(a + failures_w) / (a + b + runs_w)``: a new test starts at the prior, not at zero, and
a test that failed recently stays risky until passes outweigh it. Flaky runs (failed, then passed
on retry) get the same treatment into a flaky rate.

The change: selection says which changed units each kept test executes. If the change is faulty
with probability ``CHANGE_FAILURE`` and the fault is equally likely in any executed changed unit, a
test executing a share ``exposure`` of them fails for it with probability about
``CHANGE_FAILURE * exposure``. The two causes combine as independent ones, and the result is
discounted by the flaky rate: a flaky test's failure says less, and its slot is better spent on a
test whose failure would be believed:

    risk = (1 - (1 - history) * (1 - CHANGE_FAILURE * exposure)) * (1 - flaky_rate)

Order: highest ``risk / cost`` first, cost = expected seconds x max(1, chips). For independent
failures this order minimises the expected cost until the first failure (swap two neighbours i, j:
i first is cheaper iff p_i c_j > p_j c_i). Ties by test id, so the order is deterministic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DECAY = 0.9  # weight of a run per run newer than it: the 7th run back counts half
PRIOR_FAILURE = 0.05  # a test nobody has seen fails this often
PRIOR_RUNS = 2.0  # the prior weighs as much as this many runs
PRIOR_FLAKY = 0.01
CHANGE_FAILURE = 0.2  # chance a change breaks a test that executes all of the changed code
FAILED = frozenset({"failed", "error"})


@dataclass(frozen=True)
class Weighted:
    """Recency-weighted counts of a test's runs (newest weight 1)."""

    runs: float = 0.0
    failures: float = 0.0
    flaky: float = 0.0


def weighted_counts(statuses: Iterable[str], decay: float = DECAY) -> Weighted:
    """``statuses`` oldest first; skipped runs are not trials and do not age the others."""
    runs = failures = flaky = 0.0
    for status in statuses:
        if status == "skipped":
            continue
        runs, failures, flaky = runs * decay + 1, failures * decay, flaky * decay
        if status in FAILED:
            failures += 1
        elif status == "flaky":
            flaky += 1
    return Weighted(runs, failures, flaky)


def posterior_rate(events: float, trials: float, prior: float, prior_runs: float = PRIOR_RUNS) -> float:
    """Posterior mean of a Beta(prior * prior_runs, (1 - prior) * prior_runs) after the weighted trials."""
    return (prior * prior_runs + events) / (prior_runs + trials)


def history_risk(counts: Weighted, prior: float = PRIOR_FAILURE) -> float:
    return posterior_rate(counts.failures, counts.runs, prior)


def flaky_rate(counts: Weighted) -> float:
    return posterior_rate(counts.flaky, counts.runs, PRIOR_FLAKY)


def combined_risk(history: float, exposure: float, flaky: float, change_failure: float = CHANGE_FAILURE) -> float:
    exposure = min(1.0, max(0.0, exposure))
    return (1 - (1 - history) * (1 - change_failure * exposure)) * (1 - flaky)


def cost(expected_s: float, chips: int) -> float:
    """What running a test costs: chip-seconds, a CPU test counting as one chip; never zero."""
    return max(expected_s, 1e-3) * max(1, chips)


def order(risks: dict[str, float], costs: dict[str, float]) -> list[str]:
    """Test ids by risk per unit of cost, highest first; ties by test id."""
    return sorted(risks, key=lambda test: (-risks[test] / costs[test], test))


def exposures(functions: dict[str, Sequence[str]]) -> dict[str, float]:
    """Per test, the share of the changed units executed by any of these tests that it executes."""
    executed = set().union(*functions.values()) if functions else set()
    if not executed:
        return {test: 0.0 for test in functions}
    return {test: len(set(names)) / len(executed) for test, names in functions.items()}
