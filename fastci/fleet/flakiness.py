"""What makes a test flaky: one definition, used by ``flaky-detector`` (which marks tests) and by
``regression-detector`` (which keeps flaky tests out of baselines and regression calls).

A test is flaky when
- runs of the same code on the same stack with the same config and seed disagree (some pass, some
  fail), and the disagreement is not one sick node's doing: failures on at least two distinct
  nodes, or one node that both passed and failed; runs on nodes that were not healthy at the time
  (``baseline-exclusions``) do not count; or
- ``RETRY_LIMIT`` of its last ``RECENT`` runs passed only on retry (status 'flaky').

A failure on one node where other nodes passed is not flakiness yet: it is a node-fault candidate
(``failure-attribution`` weighs it), until a second node fails the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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


def outcomes_differ(outcomes: Iterable[Outcome]) -> str | None:
    """Why these runs of one (commit, bundle, config, seed) show a flaky test, or None."""
    counted = [o for o in outcomes if not o.excluded and o.status in FAILING | PASSING]
    failing = {o.node_id for o in counted if o.status in FAILING}
    passing = {o.node_id for o in counted if o.status in PASSING}
    if not failing or not passing:
        return None
    if len(failing) >= 2:
        return f"failed on {len(failing)} nodes and passed on {len(passing)} with the same code, stack, config and seed"
    both = failing & passing
    if both:
        return f"both passed and failed on {sorted(both)[0]} with the same code, stack, config and seed"
    return None
