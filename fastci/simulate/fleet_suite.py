"""The simulated fleet's test suite, mapped onto the tests of a replayed repository, and its durations.

The replayed repository (more-itertools) brings what must not be invented: its change stream, its
evidence graph, which tests each change selects, and its tests' measured durations. The fleet brings
what the repository lacks: accelerator work. The mapping, stated once:

- **60 qualification models.** The 60 tests of the replay's base suite that come first by sha256 of
  their id stand in for the 60 models (a hash, so neither their selection rate nor their duration
  chose them). The first 6 of them are the models that need many nodes (16, 16, 32, 32, 64, 64
  chips: 2 to 8 whole nodes); the others take 1, 2, 4 or 8 chips of one node. Each model belongs
  to one of the four families ``fastci qualify`` runs (language, vision, speech, recommendation),
  in turn. A change that selects the stand-in selects the model.
- **Kernel and compiler unit tests.** Every other test of the replay, run on CPU/simulator capacity
  with its own measured durations (the replay's junitxml seconds), unscaled.
- **Model durations** come from ``fastci qualify``'s measured run times on this host
  (``bench/qualify_durations.py`` -> ``data/qualify_durations.json``): the nightly run is the
  family's inference check plus its training at the pinned steps, the presubmit smoke run the
  inference check plus training at a tenth of the steps. Each run draws one measured sample (so
  the spread between runs and precisions is the measured one) and scales it to a fleet-size run by
  one factor, an assumption stated here and nowhere tuned: **the median single-node model's
  nightly run takes 30 minutes on the fleet.** Multi-node models run twice as long as their family
  (bigger models); developer experiments are training runs of 1 to 4 nightly lengths.
"""

from __future__ import annotations

import hashlib
import random
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson

DATA = Path(__file__).resolve().parent / "data"
QUALIFY_DURATIONS = DATA / "qualify_durations.json"
FAMILIES = ("lm-tiny", "convnet-small", "speech-conv-attn", "dlrm-small")
MODELS = 60
MULTI_NODE_CHIPS = (16, 16, 32, 32, 64, 64)
SINGLE_NODE_CHIPS = (1, 2, 4, 8)
MEDIAN_NIGHTLY_S = 1800.0  # the stated anchor: the median single-node model's nightly run on the fleet
MULTI_NODE_TIME = 2.0


@dataclass(frozen=True)
class FleetModel:
    name: str
    family: str
    chips: int
    stand_in: str  # the replay test that stands for it

    @property
    def multi_node(self) -> bool:
        return self.chips > 8


def order_key(test_id: str) -> str:
    return hashlib.sha256(test_id.encode()).hexdigest()


def choose_models(tests: Iterable[str], count: int = MODELS) -> list[FleetModel]:
    """The qualification models and the tests that stand in for them (see the module's docstring)."""
    chosen = sorted(set(tests), key=order_key)[:count]
    if len(chosen) < count:
        raise ValueError(f"the replay has {len(chosen)} tests; the fleet needs {count} to stand in for its models")
    models = []
    for index, test in enumerate(chosen):
        family = FAMILIES[index % len(FAMILIES)]
        if index < len(MULTI_NODE_CHIPS):
            chips = MULTI_NODE_CHIPS[index]
        else:
            chips = SINGLE_NODE_CHIPS[(index // len(FAMILIES)) % len(SINGLE_NODE_CHIPS)]
        models.append(FleetModel(f"{family}-{chips}c-{index:02d}", family, chips, test))
    return models


@dataclass(frozen=True)
class MeasuredRun:
    nightly_s: float  # inference + training at the pinned steps, as measured on this host
    smoke_s: float  # inference + training at a tenth of the steps


def load_qualify_durations(path: Path = QUALIFY_DURATIONS) -> dict[str, list[MeasuredRun]]:
    document = orjson.loads(path.read_bytes())
    return {
        name: [
            MeasuredRun(r["inference_s"] + r["training_s"], r["inference_s"] + r["smoke_training_s"])
            for r in entry["runs"]
        ]
        for name, entry in document["models"].items()
    }


@dataclass
class Durations:
    """Seconds of every kind of run, drawn from measured samples with a caller's seeded generator."""

    measured: Mapping[str, list[MeasuredRun]]
    unit_tests: Mapping[str, list[float]]  # replay test id -> its measured seconds, one per full run
    scale: float = field(init=False)

    def __post_init__(self) -> None:
        median = statistics.median(run.nightly_s for runs in self.measured.values() for run in runs)
        self.scale = MEDIAN_NIGHTLY_S / median

    def _run(self, model: FleetModel, rng: random.Random) -> MeasuredRun:
        return rng.choice(self.measured[model.family])

    def smoke(self, model: FleetModel, rng: random.Random) -> float:
        return self._run(model, rng).smoke_s * self.scale * (MULTI_NODE_TIME if model.multi_node else 1.0)

    def nightly(self, model: FleetModel, rng: random.Random) -> float:
        return self._run(model, rng).nightly_s * self.scale * (MULTI_NODE_TIME if model.multi_node else 1.0)

    def mean_smoke(self, model: FleetModel) -> float:
        runs = self.measured[model.family]
        return statistics.fmean(r.smoke_s for r in runs) * self.scale * (MULTI_NODE_TIME if model.multi_node else 1.0)

    def mean_nightly(self, model: FleetModel) -> float:
        runs = self.measured[model.family]
        return statistics.fmean(r.nightly_s for r in runs) * self.scale * (MULTI_NODE_TIME if model.multi_node else 1.0)

    def unit_test(self, test_id: str, rng: random.Random) -> float:
        samples = self.unit_tests.get(test_id)
        return rng.choice(samples) if samples else 0.0

    def mean_unit_test(self, test_id: str) -> float:
        samples = self.unit_tests.get(test_id)
        return statistics.fmean(samples) if samples else 0.0
