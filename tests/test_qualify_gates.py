"""The qualification set on real runs: healthy bf16 and fp8 stacks pass every gate while differing
bitwise from the fp32 reference, and each injected defect fails the gate it should."""

from __future__ import annotations

import numpy as np
import pytest

from fastci.qualify import checks, golden
from fastci.qualify.backend import ReferenceBackend
from fastci.qualify.models import FAMILIES
from fastci.qualify.runner import check_inference, check_training, family_named, make_backend, qualify
from fastci.qualify.stack import HEALTHY, with_defect
from fastci.qualify.train import infer


@pytest.fixture(scope="module")
def pinned():
    return {name: golden.load(family) for name, family in FAMILIES.items()}


@pytest.mark.parametrize("name", list(FAMILIES))
def test_reference_backend_reproduces_the_pinned_inference_golden(name, pinned):
    family = family_named(name)
    logits = infer(family, ReferenceBackend(), pinned[name].weights, pinned[name].probe)
    assert checks.relative_error(logits, pinned[name].logits) <= checks.INFERENCE_TOLERANCE["fp32"]


def test_reference_backend_reproduces_the_pinned_training_golden(pinned):
    """Training is the costly half: check it on the cheapest model, whose 600 steps take ~0.5 s."""
    family = family_named("dlrm-small")
    check = check_training(family, ReferenceBackend(), pinned["dlrm-small"])
    assert check.divergence_step is None
    assert check.eval_score == pytest.approx(pinned["dlrm-small"].eval_score, rel=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_healthy_stack_differs_bitwise_from_the_reference_and_passes_every_gate(precision, pinned):
    qualification = qualify(make_backend("emulated", HEALTHY, precision))  # type: ignore[arg-type]
    assert len(qualification.models) == 4
    for model in qualification.models:
        name = model.family.name
        assert model.inference.status == "passed", (name, model.inference.summary())
        assert 0 < model.inference.relative_error <= checks.INFERENCE_TOLERANCE[precision]
        assert model.training.status == "passed", (name, model.training.summary())
        assert model.training.loss_curve != list(pinned[name].loss_curve)  # real, different arithmetic
        assert len(model.training.throughput) >= 30 and all(t > 0 for t in model.training.throughput)


def test_kernel_rounding_bug_fails_the_correctness_gate(pinned):
    backend = make_backend("emulated", with_defect("kernel-rounding-bug"))
    for name in FAMILIES:
        check = check_inference(family_named(name), backend, pinned[name])
        assert check.status == "failed", name
        assert check.relative_error > 2 * checks.INFERENCE_TOLERANCE["bf16"]


@pytest.mark.slow
def test_kernel_rounding_bug_fails_the_eval_gate_of_the_conv_net(pinned):
    check = check_training(
        family_named("convnet-small"),
        make_backend("emulated", with_defect("kernel-rounding-bug")),
        pinned["convnet-small"],
    )
    assert check.eval_ratio < checks.EVAL_MIN_RATIO and check.status == "failed"


@pytest.mark.slow
def test_bf16_accumulation_passes_inference_then_drifts_off_the_loss_band_after_some_steps(pinned):
    backend = make_backend("emulated", with_defect("compiler-bf16-accumulation"))
    family = family_named("lm-tiny")
    assert check_inference(family, backend, pinned["lm-tiny"]).status == "passed"
    check = check_training(family, backend, pinned["lm-tiny"])
    assert check.status == "failed"
    assert check.divergence_step is not None and check.divergence_step > 50  # it followed the reference first
    late = np.mean(check.loss_curve[-20:]) / np.mean(pinned["lm-tiny"].loss_curve[-20:])
    assert late > 1.08  # and ends clearly above it
    assert check.eval_ratio >= checks.EVAL_MIN_RATIO  # the eval gate alone would have missed it


def test_nondeterministic_reduction_is_flaky_not_wrong(pinned):
    backend = make_backend("emulated", with_defect("kernel-nondeterministic-reduction"))
    check = check_inference(family_named("lm-tiny"), backend, pinned["lm-tiny"])
    assert check.relative_error <= checks.INFERENCE_TOLERANCE["bf16"]
    assert check.mismatch_fraction > 0.01
    assert check.status == "flaky"
    assert (
        check_inference(family_named("lm-tiny"), make_backend("emulated", HEALTHY), pinned["lm-tiny"]).mismatch_fraction
        == 0
    )


def _pairs(seed: int, drop: float):
    """Interleaved pairs of synthetic step times (40 steps, 6% noise on the ratio) and a counter of
    the pairs asked for after the first."""
    rng = np.random.default_rng(seed)
    asked = []

    def measure():
        asked.append(1)
        base = rng.lognormal(0, 0.1, 40)
        return list(base * np.exp(rng.normal(np.log1p(drop), 0.06, 40))), list(base)

    first = measure()
    asked.clear()
    return first, measure, asked


def test_an_undecided_comparison_pools_another_pair_before_the_gate_decides():
    first, measure, asked = _pairs(seed=3, drop=0.03)
    alone = checks.compare_interleaved([first], window=1)
    assert alone.undecided and not alone.significant_drop  # one pair of a 3% drop: p = 0.017
    verdict = checks.gate_interleaved(first, measure, window=1)
    assert verdict.pairs == 2 and verdict.windows == 80 and verdict.significant_drop
    assert verdict.confirmation is not None and verdict.confirmation.significant_drop
    assert verdict.regressed
    assert len(asked) == 3  # the pooled pair, the confirming pair, and the one pooled into it


def test_an_undecided_comparison_that_stays_unshown_passes_without_a_confirmation():
    first, measure, asked = _pairs(seed=18, drop=0.03)
    verdict = checks.gate_interleaved(first, measure, window=1)
    assert verdict.pairs == 2 and not verdict.significant_drop
    assert verdict.confirmation is None and not verdict.regressed
    assert len(asked) == 1


def test_a_comparison_with_no_lean_to_a_drop_costs_no_second_pair():
    first, measure, asked = _pairs(seed=1, drop=0.0)
    verdict = checks.gate_interleaved(first, measure, window=1)
    assert verdict.p_value > checks.PERF_UNDECIDED_P and verdict.pairs == 1
    assert not verdict.regressed and asked == []


def test_too_few_windows_for_the_gate_is_an_error_naming_the_count():
    with pytest.raises(ValueError, match="5 window"):
        checks.compare_interleaved([([1.0] * 10, [1.0] * 10)], window=2)


@pytest.mark.slow
def test_extra_work_kernel_fails_the_performance_gate_and_a_healthy_one_does_not(pinned):
    """Interleaved with a healthy baseline on this (shared) host: the 3% halo shows as a significant
    drop, and the same bundle against itself does not."""
    family = family_named("convnet-small")
    slow = check_training(
        family,
        make_backend("emulated", with_defect("kernel-extra-work")),
        pinned["convnet-small"],
        baseline=make_backend("emulated", HEALTHY),
    )
    assert slow.status == "passed"  # right answers
    assert slow.performance is not None and slow.performance.regressed, slow.performance_summary()
    same = check_training(
        family, make_backend("emulated", HEALTHY), pinned["convnet-small"], baseline=make_backend("emulated", HEALTHY)
    )
    assert same.performance is not None and not same.performance.regressed, same.performance_summary()
