"""Is a node silently slow? A one-sample test over its runs' throughput relative to other nodes.

``failure-attribution`` turns every passing run with a throughput metric into a ratio: the run's
level (a trimmed mean of its samples) over the median of the same test's other nodes' levels on the
same bundle, hardware revision and config in the hours before (one value per node, at least
``MIN_PEER_NODES`` nodes). A healthy node's ratios scatter around 1; a slow node's sit below it
whatever the test. ``node-state`` keeps a node's recent ratios and judges the newest here:

- one-sided Wilcoxon signed-rank test of log(ratio) < 0 (scipy; exact for small counts): the runs
  sit consistently below the other nodes', not just on average;
- the bootstrap interval of the median ratio (``perfstats.median_interval``, seeded from event ids):
  how much slower, with its uncertainty.

One value per run, not raw samples: samples of one run share that run's host conditions, so pooling
them would count one noisy run as many independent observations. The thresholds are calibrated by
bench/fleet_slow_gate.py (README, "Fleet health").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import numpy as np

from fastci.core.lazy import scipy_stats
from fastci.shared.perfstats import median_interval

Level = Literal["healthy", "suspect", "quarantine"]


@dataclass(frozen=True)
class SlowGate:
    window: timedelta = timedelta(hours=48)  # ratios older than this are forgotten: a node turns slow at
    max_runs: int = 16  # some point, and its older runs only dilute the newer ones (the newest 16 are judged)
    min_runs: int = 7  # fewer: no call (7 runs all below their peers give p = 0.0078)
    suspect_p: float = 0.01
    quarantine_p: float = 0.002  # needs at least 9 runs
    min_effect: float = 0.05  # both levels: the median ratio below 1 - min_effect
    suspect_ci_high: float = 0.99  # suspect: the interval's top below this (confidently slower)
    quarantine_ci_high: float = 0.97  # quarantine: confidently at least 3% slower
    confidence: float = 0.95
    n_resamples: int = 2000


@dataclass(frozen=True)
class SlowVerdict:
    level: Level
    runs: int
    median_ratio: float
    ci_low: float
    ci_high: float
    p_value: float

    def describe(self) -> str:
        if self.runs == 0:
            return "no throughput ratios"
        text = f"median throughput {self.median_ratio:.3f}x other nodes' over {self.runs} runs (p={self.p_value:.3g}"
        if math.isfinite(self.ci_high):
            text += f", 95% CI {self.ci_low:.3f}-{self.ci_high:.3f}"
        return text + ")"


def judge(ratios: Sequence[float], seed: int, gate: SlowGate = SlowGate()) -> SlowVerdict:
    """Is a node whose runs had these throughput ratios slower than its peers?"""
    x = np.asarray(ratios, dtype=np.float64)
    n = int(x.size)
    if n == 0:
        return SlowVerdict("healthy", 0, 1.0, math.nan, math.nan, 1.0)
    median = float(np.median(x))
    if n < gate.min_runs or median >= 1 - gate.min_effect:
        return SlowVerdict("healthy", n, median, math.nan, math.nan, 1.0)
    logs = np.log(x)
    p_value = float(scipy_stats().wilcoxon(logs, alternative="less").pvalue) if np.any(logs != 0) else 1.0
    if p_value >= gate.suspect_p:
        return SlowVerdict("healthy", n, median, math.nan, math.nan, p_value)
    low, high = median_interval(x, gate.confidence, gate.n_resamples, seed)
    if p_value < gate.quarantine_p and high < gate.quarantine_ci_high:
        level: Level = "quarantine"
    else:
        level = "suspect" if high < gate.suspect_ci_high else "healthy"
    return SlowVerdict(level, n, median, low, high, p_value)
