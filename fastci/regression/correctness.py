"""Correctness gates: agreement with a golden reference within a stated tolerance, never bitwise.

Three checks, each a pure function of plain numbers:

- ``check_output``: elementwise ``|observed - reference| <= atol + rtol * |reference|`` (numpy's
  ``isclose`` rule), with per-dtype defaults (``default_tolerance``) and an optional share of
  elements allowed to miss;
- ``check_loss_curve``: a training run follows the band built by ``build_loss_band`` from reference
  runs across seeds (both smoothed with the same centered moving average), and reports the step where
  a sustained excursion starts;
- ``check_eval``: the eval score reaches ``min_ratio`` (default 0.99) of the reference.

``check_result`` runs all three against a ``GoldenReference`` and is what the gates processor uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from fastci.contracts.regression_alerts import CheckOutcome
from fastci.regression.references import GoldenReference, LossBandSpec, ToleranceSpec

# Defaults per dtype of the computation under test, for model outputs of order 1 compared with an
# fp32 reference. rtol is a few units of rounding of the dtype (torch.testing's values for fp32,
# fp16, bf16; two units for fp8: e4m3 has 3 mantissa bits, e5m2 2). atol is set from a measurement
# (tests/test_correctness_gates.py): a 3-layer tanh MLP with bf16 operands and fp32 accumulation
# misses torch's bf16 atol (1e-5) on 169 of 1,024 outputs (near-zero values), max error 5.7e-3;
# with fp8-rounded operands the max error is 0.12 (e4m3) and 0.21 (e5m2). Override per output in
# the golden reference when a model needs tighter or looser bounds.
DTYPE_TOLERANCES: dict[str, ToleranceSpec] = {
    "fp64": ToleranceSpec(rtol=1e-7, atol=1e-7),
    "fp32": ToleranceSpec(rtol=1.3e-6, atol=1e-5),
    "tf32": ToleranceSpec(rtol=1e-3, atol=1e-3),
    "fp16": ToleranceSpec(rtol=1e-3, atol=1e-3),
    "bf16": ToleranceSpec(rtol=1.6e-2, atol=1e-2),
    "fp8_e4m3": ToleranceSpec(rtol=0.125, atol=0.125),
    "fp8_e5m2": ToleranceSpec(rtol=0.25, atol=0.25),
}
DTYPE_ALIASES: dict[str, str] = {
    "float64": "fp64",
    "double": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "fp8": "fp8_e4m3",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e4m3": "fp8_e4m3",
    "e4m3": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "e5m2": "fp8_e5m2",
}
DEFAULT_EVAL_MIN_RATIO = 0.99


def canonical_dtype(dtype: str) -> str:
    """'bfloat16' -> 'bf16'; raises ValueError naming the known dtypes for anything else."""
    name = DTYPE_ALIASES.get(dtype.lower(), dtype.lower())
    if name not in DTYPE_TOLERANCES:
        known = ", ".join(sorted({*DTYPE_TOLERANCES, *DTYPE_ALIASES}))
        raise ValueError(f"unknown dtype {dtype!r} (known: {known})")
    return name


def default_tolerance(dtype: str) -> ToleranceSpec:
    return DTYPE_TOLERANCES[canonical_dtype(dtype)]


# ----- outputs


def check_output(
    name: str, observed: Sequence[float], reference: Sequence[float], tolerance: ToleranceSpec
) -> CheckOutcome:
    """Elementwise agreement within ``tolerance``; reports the worst element."""
    obs = np.asarray(observed, dtype=np.float64)
    ref = np.asarray(reference, dtype=np.float64)
    common = dict(kind="output", name=name, rtol=tolerance.rtol, atol=tolerance.atol)
    if obs.shape != ref.shape:
        return CheckOutcome(
            **common,
            passed=False,
            elements=int(ref.size),
            detail=f"{name}: {obs.size} values, the reference has {ref.size}",
        )
    if ref.size == 0:
        return CheckOutcome(
            **common, passed=True, elements=0, mismatches=0, bitwise_equal=True, detail=f"{name}: empty"
        )
    error = np.abs(obs - ref)
    allowed = tolerance.atol + tolerance.rtol * np.abs(ref)
    outside = error > allowed
    mismatches = int(outside.sum())
    rel = error / np.maximum(np.abs(ref), np.finfo(np.float64).tiny)
    worst = int(np.argmax(error - allowed))
    norm = float(np.linalg.norm(obs - ref) / max(float(np.linalg.norm(ref)), np.finfo(np.float64).tiny))
    norm = min(norm, 1e300)
    passed = mismatches <= tolerance.max_mismatch_fraction * ref.size
    detail = (
        f"{name}: {mismatches} of {ref.size} outside rtol={tolerance.rtol:g} atol={tolerance.atol:g}; "
        f"worst [{worst}] {obs[worst]:.6g} vs {ref[worst]:.6g}; normwise error {norm:.3g}"
    )
    if tolerance.max_norm_error is not None:
        passed = passed and norm <= tolerance.max_norm_error
        detail += f" (max {tolerance.max_norm_error:g})"
    return CheckOutcome(
        **common,
        passed=passed,
        elements=int(ref.size),
        mismatches=mismatches,
        max_abs_error=float(error.max()),
        max_rel_error=float(min(rel.max(), 1e300)),
        norm_error=norm,
        worst_index=worst,
        bitwise_equal=bool(np.array_equal(obs, ref)),
        detail=detail,
    )


# ----- loss curves


@dataclass(frozen=True)
class LossBand:
    """Per step: the smoothed reference center and the band a followed curve stays inside."""

    center: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    spec: LossBandSpec

    def __len__(self) -> int:
        return len(self.center)


def smooth(values: Sequence[float], window: int) -> np.ndarray:
    """Centered moving average; the window shrinks at the edges (no lag, no padding)."""
    x = np.asarray(values, dtype=np.float64)
    if window <= 1 or x.size == 0:
        return x.copy()
    half = window // 2
    csum = np.concatenate(([0.0], np.cumsum(x)))
    idx = np.arange(x.size)
    lo = np.maximum(idx - half, 0)
    hi = np.minimum(idx + half + 1, x.size)
    return (csum[hi] - csum[lo]) / (hi - lo)


def build_loss_band(reference_curves: Sequence[Sequence[float]], spec: LossBandSpec | None = None) -> LossBand:
    """The band from reference runs across seeds: center +- max(k_sigma * sd * sqrt(1 + 1/seeds),
    rel_floor * |center|, abs_floor), widened so every reference run lies inside it.

    sd is the across-seed standard deviation of the smoothed curves, itself averaged over a window
    five times wider: with a handful of seeds a per-step sd is too ragged to bound a new seed
    (k_sigma defaults to 4 because every step of the curve is compared)."""
    spec = spec or LossBandSpec()
    if not reference_curves:
        raise ValueError("loss_curves: a band needs at least one reference curve")
    curves = np.vstack([smooth(c, spec.smoothing_window) for c in reference_curves])
    center = curves.mean(axis=0)
    sd = curves.std(axis=0, ddof=1) if len(curves) > 1 else np.zeros_like(center)
    sd = smooth(sd, 5 * spec.smoothing_window) * np.sqrt(1 + 1 / len(curves))  # a prediction interval
    half = np.maximum.reduce([spec.k_sigma * sd, spec.rel_floor * np.abs(center), np.full_like(center, spec.abs_floor)])
    lower = np.minimum(center - half, curves.min(axis=0))
    upper = np.maximum(center + half, curves.max(axis=0))
    return LossBand(center=center, lower=lower, upper=upper, spec=spec)


def check_loss_curve(curve: Sequence[float], band: LossBand) -> CheckOutcome:
    """Does the (smoothed) curve stay in the band? Divergence is ``patience`` consecutive steps outside;
    the reported step is the first of them. Only the steps both cover are compared."""
    spec = band.spec
    steps = min(len(curve), len(band))
    if steps == 0:
        return CheckOutcome(
            kind="loss_curve",
            name="loss_curve",
            passed=False,
            compared_steps=0,
            detail="loss_curve: the result has no loss curve",
        )
    smoothed = smooth(np.asarray(curve[:steps], dtype=np.float64), spec.smoothing_window)
    above = smoothed > band.upper[:steps]
    below = smoothed < band.lower[:steps] if spec.fail_below else np.zeros(steps, dtype=bool)
    outside = above | below
    start = _first_run(outside, spec.patience)
    if start is None:
        return CheckOutcome(
            kind="loss_curve",
            name="loss_curve",
            passed=True,
            compared_steps=steps,
            detail=f"loss_curve: inside the reference band for {steps} steps",
        )
    direction = "above" if above[start] else "below"
    return CheckOutcome(
        kind="loss_curve",
        name="loss_curve",
        passed=False,
        compared_steps=steps,
        diverged_at_step=start,
        direction=direction,
        score=float(smoothed[start]),
        reference=float(band.center[start]),
        detail=f"loss_curve: leaves the reference band ({direction}) from step {start} "
        f"(smoothed {smoothed[start]:.6g}, band {band.lower[start]:.6g}..{band.upper[start]:.6g})",
    )


def _first_run(flags: np.ndarray, length: int) -> int | None:
    """Index where the first run of at least ``length`` consecutive True values starts."""
    run = 0
    for index, flag in enumerate(flags.tolist()):
        run = run + 1 if flag else 0
        if run >= length:
            return index - length + 1
    return None


# ----- eval


def check_eval(
    score: float | None, reference: float, min_ratio: float = DEFAULT_EVAL_MIN_RATIO, higher_is_better: bool = True
) -> CheckOutcome:
    """score >= min_ratio x reference (or, lower being better, score <= reference / min_ratio)."""
    common = dict(kind="eval", name="eval_score", reference=reference, min_ratio=min_ratio)
    if score is None:
        return CheckOutcome(**common, passed=False, detail="eval_score: the result has no eval score")
    if reference == 0:
        ratio = 1.0 if score == 0 else (float("inf") if higher_is_better else 0.0)
    else:
        ratio = score / reference if higher_is_better else reference / score if score else float("inf")
    ratio = float(min(ratio, 1e300))
    passed = ratio >= min_ratio
    word = "reaches" if passed else "is below"
    return CheckOutcome(
        **common,
        passed=passed,
        score=score,
        ratio=ratio,
        detail=f"eval_score: {score:.6g} {word} {min_ratio:.2%} of the reference {reference:.6g} ({ratio:.4%})",
    )


# ----- everything a golden reference asks for


def check_result(
    golden: GoldenReference,
    metrics: Mapping[str, Sequence[float]],
    loss_curve: Sequence[float],
    eval_score: float | None,
    dtype: str,
    band: LossBand | None = None,
) -> list[CheckOutcome]:
    """Every check the golden reference defines, for a run computed in ``dtype``.

    An output the reference has but the result lacks fails (a test that stops reporting must not
    pass silently). Pass ``band`` to reuse one built earlier from the same reference.
    """
    default = default_tolerance(dtype)
    checks = []
    for name, reference in golden.outputs.items():
        tolerance = golden.tolerances.get(name, default)
        if name not in metrics:
            checks.append(
                CheckOutcome(
                    kind="output",
                    name=name,
                    passed=False,
                    elements=len(reference),
                    rtol=tolerance.rtol,
                    atol=tolerance.atol,
                    detail=f"{name}: missing from the result",
                )
            )
            continue
        checks.append(check_output(name, metrics[name], reference, tolerance))
    if golden.loss_curves:
        checks.append(check_loss_curve(loss_curve, band or build_loss_band(golden.loss_curves, golden.loss_band)))
    if golden.eval_score is not None:
        checks.append(check_eval(eval_score, golden.eval_score, golden.eval_min_ratio, golden.eval_higher_is_better))
    return checks
