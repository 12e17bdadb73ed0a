"""The qualification checks: small, self-contained tolerance helpers.

These are deliberately minimal stand-ins for the regression gates of issue 4 (tolerance gates,
loss-curve band, eval ratio, performance statistics); each is one function with its thresholds
stated here, so the runner can switch to the shared gate API without changing what it measures.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import wilcoxon

# Normwise relative error ||out - golden|| / ||golden|| allowed for inference outputs, per precision.
# Set between what healthy runs measure and what a defect produces (README: "fastci qualify").
INFERENCE_TOLERANCE: dict[str, float] = {"fp32": 1e-5, "bf16": 2e-2, "fp8": 1.5e-1}

# Loss-curve band: how far (relative) the smoothed loss may stray outside the reference's envelope,
# per precision, plus an absolute floor for losses near zero. The bands sit between what healthy runs
# stray and what the emulated defects do (docs/producers.md, "tolerances", has the figures).
LOSS_BAND_RTOL: dict[str, float] = {"fp32": 0.01, "bf16": 0.06, "fp8": 0.10}
LOSS_BAND_ATOL = 0.005
EVAL_MIN_RATIO = 0.99  # eval score must reach 99% of the reference's
PERF_MAX_DROP = 0.02  # a throughput drop this large or larger, when significant, is a regression
PERF_ALPHA = 0.01  # significance level of the one-sided Wilcoxon signed-rank test
# A comparison with a p-value under PERF_UNDECIDED_P that is no significant drop of PERF_MAX_DROP
# (p at or above alpha, or a drop measured under 2%) leans to a drop without showing it: the gate
# pools in one more interleaved pair instead of passing it (as Chromium's Pinpoint adds repeats to an
# "unknown" comparison). On a loaded host one pair of a 3% drop can land there.
PERF_UNDECIDED_P = 0.10


def relative_error(output: np.ndarray, golden: np.ndarray) -> float:
    """Normwise relative error, in fp64."""
    diff = np.linalg.norm((output.astype(np.float64) - golden.astype(np.float64)).ravel())
    return float(diff / max(np.linalg.norm(golden.astype(np.float64).ravel()), 1e-30))


def mismatch_fraction(runs: list[np.ndarray]) -> float:
    """Fraction of elements on which repeated runs of the same input disagree bit for bit."""
    first = runs[0].view(np.uint32) if runs[0].dtype == np.float32 else runs[0]
    differ = np.zeros(first.shape, bool)
    for other in runs[1:]:
        differ |= (other.view(np.uint32) if other.dtype == np.float32 else other) != first
    return float(differ.mean())


def loss_window(steps: int) -> int:
    """Steps averaged before comparing (so one noisy batch does not trip the band), and the shift in
    steps the band allows (so reaching a steep drop a few steps late is not a divergence)."""
    return max(10, steps // 20)


def _smooth(curve: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over ``window`` steps (shorter at the start)."""
    sums = np.cumsum(np.concatenate([[0.0], curve]))
    ends = np.arange(1, len(curve) + 1)
    starts = np.maximum(0, ends - window)
    return (sums[ends] - sums[starts]) / (ends - starts)


def loss_divergence_step(
    curve: list[float] | np.ndarray, reference: list[float] | np.ndarray, precision: str
) -> int | None:
    """The first step at which the smoothed loss leaves the reference's band, or None.

    Both curves are smoothed over ``loss_window`` steps; at step t the band is the reference's
    range over steps t-w..t+w, widened by ``LOSS_BAND_RTOL[precision]`` (relative) and
    ``LOSS_BAND_ATOL``. Curves of different lengths are compared over the shorter one."""
    n = min(len(curve), len(reference))
    if n == 0:
        return None
    window = loss_window(n)
    run = _smooth(np.asarray(curve[:n], np.float64), window)
    ref = _smooth(np.asarray(reference[:n], np.float64), window)
    padded = np.pad(ref, window, mode="edge")
    shifted = np.lib.stride_tricks.sliding_window_view(padded, 2 * window + 1)  # ref[t-w .. t+w] per t
    rtol = LOSS_BAND_RTOL[precision]
    low = shifted.min(axis=1) * (1 - rtol) - LOSS_BAND_ATOL
    high = shifted.max(axis=1) * (1 + rtol) + LOSS_BAND_ATOL
    outside = (run < low) | (run > high)
    return int(np.argmax(outside)) if outside.any() else None


