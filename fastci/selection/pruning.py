"""Context-aware pruning: the cheapest set of tests that still covers every changed
(function, calling context) pair the selected tests cover.

Weighted set cover is NP-hard; the greedy rule (take the test with the most uncovered pairs per
second of expected run time) is within a factor ln(n) of optimal and is what FastCI uses. Lazy
evaluation keeps it fast: a test's gain can only fall as others are kept, so a stale heap entry
is re-scored only when it reaches the top.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass

Pair = tuple[str, str]  # (unit id, context id)


@dataclass(frozen=True)
class Pruned:
    kept: tuple[str, ...]  # forced tests first (sorted), then in the order greedy took them
    covered_by: dict[str, tuple[str, ...]]  # pruned test -> kept tests covering its pairs


def prune(
    candidates: Mapping[str, frozenset[Pair]], costs: Mapping[str, float], forced: frozenset[str] = frozenset()
) -> Pruned:
    """Keep ``forced`` tests, then greedily the candidates that add uncovered pairs; every other
    candidate is pruned and names the kept tests that cover it. Deterministic: ties go to the
    cheaper test, then the smaller test id."""
    kept = sorted(forced)
    covered: set[Pair] = set()
    for test in kept:
        covered |= candidates.get(test, frozenset())
    heap = [(-_gain(pairs, covered, costs[t]), costs[t], t) for t, pairs in candidates.items() if t not in forced]
    heapq.heapify(heap)
    while heap:
        negative_gain, cost, test = heapq.heappop(heap)
        gain = _gain(candidates[test], covered, cost)
        if gain <= 0:
            continue
        if heap and -gain > heap[0][0]:  # stale score and no longer the best: re-queue
            heapq.heappush(heap, (-gain, cost, test))
            continue
        kept.append(test)
        covered |= candidates[test]
    order = {test: i for i, test in enumerate(kept)}
    first_cover: dict[Pair, str] = {}
    for test in kept:
        for pair in candidates.get(test, frozenset()):
            first_cover.setdefault(pair, test)
    covered_by = {
        test: tuple(sorted({first_cover[pair] for pair in pairs}, key=order.__getitem__))
        for test, pairs in candidates.items()
        if test not in order
    }
    return Pruned(tuple(kept), covered_by)


def _gain(pairs: frozenset[Pair], covered: set[Pair], cost: float) -> float:
    return len(pairs - covered) / max(cost, 1e-3)
