"""A qualification as ``results`` events: three tests per model and precision.

- ``qualify/<model>/<precision>/inference``: relative error against the golden, the tolerance,
  and the fraction of outputs on which repeats disagreed (status failed, flaky or passed);
- ``qualify/<model>/<precision>/training``: the loss curve, the eval score and its ratio to the
  reference, and the step where the loss left the band if it did;
- ``qualify/<model>/<precision>/throughput``: the runtime's throughput samples (items per second of
  kernel time, after warmup), and the comparison with the baseline bundle when one ran.

Each result carries what it takes to run it again (``fastci rerun``): the bundle (whose layer
versions also pin any injected defect), the seed the training used, and a config naming the
backend, precision, model, steps and, when throughput was gated, the baseline bundle. The
inference result's ``output_digest`` is the sha256 of its logits, the training result's the sha256
of the weights it ended with: a rerun that computes the same bits has the same digest.
"""

from __future__ import annotations

from datetime import datetime

from fastci.inputs import BUNDLE_LAYERS, ResultEvent
from fastci.producer.context import RunContext
from fastci.qualify.runner import ModelQualification, Qualification

BASELINE_CONFIG = "baseline_bundle"  # config key: the baseline's versions, in BUNDLE_LAYERS order


def test_id(model: str, precision: str, check: str) -> str:
    return f"qualify/{model}/{precision}/{check}"


def to_results(qualification: Qualification, context: RunContext, run_id: str, time: datetime) -> list[ResultEvent]:
    events: list[ResultEvent] = []
    common = {
        "run_id": run_id,
        "repo": context.repo,
        "commit": context.commit,
        "bundle": qualification.bundle,
        "node_id": context.node_id,
        "hardware_revision": context.hardware_revision,
        "trigger": context.trigger,
        "chips": 0 if qualification.backend.startswith("reference") else 1,
        "time": time,
    }
    for model in qualification.models:
        config = _config(qualification, model)
        seed = model.training.seed
        precision = qualification.precision
        name = model.family.name
        inference, training = model.inference, model.training
        events.append(
            ResultEvent(
                test_id=test_id(name, precision, "inference"),
                status=inference.status,
                duration_s=inference.seconds,
                metrics={
                    "relative_error": (inference.relative_error,),
                    "tolerance": (inference.tolerance,),
                    "repeat_mismatch_fraction": (inference.mismatch_fraction,),
                },
                config=config,
                seed=seed,
                output_digest=inference.output_digest or None,
                **common,
            )
        )
        training_metrics = {"eval_ratio": (training.eval_ratio,)}
        if training.divergence_step is not None:
            training_metrics["loss_divergence_step"] = (float(training.divergence_step),)
        events.append(
            ResultEvent(
                test_id=test_id(name, precision, "training"),
                status=training.status,
                duration_s=training.seconds,
                metrics=training_metrics,
                loss_curve=tuple(training.loss_curve),
                eval_score=training.eval_score,
                config=config,
                seed=seed,
                output_digest=training.weights_digest or None,
                **common,
            )
        )
        throughput_metrics = {f"throughput_{model.family.item_unit}_per_s": tuple(training.throughput)}
        if training.performance is not None:
            throughput_metrics["baseline_ratio"] = (training.performance.ratio,)
            throughput_metrics["baseline_p_value"] = (training.performance.p_value,)
            if training.performance.confirmation is not None:
                throughput_metrics["baseline_ratio"] += (training.performance.confirmation.ratio,)
                throughput_metrics["baseline_p_value"] += (training.performance.confirmation.p_value,)
        events.append(
            ResultEvent(
                test_id=test_id(name, precision, "throughput"),
                status=training.performance_status,
                duration_s=training.seconds,
                metrics=throughput_metrics,
                config=config,
                seed=seed,
                **common,
            )
        )
    return events


def _config(qualification: Qualification, model: ModelQualification) -> dict:
    family = model.family
    config = {
        "backend": qualification.backend.split(" ")[0],
        "precision": qualification.precision,
        "model": family.name,
        "family": family.kind,
        "steps": len(model.training.loss_curve),
        "batch": family.batch_size,
        "learning_rate": family.lr,
        **family.config,
    }
    if qualification.baseline_bundle is not None:
        config[BASELINE_CONFIG] = [getattr(qualification.baseline_bundle, layer) for layer in BUNDLE_LAYERS]
    return config
