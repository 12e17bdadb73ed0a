"""Language: a tiny decoder-only transformer LM (one pre-norm block, two causal heads).

Data: sequences over a small vocabulary in which each token is a fixed (random) function of the
token two places back, so the model has to learn to attend to an earlier position: the previous
token alone says nothing. Eval score: next-token accuracy on held-out sequences (only the first
prediction is a guess, so the best to expect is 15/16 + 1/384 = 0.940; chance is 1/24).
"""

from __future__ import annotations

import numpy as np

from fastci.qualify.models.base import Dataset, Family, Params, accuracy, classification_loss, glorot
from fastci.qualify.tensor import Ops, Tensor

VOCAB, SEQ, WIDTH, HEADS, HIDDEN = 24, 16, 32, 2, 64


def make_data(rng: np.random.Generator) -> Dataset:
    successor = rng.integers(0, VOCAB, VOCAB)  # of the token two places back

    def sample(n: int) -> np.ndarray:
        seqs = np.empty((n, SEQ + 1), np.int64)
        seqs[:, :2] = rng.integers(0, VOCAB, (n, 2))
        for t in range(2, SEQ + 1):
            seqs[:, t] = successor[seqs[:, t - 2]]
        return seqs

    train, held_out = sample(4096), sample(256)
    return Dataset(train[:, :-1], train[:, 1:], held_out[:, :-1], held_out[:, 1:])


def init(rng: np.random.Generator) -> Params:
    s = 0.1
    return {
        "embed": (rng.standard_normal((VOCAB, WIDTH)) * s).astype(np.float32),
        "pos": (rng.standard_normal((SEQ, WIDTH)) * s).astype(np.float32),
        "ln1_g": np.ones(WIDTH, np.float32), "ln1_b": np.zeros(WIDTH, np.float32),
        "qkv": glorot(rng, WIDTH, 3 * WIDTH), "proj": glorot(rng, WIDTH, WIDTH),
        "ln2_g": np.ones(WIDTH, np.float32), "ln2_b": np.zeros(WIDTH, np.float32),
        "up": glorot(rng, WIDTH, HIDDEN), "up_b": np.zeros(HIDDEN, np.float32),
        "down": glorot(rng, HIDDEN, WIDTH), "down_b": np.zeros(WIDTH, np.float32),
        "lnf_g": np.ones(WIDTH, np.float32), "lnf_b": np.zeros(WIDTH, np.float32),
        "head": glorot(rng, WIDTH, VOCAB),
    }


_CAUSAL = np.tril(np.ones((SEQ, SEQ), bool))


def forward(ops: Ops, p: dict[str, Tensor], tokens: np.ndarray) -> Tensor:
    batch, seq = tokens.shape
    head_dim = WIDTH // HEADS
    x = ops.add(ops.gather_rows(p["embed"], tokens), p["pos"])
    h = ops.layer_norm(x, p["ln1_g"], p["ln1_b"])
    qkv = ops.transpose(ops.reshape(ops.matmul(h, p["qkv"]), (batch, seq, 3, HEADS, head_dim)), (2, 0, 3, 1, 4))
    q, k, v = (ops.reshape(_pick(ops, qkv, i), (batch, HEADS, seq, head_dim)) for i in range(3))
    scores = ops.scale(ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))), 1.0 / np.sqrt(head_dim))
    attended = ops.matmul(ops.softmax(scores, _CAUSAL[:seq, :seq]), v)
    merged = ops.reshape(ops.transpose(attended, (0, 2, 1, 3)), (batch, seq, WIDTH))
    x = ops.add(x, ops.matmul(merged, p["proj"]))
    h = ops.layer_norm(x, p["ln2_g"], p["ln2_b"])
    h = ops.gelu(ops.add(ops.matmul(h, p["up"]), p["up_b"]))
    x = ops.add(x, ops.add(ops.matmul(h, p["down"]), p["down_b"]))
    return ops.matmul(ops.layer_norm(x, p["lnf_g"], p["lnf_b"]), p["head"])


def _pick(ops: Ops, stacked: Tensor, index: int) -> Tensor:
    """``stacked[index]`` along the first axis, with its gradient."""
    def grads(g: np.ndarray) -> tuple[np.ndarray]:
        full = np.zeros_like(stacked.value)
        full[index] = g
        return (full,)

    return Tensor(stacked.value[index], (stacked,), grads)


FAMILY = Family(
    name="lm-tiny",
    kind="language",
    describe=f"decoder-only transformer, 1 block, {HEADS} heads, width {WIDTH}, vocab {VOCAB}, context {SEQ}",
    make_data=make_data,
    init=init,
    forward=forward,
    loss=classification_loss,
    score=accuracy,
    score_name="next-token accuracy",
    items=lambda x: int(x.size),
    item_unit="tokens",
    steps=300,
    batch_size=32,
    lr=2e-3,
    config={"vocab": VOCAB, "context": SEQ, "width": WIDTH, "heads": HEADS, "layers": 1},
)
