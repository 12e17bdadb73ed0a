"""Plan and bisect, through the processors in memory: code culprits, bundle bumps, correctness."""

from __future__ import annotations

import math

import pytest

from fastci.contracts.regression_alerts import RegressionAlert
from fastci.contracts.runs import RunRequested
from fastci.inputs import ResultEvent
from fastci.regression.events import BisectPlan, BisectStep
from fastci.regression.synthetic import REPO, Scenario, sha
from fastci.runtime.memory import MemoryRuntime
from fastci.shared.owners import parse_owner_file
from fastci.topology import SYSTEM

OWNERS = """
*                  @framework-team
/fastlm/compiler/  @compiler-team
/fastlm/kernels/   @kernels-team
layer:driver       @driver-team
layer:firmware     @firmware-team
"""


def bisect(scenario: Scenario) -> MemoryRuntime:
    pipeline = MemoryRuntime(SYSTEM, responders={RunRequested.TOPIC: scenario.run})
    pipeline.publish([parse_owner_file(OWNERS, repo=REPO), *scenario.commits()])
    pipeline.publish(scenario.nightly_results())
    return pipeline


def final_alert(pipeline: MemoryRuntime) -> RegressionAlert:
    (alert,) = [a for a in pipeline.of_topic(RegressionAlert.TOPIC) if a.stage in ("culprit", "unresolved")]
    return alert


@pytest.mark.parametrize("culprit", [0, 1, 137, 398, 399])
def test_finds_a_code_culprit_among_400_changes(culprit):
    pipeline = bisect(Scenario(culprit=culprit, seed=culprit))
    alert = final_alert(pipeline)
    assert alert.stage == "culprit" and alert.culprit.kind == "commit"
    assert alert.culprit.commit == sha(10 + culprit)
    assert len(alert.trail) <= math.ceil(math.log2(400)) + 1
    steps = pipeline.of_topic(BisectStep.TOPIC)
    assert [s.step for s in steps] == list(range(1, len(steps) + 1))
    assert steps[-1].candidates_left == 1
    layer = ("framework", "compiler", "kernels", "model")[(10 + culprit) % 4]
    expected = {"compiler": "compiler-team", "kernels": "kernels-team"}.get(layer, "framework-team")
    assert alert.owners == (expected,) and f"@{expected}" not in alert.summary and expected in alert.summary


def test_every_bisect_run_is_a_bisect_class_request_with_the_nightly_config():
    pipeline = bisect(Scenario(culprit=50, seed=3))
    requests = [r for r in pipeline.of_topic(RunRequested.TOPIC) if r.purpose.startswith("bisect:")]
    assert requests and all(r.work_class == "bisect" and r.hardware_revision == "rev-a" for r in requests)
    assert all(r.repeats >= 3 for r in requests) and len({r.id for r in requests}) == len(requests)
    assert final_alert(pipeline).runs_used == len(requests)


def test_a_driver_bump_is_found_as_the_culprit_with_its_owner():
    scenario = Scenario(
        culprit=None, bumped={"driver": "dr-545", "firmware": "fw-8"}, culprit_component="driver", seed=4
    )
    alert = final_alert(bisect(scenario))
    assert alert.culprit.kind == "component" and alert.culprit.component == "driver"
    assert (alert.culprit.from_version, alert.culprit.to_version) == ("dr-535", "dr-545")
    assert alert.owners == ("driver-team",)
    assert alert.trail[0].phase == "attribute" and alert.trail[0].verdict == "good"
    assert len(alert.trail) <= 3


def test_a_code_culprit_is_found_even_when_the_bundle_changed_too():
    scenario = Scenario(culprit=300, bumped={"firmware": "fw-8"}, seed=5)
    alert = final_alert(bisect(scenario))
    assert alert.culprit.commit == sha(310)
    assert alert.trail[0].phase == "attribute" and alert.trail[0].verdict == "bad"
    assert len(alert.trail) <= math.ceil(math.log2(400)) + 1


def test_a_missing_commit_range_is_unresolved_with_the_reason():
    scenario = Scenario(culprit=20, changes=40, seed=6)
    pipeline = MemoryRuntime(SYSTEM, responders={RunRequested.TOPIC: scenario.run})
    pipeline.publish(scenario.commits()[:-5])  # the newest commits never reached 'commits'
    pipeline.publish(scenario.nightly_results())
    alert = final_alert(pipeline)
    assert alert.stage == "unresolved" and "never seen on 'commits'" in alert.problem
    assert alert.owners == ()  # no owner map published: the ticket goes to triage


