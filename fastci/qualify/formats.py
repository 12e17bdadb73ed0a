"""Number formats of the emulated accelerator: rounding fp32 values to bf16 or fp8 (``ml_dtypes``).

A kernel "computes in bf16" by rounding its operands to bf16 and computing exactly on those
values; the products of two bf16 (or fp8) values are exact in fp64 and so are short sums of them,
so only the roundings a real kernel makes are the ones we make. fp8 operands are scaled per tensor
by a power of two (exact) so that the tensor's largest magnitude lands near the format's maximum,
as fp8 training recipes do; without it small gradients would flush to zero.
"""

from __future__ import annotations

from typing import Literal

import ml_dtypes
import numpy as np

Format = Literal["float32", "bfloat16", "float8_e4m3", "float8_e5m2"]

_DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
}
_FP8_MAX = {"float8_e4m3": 448.0, "float8_e5m2": 57344.0}


def dtype_of(fmt: str) -> np.dtype:
    try:
        return _DTYPES[fmt]
    except KeyError:
        raise ValueError(f"unknown number format {fmt!r} (known: {', '.join(_DTYPES)})") from None


def round_to(x: np.ndarray, fmt: str) -> np.ndarray:
    """``x`` rounded (to nearest, ties to even) to ``fmt`` and returned as fp64 values."""
    if fmt == "float32":
        return np.asarray(x, dtype=np.float32).astype(np.float64)
    return np.asarray(x, dtype=np.float32).astype(dtype_of(fmt)).astype(np.float64)


def quantize(x: np.ndarray, fmt: str) -> tuple[np.ndarray, float]:
    """``(values, scale)`` with ``values / scale`` approximating ``x`` in ``fmt``.

    The scale is 1 except for fp8, where it is the power of two that brings the tensor's largest
    magnitude just under the format's maximum (per-tensor scaling)."""
    if fmt not in _FP8_MAX:
        return round_to(x, fmt), 1.0
    amax = float(np.max(np.abs(x))) if x.size else 0.0
    if amax == 0.0 or not np.isfinite(amax):
        return round_to(x, fmt), 1.0
    scale = float(2.0 ** np.floor(np.log2(_FP8_MAX[fmt] / amax)))
    return round_to(np.asarray(x, dtype=np.float64) * scale, fmt), scale


def round_bf16_with_wrong_increment(x: np.ndarray) -> np.ndarray:
    """The defect of kernels 2.1.0: bf16 packing adds its rounding increment at bit 19 instead of
    bit 15 (``0x80000`` for ``0x8000``, one zero too many), so every value is pushed up by about
    eight bf16 ulps in magnitude before the low half is cut: outputs stay plausible, ~3-6% too big."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    packed = ((bits.astype(np.uint64) + 0x80000) & 0xFFFF0000).astype(np.uint32)
    return packed.view(np.float32).astype(np.float64)
