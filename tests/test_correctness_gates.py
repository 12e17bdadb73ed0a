"""Correctness gates on real floating point: tolerance by dtype, loss-curve band, eval ratio."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from regression_factories import golden

from fastci.regression.correctness import (
    build_loss_band,
    check_eval,
    check_loss_curve,
    check_output,
    check_result,
    default_tolerance,
    smooth,
)
from fastci.regression.references import LossBandSpec, ToleranceSpec


def to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (round to nearest even) and back, as bf16 hardware stores values."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def mlp(x, weights, cast):
    """A small MLP: operands rounded by ``cast`` before each matmul, accumulation in fp32."""
    for w in weights:
        x = np.tanh(cast(x) @ cast(w)).astype(np.float32)
    return x


def test_bf16_outputs_differ_bitwise_but_pass_the_bf16_tolerance():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    weights = [(rng.standard_normal((64, 64)) / 8).astype(np.float32) for _ in range(3)]
    reference = mlp(x, weights, lambda a: a).ravel()
    observed = mlp(x, weights, to_bf16).ravel()
    assert not np.array_equal(observed, reference)
    verdict = check_output("logits", observed, reference, default_tolerance("bfloat16"))
    assert verdict.passed and verdict.bitwise_equal is False and verdict.max_abs_error > 0
    # ...and the same bf16 outputs are far outside what fp32 promises
    assert not check_output("logits", observed, reference, default_tolerance("fp32")).passed


def test_a_wrong_kernel_fails_with_the_worst_element_named():
    rng = np.random.default_rng(1)
    reference = rng.standard_normal(1000)
    observed = reference * (1 + 1e-3 * rng.standard_normal(1000))
    observed[417] = reference[417] * 1.3  # one wrong element, as from a rounding bug in one tile
    verdict = check_output("logits", observed, reference, default_tolerance("bf16"))
    assert not verdict.passed and verdict.mismatches == 1 and verdict.worst_index == 417
    assert "[417]" in verdict.detail
    lenient = ToleranceSpec(rtol=1.6e-2, atol=1e-5, max_mismatch_fraction=0.01)
    assert check_output("logits", observed, reference, lenient).passed


def test_shape_mismatch_and_missing_output_fail():
    assert not check_output("x", [1.0, 2.0], [1.0, 2.0, 3.0], default_tolerance("fp32")).passed
    ref = golden(outputs={"logits": (1.0, 2.0)})
    (check,) = check_result(ref, metrics={}, loss_curve=(), eval_score=None, dtype="fp32")
    assert not check.passed and "missing" in check.detail


def test_unknown_dtype_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown dtype 'int4'"):
        default_tolerance("int4")


def training_curve(rng, steps=300, noise=0.02, drift_from=None, drift=0.0):
    t = np.arange(steps)
    curve = 2.5 * np.exp(-t / 80) + 0.6 + noise * rng.standard_normal(steps)
    if drift_from is not None:
        curve[drift_from:] += drift * (t[drift_from:] - drift_from)
    return curve


def test_every_reference_run_lies_inside_its_own_band():
    rng = np.random.default_rng(2)
    refs = [training_curve(rng) for _ in range(4)]
    band = build_loss_band(refs)
    assert all(check_loss_curve(c, band).passed for c in refs)


def test_a_new_seed_follows_the_band():
    rng = np.random.default_rng(3)
    band = build_loss_band([training_curve(rng) for _ in range(5)])
    assert sum(check_loss_curve(training_curve(rng), band).passed for _ in range(50)) >= 49


@pytest.mark.parametrize("k", [40, 150, 260])
def test_divergence_after_step_k_is_reported_at_that_step(k):
    rng = np.random.default_rng(k)
    band = build_loss_band([training_curve(rng) for _ in range(5)])
    drifting = training_curve(rng, drift_from=k, drift=0.004)  # loss creeps up from step k on
    verdict = check_loss_curve(drifting, band)
    assert not verdict.passed and verdict.direction == "above"
    assert k <= verdict.diverged_at_step <= k + 25, verdict.detail
    assert f"from step {verdict.diverged_at_step}" in verdict.detail


def test_a_curve_far_below_the_references_fails_unless_allowed():
    rng = np.random.default_rng(4)
    refs = [training_curve(rng) for _ in range(3)]
    too_good = training_curve(rng) * 0.7
    assert check_loss_curve(too_good, build_loss_band(refs)).direction == "below"
    assert check_loss_curve(too_good, build_loss_band(refs, LossBandSpec(fail_below=False))).passed


def test_a_shortened_run_is_compared_on_the_steps_it_has():
    rng = np.random.default_rng(5)
    band = build_loss_band([training_curve(rng) for _ in range(3)])
    verdict = check_loss_curve(training_curve(rng)[:50], band)
    assert verdict.passed and verdict.compared_steps == 50


def test_eval_gate_at_99_percent():
    assert check_eval(0.8 * 0.995, 0.8).passed  # a 0.5% drop is within the gate
    verdict = check_eval(0.8 * 0.99 * 0.995, 0.8)  # 0.5% below the 99% gate
    assert not verdict.passed and verdict.ratio == pytest.approx(0.98505)
    assert check_eval(0.9, 1.0, min_ratio=0.85).passed  # configurable per model
    assert not check_eval(10.2, 10.0, higher_is_better=False).passed  # perplexity up 2%
    assert not check_eval(None, 0.8).passed


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=60), st.integers(1, 15))
def test_smoothing_preserves_constants_and_bounds(values, window):
    smoothed = smooth(values, window)
    assert smoothed.shape == (len(values),)
    assert smoothed.min() >= min(values) - 1e-6 * (1 + abs(min(values)))
    assert smoothed.max() <= max(values) + 1e-6 * (1 + abs(max(values)))
    assert np.allclose(smooth([values[0]] * len(values), window), values[0])


def test_check_result_runs_every_check_of_the_reference():
    rng = np.random.default_rng(6)
    refs = tuple(tuple(training_curve(rng)) for _ in range(3))
    ref = golden(outputs={"logits": (0.5, -1.25)}, loss_curves=refs, eval_score=0.8)
    checks = check_result(ref, {"logits": (0.5, -1.25)}, training_curve(rng), 0.795, dtype="bf16")
    assert [(c.kind, c.passed) for c in checks] == [("output", True), ("loss_curve", True), ("eval", True)]


def to_fp8(x: np.ndarray, mantissa_bits: int) -> np.ndarray:
    """Round to an fp8 significand (range and subnormals ignored): e4m3 keeps 3 bits, e5m2 2."""
    m, e = np.frexp(np.asarray(x, dtype=np.float64))
    scale = 2 ** (mantissa_bits + 1)
    return (np.round(m * scale) / scale * 2.0**e).astype(np.float32)


@pytest.mark.parametrize("dtype,bits", [("fp8_e4m3", 3), ("fp8_e5m2", 2)])
def test_fp8_outputs_pass_their_default_and_fail_bf16s(dtype, bits):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    weights = [(rng.standard_normal((64, 64)) / 8).astype(np.float32) for _ in range(2)]
    reference = mlp(x, weights, lambda a: a).ravel()
    observed = mlp(x, weights, lambda a: to_fp8(a, bits)).ravel()
    assert check_output("y", observed, reference, default_tolerance(dtype)).passed
    assert not check_output("y", observed, reference, default_tolerance("bf16")).passed


def test_a_normwise_bound_can_replace_or_tighten_the_elementwise_rule():
    rng = np.random.default_rng(8)
    reference = rng.standard_normal(256)
    observed = reference * (1 + 0.01 * rng.standard_normal(256))  # ~1% normwise error
    normwise_only = ToleranceSpec(rtol=0, atol=0, max_mismatch_fraction=1, max_norm_error=2e-2)
    verdict = check_output("y", observed, reference, normwise_only)
    assert verdict.passed and 0.005 < verdict.norm_error < 0.02
    assert not check_output("y", observed, reference, normwise_only.model_copy(update={"max_norm_error": 5e-3})).passed
    tightened = ToleranceSpec(rtol=0.1, atol=0.01, max_norm_error=1e-3)
    assert check_output("y", observed, reference, tightened.model_copy(update={"max_norm_error": None})).passed
    assert not check_output("y", observed, reference, tightened).passed
