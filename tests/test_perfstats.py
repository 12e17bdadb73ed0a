"""Performance statistics: the Mann-Whitney + bootstrap gate, its determinism, change points."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fastci.regression.changepoint import change_points
from fastci.shared.perfstats import (
    PerfGate,
    compare,
    median_ratio_interval,
    metric_direction,
    relative_noise,
    repeats_needed,
    seed_from,
)

GATE = PerfGate()


def noisy(level: float, noise: float, n: int, rng: np.random.Generator) -> np.ndarray:
    return level * (1 + noise * rng.standard_normal(n))


def test_a_two_percent_drop_with_enough_repeats_is_a_regression():
    rng = np.random.default_rng(0)
    verdict = compare(noisy(1000, 0.02, 512, rng), noisy(980, 0.02, 120, rng), "higher", GATE, seed=1)
    assert verdict.regression and verdict.ci_high < 0.99 and verdict.p_value < 0.01
    assert verdict.loss == pytest.approx(0.02, abs=0.006)


def test_latency_is_judged_the_other_way_round():
    rng = np.random.default_rng(1)
    slower = compare(noisy(10.0, 0.01, 200, rng), noisy(10.3, 0.01, 60, rng), "lower", GATE, seed=1)
    faster = compare(noisy(10.0, 0.01, 200, rng), noisy(9.7, 0.01, 60, rng), "lower", GATE, seed=1)
    assert slower.regression and not faster.regression and faster.ratio > 1


def test_a_significant_but_tiny_drop_is_not_called():
    rng = np.random.default_rng(2)
    verdict = compare(noisy(1000, 0.01, 1024, rng), noisy(996, 0.01, 2000, rng), "higher", GATE, seed=1)
    assert verdict.p_value < 0.01 and not verdict.regression  # 0.4% slower: real, but under min_effect


def test_too_few_samples_never_call():
    assert not compare([1.0, 1.0], [0.5, 0.5], "higher", GATE, seed=1).regression


def test_same_seed_same_interval_and_seeds_come_from_ids():
    rng = np.random.default_rng(3)
    base, cand = noisy(100, 0.03, 300, rng), noisy(97, 0.03, 80, rng)
    assert median_ratio_interval(base, cand, 0.95, 2000, 5) == median_ratio_interval(base, cand, 0.95, 2000, 5)
    assert seed_from("abc", "throughput") == seed_from("abc", "throughput") != seed_from("abd", "throughput")


@pytest.mark.parametrize("n_base,n_cand", [(1024, 110), (101, 31), (40, 12)])
def test_fast_interval_matches_scipy_bootstrap(n_base, n_cand):
    rng = np.random.default_rng(n_base)
    base, cand = noisy(1000, 0.02, n_base, rng), noisy(980, 0.02, n_cand, rng)
    ours = median_ratio_interval(base, cand, 0.95, 8000, 1)
    theirs = stats.bootstrap(
        (base, cand),
        lambda b, c, axis=-1: np.median(c, axis=axis) / np.median(b, axis=axis),
        vectorized=True,
        paired=False,
        n_resamples=8000,
        method="percentile",
        rng=np.random.default_rng(2),
    ).confidence_interval
    width = theirs.high - theirs.low
    assert ours[0] == pytest.approx(theirs.low, abs=0.08 * width)
    assert ours[1] == pytest.approx(theirs.high, abs=0.08 * width)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.005, 0.05), st.integers(5, 80))
def test_no_drop_is_rarely_called_and_never_with_identical_samples(seed, noise, repeats):
    rng = np.random.default_rng(seed)
    base = noisy(1000, noise, 256, rng)
    assert not compare(base, base[:repeats], "higher", GATE, seed=seed).regression
    # the candidate better than baseline can never be a regression
    assert not compare(base, noisy(1050, noise, repeats, rng), "higher", GATE, seed=seed).regression


def test_metric_direction_by_name():
    assert metric_direction("throughput_tokens_per_s") == "higher"
    assert metric_direction("step_time_ms") == "lower"
    assert metric_direction("logits") is None


def test_relative_noise_estimates_the_cv():
    rng = np.random.default_rng(4)
    assert relative_noise(noisy(500, 0.03, 20_000, rng)) == pytest.approx(0.03, rel=0.05)


def test_repeats_needed_grows_with_noise():
    needed = [repeats_needed(n) for n in (0.01, 0.02, 0.03, 0.05)]
    assert needed == sorted(needed) and needed[0] < 40 and needed[-1] > 500
    assert repeats_needed(0.02, drop=0.005) is None  # smaller than min_effect: never reliably


def test_change_points_find_a_sustained_shift_not_a_single_noisy_night():
    rng = np.random.default_rng(5)
    sustained = np.r_[noisy(1000, 0.005, 30, rng), noisy(980, 0.005, 4, rng)]
    (point,) = change_points(sustained, min_effect=0.01)
    assert point.index == 30 and point.relative_change == pytest.approx(-0.02, abs=0.005)
    single = noisy(1000, 0.005, 40, rng)
    single[25] *= 0.95
    assert change_points(single, min_effect=0.01) == []


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(5, 40), st.integers(5, 40))
def test_change_point_is_found_at_a_large_step(seed, before, after):
    rng = np.random.default_rng(seed)
    series = np.r_[noisy(100, 0.01, before, rng), noisy(90, 0.01, after, rng)]
    assert before in [p.index for p in change_points(series, min_effect=0.02)]


def test_spurious_change_points_are_rare():
    # Two noisy nights at an end can pass a pooled t-test (as in Otava); it must stay rare.
    rng = np.random.default_rng(20261202)
    stable = [change_points(noisy(100, 0.01, 60, rng), min_effect=0.02) for _ in range(300)]
    assert sum(bool(points) for points in stable) <= 6  # <= 2% of 60-night series
