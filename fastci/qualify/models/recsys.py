"""Recommendation: embedding bags + MLPs with a DLRM-style dot-product interaction.

Data: users and items have hidden 4-dimensional tastes; a sample is (user, item, a bag of four items
the user engaged with before, two dense features) and its click label is drawn with probability
sigmoid(2.5 * taste(user) . taste(item) + 0.8 * dense[0] - 0.3). Eval score: AUC on held-out samples.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

from fastci.qualify.models.base import Dataset, Family, Params, glorot
from fastci.qualify.tensor import Ops, Tensor

USERS, ITEMS, BAG, DENSE, EMBED, TASTE, HIDDEN = 64, 96, 4, 2, 8, 4, 32
INIT = 0.3  # embedding init scale: large enough for dot products to carry gradient from the start
_PAIRS = np.triu_indices(4, k=1)  # dot products between the four embedded vectors


def make_data(rng: np.random.Generator) -> Dataset:
    user_taste = rng.normal(0, 0.7, (USERS, TASTE))
    item_taste = rng.normal(0, 0.7, (ITEMS, TASTE))

    def sample(n: int) -> tuple[np.ndarray, np.ndarray]:
        users = rng.integers(0, USERS, n)
        items = rng.integers(0, ITEMS, n)
        affinity = user_taste[users] @ item_taste.T  # earlier engagement follows taste
        history = np.argsort(-(affinity + rng.gumbel(0, 1, affinity.shape)), axis=1)[:, :BAG]
        dense = rng.normal(0, 1, (n, DENSE))
        logit = 2.5 * np.sum(user_taste[users] * item_taste[items], axis=1) + 0.8 * dense[:, 0] - 0.3
        clicks = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
        # One float row per sample: user id, item id, bag of item ids, dense features.
        rows = np.concatenate([users[:, None], items[:, None], history, dense], axis=1).astype(np.float32)
        return rows, clicks

    train_x, train_y = sample(8192)
    eval_x, eval_y = sample(2048)
    return Dataset(train_x, train_y, eval_x, eval_y)


def init(rng: np.random.Generator) -> Params:
    return {
        "users": (rng.standard_normal((USERS, EMBED)) * INIT).astype(np.float32),
        "items": (rng.standard_normal((ITEMS, EMBED)) * INIT).astype(np.float32),
        "bottom": glorot(rng, DENSE, EMBED),
        "bottom_b": np.zeros(EMBED, np.float32),
        "top1": glorot(rng, len(_PAIRS[0]) + EMBED, HIDDEN),
        "top1_b": np.zeros(HIDDEN, np.float32),
        "top2": glorot(rng, HIDDEN, 1),
        "top2_b": np.zeros(1, np.float32),
    }


def forward(ops: Ops, p: dict[str, Tensor], rows: np.ndarray) -> Tensor:
    batch = rows.shape[0]
    ids = rows[:, : 2 + BAG].astype(np.int64)
    user = ops.gather_rows(p["users"], ids[:, 0])
    item = ops.gather_rows(p["items"], ids[:, 1])
    bag = ops.reshape(ops.sum(ops.gather_rows(p["items"], ids[:, 2:]), 1), (batch, EMBED))  # embedding bag (sum)
    dense = ops.relu(ops.add(ops.matmul(Tensor(rows[:, 2 + BAG :]), p["bottom"]), p["bottom_b"]))
    stacked = ops.reshape(ops.concat([user, item, bag, dense], 1), (batch, 4, EMBED))
    dots = ops.matmul(stacked, ops.transpose(stacked, (0, 2, 1)))  # (B, 4, 4)
    pairs = _upper_triangle(dots)
    hidden = ops.relu(ops.add(ops.matmul(ops.concat([pairs, dense], 1), p["top1"]), p["top1_b"]))
    return ops.add(ops.matmul(hidden, p["top2"]), p["top2_b"])  # (B, 1) click logit


def _upper_triangle(dots: Tensor) -> Tensor:
    def grads(g: np.ndarray) -> tuple[np.ndarray]:
        full = np.zeros_like(dots.value)
        full[:, _PAIRS[0], _PAIRS[1]] = g
        return (full,)

    return Tensor(dots.value[:, _PAIRS[0], _PAIRS[1]], (dots,), grads)


def loss(ops: Ops, logits: Tensor, labels: np.ndarray) -> Tensor:
    return ops.binary_cross_entropy(logits, labels)


def auc(logits: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney form, ties counted half)."""
    scores = logits.reshape(-1).astype(np.float64)
    positives = labels.reshape(-1) == 1
    n_pos, n_neg = int(positives.sum()), int((~positives).sum())
    ranks = rankdata(scores)
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


FAMILY = Family(
    name="dlrm-small",
    kind="recommendation",
    describe=f"embedding bags ({USERS} users, {ITEMS} items, width {EMBED}) + dense MLP + dot interaction + MLP",
    make_data=make_data,
    init=init,
    forward=forward,
    loss=loss,
    score=auc,
    score_name="AUC",
    items=lambda x: int(x.shape[0]),
    item_unit="samples",
    steps=600,
    batch_size=64,
    lr=3e-2,
    config={"users": USERS, "items": ITEMS, "embedding": EMBED, "bag": BAG},
)
