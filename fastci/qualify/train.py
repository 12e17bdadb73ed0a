"""Training, evaluation and inference of a model family on a backend.

Optimizer: Adam. Its moments and the parameters are running sums, accumulated by the backend's
``accumulate`` (fp32 on a healthy stack: mixed precision keeps master weights and moments in fp32).
Learning rate: linear warmup over the first 10%
of steps, then cosine decay to 10% of the peak, so late updates are small, as in real schedules.
Batches are drawn from a generator seeded by the run's seed, so every backend sees the same data
in the same order and loss curves can be compared step by step.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from fastci.evidence.dimensions import at
from fastci.qualify.backend import Backend
from fastci.qualify.models.base import Dataset, Family, Params
from fastci.qualify.stack import RuntimeConfig
from fastci.qualify.tensor import Ops, Tensor, backward

EVAL_CHUNK = 256
CHECKPOINT_EVERY = 100  # steps between in-memory checkpoints of the weights and optimizer moments
_BETA1, _BETA2, _EPS = 0.9, 0.999, 1e-8


def learning_rate(step: int, steps: int, peak: float) -> float:
    warmup = max(1, steps // 10)
    if step < warmup:
        return warmup_rate(step, warmup, peak)
    return cosine_rate(step, warmup, steps, peak)


def warmup_rate(step: int, warmup: int, peak: float) -> float:
    return peak * (step + 1) / warmup


def cosine_rate(step: int, warmup: int, steps: int, peak: float) -> float:
    """From the end of warmup on: code that runs only once a run is past its first 10% of steps."""
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


@dataclass
class Throughput:
    """The runtime layer's throughput samples: items per second of kernel time, after warmup."""

    config: RuntimeConfig
    samples: list[float] = field(default_factory=list)
    _window_items: int = 0
    _window_start: float | None = None
    _steps: int = 0

    def record_step(self, items: int, kernel_seconds: float) -> None:
        self._steps += 1
        if self._steps == self.config.warmup_steps:
            self._window_start = kernel_seconds
            return
        if self._window_start is None:
            return
        self._window_items += items
        if (self._steps - self.config.warmup_steps) % self.config.steps_per_sample == 0:
            elapsed = kernel_seconds - self._window_start
            if elapsed > 0:
                self.samples.append(self._window_items / elapsed)
            self._window_items, self._window_start = 0, kernel_seconds


@dataclass
class TrainingRun:
    loss_curve: list[float]
    eval_score: float
    params: Params
    throughput: list[float]
    wall_seconds: float


class Adam:
    """Adam whose moments and parameters are running sums kept by ``backend.accumulate``."""

    def __init__(self, backend: Backend, params: Params) -> None:
        self.backend = backend
        self.first = {k: np.zeros_like(v) for k, v in params.items()}
        self.second = {k: np.zeros_like(v) for k, v in params.items()}
        self.steps = 0

    def step(self, params: Params, grads: dict[str, np.ndarray | None], lr: float) -> None:
        be = self.backend
        self.steps += 1
        t = self.steps
        for name, grad in grads.items():
            grad = grad if grad is not None else np.zeros_like(params[name])
            self.first[name] = be.accumulate(_BETA1 * self.first[name], (1 - _BETA1) * grad)
            self.second[name] = be.accumulate(_BETA2 * self.second[name], (1 - _BETA2) * grad * grad)
            m_hat = self.first[name] / (1 - _BETA1**t)
            v_hat = self.second[name] / (1 - _BETA2**t)
            params[name] = be.accumulate(params[name], (-lr * m_hat / (np.sqrt(v_hat) + _EPS)).astype(np.float32))


class Trainer:
    """One training run, a step at a time (so two runs can be interleaved on one host)."""

    def __init__(
        self,
        family: Family,
        backend: Backend,
        seed: int,
        runtime: RuntimeConfig,
        data: Dataset | None = None,
        steps: int | None = None,
    ) -> None:
        self.family, self.backend = family, backend
        self.data = data or family.make_data(np.random.default_rng(seed))
        self.rng = np.random.default_rng([seed, 1])
        self.params = family.init(self.rng)
        self.optimizer = Adam(backend, self.params)
        self.steps = steps or family.steps
        self.throughput = Throughput(runtime)
        self.loss_curve: list[float] = []
        self.step_kernel_seconds: list[float] = []
        self.checkpoint: Checkpoint | None = None

    @property
    def done(self) -> bool:
        return len(self.loss_curve) >= self.steps

    def step(self) -> None:
        index = len(self.loss_curve)
        with at("steps", index):  # evidence says from which step on each unit runs
            self._step()
            if (index + 1) % CHECKPOINT_EVERY == 0:
                self.checkpoint = save_checkpoint(self.params, self.optimizer, index + 1)

    def _step(self) -> None:
        family, backend = self.family, self.backend
        x, y = self.data.batch(self.rng, family.batch_size)
        before = backend.kernel_seconds
        ops = Ops(backend)
        tensors = {k: Tensor(v) for k, v in self.params.items()}
        loss = family.loss(ops, family.forward(ops, tensors, x), y)
        backward(loss)
        lr = learning_rate(len(self.loss_curve), self.steps, family.lr)
        self.optimizer.step(self.params, {k: t.grad for k, t in tensors.items()}, lr)
        self.loss_curve.append(float(loss.value))
        self.step_kernel_seconds.append(backend.kernel_seconds - before)
        self.throughput.record_step(family.items(x), backend.kernel_seconds)

    def finish(self, started: float) -> TrainingRun:
        score = evaluate(self.family, self.backend, self.params, self.data)
        return TrainingRun(self.loss_curve, score, self.params, self.throughput.samples, time.perf_counter() - started)


@dataclass(frozen=True)
class Checkpoint:
    """What a long run would write to storage to resume from: weights and optimizer moments."""

    step: int
    params: Params
    first: Params
    second: Params


def save_checkpoint(params: Params, optimizer: Adam, step: int) -> Checkpoint:
    """Runs only once a run reaches CHECKPOINT_EVERY steps: shorter runs never checkpoint."""
    copy = lambda arrays: {k: v.copy() for k, v in arrays.items()}  # noqa: E731
    return Checkpoint(step, copy(params), copy(optimizer.first), copy(optimizer.second))


def train(
    family: Family,
    backend: Backend,
    seed: int,
    runtime: RuntimeConfig,
    data: Dataset | None = None,
    steps: int | None = None,
) -> TrainingRun:
    started = time.perf_counter()
    trainer = Trainer(family, backend, seed, runtime, data, steps)
    with threadpool_limits(1, user_api="blas"):  # one emulated chip = one core: steadier kernel timings
        while not trainer.done:
            trainer.step()
    return trainer.finish(started)


def infer(family: Family, backend: Backend, params: Params, inputs: np.ndarray) -> np.ndarray:
    """Logits of ``inputs`` (evaluated in chunks) on ``backend``."""
    ops = Ops(backend)
    tensors = {k: Tensor(v) for k, v in params.items()}
    chunks = [family.forward(ops, tensors, inputs[i : i + EVAL_CHUNK]).value for i in range(0, len(inputs), EVAL_CHUNK)]
    return np.concatenate(chunks)


def evaluate(family: Family, backend: Backend, params: Params, data: Dataset) -> float:
    return family.score(infer(family, backend, params, data.eval_x), data.eval_y)
