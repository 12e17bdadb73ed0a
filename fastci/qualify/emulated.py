"""The emulated accelerator: bf16 or fp8 kernels with fp32 accumulation, shaped by a versioned stack.

- The "compiler" (``CompilerConfig``) splits every contraction into K tiles and chooses the order the
  tile partials are summed in and the accumulator format.
- The "kernels" (``KernelsConfig``) round operands to bf16 or fp8 (scaled per tensor), compute each
  tile exactly (products of bf16/fp8 values and short sums of them are exact in fp64) and round the
  tile partial to fp32, as a matrix unit with an fp32 accumulator does.
- The "runtime" (``RuntimeConfig``) turns kernel time into throughput samples after warmup
  (``fastci.qualify.train.Throughput``); the kernel clock measures real time spent in kernels.

The precision (bf16 or fp8) is a run setting, like a serving config; the stack versions decide how
the kernels behave, including the defects some versions carry (``fastci.qualify.stack``).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from fastci.inputs import Bundle
from fastci.qualify.backend import KernelClock, Operand
from fastci.qualify.formats import quantize, round_bf16_with_wrong_increment, round_to
from fastci.qualify.stack import Stack

Precision = Literal["bf16", "fp8"]
PRECISIONS: tuple[str, ...] = ("bf16", "fp8")
_SPLIT_K_CHUNKS = 4  # partial sums the arrival-order split-K kernel combines per contraction
# The order split-K partials land in with atomic adds depends on which core finishes first: not
# reproducible, so it is drawn from OS entropy, never from the run's seed.
_arrival = np.random.default_rng()


class EmulatedAccelerator:
    def __init__(self, bundle: Bundle, precision: Precision = "bf16", slowdown: float = 0.0) -> None:
        """``slowdown``: this chip's kernels take that fraction longer than a healthy chip's (a node
        fault, not a stack property: see ``KernelClock``); 0 for a healthy chip."""
        if precision not in PRECISIONS:
            raise ValueError(f"precision: {precision!r} is not one of {', '.join(PRECISIONS)}")
        self.bundle = bundle
        self.stack = Stack.of(bundle)
        self.precision = precision
        self.name = f"emulated-{precision}"
        self.clock = KernelClock(slowdown)
        self._value_format = "bfloat16" if precision == "bf16" else "float8_e4m3"
        self._grad_format = "bfloat16" if precision == "bf16" else "float8_e5m2"

    # ----- the interface

    def matmul(self, a: np.ndarray, b: np.ndarray, a_is: Operand = "value", b_is: Operand = "value") -> np.ndarray:
        with self.clock:
            rows = a.shape[-2] if a.ndim >= 2 else 1
            a = self._with_halo(a)
            qa, scale_a = self._operand(a, a_is)
            qb, scale_b = self._operand(b, b_is)
            partials = [
                np.matmul(qa[..., k0:k1], qb[..., k0:k1, :]).astype(np.float32) for k0, k1 in self._tiles(a.shape[-1])
            ]
            result = self._combine(partials)[..., :rows, :]
            return (result.astype(np.float64) / (scale_a * scale_b)).astype(np.float32)

    def sum(self, x: np.ndarray, axis: int) -> np.ndarray:
        with self.clock:
            q = self._round(x, "bfloat16")  # reductions read bf16 activations on both precisions
            moved = np.moveaxis(q, axis, -1)
            partials = [
                np.sum(moved[..., k0:k1], axis=-1, keepdims=True).astype(np.float32)
                for k0, k1 in self._tiles(moved.shape[-1])
            ]
            return np.moveaxis(self._combine(partials), -1, axis)

    def accumulate(self, total: np.ndarray, increment: np.ndarray) -> np.ndarray:
        return self._accumulator(total.astype(np.float32) + increment.astype(np.float32))

    @property
    def kernel_seconds(self) -> float:
        return self.clock.seconds

    def describe(self) -> str:
        b = self.bundle
        defects = f", defects: {', '.join(self.stack.defects)}" if self.stack.defects else ""
        return f"{self.name} (compiler {b.compiler}, kernels {b.kernels}, runtime {b.runtime}{defects})"

    # ----- kernels

    def _operand(self, x: np.ndarray, kind: Operand) -> tuple[np.ndarray, float]:
        fmt = self._value_format if kind == "value" else self._grad_format
        if fmt == "bfloat16":
            return self._round(x, fmt), 1.0
        return quantize(x, fmt)

    def _round(self, x: np.ndarray, fmt: str) -> np.ndarray:
        if fmt == "bfloat16" and self.stack.kernels.rounding == "wrong-increment":
            return round_bf16_with_wrong_increment(x)
        return round_to(x, fmt)

    def _with_halo(self, a: np.ndarray) -> np.ndarray:
        """kernels 2.2.0: the M tiling computes a halo of round(3% of M) rows twice: real work through
        the whole kernel (rounding, tiles, accumulation), thrown away afterwards."""
        fraction = self.stack.kernels.extra_rows
        halo = round(a.shape[-2] * fraction) if a.ndim >= 2 else 0
        if halo == 0:
            return a
        return np.concatenate([a, a[..., :halo, :]], axis=-2)

    # ----- compiler

    def _tiles(self, k: int) -> list[tuple[int, int]]:
        tile = self.stack.compiler.tile_k
        if self.stack.kernels.split_k_order == "arrival":
            tile = min(tile, max(1, math.ceil(k / _SPLIT_K_CHUNKS)))
        return [(start, min(start + tile, k)) for start in range(0, k, tile)]

    def _combine(self, partials: list[np.ndarray]) -> np.ndarray:
        """Sum the fp32 tile partials in the compiler's order, in its accumulator format."""
        if self.stack.kernels.split_k_order == "arrival" and len(partials) > 1:
            return self._atomic_add(partials)
        if self.stack.compiler.tile_order == "pairwise":
            while len(partials) > 1:
                paired = [self._accumulator(partials[i] + partials[i + 1]) for i in range(0, len(partials) - 1, 2)]
                partials = paired + ([partials[-1]] if len(partials) % 2 else [])
            return self._accumulator(partials[0])
        total = self._accumulator(partials[0])
        for partial in partials[1:]:
            total = self._accumulator(total + partial)
        return total

    def _atomic_add(self, partials: list[np.ndarray]) -> np.ndarray:
        """Atomic accumulation: every output element adds its partials in its own arrival order."""
        stacked = np.stack(partials)
        order = np.argsort(_arrival.random(stacked.shape), axis=0)
        arrived = np.take_along_axis(stacked, order, axis=0)
        total = self._accumulator(arrived[0])
        for partial in arrived[1:]:
            total = self._accumulator(total + partial)
        return total

    def _accumulator(self, x: np.ndarray) -> np.ndarray:
        if self.stack.compiler.accumulate == "bfloat16":
            return round_to(x, "bfloat16").astype(np.float32)
        return x.astype(np.float32, copy=False)
