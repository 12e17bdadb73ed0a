"""Where a run is along its shrinkable dimensions, so evidence can say from which step (layer...) on
each unit executes.

Code under test marks its loops::

    from fastci.evidence.dimensions import at
    for step in range(steps):
        with at("steps", step):
            ...

Outside evidence collection this costs a dict write per loop turn. The tracing collector
(``fastci.evidence.tracing.Tracer`` with ``dimensions=True``) reads the current point at every
call into project code and keeps, per unit, the minimal points it ran at
(``fastci.planning.shrink.add_point``). The point is one tuple replaced on every change, so the
tracer tells "same point as this unit's last call" by identity.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastci.evidence.stacks import Frame, to_project_stack
from fastci.planning.shrink import add_point
from fastci.selection.graph import parse_frame
from fastci.selection.units import LAMBDA

POINT_LIMIT = 8  # minimal points per call site: fastci.inputs.MAX_POINTS

_position: dict[str, int] = {}
POINT: tuple[tuple[str, int], ...] = ()  # the current position, sorted by dimension; () outside every loop


@contextmanager
def at(dimension: str, index: int) -> Iterator[None]:
    """Run the block at ``index`` (0-based) of ``dimension``."""
    global POINT
    previous = _position.get(dimension)
    _position[dimension] = index
    POINT = tuple(sorted(_position.items()))
    try:
        yield
    finally:
        if previous is None:
            _position.pop(dimension, None)
        else:
            _position[dimension] = previous
        POINT = tuple(sorted(_position.items()))


@contextmanager
def restored(point: tuple[tuple[str, int], ...]) -> Iterator[None]:
    """Run deferred work (an autodiff backward step, a callback) at the point that created it, so its
    code counts for that step and layer, not for wherever it happens to run."""
    global POINT, _position
    if point is POINT:
        yield
        return
    saved = POINT, _position
    POINT, _position = point, dict(point)
    try:
        yield
    finally:
        POINT, _position = saved


def first_executions(
    points: Mapping[tuple[str, int] | tuple[str, int, bool], list[dict[str, int]]],
    root: str | Path,
    units_cache: Any,
    cwd: str | Path | None = None,
    dimensions: set[str] | None = None,
) -> dict[str, list[dict[str, int]]]:
    """The tracer's points per (filename, line[, runs a lambda]) as minimal points per unit ('path::qualname'),
    restricted to ``dimensions`` (undeclared ones are dropped: the unit then looks as if it ran
    outside them). Units that ran at the first index of everything are left out: any config runs them."""

    by_unit: dict[str, list[dict[str, int]]] = {}
    for (filename, line, *in_lambda), found in points.items():
        stack = to_project_stack([Frame(LAMBDA if any(in_lambda) else "", filename, line)], root, units_cache, cwd)
        parsed = parse_frame(stack) if stack else None
        if parsed is None:
            continue
        path, qualname = parsed
        kept = by_unit.setdefault(f"{path}::{qualname}", [])
        for point in found:
            add_point(kept, {d: i for d, i in point.items() if dimensions is None or d in dimensions}, POINT_LIMIT)
    return {
        unit: sorted(kept, key=lambda p: sorted(p.items()))
        for unit, kept in sorted(by_unit.items())
        if not any(all(i == 0 for i in p.values()) for p in kept)
    }
