"""Change points in a nightly series: e-divisive means with a t-test, as Hunter/Apache Otava do.

Binary segmentation: in a segment, the split that maximises the energy statistic (Matteson & James'
E-divisive with alpha = 1) is a candidate; it is kept when Student's t-test between the two sides is
significant and the shift is at least ``min_effect`` of the earlier level; then both sides are
searched again. Otava replaced E-divisive's permutation test with this t-test to make the result
deterministic and fast; we do the same (no randomness, so processors can call it).

Series are short (a window of nightly medians, <= a few hundred points): O(n^2) per segment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fastci.core.lazy import scipy_stats


@dataclass(frozen=True)
class ChangePoint:
    index: int  # first point of the new segment
    before: float  # mean of the segment before
    after: float  # mean of the segment after
    p_value: float

    @property
    def relative_change(self) -> float:
        return self.after / self.before - 1 if self.before else float("inf")


def change_points(
    series: Sequence[float], min_size: int = 2, max_p: float = 0.001, min_effect: float = 0.0
) -> list[ChangePoint]:
    """Change points of ``series``, in index order. ``min_size`` points on each side at least."""
    x = np.asarray(series, dtype=np.float64)
    found: list[int] = []
    _split(x, 0, x.size, min_size, max_p, min_effect, found)
    found.sort()
    bounds = [0, *found, x.size]
    points = []
    for i, index in enumerate(found):
        left, right = x[bounds[i] : index], x[index : bounds[i + 2]]
        points.append(ChangePoint(index, float(left.mean()), float(right.mean()), _p_value(left, right)))
    return points


def _split(
    x: np.ndarray, start: int, end: int, min_size: int, max_p: float, min_effect: float, found: list[int]
) -> None:
    n = end - start
    if n < 2 * min_size:
        return
    segment = x[start:end]
    tau = _best_split(segment, min_size)
    left, right = segment[:tau], segment[tau:]
    level = abs(left.mean()) or 1.0
    if _p_value(left, right) >= max_p or abs(right.mean() - left.mean()) / level < min_effect:
        return
    found.append(start + tau)
    _split(x, start, start + tau, min_size, max_p, min_effect, found)
    _split(x, start + tau, end, min_size, max_p, min_effect, found)


def _best_split(segment: np.ndarray, min_size: int) -> int:
    """argmax over tau of the E-divisive statistic Q(tau), from 2-D prefix sums of |x_i - x_j|."""
    n = segment.size
    distances = np.abs(segment[:, None] - segment[None, :])
    prefix = np.zeros((n + 1, n + 1))
    prefix[1:, 1:] = distances.cumsum(0).cumsum(1)

    tau = np.arange(min_size, n - min_size + 1)
    m = n - tau
    between = (prefix[tau, n] - prefix[tau, tau]) * 2 / (tau * m)
    within_left = np.where(tau > 1, prefix[tau, tau] / np.maximum(tau * (tau - 1), 1), 0.0)
    right_sum = prefix[n, n] - prefix[tau, n] - prefix[n, tau] + prefix[tau, tau]
    within_right = np.where(m > 1, right_sum / np.maximum(m * (m - 1), 1), 0.0)
    q = tau * m / n * (between - within_left - within_right)
    return int(tau[int(np.argmax(q))])


def _p_value(left: np.ndarray, right: np.ndarray) -> float:
    if left.size < 2 or right.size < 2:
        return 0.0 if left.size and right.size and left.mean() != right.mean() else 1.0
    if np.ptp(left) == 0 and np.ptp(right) == 0:
        return 0.0 if left[0] != right[0] else 1.0
    # Student's (pooled) t-test, as Otava: the noise level is shared across a mean shift, and the long
    # side's variance makes a short new segment testable (Welch's test finds a short new segment less
    # often: bench/changepoint_compare.py compares the two on the same series).
    return float(scipy_stats().ttest_ind(left, right, equal_var=True).pvalue)
