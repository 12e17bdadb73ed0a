"""Speech: a 1-D convolution over time, then a self-attention block, over synthetic audio features.

Data: 24 frames x 16 filterbank bands. Each keyword is three "phones" in a fixed order; a phone
lights up a band with a Gaussian profile for 5-7 frames. Keywords share phones in different orders,
so the model has to see transitions, not just which phones occur. The utterance starts at a random
frame, with Gaussian noise on every band. Eval score: keyword accuracy on held-out utterances.
"""

from __future__ import annotations

import numpy as np

from fastci.qualify.models.base import Dataset, Family, Params, accuracy, classification_loss, glorot
from fastci.qualify.tensor import Ops, Tensor

FRAMES, BANDS, CHANNELS, NOISE = 24, 16, 24, 0.7
PHONE_BANDS = (2, 5, 8, 11, 14)  # centre band of each phone
KEYWORDS = ((0, 1, 2), (2, 1, 0), (1, 3, 4), (4, 3, 1), (0, 3, 2), (2, 4, 0))  # phone sequences
_BAND_AXIS = np.arange(BANDS)


def make_data(rng: np.random.Generator) -> Dataset:
    def sample(n: int) -> tuple[np.ndarray, np.ndarray]:
        labels = rng.integers(0, len(KEYWORDS), n)
        features = rng.normal(0, NOISE, (n, FRAMES, BANDS)).astype(np.float32)
        for k, label in enumerate(labels):
            frame = int(rng.integers(0, 4))
            for phone in KEYWORDS[label]:
                length = int(rng.integers(5, 8))
                profile = 1.5 * np.exp(-0.5 * (_BAND_AXIS - PHONE_BANDS[phone]) ** 2)
                features[k, frame : frame + length] += profile.astype(np.float32)
                frame += length
        return features, labels

    train_x, train_y = sample(2048)
    eval_x, eval_y = sample(512)
    return Dataset(train_x, train_y, eval_x, eval_y)


def _time_conv_index() -> np.ndarray:
    """(FRAMES, 3*BANDS) gather indices of a width-3 'same' convolution over time; -1 pads."""
    index = np.full((FRAMES, 3 * BANDS), -1, np.int64)
    for t in range(FRAMES):
        for p, dt in enumerate((-1, 0, 1)):
            if 0 <= t + dt < FRAMES:
                index[t, p * BANDS : (p + 1) * BANDS] = np.arange((t + dt) * BANDS, (t + dt + 1) * BANDS)
    return index


_INDEX = _time_conv_index()


def init(rng: np.random.Generator) -> Params:
    return {
        "conv": glorot(rng, 3 * BANDS, CHANNELS),
        "conv_b": np.zeros(CHANNELS, np.float32),
        "pos": (rng.standard_normal((FRAMES, CHANNELS)) * 0.1).astype(np.float32),
        "qkv": glorot(rng, CHANNELS, 3 * CHANNELS),
        "proj": glorot(rng, CHANNELS, CHANNELS),
        "ln_g": np.ones(CHANNELS, np.float32),
        "ln_b": np.zeros(CHANNELS, np.float32),
        "head": glorot(rng, CHANNELS, len(KEYWORDS)),
        "head_b": np.zeros(len(KEYWORDS), np.float32),
    }


def forward(ops: Ops, p: dict[str, Tensor], features: np.ndarray) -> Tensor:
    batch = features.shape[0]
    x = ops.relu(ops.add(ops.matmul(ops.unfold(Tensor(features), _INDEX), p["conv"]), p["conv_b"]))
    x = ops.add(x, p["pos"])  # (B, T, C)
    qkv = ops.matmul(x, p["qkv"])
    q, k, v = (_columns(ops, qkv, i * CHANNELS, (i + 1) * CHANNELS) for i in range(3))
    scores = ops.scale(ops.matmul(q, ops.transpose(k, (0, 2, 1))), 1.0 / np.sqrt(CHANNELS))
    x = ops.add(x, ops.matmul(ops.matmul(ops.softmax(scores), v), p["proj"]))
    x = ops.layer_norm(x, p["ln_g"], p["ln_b"])
    pooled = ops.reshape(ops.mean(x, 1), (batch, CHANNELS))
    return ops.add(ops.matmul(pooled, p["head"]), p["head_b"])


def _columns(ops: Ops, x: Tensor, start: int, stop: int) -> Tensor:
    def grads(g: np.ndarray) -> tuple[np.ndarray]:
        full = np.zeros_like(x.value)
        full[..., start:stop] = g
        return (full,)

    return Tensor(x.value[..., start:stop], (x,), grads)


FAMILY = Family(
    name="speech-conv-attn",
    kind="speech",
    describe=f"1-D conv (width 3, {CHANNELS} channels) + self-attention block over {FRAMES}x{BANDS} features, "
    f"{len(KEYWORDS)} keywords",
    make_data=make_data,
    init=init,
    forward=forward,
    loss=classification_loss,
    score=accuracy,
    score_name="keyword accuracy",
    items=lambda x: int(x.shape[0]),
    item_unit="utterances",
    steps=200,
    batch_size=32,
    lr=1e-2,
    config={"frames": FRAMES, "bands": BANDS, "channels": CHANNELS, "keywords": len(KEYWORDS)},
)
