"""Performance regressions from noisy samples: Mann-Whitney U plus a bootstrap of the median ratio.

A run carries repeats of each metric after warmup. ``compare`` calls a regression only when both
- a one-sided Mann-Whitney U test says the candidate is worse than the baseline (p < alpha), and
- the bootstrap confidence interval of the median ratio (as performance: < 1 is worse) lies
  entirely below ``1 - min_effect``: we are confident the loss is at least ``min_effect``.

``threshold`` (default 2%) is the drop that must be caught; ``min_effect`` defaults to half of it.
Requiring the interval to exclude the threshold itself would catch a drop of exactly 2% at most
half the time (the estimate lands on either side of it), so the decision boundary sits halfway
between "no change" and "the drop we must catch". The repeats that make this reliable for a given
noise are in ``repeats_needed`` and the power table of bench/regression_detection.py.

No randomness: the bootstrap's generator is seeded from event ids (``seed_from``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fastci.core.lazy import scipy_stats

Direction = Literal["higher", "lower"]

# Name conventions for metrics whose direction is known; anything else is not a performance metric.
_HIGHER = ("throughput", "_per_s", "_per_sec", "tokens_per", "samples_per", "tflops", "mfu", "bandwidth")
_LOWER = ("latency", "step_time", "_time_s", "_seconds", "_ms", "duration", "memory_bytes", "peak_memory")


def metric_direction(name: str) -> Direction | None:
    """'higher' for throughput-like names, 'lower' for latency/time-like names, else None."""
    lowered = name.lower()
    if any(part in lowered for part in _HIGHER):
        return "higher"
    if any(part in lowered for part in _LOWER):
        return "lower"
    return None


def seed_from(*parts: str) -> int:
    """A 64-bit seed derived from ids, so resampling is the same in every runtime and replay."""
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "little")


@dataclass(frozen=True)
class PerfGate:
    threshold: float = 0.02  # the drop that must be caught
    min_effect: float | None = None  # the interval must exclude losses smaller than this (threshold / 2)
    alpha: float = 0.01  # one-sided Mann-Whitney U
    confidence: float = 0.95  # two-sided bootstrap interval
    n_resamples: int = 2000
    min_samples: int = 3  # fewer repeats than this on either side: no call

    @property
    def effect(self) -> float:
        return self.threshold / 2 if self.min_effect is None else self.min_effect


@dataclass(frozen=True)
class PerfVerdict:
    regression: bool
    ratio: float  # candidate / baseline median, as performance: < 1 is worse
    ci_low: float
    ci_high: float
    p_value: float
    n_baseline: int
    n_candidate: int
    reason: str

    @property
    def loss(self) -> float:
        """How much worse, as a fraction (0.03 = 3% slower)."""
        return 1.0 - self.ratio


def as_performance(samples: Sequence[float], direction: Direction) -> np.ndarray:
    """Samples where higher is better (latencies become rates), all finite and positive."""
    x = np.asarray(samples, dtype=np.float64)
    if x.size and (not np.all(np.isfinite(x)) or np.any(x <= 0)):
        raise ValueError("performance samples must be finite and positive")
    return x if direction == "higher" else 1.0 / x


def compare(
    baseline: Sequence[float], candidate: Sequence[float], direction: Direction, gate: PerfGate, seed: int
) -> PerfVerdict:
    """Is ``candidate`` worse than ``baseline`` by a real, material amount? (see module doc)"""
    base = as_performance(baseline, direction)
    cand = as_performance(candidate, direction)
    n_b, n_c = base.size, cand.size
    if n_b < gate.min_samples or n_c < gate.min_samples:
        return PerfVerdict(
            False, 1.0, 0.0, math.inf, 1.0, n_b, n_c, f"too few samples ({n_b} baseline, {n_c} candidate)"
        )
    ratio = float(np.median(cand) / np.median(base))
    p_value = float(scipy_stats().mannwhitneyu(cand, base, alternative="less").pvalue)
    boundary = 1.0 - gate.effect
    if p_value >= gate.alpha or ratio >= boundary:
        # The interval contains the estimate, so it cannot lie below the boundary: skip the resampling.
        reason = (
            f"p={p_value:.3g} >= {gate.alpha:g}" if p_value >= gate.alpha else f"ratio {ratio:.4f} >= {boundary:.4f}"
        )
        return PerfVerdict(False, ratio, math.nan, math.nan, p_value, n_b, n_c, reason)
    low, high = median_ratio_interval(base, cand, gate.confidence, gate.n_resamples, seed)
    regression = high < boundary
    reason = (
        f"{1 - ratio:.2%} worse, p={p_value:.3g}, {gate.confidence:.0%} CI of the ratio [{low:.4f}, {high:.4f}] "
        f"{'below' if regression else 'reaches'} {boundary:.4f}"
    )
    return PerfVerdict(regression, ratio, low, high, p_value, n_b, n_c, reason)


def median_ratio_interval(
    base: np.ndarray, cand: np.ndarray, confidence: float, n_resamples: int, seed: int
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(cand) / median(base), resampling both independently.

    Each resample's median is drawn from its exact sampling distribution instead of by sorting a
    resample: for sorted data x(1..n), P(median of a resample <= x(j)) = P(Binomial(n, j/n) >= k)
    with k = (n + 1) // 2. That is the same interval as scipy.stats.bootstrap (exactly so for odd
    n; for even n the two middle order statistics are drawn with one shared uniform and averaged),
    about 100 times faster on a 1,000-sample baseline (tests compare the two).
    """
    rng = np.random.default_rng(seed)
    ratios = _resampled_medians(cand, n_resamples, rng) / _resampled_medians(base, n_resamples, rng)
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return float(low), float(high)


