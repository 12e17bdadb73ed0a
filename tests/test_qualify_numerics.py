"""The numerics under the qualification set: formats, kernels, the versioned stack, the autodiff."""

from __future__ import annotations

import re

import numpy as np
import pytest

from fastci.inputs import Bundle
from fastci.qualify import checks, tensor
from fastci.qualify.backend import ReferenceBackend
from fastci.qualify.emulated import EmulatedAccelerator
from fastci.qualify.formats import quantize, round_bf16_with_wrong_increment, round_to
from fastci.qualify.models import FAMILIES
from fastci.qualify.stack import DEFECTS, HEALTHY, KERNELS, Stack, with_defect
from fastci.qualify.tensor import Ops, Tensor, backward

RNG = np.random.default_rng(5)
A = RNG.standard_normal((48, 200)).astype(np.float32)
B = RNG.standard_normal((200, 24)).astype(np.float32)


def bundle(**versions: str) -> Bundle:
    return HEALTHY.model_copy(update=versions)


def test_reference_matmul_is_one_rounding_of_the_exact_product_whatever_the_order():
    exact = A.astype(np.float64) @ B.astype(np.float64)
    reference = ReferenceBackend().matmul(A, B)
    assert np.array_equal(reference, exact.astype(np.float32))
    order = RNG.permutation(200)  # the same sum in another order
    assert np.array_equal(ReferenceBackend().matmul(A[:, order], B[order]), reference)
    naive_fp32 = np.zeros((48, 24), np.float32)
    for k in range(200):  # a plain fp32 loop rounds at every step and lands elsewhere
        naive_fp32 += A[:, k : k + 1] * B[k : k + 1]
    assert not np.array_equal(naive_fp32, reference)


def test_bf16_matmul_computes_exactly_on_bf16_operands_per_tile():
    accelerator = EmulatedAccelerator(bundle(compiler="1.0.0"), "bf16")  # 32-wide tiles summed in order
    qa, qb = round_to(A, "bfloat16"), round_to(B, "bfloat16")
    expected = (qa[:, :32] @ qb[:32]).astype(np.float32)
    for k0 in range(32, 200, 32):
        expected = expected + (qa[:, k0 : k0 + 32] @ qb[k0 : k0 + 32]).astype(np.float32)
    result = accelerator.matmul(A, B)
    assert np.array_equal(result, expected)
    error = checks.relative_error(result, ReferenceBackend().matmul(A, B))
    assert 1e-4 < error < 2**-8  # bitwise different from fp32, within bf16 rounding


def test_compiler_tile_order_changes_bits_not_accuracy():
    sequential = EmulatedAccelerator(bundle(compiler="1.0.0"), "bf16").matmul(A, B)
    tree = EmulatedAccelerator(bundle(compiler="1.1.0"), "bf16").matmul(A, B)
    reference = ReferenceBackend().matmul(A, B)
    assert not np.array_equal(sequential, tree)
    assert checks.relative_error(tree, reference) < 1.5 * checks.relative_error(sequential, reference)


def test_fp8_scales_per_tensor_by_a_power_of_two_so_small_gradients_survive():
    gradient = (RNG.standard_normal(1000) * 1e-5).astype(np.float32)
    values, scale = quantize(gradient, "float8_e5m2")
    assert np.log2(scale) == int(np.log2(scale))
    assert np.count_nonzero(values) > 990  # unscaled, e5m2 would flush most of these to zero
    assert np.max(np.abs(values)) <= 57344.0
    assert checks.relative_error(values / scale, gradient) < 0.15
    unscaled = round_to(gradient, "float8_e4m3")
    assert np.count_nonzero(unscaled) < 10


def test_rounding_bug_pushes_magnitudes_up_by_several_percent():
    x = RNG.standard_normal(10_000).astype(np.float32)
    ratio = np.abs(round_bf16_with_wrong_increment(x)) / np.abs(x)
    assert 1.02 < np.median(ratio) < 1.07
    assert np.all(ratio >= 1 - 2**-7)  # never smaller than a truncation would make it
    assert np.median(np.abs(round_to(x, "bfloat16")) / np.abs(x)) == pytest.approx(1.0, abs=1e-3)


