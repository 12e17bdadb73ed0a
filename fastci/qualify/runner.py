"""Run the qualification set on a backend and judge every model against its pinned golden.

Per model, two checks plus the throughput samples (three ``results`` events, see ``fastci.qualify.results``):

- inference: the golden weights on the golden probe inputs, compared with the golden logits within
  the precision's tolerance, then repeated: a stack that promises reproducible results must give
  the same bits for the same input. Within tolerance but not reproducible is ``flaky``.
- training: a short run from the pinned seed; its loss curve must stay in the reference's band and
  its eval score reach 99% of the reference's. The runtime's throughput samples come from the
  same steps (after warmup), so they cost no extra run.

With a baseline backend (a known-good bundle), each training run is interleaved step by step with
the baseline's on the same host, and the performance gate compares the two (``checks.
compare_interleaved``); that doubles the training time and is what makes a few percent visible on
a shared machine. An undecided comparison (leaning to a drop, not significant) pools in a second
pair; a drop it flags is confirmed by a fresh comparison before it counts (``checks.gate_interleaved``).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Literal

import numpy as np
from threadpoolctl import threadpool_limits

from fastci.inputs import Bundle
from fastci.qualify import checks, golden
from fastci.qualify.backend import Backend, ReferenceBackend
from fastci.qualify.emulated import EmulatedAccelerator, Precision
from fastci.qualify.models import FAMILIES
from fastci.qualify.models.base import Family
from fastci.qualify.stack import RuntimeConfig
from fastci.qualify.train import Trainer, infer, train

CheckStatus = Literal["passed", "failed", "flaky"]
INFERENCE_REPEATS = 3


@dataclass(frozen=True)
class InferenceCheck:
    relative_error: float
    tolerance: float
    mismatch_fraction: float  # of elements that differed between repeats
    seconds: float
    output_digest: str = ""  # sha256 of the first repeat's logits: a rerun that reproduces them matches it

    @property
    def status(self) -> CheckStatus:
        if not self.relative_error <= self.tolerance:
            return "failed"
        return "flaky" if self.mismatch_fraction > 0 else "passed"

    def summary(self) -> str:
        text = f"error {self.relative_error:.1e} (tol {self.tolerance:g})"
        if self.mismatch_fraction > 0:
            text += f"; repeats differ on {self.mismatch_fraction:.1%}"
        return text


@dataclass(frozen=True)
class TrainingCheck:
    loss_curve: list[float]
    divergence_step: int | None
    eval_score: float
    reference_eval: float
    throughput: list[float]  # items per second of kernel time, one sample per window after warmup
    seconds: float
    performance: checks.PerformanceVerdict | None = None  # against the baseline bundle, when run with one
    seed: int = golden.SEED  # the seed the run used (data, init, batch order)
    weights_digest: str = ""  # sha256 of the weights the run ended with: same digest, same training bit for bit

    @property
    def eval_ratio(self) -> float:
        return self.eval_score / self.reference_eval

    @property
    def throughput_cv(self) -> float:
        """Coefficient of variation of the throughput samples: the run's own noise level."""
        return float(np.std(self.throughput) / np.mean(self.throughput)) if len(self.throughput) > 1 else 0.0

    @property
    def status(self) -> CheckStatus:
        ok = self.divergence_step is None and self.eval_ratio >= checks.EVAL_MIN_RATIO
        return "passed" if ok else "failed"

    @property
    def performance_status(self) -> CheckStatus:
        return "failed" if self.performance is not None and self.performance.regressed else "passed"

    def summary(self) -> str:
        curve = "loss in band" if self.divergence_step is None else f"loss off band at step {self.divergence_step}"
        return f"{curve}; eval {self.eval_ratio:.1%} of ref"

    def performance_summary(self) -> str:
        text = f"{len(self.throughput)} samples, CV {self.throughput_cv:.0%}"
        if self.performance is not None:
            v = self.performance
            text += f"; vs baseline {_compared(v)}"
            if v.confirmation is not None:
                text += f", rerun {_compared(v.confirmation)}"
        return text


def _compared(verdict: checks.PerformanceVerdict) -> str:
    pooled = f", {verdict.pairs} pairs" if verdict.pairs > 1 else ""
    return f"{verdict.ratio - 1:+.1%} (p={verdict.p_value:.0e}{pooled})"


@dataclass(frozen=True)
class ModelQualification:
    family: Family
    inference: InferenceCheck
    training: TrainingCheck


@dataclass(frozen=True)
class Qualification:
    backend: str  # the backend's description
    bundle: Bundle
    precision: str
    models: list[ModelQualification]
    seconds: float
    baseline_bundle: Bundle | None = None  # the known-good bundle throughput was gated against, if any


def make_backend(kind: str, bundle: Bundle, precision: Precision = "bf16") -> Backend:
    if kind == "reference":
        return ReferenceBackend()
    if kind == "emulated":
        return EmulatedAccelerator(bundle, precision)
    raise ValueError(f"backend: {kind!r} is not one of reference, emulated")


def precision_of(backend: Backend) -> str:
    return getattr(backend, "precision", "fp32")


def runtime_of(backend: Backend) -> RuntimeConfig:
    stack = getattr(backend, "stack", None)
    return stack.runtime if stack is not None else RuntimeConfig()