@dataclass(frozen=True)
class PerformanceVerdict:
    ratio: float  # median over windows of candidate throughput / baseline throughput
    p_value: float  # one-sided Wilcoxon signed-rank test that the candidate is slower
    windows: int
    spread: float  # standard deviation of the per-window log ratio: the noise the gate works against
    confirmation: PerformanceVerdict | None = None  # the second comparison, run when this one flagged
    pairs: int = 1  # interleaved pairs pooled into this comparison (2 when the first was undecided)

    @property
    def significant_drop(self) -> bool:
        return self.p_value < PERF_ALPHA and self.ratio <= 1 - PERF_MAX_DROP

    @property
    def undecided(self) -> bool:
        """Leaning to a drop (a small p-value) without showing one: worth another pair."""
        return not self.significant_drop and self.p_value < PERF_UNDECIDED_P

    @property
    def regressed(self) -> bool:
        """A drop flagged by two independent interleaved comparisons (one alone is a false alarm ~1-8%
        of the time on a shared host: alpha plus per-run measurement bias)."""
        return self.significant_drop and self.confirmation is not None and self.confirmation.significant_drop


StepSeconds = Sequence[float]


def compare_interleaved(pairs: Sequence[tuple[StepSeconds, StepSeconds]], window: int) -> PerformanceVerdict:
    """Judge per-step kernel times of candidate and baseline runs interleaved step by step on one host.

    Each pair's steps are summed in windows; each window pair gives a throughput ratio, and the
    windows of all ``pairs`` are pooled. Interleaving puts both runs under the same machine state, so
    a shared host's load shifts (which move a run's median by up to 25% here) cancel in the ratio.
    A regression is a significant drop of at least ``PERF_MAX_DROP``."""
    log_ratios = []
    for candidate_seconds, baseline_seconds in pairs:
        n = min(len(candidate_seconds), len(baseline_seconds)) // window * window
        cand = np.asarray(candidate_seconds[:n]).reshape(-1, window).sum(axis=1)
        base = np.asarray(baseline_seconds[:n]).reshape(-1, window).sum(axis=1)
        log_ratios.append(np.log(base / cand))  # throughput ratio: the candidate is slower when this is < 0
    log_ratio = np.concatenate(log_ratios)
    if len(log_ratio) < 6:
        raise ValueError(f"performance: {len(log_ratio)} window(s) of {window} steps; need at least 6")
    p_value = float(wilcoxon(log_ratio, alternative="less").pvalue)
    median = float(np.exp(np.median(log_ratio)))
    return PerformanceVerdict(median, p_value, len(log_ratio), float(np.std(log_ratio)), pairs=len(pairs))


def gate_interleaved(
    first: tuple[StepSeconds, StepSeconds], measure: Callable[[], tuple[StepSeconds, StepSeconds]], window: int
) -> PerformanceVerdict:
    """The performance gate's procedure from a first interleaved pair; ``measure`` runs another.

    A comparison is one pair, with a second pooled in when it is undecided. When it flags a drop, a
    confirming comparison from a fresh pair (pooled the same way) must flag it too: one pair's
    measurement bias does not carry over to the next."""

    def comparison(pair: tuple[StepSeconds, StepSeconds]) -> PerformanceVerdict:
        verdict = compare_interleaved([pair], window)
        if verdict.undecided:
            verdict = compare_interleaved([pair, measure()], window)
        return verdict

    verdict = comparison(first)
    if verdict.significant_drop:
        verdict = replace(verdict, confirmation=comparison(measure()))
    return verdict
