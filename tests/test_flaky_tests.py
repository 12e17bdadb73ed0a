"""Flaky tests: marked by flaky-detector, owned through flaky-owners, kept out of regression calls."""

from __future__ import annotations

import numpy as np
from fleet_factories import run
from processor_helpers import Store, feed, of_topic
from regression_factories import nightly

from fastci.contracts.baseline_exclusions import BaselineExclusion
from fastci.contracts.flaky_verdicts import FlakyVerdict
from fastci.contracts.regression_alerts import RegressionAlert
from fastci.contracts.runs import RunRequested
from fastci.fleet.events import FlakyTest
from fastci.fleet.flaky_detector import FlakyDetectorProcessor
from fastci.fleet.flaky_owners import FlakyOwnersProcessor
from fastci.regression.detector import RegressionDetectorProcessor
from fastci.shared.flakiness import STABLE_AFTER
from fastci.shared.owners import parse_owner_file

TEST = "tests/dist/test_checkpoint.py::test_async_save"


def verdicts(outputs) -> list[tuple[bool, str]]:
    return [(v.flaky, v.rule) for v in of_topic(outputs, FlakyVerdict.TOPIC)]


def test_outcomes_that_differ_on_the_same_code_stack_config_and_seed_mark_a_test_flaky():
    processor, store = FlakyDetectorProcessor(), Store()
    assert (
        feed(
            processor,
            store,
            [run(TEST, hours=1, node="node-01", seed=7), run(TEST, hours=1, node="node-02", seed=7, status="failed")],
        )
        == []
    )  # one node: a node?
    second = run(TEST, hours=2, node="node-03", seed=7, status="error")
    (verdict,) = of_topic(feed(processor, store, [second]), FlakyVerdict.TOPIC)
    assert (verdict.flaky, verdict.rule, verdict.cause_id, verdict.seed) == (True, "outcomes-differ", second.id, 7)
    assert "failed on 2 nodes and passed on 1" in verdict.reason
    assert {o.node_id for o in verdict.outcomes} == {"node-01", "node-02", "node-03"}
    assert feed(processor, store, [run(TEST, hours=3, node="node-04", seed=7, status="failed")]) == []  # already flaky


def test_outcomes_that_differ_across_seeds_or_commits_are_not_flakiness():
    processor, store = FlakyDetectorProcessor(), Store()
    events = [
        run(TEST, hours=1, node="node-01", seed=1),
        run(TEST, hours=1, node="node-02", seed=2, status="failed"),
        run(TEST, hours=1, node="node-03", seed=3, status="failed"),
        run(TEST, hours=2, node="node-04", seed=1, commit="abcdef2", status="failed"),
        run(TEST, hours=2, node="node-05", seed=1, commit="abcdef2", status="failed"),
    ]
    assert feed(processor, store, events) == []


def test_one_node_passing_then_failing_the_same_run_is_a_node_candidate_not_a_flake():
    processor, store = FlakyDetectorProcessor(), Store()
    outputs = feed(
        processor,
        store,
        [
            run(TEST, hours=1, node="node-01"),
            run(TEST, hours=2, node="node-02"),
            run(TEST, hours=3, node="node-01", status="failed"),
        ],
    )
    assert outputs == []


def test_a_verdict_resting_on_a_sick_nodes_failure_is_withdrawn_when_its_exclusion_arrives():
    processor, store = FlakyDetectorProcessor(), Store()
    sick = run(TEST, hours=2, node="node-03", status="error")
    outputs = feed(
        processor,
        store,
        [run(TEST, hours=1, node="node-01"), run(TEST, hours=1.5, node="node-02", status="failed"), sick],
    )
    assert verdicts(outputs) == [(True, "outcomes-differ")]
    exclusion = BaselineExclusion(
        result_id=sick.id, test_id=TEST, node_id="node-03", node_state="quarantined", cause_id="q" * 32
    )
    (withdrawn,) = of_topic(feed(processor, store, [exclusion]), FlakyVerdict.TOPIC)
    assert (withdrawn.flaky, withdrawn.rule, withdrawn.cause_id) == (False, "withdrawn", exclusion.id)
    assert "node-03" in withdrawn.reason and withdrawn.repo == "acme/llm-framework"
    # a second, healthy node failing the same run makes it flaky again
    assert verdicts(feed(processor, store, [run(TEST, hours=3, node="node-04", status="failed")])) == [
        (True, "outcomes-differ")
    ]