def test_bf16_accumulation_loses_small_updates_that_fp32_keeps():
    weights = np.full(4, 0.5, np.float32)
    update = np.full(4, 5e-4, np.float32)  # under half a bf16 ulp of 0.5 (0.00098)
    healthy, defective = EmulatedAccelerator(HEALTHY), EmulatedAccelerator(with_defect("compiler-bf16-accumulation"))
    assert np.all(healthy.accumulate(weights, update) > weights)
    assert np.array_equal(defective.accumulate(weights, update), weights)


def test_only_the_arrival_order_kernel_is_nondeterministic():
    healthy = EmulatedAccelerator(HEALTHY)
    assert checks.mismatch_fraction([healthy.matmul(A, B) for _ in range(3)]) == 0
    racy = EmulatedAccelerator(with_defect("kernel-nondeterministic-reduction"))
    runs = [racy.matmul(A, B) for _ in range(3)]
    assert checks.mismatch_fraction(runs) > 0.05
    assert max(checks.relative_error(r, healthy.matmul(A, B)) for r in runs) < 2**-8


def test_extra_work_kernel_gives_the_same_answer():
    healthy, slow = EmulatedAccelerator(HEALTHY), EmulatedAccelerator(with_defect("kernel-extra-work"))
    assert np.array_equal(slow.matmul(A, B), healthy.matmul(A, B))
    assert np.array_equal(slow.sum(A, 1), healthy.sum(A, 1))


@pytest.mark.parametrize(
    ("version", "defects"),
    [
        ("2.0.0", ()),
        ("2.1.0", ("kernel-rounding-bug",)),
        ("2.1.7", ()),
        ("2.2.0", ("kernel-extra-work",)),
        ("2.2.9", ()),
        ("2.3.0", ("kernel-nondeterministic-reduction",)),
        ("2.3.1", ()),
        ("9.0.0", ()),
    ],
)
def test_a_version_carries_the_defects_its_changelog_introduced_and_did_not_fix(version, defects):
    assert KERNELS.resolve(version)[1] == defects


def test_every_defect_lives_in_exactly_one_layer_version():
    for defect in DEFECTS:
        assert Stack.of(with_defect(defect)).defects == (defect,)
    assert Stack.of(HEALTHY).defects == ()


@pytest.mark.parametrize(
    ("versions", "message"),
    [
        ({"kernels": "2.1"}, "bundle field 'kernels': '2.1' is not a version like 1.2.0"),
        ({"compiler": "0.9.0"}, "bundle field 'compiler': 0.9.0 predates the first release (1.0.0)"),
    ],
)
def test_unknown_versions_are_refused_naming_the_field(versions, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        EmulatedAccelerator(bundle(**versions))
    with pytest.raises(ValueError, match=re.escape("precision: 'fp16' is not one of bf16, fp8")):
        EmulatedAccelerator(HEALTHY, "fp16")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", list(FAMILIES))
def test_gradients_match_finite_differences(name, monkeypatch):
    """The hand-written backward passes of every model, against central differences, all in fp64."""
    monkeypatch.setattr(tensor, "FLOAT", np.float64)
    family = FAMILIES[name]
    rng = np.random.default_rng(3)
    data = family.make_data(np.random.default_rng(11))
    params = {k: v.astype(np.float64) for k, v in family.init(rng).items()}
    x, y = data.batch(rng, 4)
    backend = _Float64Backend()

    def loss_of(values: dict) -> tuple[Tensor, dict]:
        ops = Ops(backend)
        tensors = {k: Tensor(v) for k, v in values.items()}
        return family.loss(ops, family.forward(ops, tensors, x), y), tensors

    loss, tensors = loss_of(params)
    backward(loss)
    checked = 0
    for pname in params:
        flat = params[pname].reshape(-1)
        for index in rng.choice(flat.size, size=min(3, flat.size), replace=False):
            h = 1e-6
            plus, minus = {k: v.copy() for k, v in params.items()}, {k: v.copy() for k, v in params.items()}
            plus[pname].reshape(-1)[index] += h
            minus[pname].reshape(-1)[index] -= h
            numeric = (float(loss_of(plus)[0].value) - float(loss_of(minus)[0].value)) / (2 * h)
            analytic = float(tensors[pname].grad.reshape(-1)[index])
            assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-8), f"{name} {pname}[{index}]"
            checked += 1
    assert checked >= 2 * len(params)


class _Float64Backend(ReferenceBackend):
    def matmul(self, a, b, a_is="value", b_is="value"):
        return np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))

    def sum(self, x, axis):
        return np.sum(np.asarray(x, np.float64), axis=axis, keepdims=True)
