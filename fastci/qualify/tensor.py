"""A small reverse-mode autodiff over numpy whose matmuls and sums run on a backend.

Forward and backward passes both go through the backend, as they would on an accelerator: the
gradient matmuls take the incoming gradient as their "grad" operand (e5m2 on fp8 kernels), and the
weight gradients contract over every token of the batch, which is where tile order and accumulator
format matter. Only what the models need is here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from fastci.evidence import dimensions
from fastci.qualify.backend import Backend

Grads = tuple[np.ndarray | None, ...]
FLOAT = np.float32  # the type of every value and gradient; a gradient check switches it to fp64


class Tensor:
    __slots__ = ("value", "grad", "parents", "backward_fn", "point")

    def __init__(
        self,
        value: np.ndarray,
        parents: tuple[Tensor, ...] = (),
        backward_fn: Callable[[np.ndarray], Grads] | None = None,
    ) -> None:
        self.value = np.asarray(value, dtype=FLOAT)
        self.grad: np.ndarray | None = None
        self.parents = parents
        self.backward_fn = backward_fn
        self.point = dimensions.POINT  # the step and layer it was computed at: its backward counts there

    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape


def backward(loss: Tensor) -> None:
    """Fill ``grad`` of every tensor ``loss`` depends on (in a fixed, reproducible order)."""
    order: list[Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(loss, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((parent, False) for parent in reversed(node.parents))
    loss.grad = np.ones_like(loss.value)
    for node in reversed(order):
        if node.backward_fn is None or node.grad is None:
            continue
        with dimensions.restored(node.point):
            grads = node.backward_fn(node.grad)
        for parent, grad in zip(node.parents, grads, strict=True):
            if grad is None:
                continue
            grad = grad.astype(FLOAT, copy=False)
            parent.grad = grad if parent.grad is None else parent.grad + grad


class Ops:
    """The operations models are written in, bound to one backend."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    # ----- contractions and reductions (on the backend)

    def matmul(self, x: Tensor, w: Tensor) -> Tensor:
        """``x @ w``: a weight ``w`` of shape (K, N) against tokens (..., K), or two batched operands."""
        be = self.backend
        out = be.matmul(x.value, w.value)
        if w.value.ndim == 2:

            def grads(g: np.ndarray) -> Grads:
                dx = be.matmul(g, w.value.T, "grad", "value")
                flat_x = x.value.reshape(-1, x.shape[-1])
                dw = be.matmul(flat_x.T, g.reshape(-1, g.shape[-1]), "value", "grad")
                return dx, dw
        else:

            def grads(g: np.ndarray) -> Grads:
                dx = be.matmul(g, np.swapaxes(w.value, -1, -2), "grad", "value")
                dw = be.matmul(np.swapaxes(x.value, -1, -2), g, "value", "grad")
                return dx, dw

        return Tensor(out, (x, w), grads)

    def sum(self, x: Tensor, axis: int) -> Tensor:
        out = self.backend.sum(x.value, axis)
        return Tensor(out, (x,), lambda g: (np.broadcast_to(g, x.shape).copy(),))

    def mean(self, x: Tensor, axis: int) -> Tensor:
        return self.scale(self.sum(x, axis), 1.0 / x.shape[axis])

    def _sum_to(self, g: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        """Reduce a broadcast gradient back to ``shape`` (bias gradients: a sum over tokens)."""
        if g.shape == shape:
            return g
        lead = g.ndim - len(shape)
        if lead and all(s == d for s, d in zip(shape, g.shape[lead:], strict=True)):
            return self.backend.sum(g.reshape(-1, *shape), 0).reshape(shape)
        for axis, size in enumerate((1,) * lead + shape):
            if size == 1 and g.shape[axis] != 1:
                g = self.backend.sum(g, axis)
        return g.reshape(shape)

    # ----- elementwise (fp32 on the host)

    def add(self, a: Tensor, b: Tensor) -> Tensor:
        return Tensor(a.value + b.value, (a, b), lambda g: (self._sum_to(g, a.shape), self._sum_to(g, b.shape)))

    def mul(self, a: Tensor, b: Tensor) -> Tensor:
        return Tensor(
            a.value * b.value,
            (a, b),
            lambda g: (self._sum_to(g * b.value, a.shape), self._sum_to(g * a.value, b.shape)),
        )

    def scale(self, a: Tensor, factor: float) -> Tensor:
        f = np.float32(factor)
        return Tensor(a.value * f, (a,), lambda g: (g * f,))

    def relu(self, a: Tensor) -> Tensor:
        mask = a.value > 0
        return Tensor(np.where(mask, a.value, np.float32(0)), (a,), lambda g: (g * mask,))

    def gelu(self, a: Tensor) -> Tensor:
        x = a.value
        c = np.float32(np.sqrt(2.0 / np.pi))
        inner = c * (x + np.float32(0.044715) * x * x * x)
        t = np.tanh(inner)
        out = np.float32(0.5) * x * (1 + t)

        def grads(g: np.ndarray) -> Grads:
            d_inner = c * (1 + np.float32(3 * 0.044715) * x * x)
            return (g * (np.float32(0.5) * (1 + t) + np.float32(0.5) * x * (1 - t * t) * d_inner),)

        return Tensor(out, (a,), grads)

    def tanh(self, a: Tensor) -> Tensor:
        out = np.tanh(a.value)
        return Tensor(out, (a,), lambda g: (g * (1 - out * out),))

    def sigmoid(self, a: Tensor) -> Tensor:
        out = _sigmoid(a.value)
        return Tensor(out, (a,), lambda g: (g * out * (1 - out),))

    # ----- shapes and gathers

    def reshape(self, a: Tensor, shape: Sequence[int]) -> Tensor:
        return Tensor(a.value.reshape(shape), (a,), lambda g: (g.reshape(a.shape),))

    def transpose(self, a: Tensor, axes: Sequence[int]) -> Tensor:
        inverse = np.argsort(axes)
        return Tensor(np.transpose(a.value, axes), (a,), lambda g: (np.transpose(g, inverse),))

    def concat(self, parts: Sequence[Tensor], axis: int) -> Tensor:
        sizes = np.cumsum([p.shape[axis] for p in parts])[:-1]
        return Tensor(
            np.concatenate([p.value for p in parts], axis=axis),
            tuple(parts),
            lambda g: tuple(np.split(g, sizes, axis=axis)),
        )

    def gather_rows(self, table: Tensor, ids: np.ndarray) -> Tensor:
        """``table[ids]`` (embedding lookup); the gradient scatter-adds rows in a fixed order."""

        def grads(g: np.ndarray) -> Grads:
            rows, width = table.shape
            flat = (ids.reshape(-1, 1) * width + np.arange(width)).reshape(-1)
            return (_scatter_add(flat, g.reshape(-1), rows * width).reshape(table.shape),)

        return Tensor(table.value[ids], (table,), grads)

    def unfold(self, x: Tensor, index: np.ndarray) -> Tensor:
        """Per sample, gather ``x`` (flattened) at ``index`` (im2col for convolutions); -1 reads a zero pad."""
        batch = x.shape[0]
        flat = x.value.reshape(batch, -1)
        size = flat.shape[1] + 1
        padded = np.concatenate([flat, np.zeros((batch, 1), FLOAT)], axis=1)

        def grads(g: np.ndarray) -> Grads:
            positions = np.arange(batch).reshape(-1, *([1] * index.ndim)) * size + np.where(index < 0, size - 1, index)
            full = _scatter_add(positions.reshape(-1), g.reshape(-1), batch * size).reshape(batch, size)
            return (full[:, :-1].reshape(x.shape),)

        return Tensor(padded[:, index], (x,), grads)

    # ----- fused blocks (their reductions run on the backend)

    def softmax(self, a: Tensor, mask: np.ndarray | None = None) -> Tensor:
        x = a.value if mask is None else np.where(mask, a.value, np.float32(-1e9))
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        out = e / self.backend.sum(e, -1)

        def grads(g: np.ndarray) -> Grads:
            return (out * (g - self.backend.sum(g * out, -1)),)

        return Tensor(out, (a,), grads)

    def layer_norm(self, x: Tensor, gain: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
        be, n = self.backend, x.shape[-1]
        centred = x.value - be.sum(x.value, -1) / np.float32(n)
        inv_std = 1.0 / np.sqrt(be.sum(centred * centred, -1) / np.float32(n) + np.float32(eps))
        normed = centred * inv_std
        out = normed * gain.value + bias.value

        def grads(g: np.ndarray) -> Grads:
            dn = g * gain.value
            dx = inv_std * (dn - be.sum(dn, -1) / np.float32(n) - normed * be.sum(dn * normed, -1) / np.float32(n))
            return dx, self._sum_to(g * normed, gain.shape), self._sum_to(g, bias.shape)

        return Tensor(out, (x, gain, bias), grads)

    def cross_entropy(self, logits: Tensor, targets: np.ndarray) -> Tensor:
        """Mean negative log-likelihood of integer ``targets`` under ``logits`` (classes last)."""
        be = self.backend
        flat = logits.value.reshape(-1, logits.shape[-1])
        shifted = flat - flat.max(axis=-1, keepdims=True)
        log_z = np.log(be.sum(np.exp(shifted), -1))
        rows = np.arange(flat.shape[0])
        picked = (shifted[rows, targets.reshape(-1)] - log_z[:, 0]).astype(FLOAT)
        count = np.float32(flat.shape[0])
        loss = -be.sum(picked.reshape(1, -1), 1).reshape(()) / count

        def grads(g: np.ndarray) -> Grads:
            probs = np.exp(shifted - log_z)
            probs[rows, targets.reshape(-1)] -= 1
            return ((probs * (g / count)).reshape(logits.shape),)

        return Tensor(loss, (logits,), grads)

    def binary_cross_entropy(self, logits: Tensor, labels: np.ndarray) -> Tensor:
        be = self.backend
        z = logits.value.reshape(-1)
        y = labels.reshape(-1).astype(FLOAT)
        per_item = np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))
        count = np.float32(z.size)
        loss = be.sum(per_item.reshape(1, -1), 1).reshape(()) / count

        def grads(g: np.ndarray) -> Grads:
            return (((_sigmoid(z) - y) * (g / count)).reshape(logits.shape),)

        return Tensor(loss, (logits,), grads)


def _scatter_add(positions: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """Sum ``values`` into ``size`` slots by position, in order (fp64 sums, one rounding to fp32)."""
    return np.bincount(positions, weights=values, minlength=size).astype(FLOAT)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (0.5 * (np.tanh(0.5 * x) + 1)).astype(FLOAT)
