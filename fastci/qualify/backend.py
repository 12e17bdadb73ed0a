"""The backend interface: the seam where an accelerator plugs into the qualification set.

A model runs every matmul, every sum-reduction and every optimizer accumulation through its backend;
elementwise work (activations, exp, masks) stays in fp32 numpy on the host. A backend for real
hardware (CuPy, PyTorch on a device) implements the same four methods and reports the versions of
the stack it runs on.

``ReferenceBackend`` is the trusted reference: fp32 inputs and outputs, every dot product and
every sum computed in fp64 and rounded to fp32 once. One rounding of a sum that is exact to ~1e-16
does not depend on the order the terms were added in (the order only moves bits far below an fp32
ulp), so the reference gives the same fp32 result on any BLAS, thread count or machine, which a
plain fp32 BLAS call does not promise.
"""

from __future__ import annotations

import time
from typing import Literal, Protocol

import numpy as np

from fastci.inputs import Bundle

Operand = Literal["value", "grad"]  # fp8 kernels use e4m3 for values and e5m2 for gradients

REFERENCE_BUNDLE = Bundle(
    compiler="reference", kernels="reference-fp32", runtime="reference", driver="none", firmware="none"
)


class Backend(Protocol):
    name: str
    bundle: Bundle

    def matmul(self, a: np.ndarray, b: np.ndarray, a_is: Operand = "value", b_is: Operand = "value") -> np.ndarray:
        """``a @ b`` (leading dimensions broadcast), fp32 in and out."""

    def sum(self, x: np.ndarray, axis: int) -> np.ndarray:
        """Sum along ``axis`` (kept as a dimension of size 1), fp32 in and out."""

    def accumulate(self, total: np.ndarray, increment: np.ndarray) -> np.ndarray:
        """``total + increment`` in the format the stack keeps running sums in: the fused optimizer
        update accumulates parameters and Adam moments with it."""

    @property
    def kernel_seconds(self) -> float:
        """Seconds spent inside kernels so far: the device time throughput is measured on."""


class KernelClock:
    """Accumulates the CPU time the calling thread spends inside kernels: the emulation's device time.

    A device timer counts only the device's own busy time; the closest host analogue is the thread's
    CPU time with BLAS pinned to that thread (``fastci.qualify.train`` pins it while it trains), so
    time the OS gives to other tenants of a shared machine is not counted: on shared cores this clock
    varies several times less than wall time (docs/producers.md has the figures).

    ``slowdown`` emulates a chip that is that much slower than its peers (a node throttled by heat or
    power, a degraded link): after each kernel the clock's thread keeps the core busy for ``slowdown``
    times the kernel's own time, inside the measured span. The extra time is real CPU time on this
    host, with its noise, so a slow node's throughput comes from runs, not from a scaled number.
    """

    def __init__(self, slowdown: float = 0.0) -> None:
        if not 0.0 <= slowdown <= 10.0:
            raise ValueError(f"slowdown: {slowdown!r} is not between 0 and 10 (a fraction of kernel time)")
        self.slowdown = slowdown
        self.seconds = 0.0
        self._started = 0.0

    def __enter__(self) -> None:
        self._started = time.thread_time()

    def __exit__(self, *exc: object) -> None:
        if self.slowdown:
            now = time.thread_time()
            until = now + (now - self._started) * self.slowdown
            while time.thread_time() < until:
                pass
        self.seconds += time.thread_time() - self._started


class ReferenceBackend:
    name = "reference"

    def __init__(self) -> None:
        self.bundle = REFERENCE_BUNDLE
        self.clock = KernelClock()

    def matmul(self, a: np.ndarray, b: np.ndarray, a_is: Operand = "value", b_is: Operand = "value") -> np.ndarray:
        with self.clock:
            return np.matmul(
                np.asarray(a, np.float32).astype(np.float64), np.asarray(b, np.float32).astype(np.float64)
            ).astype(np.float32)

    def sum(self, x: np.ndarray, axis: int) -> np.ndarray:
        with self.clock:
            return np.sum(np.asarray(x, np.float32).astype(np.float64), axis=axis, keepdims=True).astype(np.float32)

    def accumulate(self, total: np.ndarray, increment: np.ndarray) -> np.ndarray:
        return (total.astype(np.float32) + increment.astype(np.float32)).astype(np.float32)

    @property
    def kernel_seconds(self) -> float:
        return self.clock.seconds

    def describe(self) -> str:
        return "reference (fp32, one rounding per dot product and per sum)"
