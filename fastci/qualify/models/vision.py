"""Vision: a small conv net (two 3x3 convolutions as im2col matmuls, average pooling, a linear head).

Data: 12x12 single-channel images of one stroke (horizontal, vertical, diagonal or anti-diagonal)
of random length and place, in Gaussian noise. Eval score: accuracy on held-out images.
"""

from __future__ import annotations

import numpy as np

from fastci.qualify.models.base import Dataset, Family, Params, accuracy, classification_loss, glorot
from fastci.qualify.tensor import Ops, Tensor

SIZE, CLASSES, C1, C2, NOISE = 12, 4, 8, 16, 0.4
_DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))  # (row step, column step) of each class's stroke


def make_data(rng: np.random.Generator) -> Dataset:
    def sample(n: int) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.integers(0, CLASSES, n)
        images = rng.normal(0, NOISE, (n, SIZE, SIZE, 1)).astype(np.float32)
        for k, label in enumerate(labels):
            dr, dc = _DIRECTIONS[label]
            length = int(rng.integers(5, 9))
            r0 = int(rng.integers(0, SIZE - dr * (length - 1)))
            c_lo, c_hi = (0, SIZE - dc * (length - 1)) if dc >= 0 else (length - 1, SIZE)
            c0 = int(rng.integers(c_lo, c_hi))
            for step in range(length):
                images[k, r0 + dr * step, c0 + dc * step, 0] += 1.5
        return images, labels

    train_x, train_y = sample(2048)
    eval_x, eval_y = sample(512)
    return Dataset(train_x, train_y, eval_x, eval_y)


def conv_index(height: int, width: int, channels: int) -> np.ndarray:
    """im2col gather indices (channels last, 3x3, same padding): (H*W, 9*C), -1 for the padding."""
    index = np.full((height * width, 9 * channels), -1, np.int64)
    for i in range(height):
        for j in range(width):
            for p, (di, dj) in enumerate((di, dj) for di in (-1, 0, 1) for dj in (-1, 0, 1)):
                r, c = i + di, j + dj
                if 0 <= r < height and 0 <= c < width:
                    base = (r * width + c) * channels
                    index[i * width + j, p * channels : (p + 1) * channels] = np.arange(base, base + channels)
    return index


_INDEX1 = conv_index(SIZE, SIZE, 1)
_INDEX2 = conv_index(SIZE // 2, SIZE // 2, C1)


def init(rng: np.random.Generator) -> Params:
    return {
        "conv1": glorot(rng, 9, C1) * 2,
        "conv1_b": np.zeros(C1, np.float32),
        "conv2": glorot(rng, 9 * C1, C2) * 2,
        "conv2_b": np.zeros(C2, np.float32),
        "head": glorot(rng, C2, CLASSES),
        "head_b": np.zeros(CLASSES, np.float32),
    }


def forward(ops: Ops, p: dict[str, Tensor], images: np.ndarray) -> Tensor:
    batch = images.shape[0]
    x = Tensor(images)
    h = ops.relu(ops.add(ops.matmul(ops.unfold(x, _INDEX1), p["conv1"]), p["conv1_b"]))  # (B, 144, C1)
    half = SIZE // 2
    blocks = ops.transpose(ops.reshape(h, (batch, half, 2, half, 2, C1)), (0, 1, 3, 5, 2, 4))
    pooled = ops.reshape(ops.mean(ops.reshape(blocks, (batch, half, half, C1, 4)), -1), (batch, half, half, C1))
    h = ops.relu(ops.add(ops.matmul(ops.unfold(pooled, _INDEX2), p["conv2"]), p["conv2_b"]))  # (B, 36, C2)
    features = ops.reshape(ops.mean(h, 1), (batch, C2))
    return ops.add(ops.matmul(features, p["head"]), p["head_b"])


FAMILY = Family(
    name="convnet-small",
    kind="vision",
    describe=f"conv 3x3x{C1} -> avg pool -> conv 3x3x{C2} -> global avg pool -> linear, "
    f"{SIZE}x{SIZE} images, {CLASSES} classes",
    make_data=make_data,
    init=init,
    forward=forward,
    loss=classification_loss,
    score=accuracy,
    score_name="accuracy",
    items=lambda x: int(x.shape[0]),
    item_unit="images",
    steps=250,
    batch_size=32,
    lr=2e-2,
    config={"image": SIZE, "classes": CLASSES, "channels": [C1, C2]},
)