def check_inference(
    family: Family, backend: Backend, pinned: golden.Golden, repeats: int = INFERENCE_REPEATS
) -> InferenceCheck:
    started = time.perf_counter()
    runs = [infer(family, backend, pinned.weights, pinned.probe) for _ in range(repeats)]
    return InferenceCheck(
        relative_error=checks.relative_error(runs[0], pinned.logits),
        tolerance=checks.INFERENCE_TOLERANCE[precision_of(backend)],
        mismatch_fraction=checks.mismatch_fraction(runs),
        seconds=time.perf_counter() - started,
        output_digest=digest({"logits": runs[0]}),
    )


def digest(arrays: dict[str, np.ndarray]) -> str:
    """sha256 of named arrays: names in order, each with its dtype, shape and bytes (C order)."""
    sha = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        sha.update(f"{name}\x1f{array.dtype.str}\x1f{array.shape}\x1f".encode())
        sha.update(array.tobytes())
    return sha.hexdigest()


def check_training(
    family: Family,
    backend: Backend,
    pinned: golden.Golden,
    baseline: Backend | None = None,
    steps: int | None = None,
    seed: int | None = None,
) -> TrainingCheck:
    """Train from the pinned seed (or ``seed``, to reproduce a run that used another); with ``baseline``,
    interleave a baseline run step by step and judge the candidate's performance against it."""
    started = time.perf_counter()
    seed = pinned.seed if seed is None else seed
    candidate, other = _interleaved(family, backend, baseline, seed, steps or pinned.steps)
    run = candidate.finish(started)
    performance = None
    if baseline is not None and other is not None:
        performance = checks.gate_interleaved(
            _kernel_seconds(backend, candidate, other),
            lambda: _kernel_seconds(backend, *_interleaved(family, backend, baseline, seed, candidate.steps)),
            runtime_of(backend).steps_per_sample,
        )
    return TrainingCheck(
        loss_curve=run.loss_curve,
        divergence_step=checks.loss_divergence_step(run.loss_curve, pinned.loss_curve, precision_of(backend)),
        eval_score=run.eval_score,
        reference_eval=pinned.eval_score,
        throughput=run.throughput,
        seconds=time.perf_counter() - started,
        performance=performance,
        seed=seed,
        weights_digest=digest(run.params),
    )


def _interleaved(
    family: Family, backend: Backend, baseline: Backend | None, seed: int, steps: int
) -> tuple[Trainer, Trainer | None]:
    """Train on ``backend`` and, if given, on ``baseline`` in lockstep (alternating which goes first)."""
    candidate = Trainer(family, backend, seed, runtime_of(backend), steps=steps)
    other = (
        Trainer(family, baseline, seed, runtime_of(baseline), data=candidate.data, steps=steps) if baseline else None
    )
    with threadpool_limits(1, user_api="blas"):  # one emulated chip = one core: steadier kernel timings
        while not candidate.done:
            pair = (candidate, other) if len(candidate.loss_curve) % 2 == 0 else (other, candidate)
            for trainer in pair:
                if trainer is not None:
                    trainer.step()
    return candidate, other


def _kernel_seconds(backend: Backend, candidate: Trainer, baseline: Trainer | None) -> tuple[list[float], list[float]]:
    """Per-step kernel times of an interleaved pair, past the runtime's warmup."""
    assert baseline is not None, "an interleaved pair has a baseline run"
    skip = runtime_of(backend).warmup_steps
    return candidate.step_kernel_seconds[skip:], baseline.step_kernel_seconds[skip:]


def qualify(
    backend: Backend,
    families: list[str] | None = None,
    baseline: Backend | None = None,
    progress=None,
    seed: int | None = None,
    steps: int | None = None,
) -> Qualification:
    """Run every check of ``families`` (default: the whole set) on ``backend``; ``seed`` and ``steps``
    default to the pinned golden's (a rerun passes the recorded ones)."""
    started = time.perf_counter()
    results = []
    for name in families or list(FAMILIES):
        family = family_named(name)
        pinned = golden.load(family)
        inference = check_inference(family, backend, pinned)
        training = check_training(family, backend, pinned, baseline, steps=steps, seed=seed)
        results.append(ModelQualification(family, inference, training))
        if progress:
            progress(family)
    return Qualification(
        backend=describe(backend),
        bundle=backend.bundle,
        precision=precision_of(backend),
        models=results,
        seconds=time.perf_counter() - started,
        baseline_bundle=baseline.bundle if baseline is not None else None,
    )


def family_named(name: str) -> Family:
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"model: {name!r} is not in the qualification set ({', '.join(FAMILIES)})") from None


def describe(backend: Backend) -> str:
    return backend.describe() if hasattr(backend, "describe") else backend.name


def write_golden(family: Family, directory=golden.GOLDEN_DIR) -> golden.Golden:
    """Train ``family`` on the reference backend from the pinned seed and pin what it produced."""
    backend = ReferenceBackend()
    data = family.make_data(np.random.default_rng(golden.SEED))
    run = train(family, backend, golden.SEED, RuntimeConfig(), data=data)
    probe = data.eval_x[: golden.PROBE_SIZE]
    pinned = golden.Golden(
        family=family.name,
        seed=golden.SEED,
        steps=len(run.loss_curve),
        probe=probe,
        weights=run.params,
        logits=infer(family, backend, run.params, probe),
        loss_curve=np.asarray(run.loss_curve),
        eval_score=run.eval_score,
    )
    golden.save(pinned, directory)
    return pinned
