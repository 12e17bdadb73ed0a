"""Golden references: versioned facts that producers publish (an input topic).

Owner maps, the other such facts, are read by the fleet too: ``fastci/contracts/owner_maps.py``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from fastci.core.events import Event, FiniteFloat, Name, Record, Sha, Text, Timestamp
from fastci.inputs import Bundle

DType = Literal["fp64", "fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2"]


class ToleranceSpec(Record):
    """|observed - reference| <= atol + rtol * |reference|, elementwise; a share of elements may miss;
    and, when given, the normwise relative error ||observed - reference|| / ||reference|| is bounded
    (a normwise-only check: max_mismatch_fraction=1 and max_norm_error set)."""

    rtol: FiniteFloat = Field(ge=0)
    atol: FiniteFloat = Field(ge=0)
    max_mismatch_fraction: FiniteFloat = Field(default=0.0, ge=0, le=1)
    max_norm_error: FiniteFloat | None = Field(default=None, ge=0)


class LossBandSpec(Record):
    """How the loss-curve band is built from reference runs, and when a curve has left it."""

    smoothing_window: int = Field(default=9, ge=1, le=10_001, description="Centered moving average, in steps.")
    k_sigma: FiniteFloat = Field(default=4.0, ge=0, description="Half-width in across-seed standard deviations.")
    rel_floor: FiniteFloat = Field(default=0.02, ge=0, description="Half-width at least this share of the center.")
    abs_floor: FiniteFloat = Field(default=0.0, ge=0, description="Half-width at least this much loss.")
    patience: int = Field(default=3, ge=1, description="Consecutive steps outside the band that count as divergence.")
    fail_below: bool = Field(default=True, description="A curve far below the references is also a divergence.")


class GoldenReference(Event):
    """The trusted reference of one test, versioned and pinned to the stack that produced it. Key: test_id.

    A result is checked against the highest version of its test's reference. A version, once
    published, is immutable: publish a new version to change it.
    """

    TOPIC: ClassVar[str] = "golden-references"
    KEY: ClassVar[str] = "test_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("test_id", "version")

    test_id: Name
    version: int = Field(ge=1)
    repo: Name
    commit: Sha = Field(description="The code that produced the reference.")
    bundle: Bundle = Field(description="The stack that produced the reference (the pin).")
    hardware_revision: Name = Field(description="Where it ran, e.g. 'cpu-fp32-reference'.")
    dtype: DType = Field(default="fp32", description="Precision the reference was computed in.")
    outputs: dict[Name, tuple[FiniteFloat, ...]] = Field(
        default_factory=dict,
        max_length=256,
        description="Reference values of the result metrics checked for agreement.",
    )
    tolerances: dict[Name, ToleranceSpec] = Field(
        default_factory=dict, max_length=256, description="Per-output tolerance; others get the result dtype's default."
    )
    loss_curves: tuple[tuple[FiniteFloat, ...], ...] = Field(
        default=(), max_length=64, description="Reference loss curves, one per seed, all the same length."
    )
    seeds: tuple[int, ...] = Field(default=(), max_length=64)
    loss_band: LossBandSpec = Field(default_factory=LossBandSpec)
    eval_score: FiniteFloat | None = None
    eval_min_ratio: FiniteFloat = Field(default=0.99, gt=0, le=1, description="Gate: score >= ratio x reference.")
    eval_higher_is_better: bool = True
    time: Timestamp | None = None
    note: Text = ""

    @model_validator(mode="after")
    def _consistent(self) -> GoldenReference:
        lengths = {len(curve) for curve in self.loss_curves}
        if len(lengths) > 1:
            raise ValueError(f"loss_curves must all have the same length (got {sorted(lengths)})")
        if 0 in lengths:
            raise ValueError("loss_curves must not be empty")
        unknown = sorted(set(self.tolerances) - set(self.outputs))
        if unknown:
            raise ValueError(f"tolerances name outputs the reference does not have: {', '.join(unknown)}")
        return self
