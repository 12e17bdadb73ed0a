"""What a model family provides to the qualification runner, and the data split every family uses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fastci.qualify.tensor import Ops, Tensor

Params = dict[str, np.ndarray]


@dataclass(frozen=True)
class Dataset:
    """Generated in code from a seed: a training pool to draw batches from and a held-out eval set."""

    train_x: np.ndarray
    train_y: np.ndarray
    eval_x: np.ndarray
    eval_y: np.ndarray

    def batch(self, rng: np.random.Generator, size: int) -> tuple[np.ndarray, np.ndarray]:
        rows = rng.integers(0, len(self.train_x), size)
        return self.train_x[rows], self.train_y[rows]


@dataclass(frozen=True)
class Family:
    """One model of the qualification set: its data, parameters, forward pass, loss and score."""

    name: str  # the test id's model part, e.g. "lm-tiny"
    kind: str  # language, vision, speech, recommendation
    describe: str
    make_data: Callable[[np.random.Generator], Dataset]
    init: Callable[[np.random.Generator], Params]
    forward: Callable[[Ops, dict[str, Tensor], np.ndarray], Tensor]
    loss: Callable[[Ops, Tensor, np.ndarray], Tensor]
    score: Callable[[np.ndarray, np.ndarray], float]  # eval score from logits and targets (higher is better)
    score_name: str
    items: Callable[[np.ndarray], int]  # samples (or tokens) in a batch, for throughput
    item_unit: str
    steps: int = 150
    batch_size: int = 32
    lr: float = 3e-3
    config: dict[str, Any] = field(default_factory=dict)


def glorot(rng: np.random.Generator, fan_in: int, fan_out: int) -> np.ndarray:
    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32)


def accuracy(logits: np.ndarray, targets: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=-1) == targets))


def classification_loss(ops: Ops, logits: Tensor, targets: np.ndarray) -> Tensor:
    return ops.cross_entropy(logits, targets)
