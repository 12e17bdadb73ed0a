"""Workload optimisation: the smallest config that still executes every changed unit the full config executes.

A test declares the dimensions that may shrink, each with its full value, its minimum and how its
duration grows with it (``duration ∝ value ** cost_exponent``), and a validation scope that is
never touched (scope dimensions are not in ``dimensions`` at all). Evidence says, per unit, the
minimal points (0-based step, layer... indices) at which it executed in the full run: it runs in
a config whose every dimension exceeds the point's index there, for one of its points.

The assumption is monotone code: whatever ran at step k of the full run also runs at step k of a
run with more than k steps. Code that keys on the extent itself (``if steps >= 100``) breaks it;
so a shrunk config is proven by running it under evidence collection (tests/test_workload_qualify.py).

The search: each dimension's candidate values are its minimum and every ``index + 1`` a needed
point asks for; the grid of candidates is searched whole when small (a few units, a few points),
greedily (one dimension at a time, from the full config down) when not. Cost is the duration
ratio ``prod((value / full) ** cost_exponent)``; ties go to the config with the smaller values in
declaration order, so the choice is deterministic. The estimated duration adds back the share of
the run no dimension shrinks: ``fixed + (1 - fixed) * prod(...)`` (measured per test; see
bench/workload_scaling.py: with several dimensions at their minimum, per-call overheads dominate).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

Point = Mapping[str, int]
GRID_LIMIT = 20_000  # configs searched exhaustively; beyond, the greedy search


@dataclass(frozen=True)
class Dimension:
    name: str
    full: int
    minimum: int
    cost_exponent: float = 1.0


@dataclass(frozen=True)
class Shrink:
    values: dict[str, int]  # every dimension's chosen value
    scale: float  # estimated duration of the chosen config / the full config's

    def shrunk(self, dimensions: Sequence[Dimension]) -> dict[str, int]:
        return {d.name: self.values[d.name] for d in dimensions if self.values[d.name] < d.full}


def executes(points: Iterable[Point], values: Mapping[str, int]) -> bool:
    """Whether a unit with these first-execution points runs in a config with these values."""
    return any(all(index < values[name] for name, index in point.items()) for point in points)


def dominates(a: Point, b: Point) -> bool:
    """``a`` asks for no more than ``b``: every dimension of ``a`` is in ``b`` at an index no lower."""
    return all(name in b and index <= b[name] for name, index in a.items())


def add_point(points: list[dict[str, int]], point: dict[str, int], limit: int) -> bool:
    """Keep ``points`` the minimal ones; False when ``point`` added nothing."""
    if any(dominates(kept, point) for kept in points):
        return False
    points[:] = [kept for kept in points if not dominates(point, kept)]
    if len(points) < limit:  # a dropped point only makes the unit look more demanding: safe
        points.append(point)
    return True


def scale_of(dimensions: Sequence[Dimension], values: Mapping[str, int], fixed_share: float = 0.0) -> float:
    """Estimated duration of a config as a share of the full config's."""
    product = math.prod((values[d.name] / d.full) ** d.cost_exponent for d in dimensions)
    return fixed_share + (1 - fixed_share) * product


def smallest_config(
    dimensions: Sequence[Dimension], needed: Mapping[str, Sequence[Point]], fixed_share: float = 0.0
) -> Shrink:
    """The cheapest config, each dimension within [minimum, full], in which every unit of ``needed``
    (unit -> its first-execution points in the full run) still executes."""
    full = {d.name: d.full for d in dimensions}
    demands = [points for points in needed.values() if points]
    if not dimensions:
        return Shrink({}, 1.0)
    candidates = []
    for d in dimensions:
        asked = {point[d.name] + 1 for points in demands for point in points if d.name in point}
        candidates.append(sorted({d.minimum, d.full} | {v for v in asked if d.minimum < v < d.full}))

    def feasible(values: Mapping[str, int]) -> bool:
        return all(executes(points, values) for points in demands)

    def rank(values: Mapping[str, int]) -> tuple[float, tuple[int, ...]]:
        return scale_of(dimensions, values), tuple(values[d.name] for d in dimensions)

    if math.prod(len(c) for c in candidates) <= GRID_LIMIT:
        grid = (dict(zip(full, combo, strict=True)) for combo in itertools.product(*candidates))
        best = min((values for values in grid if feasible(values)), key=rank)
    else:
        best = dict(full)
        for d, values in zip(dimensions, candidates, strict=True):
            for value in values:  # ascending: the first feasible is the smallest for this dimension
                trial = {**best, d.name: value}
                if feasible(trial):
                    best = trial
                    break
    return Shrink(best, scale_of(dimensions, best, fixed_share))
