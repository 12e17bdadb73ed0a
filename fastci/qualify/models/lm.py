"""Language: a tiny decoder-only transformer LM (pre-norm blocks, two causal heads).

Data: sequences over a small vocabulary in which each token is a fixed (random) function of the
token two places back, so the model has to learn to attend to an earlier position: the previous
token alone says nothing. Eval score: next-token accuracy on held-out sequences (only the first
prediction is a guess, so the best to expect is 15/16 + 1/384 = 0.940; chance is 1/24).

Its dimensions are configurable (``LMConfig``: layers, width, context, heads); the qualification
set runs the default, one block, whose arithmetic and random draws are those of the pinned golden.
Deeper configs follow the dense-then-experts layout of DeepSeek-style models: blocks from
``first_moe_layer`` on replace the dense MLP by a soft mixture of experts (a router's softmax
weighs every expert's MLP), so that code runs only when the model has that many layers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fastci.evidence.dimensions import at
from fastci.qualify.models.base import Dataset, Family, Params, accuracy, classification_loss, glorot
from fastci.qualify.tensor import Ops, Tensor

VOCAB = 24


@dataclass(frozen=True)
class LMConfig:
    layers: int = 1
    width: int = 32
    context: int = 16
    heads: int = 2
    first_moe_layer: int = 1  # blocks before it have a dense MLP, the rest a mixture of experts
    experts: int = 2

    @property
    def hidden(self) -> int:
        return 2 * self.width

    def __post_init__(self) -> None:
        if self.layers < 1 or self.context < 3 or self.width % self.heads:
            raise ValueError(f"LMConfig: need layers >= 1, context >= 3 and width divisible by heads (got {self})")


DEFAULT = LMConfig()


def make_data(rng: np.random.Generator, config: LMConfig = DEFAULT) -> Dataset:
    successor = rng.integers(0, VOCAB, VOCAB)  # of the token two places back

    def sample(n: int) -> np.ndarray:
        seqs = np.empty((n, config.context + 1), np.int64)
        seqs[:, :2] = rng.integers(0, VOCAB, (n, 2))
        for t in range(2, config.context + 1):
            seqs[:, t] = successor[seqs[:, t - 2]]
        return seqs

    train, held_out = sample(4096), sample(256)
    return Dataset(train[:, :-1], train[:, 1:], held_out[:, :-1], held_out[:, 1:])


def _prefix(layer: int) -> str:
    return "" if layer == 0 else f"l{layer}."  # the first block's names are the golden's


def init(rng: np.random.Generator, config: LMConfig = DEFAULT) -> Params:
    s, width, hidden = 0.1, config.width, config.hidden
    params = {
        "embed": (rng.standard_normal((VOCAB, width)) * s).astype(np.float32),
        "pos": (rng.standard_normal((config.context, width)) * s).astype(np.float32),
        "ln1_g": np.ones(width, np.float32),
        "ln1_b": np.zeros(width, np.float32),
        "qkv": glorot(rng, width, 3 * width),
        "proj": glorot(rng, width, width),
        "ln2_g": np.ones(width, np.float32),
        "ln2_b": np.zeros(width, np.float32),
        "up": glorot(rng, width, hidden),
        "up_b": np.zeros(hidden, np.float32),
        "down": glorot(rng, hidden, width),
        "down_b": np.zeros(width, np.float32),
        "lnf_g": np.ones(width, np.float32),
        "lnf_b": np.zeros(width, np.float32),
        "head": glorot(rng, width, VOCAB),
    }
    for layer in range(1, config.layers):  # drawn after the first block's, so its draws stay the golden's
        pre = _prefix(layer)
        params.update(
            {
                f"{pre}ln1_g": np.ones(width, np.float32),
                f"{pre}ln1_b": np.zeros(width, np.float32),
                f"{pre}qkv": glorot(rng, width, 3 * width),
                f"{pre}proj": glorot(rng, width, width),
                f"{pre}ln2_g": np.ones(width, np.float32),
                f"{pre}ln2_b": np.zeros(width, np.float32),
            }
        )
        experts = config.experts if layer >= config.first_moe_layer else 1
        if experts > 1:
            params[f"{pre}router"] = glorot(rng, width, experts)
        for e in range(experts):
            tag = f"{pre}e{e}." if experts > 1 else pre
            params.update(
                {
                    f"{tag}up": glorot(rng, width, hidden),
                    f"{tag}up_b": np.zeros(hidden, np.float32),
                    f"{tag}down": glorot(rng, hidden, width),
                    f"{tag}down_b": np.zeros(width, np.float32),
                }
            )
    return params


def forward(ops: Ops, p: dict[str, Tensor], tokens: np.ndarray, config: LMConfig = DEFAULT) -> Tensor:
    x = ops.add(ops.gather_rows(p["embed"], tokens), p["pos"])
    for layer in range(config.layers):
        with at("layers", layer):
            x = block(ops, p, x, layer, config)
    return ops.matmul(ops.layer_norm(x, p["lnf_g"], p["lnf_b"]), p["head"])


def block(ops: Ops, p: dict[str, Tensor], x: Tensor, layer: int, config: LMConfig) -> Tensor:
    pre = _prefix(layer)
    x = ops.add(x, attention(ops, p, ops.layer_norm(x, p[f"{pre}ln1_g"], p[f"{pre}ln1_b"]), pre, config))
    h = ops.layer_norm(x, p[f"{pre}ln2_g"], p[f"{pre}ln2_b"])
    if layer >= config.first_moe_layer and config.experts > 1:
        return ops.add(x, mixture_of_experts(ops, p, h, pre, config))
    return ops.add(x, mlp(ops, p, h, pre))


def attention(ops: Ops, p: dict[str, Tensor], h: Tensor, pre: str, config: LMConfig) -> Tensor:
    batch, seq, width = h.shape
    heads = config.heads
    head_dim = width // heads
    qkv = ops.transpose(ops.reshape(ops.matmul(h, p[f"{pre}qkv"]), (batch, seq, 3, heads, head_dim)), (2, 0, 3, 1, 4))
    q, k, v = (ops.reshape(_pick(ops, qkv, i), (batch, heads, seq, head_dim)) for i in range(3))
    scores = ops.scale(ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))), 1.0 / np.sqrt(head_dim))
    attended = ops.matmul(ops.softmax(scores, _causal(seq)), v)
    merged = ops.reshape(ops.transpose(attended, (0, 2, 1, 3)), (batch, seq, width))
    return ops.matmul(merged, p[f"{pre}proj"])


def mlp(ops: Ops, p: dict[str, Tensor], h: Tensor, tag: str) -> Tensor:
    h = ops.gelu(ops.add(ops.matmul(h, p[f"{tag}up"]), p[f"{tag}up_b"]))
    return ops.add(ops.matmul(h, p[f"{tag}down"]), p[f"{tag}down_b"])


def mixture_of_experts(ops: Ops, p: dict[str, Tensor], h: Tensor, pre: str, config: LMConfig) -> Tensor:
    """Soft routing: every expert's MLP, weighed by the router's softmax over experts."""
    gates = ops.softmax(ops.matmul(h, p[f"{pre}router"]))
    mixed = None
    for e in range(config.experts):
        one_hot = np.zeros((config.experts, 1), np.float32)
        one_hot[e, 0] = 1.0
        weighted = ops.mul(mlp(ops, p, h, f"{pre}e{e}."), ops.matmul(gates, Tensor(one_hot)))
        mixed = weighted if mixed is None else ops.add(mixed, weighted)
    return mixed


def _causal(seq: int) -> np.ndarray:
    return np.tril(np.ones((seq, seq), bool))


def _pick(ops: Ops, stacked: Tensor, index: int) -> Tensor:
    """``stacked[index]`` along the first axis, with its gradient."""

    def grads(g: np.ndarray) -> tuple[np.ndarray]:
        full = np.zeros_like(stacked.value)
        full[index] = g
        return (full,)

    return Tensor(stacked.value[index], (stacked,), grads)


def family(config: LMConfig = DEFAULT) -> Family:
    """The LM family for ``config`` (the qualification set's is ``FAMILY``, the default)."""
    return Family(
        name="lm-tiny",
        kind="language",
        describe=f"decoder-only transformer, {config.layers} block{'s' if config.layers > 1 else ''}, "
        f"{config.heads} heads, width {config.width}, vocab {VOCAB}, context {config.context}",
        make_data=lambda rng: make_data(rng, config),
        init=lambda rng: init(rng, config),
        forward=lambda ops, p, tokens: forward(ops, p, tokens, config),
        loss=classification_loss,
        score=accuracy,
        score_name="next-token accuracy",
        items=lambda x: int(x.size),
        item_unit="tokens",
        steps=300,
        batch_size=32,
        lr=2e-3,
        config={
            "vocab": VOCAB,
            "context": config.context,
            "width": config.width,
            "heads": config.heads,
            "layers": config.layers,
        },
    )


FAMILY = family()
