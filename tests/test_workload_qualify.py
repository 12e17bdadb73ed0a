"""Workload optimisation proven on the real qualification models: the shrunk config, re-run under evidence
collection (the tracing collector), executes the same changed units as the full config; one step or one
layer less would miss one."""

from __future__ import annotations

import pytest
from factories import result
from processor_helpers import Store, feed, of_topic
from test_test_plan import METRICS

from fastci.planning.processor import TestPlanProcessor
from fastci.planning.shrink import executes, smallest_config
from fastci.qualify.backend import ReferenceBackend
from fastci.qualify.configs import dimensions, evidence_event, traced_training
from fastci.qualify.golden import SEED
from fastci.selection.events import KeptTest, Selection

pytestmark = pytest.mark.slow
REPO = "acme/llm-framework"
TEST = "tests/qualify/test_lm.py::test_training[bf16]"
COSINE = "fastci/qualify/train.py::cosine_rate"
CHECKPOINT = "fastci/qualify/train.py::save_checkpoint"
EXPERTS = "fastci/qualify/models/lm.py::mixture_of_experts"
ATTENTION = "fastci/qualify/models/lm.py::attention"


@pytest.fixture(scope="module")
def lm_full():
    """The LM's training check at a two-block config (its second block has the mixture of experts)."""
    dims = dimensions("lm-tiny", {"layers": 2})
    full = {d.name: d.full for d in dims}
    return dims, full, traced_training("lm-tiny", full, ReferenceBackend(), SEED)


def test_the_full_run_records_where_the_dimension_dependent_code_starts(lm_full):
    _, full, traced = lm_full
    assert full == {"steps": 300, "batch": 32, "layers": 2, "width": 32, "context": 16}
    assert traced.first[COSINE] == [{"steps": 30}]  # after warmup: 10% of 300 steps
    assert traced.first[CHECKPOINT] == [{"steps": 99}]
    assert traced.first[EXPERTS] == [{"layers": 1}]  # the final eval runs it too, outside any step
    assert ATTENTION in traced.units and ATTENTION not in traced.first  # from step 0, layer 0: any config runs it


def test_the_planned_config_reruns_the_changed_units(lm_full):
    """Through the processor: evidence of the full run, a selection keeping the test for four changed
    units, the plan's config, then that config traced again."""
    dims, full, traced = lm_full
    changed = (ATTENTION, CHECKPOINT, COSINE, EXPERTS)
    selection = Selection(
        commit_id="c1",
        repo=REPO,
        sha="1234567",
        run_all=False,
        metrics=METRICS,
        kept=(KeptTest(test_id=TEST, reason="executes-changed-code", functions=changed, estimated_s=60.0),),
    )
    events = [
        result(TEST, "full-1", repo=REPO, duration_s=60.0, chips=8),
        evidence_event(TEST, "full-1", REPO, "abcdef1", "lm-tiny", "bf16", full, traced),
        selection,
    ]
    (plan,) = of_topic(feed(TestPlanProcessor(), Store(), events), "test-plan")
    (entry,) = plan.entries
    assert entry.shrunk == {
        "steps": 100,
        "batch": 4,
        "width": 8,
        "context": 4,
    }  # 2 layers stay: the experts are in the second
    assert entry.config["precision"] == "bf16" and entry.config["heads"] == 2  # the validation scope, untouched
    assert entry.saved_chip_s > 0.9 * 60.0 * 8
    values = {d.name: entry.config[d.name] for d in dims}
    rerun = traced_training("lm-tiny", values, ReferenceBackend(), SEED)
    assert set(changed) <= rerun.units


def test_shrunk_to_the_rule_every_unit_of_the_full_run_still_runs_and_one_less_misses_one(lm_full):
    dims, _, traced = lm_full
    shrink = smallest_config(dims, {unit: traced.first.get(unit, []) for unit in traced.units})
    assert shrink.values == {"steps": 100, "batch": 4, "layers": 2, "width": 8, "context": 4}
    assert shrink.scale < 0.05
    rerun = traced_training("lm-tiny", shrink.values, ReferenceBackend(), SEED)
    assert rerun.units == traced.units
    for dimension, missed in {"steps": CHECKPOINT, "layers": EXPERTS}.items():
        fewer = {**shrink.values, dimension: shrink.values[dimension] - 1}
        lost = traced.units - traced_training("lm-tiny", fewer, ReferenceBackend(), SEED).units
        assert missed in lost, dimension
        # the evidence predicted exactly what a config runs: what it said needs more is what went missing
        assert lost == {u for u, points in traced.first.items() if not executes(points, fewer)}, dimension


@pytest.mark.parametrize("name", ["convnet-small", "speech-conv-attn", "dlrm-small"])
def test_the_other_models_shrink_steps_and_batch_and_keep_every_unit(name):
    dims = dimensions(name)
    full = {d.name: d.full for d in dims}
    traced = traced_training(name, full, ReferenceBackend(), SEED)
    shrink = smallest_config(dims, {unit: traced.first.get(unit, []) for unit in traced.units})
    assert shrink.values == {"steps": 100, "batch": 4}  # the first checkpoint is at step 100
    assert traced_training(name, shrink.values, ReferenceBackend(), SEED).units == traced.units
    fewer = {**shrink.values, "steps": 99}
    lost = traced.units - traced_training(name, fewer, ReferenceBackend(), SEED).units
    assert CHECKPOINT in lost and lost == {u for u, points in traced.first.items() if not executes(points, fewer)}
