"""What makes a test flaky: one definition, used by ``flaky-detector`` (which marks tests) and by
``regression-detector`` (which keeps flaky tests out of baselines and regression calls).

A test is flaky when
- runs of the same code on the same stack with the same config and seed disagree (some pass, some
  fail), and the disagreement is not one sick node's doing: failures on at least two distinct
  nodes; runs on nodes that were not healthy at the time (``baseline-exclusions``) do not count
  (an exclusion that arrives after the verdict withdraws it when the rest no longer disagree); or
- ``RETRY_LIMIT`` of its last ``RECENT`` runs passed only on retry (status 'flaky').

A failure on one node where other nodes passed is not flakiness yet, even on a node that passed the
same run before (it may be turning sick): it is a node-fault candidate (``failure-attribution``
weighs it), until a second node fails the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

RECENT = 20  # runs of a test the retry rule looks at
RETRY_LIMIT = 2  # runs among them that passed only on retry
STABLE_AFTER = 50  # runs without new flake evidence before a flaky test is stable again
FAILING: frozenset[str] = frozenset({"failed", "error"})
PASSING: frozenset[str] = frozenset({"passed", "flaky"})


def flaky_by_retries(statuses: Sequence[str]) -> bool:
    """Too many of the recent runs passed only on retry."""
    return list(statuses[-RECENT:]).count("flaky") >= RETRY_LIMIT


@dataclass(frozen=True)
class Outcome:
    node_id: str
    status: str
    excluded: bool = False  # the node was not healthy when it ran


class Run(Protocol):
    """A run as the rules read it: an ``Outcome``, or a stored outcome with these fields."""

    @property
    def node_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def excluded(self) -> bool: ...


def outcomes_differ(outcomes: Iterable[Run]) -> str | None:
    """Why these runs of one (commit, bundle, config, seed) show a flaky test, or None."""
    failing: set[str] = set()
    passing: set[str] = set()
    for outcome in outcomes:  # the hot path of every result: one pass, no copies
        if outcome.excluded:
            continue
        if outcome.status in FAILING:
            failing.add(outcome.node_id)
        elif outcome.status in PASSING:
            passing.add(outcome.node_id)
    if not failing or not passing:
        return None
    if len(failing) >= 2:
        return f"failed on {len(failing)} nodes and passed on {len(passing)} with the same code, stack, config and seed"
    return None  # one node failing (even where it passed before) may be that node turning sick