def test_an_unresolved_regression_goes_to_the_owners_of_the_test():
    scenario = Scenario(culprit=20, changes=40, seed=6)
    pipeline = MemoryRuntime(SYSTEM, responders={RunRequested.TOPIC: scenario.run})
    owners = OWNERS + "/tests/models/ @models-team\n"
    pipeline.publish([parse_owner_file(owners, repo=REPO), *scenario.commits()[:-5]])
    pipeline.publish(scenario.nightly_results())
    alert = final_alert(pipeline)
    assert alert.stage == "unresolved" and alert.owners == ("models-team",) and "models-team" in alert.summary


def test_a_redelivered_plan_changes_nothing():
    pipeline = bisect(Scenario(culprit=7, changes=16, seed=7))
    (plan,) = pipeline.of_topic(BisectPlan.TOPIC)
    assert pipeline.publish([plan]) == []


@pytest.mark.parametrize("kind", ["output", "loss_curve", "eval"])
def test_correctness_regressions_are_bisected_by_their_gate(kind):
    scenario = Scenario(kind=kind, culprit=23, changes=60, seed=8)
    pipeline = MemoryRuntime(SYSTEM, responders={RunRequested.TOPIC: scenario.run})
    pipeline.publish([parse_owner_file(OWNERS, repo=REPO), scenario.golden(), *scenario.commits()])
    pipeline.publish(scenario.nightly_results())
    detected, final = pipeline.of_topic(RegressionAlert.TOPIC)
    assert detected.stage == "detected" and detected.kind == kind
    assert final.stage == "culprit" and final.culprit.commit == sha(10 + 23)
    assert len(final.trail) <= math.ceil(math.log2(60)) + 1
    requests = [r for r in pipeline.of_topic(RunRequested.TOPIC) if r.purpose.startswith("bisect:")]
    assert all(r.repeats == 1 for r in requests)  # one run decides a correctness step
    if kind == "loss_curve":
        assert 60 <= detected.checks[0].diverged_at_step <= 90


def test_a_failed_bisect_run_is_asked_for_again_and_the_bisect_still_converges():
    scenario = Scenario(culprit=11, changes=32, seed=9)
    failed_once: set[int] = set()

    def flaky_runner(request):
        (outcome,) = scenario.run(request)
        step = request.purpose.split(":")[2] if request.purpose.startswith("bisect:") else None
        if step == "2" and 2 not in failed_once:  # the node dies mid-run once
            failed_once.add(2)
            return [
                ResultEvent.model_validate({**outcome.model_dump(exclude={"id"}), "status": "error", "metrics": {}})
            ]
        return [outcome]

    pipeline = MemoryRuntime(SYSTEM, responders={RunRequested.TOPIC: flaky_runner})
    pipeline.publish([parse_owner_file(OWNERS, repo=REPO), *scenario.commits()])
    pipeline.publish(scenario.nightly_results())
    alert = final_alert(pipeline)
    assert failed_once == {2} and alert.culprit.commit == sha(10 + 11)
    step_two = [
        r for r in pipeline.of_topic(RunRequested.TOPIC) if r.purpose.startswith(f"bisect:{alert.regression_id}:2:")
    ]
    assert len(step_two) == 2  # asked again after the failure


def test_the_largest_plan_stays_under_the_event_size_limit():
    from fastci.core.codec import MAX_EVENT_BYTES, encode
    from fastci.regression.bisect_planner import AUTHOR_CHARS, MAX_CHANGES, TITLE_CHARS
    from fastci.regression.events import PlannedChange

    pipeline = bisect(Scenario(culprit=3, changes=8, seed=10, repeats=4000))  # the most samples an alert carries
    (plan,) = pipeline.of_topic(BisectPlan.TOPIC)
    widest = PlannedChange(
        sha="f" * 40,
        title="t" * TITLE_CHARS,
        author="a" * AUTHOR_CHARS,
        layers=("framework", "compiler", "kernels"),
        owners=("some-team-name",) * 3,
    )
    biggest = BisectPlan.model_validate(
        {**plan.model_dump(exclude={"id"}), "changes": [widest.model_dump()] * MAX_CHANGES}
    )
    assert len(encode(biggest)) < MAX_EVENT_BYTES


def test_a_finished_bisect_keeps_only_its_small_progress():
    from fastci.regression.bisect import ActiveBisects, BisectProcessor, BisectProgress
    from fastci.runtime.driver import is_applied_mark

    pipeline = bisect(Scenario(culprit=300, changes=400, seed=12))
    assert final_alert(pipeline).stage == "culprit"
    driver, store = pipeline.state(BisectProcessor.name)
    kept = [driver.get(key) for key in store if not is_applied_mark(key)]  # marks are no state
    assert kept and all(value is None or isinstance(value, BisectProgress | ActiveBisects) for value in kept)