def test_failures_on_a_sick_node_do_not_count_whichever_comes_first():
    processor, store = FlakyDetectorProcessor(), Store()
    sick = run(TEST, hours=1, node="node-09", status="failed")
    early = BaselineExclusion(
        result_id=sick.id, test_id=TEST, node_id="node-09", node_state="quarantined", cause_id="q" * 32
    )
    late_sick = run(TEST, hours=1, node="node-10", status="failed")
    late = BaselineExclusion(
        result_id=late_sick.id, test_id=TEST, node_id="node-10", node_state="suspect", cause_id="s" * 32
    )
    events = [early, sick, late_sick, late, run(TEST, hours=2, node="node-01"), run(TEST, hours=2, node="node-02")]
    assert feed(processor, store, events) == []


def test_runs_that_passed_only_on_retry_mark_a_test_flaky_and_enough_clean_runs_make_it_stable():
    processor, store = FlakyDetectorProcessor(), Store()
    runs = [
        run(TEST, hours=i, node="node-01", status="flaky" if i in (3, 9) else "passed", commit=f"{i:07x}")
        for i in range(12)
    ]
    assert verdicts(feed(processor, store, runs)) == [(True, "retries")]
    clean = [run(TEST, hours=20 + i, node="node-02", commit=f"{100 + i:07x}") for i in range(STABLE_AFTER)]
    assert verdicts(feed(processor, store, clean)) == [(False, "stable")]


def test_owners_come_from_the_repos_owner_map():
    owners, store = FlakyOwnersProcessor(), Store()
    owner_map = parse_owner_file("*  @framework-team\n/tests/dist/  @dist-team @infra\n", repo="acme/llm-framework")
    verdict = FlakyVerdict(
        cause_id="a" * 32,
        test_id=TEST,
        repo="acme/llm-framework",
        flaky=True,
        rule="outcomes-differ",
        reason="failed on 2 nodes",
        chips=8,
    )
    before = of_topic(feed(owners, store, [verdict]), FlakyTest.TOPIC)[0]
    assert before.owners == () and before.owner_map_version is None
    (owned,) = of_topic(feed(owners, store, [owner_map, verdict]), FlakyTest.TOPIC)
    assert owned.owners == ("dist-team", "infra") and owned.verdict_id == verdict.id and owned.chips == 8
    assert owned.owner_map_version == owner_map.version
    assert owners.partition_key(verdict) == "acme/llm-framework"


def test_a_test_marked_flaky_is_kept_out_of_regression_calls():
    def nights(store, marked: bool):
        processor = RegressionDetectorProcessor()
        rng = np.random.default_rng(0)
        test = "tests/test_a.py::test_x"
        out = []
        if marked:
            out += feed(
                processor,
                store,
                [
                    FlakyVerdict(
                        cause_id="b" * 32,
                        test_id=test,
                        repo="acme/llm-framework",
                        flaky=True,
                        rule="outcomes-differ",
                        reason="differs",
                    )
                ],
            )
        for night, level in enumerate([1000] * 8 + [950]):
            out += feed(processor, store, [nightly(night, level * (1 + 0.01 * rng.standard_normal(60)))])
        return out

    assert of_topic(nights(Store(), marked=False), RunRequested.TOPIC)  # the drop is confirmed ...
    marked = nights(Store(), marked=True)
    assert (
        of_topic(marked, RunRequested.TOPIC) == [] and of_topic(marked, RegressionAlert.TOPIC) == []
    )  # ... unless flaky