def median_interval(samples: Sequence[float], confidence: float, n_resamples: int, seed: int) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of one sample (same resampler as above)."""
    x = np.asarray(samples, dtype=np.float64)
    medians = _resampled_medians(x, n_resamples, np.random.default_rng(seed))
    tail = (1 - confidence) / 2
    low, high = np.quantile(medians, [tail, 1 - tail])
    return float(low), float(high)


def _resampled_medians(samples: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    x = np.sort(samples)
    n = x.size
    u = rng.random(count)
    share = np.arange(1, n + 1) / n

    def order_statistic(k: int) -> np.ndarray:
        cdf = scipy_stats().binom.sf(k - 1, n, share)  # P(at least k of n draws are <= x(j))
        cdf[-1] = 1.0
        return x[np.minimum(np.searchsorted(cdf, u), n - 1)]

    if n % 2:
        return order_statistic((n + 1) // 2)
    return (order_statistic(n // 2) + order_statistic(n // 2 + 1)) / 2


def sketch(samples: Sequence[float], count: int) -> tuple[float, ...]:
    """``count`` evenly spaced order statistics of ``samples`` (all of them when there are fewer):
    a distribution in bounded space. As a baseline it is conservative: a test takes it for ``count``
    samples, not for the many it summarises."""
    ordered = sorted(samples)
    if len(ordered) <= count:
        return tuple(ordered)
    return tuple(ordered[int((i + 0.5) * len(ordered) / count)] for i in range(count))


def relative_noise(samples: Sequence[float]) -> float:
    """Robust coefficient of variation: 1.4826 * MAD / median (the sd for normal noise)."""
    x = np.asarray(samples, dtype=np.float64)
    if x.size < 2:
        return math.nan
    median = float(np.median(x))
    return float(1.4826 * np.median(np.abs(x - median)) / abs(median)) if median else math.nan


def detection_probability(noise: float, repeats: int, baseline_size: int, drop: float, gate: PerfGate) -> float:
    """Normal approximation of P(one gate fires) for a true ``drop`` (the median's sd is 1.2533 sd/sqrt(n))."""
    se = 1.2533 * noise * math.sqrt(1 / repeats + 1 / baseline_size)
    z = scipy_stats().norm.ppf(0.5 + gate.confidence / 2)
    return float(scipy_stats().norm.cdf((drop - gate.effect) / se - z))


def repeats_needed(
    noise: float,
    drop: float = 0.02,
    gate: PerfGate | None = None,
    baseline_size: int = 1024,
    target: float = 0.95,
    stages: int = 2,
    limit: int = 100_000,
) -> int | None:
    """Fewest repeats per run so that ``stages`` independent gates all fire with ``target`` probability
    (the nightly run and its confirmation run), by the normal approximation. None past ``limit``."""
    gate = gate or PerfGate()
    if drop <= gate.effect:
        return None
    per_stage = target ** (1 / stages)
    lo, hi = 1, limit
    if detection_probability(noise, hi, baseline_size, drop, gate) < per_stage:
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if detection_probability(noise, mid, baseline_size, drop, gate) >= per_stage:
            hi = mid
        else:
            lo = mid + 1
    return max(lo, gate.min_samples)
