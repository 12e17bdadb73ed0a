"""Pinned golden references: what the reference backend produced for each model, stored in the repo.

One compressed ``.npz`` per family in ``fastci/qualify/golden/``: the probe inputs, the weights the
reference training run ended with, the reference's logits for those inputs (the inference golden),
and the reference loss curve and eval score (the training goldens), with the seed and step count
they came from. The inference check reads the probe and weights from the file, so it does not
depend on how the data generator or the training would behave elsewhere; ``fastci qualify
--write-golden`` regenerates the files when a model changes on purpose.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fastci.qualify.models.base import Family, Params

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
PROBE_SIZE = 32  # held-out inputs the inference check runs
SEED = 20261201  # the seed every qualification run of the set uses (data, init, batch order)


@dataclass(frozen=True)
class Golden:
    family: str
    seed: int
    steps: int
    probe: np.ndarray
    weights: Params
    logits: np.ndarray
    loss_curve: np.ndarray
    eval_score: float


def golden_path(family: str, directory: Path = GOLDEN_DIR) -> Path:
    return directory / f"{family}.npz"


def save(golden: Golden, directory: Path = GOLDEN_DIR) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    arrays = {f"weight.{name}": value for name, value in golden.weights.items()}
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        seed=np.int64(golden.seed),
        steps=np.int64(golden.steps),
        probe=golden.probe,
        logits=golden.logits,
        loss_curve=golden.loss_curve.astype(np.float64),
        eval_score=np.float64(golden.eval_score),
        **arrays,
    )
    path = golden_path(golden.family, directory)
    path.write_bytes(buffer.getvalue())
    return path


def load(family: Family, directory: Path = GOLDEN_DIR) -> Golden:
    path = golden_path(family.name, directory)
    if not path.exists():
        raise FileNotFoundError(f"no pinned golden for {family.name} at {path} (fastci qualify --write-golden)")
    with np.load(path) as data:
        weights = {key.removeprefix("weight."): data[key] for key in data.files if key.startswith("weight.")}
        return Golden(
            family=family.name,
            seed=int(data["seed"]),
            steps=int(data["steps"]),
            probe=data["probe"],
            weights=weights,
            logits=data["logits"],
            loss_curve=data["loss_curve"],
            eval_score=float(data["eval_score"]),
        )
