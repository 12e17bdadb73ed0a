"""The correctness-gates and baseline-guard processors, alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from factories import result
from processor_helpers import Store, feed, of_topic
from regression_factories import golden

from fastci.contracts.baseline_exclusions import BaselineExclusion
from fastci.contracts.node_states import NodeStateChanged
from fastci.core.system import FEEDBACK_LEAD_MS
from fastci.regression.baseline_guard import BaselineGuardProcessor
from fastci.regression.correctness_gates import CorrectnessGatesProcessor, GoldenHeld, golden_key
from fastci.regression.events import GateResult
from fastci.runtime.driver import Driver, Entry, encode_entry

TEST = "tests/test_a.py::test_x"
T0 = datetime(2026, 12, 1, 2, tzinfo=UTC)


def test_results_are_gated_against_the_highest_golden_version():
    processor, store = CorrectnessGatesProcessor(), Store()
    feed(
        processor,
        store,
        [golden(version=2, outputs={"logits": (1.0, 2.0)}), golden(version=1, outputs={"logits": (9.0, 9.0)})],
    )  # late, older: ignored
    out = feed(
        processor,
        store,
        [
            result(TEST, run_id="r1", metrics={"logits": (1.004, 1.99)}, config={"dtype": "bfloat16"}),
            result(TEST, run_id="r2", metrics={"logits": (1.004, 1.99)}, config={"dtype": "fp32"}),
            result(TEST, run_id="r3", status="failed"),
            result(
                TEST, run_id="r4", metrics={"logits": (1.004, 1.99)}, config={"precision": "bf16"}
            ),  # fastci qualify
        ],
    )
    first, second, qualify = of_topic(out, GateResult.TOPIC)
    assert qualify.passed and qualify.dtype == "bf16"
    assert (first.passed, first.dtype, first.golden_version) == (True, "bf16", 2)
    assert first.checks[0].bitwise_equal is False and not second.passed
    assert first.result_id == result(TEST, run_id="r1").id


def test_a_pinned_version_cannot_change():
    processor, store = CorrectnessGatesProcessor(), Store()
    feed(processor, store, [golden(version=1, outputs={"logits": (1.0,)})])
    assert feed(processor, store, [golden(version=1, outputs={"logits": (1.0,)})]) == []  # same: fine
    changed = golden(version=1, outputs={"logits": (2.0,)})
    with pytest.raises(ValueError, match="field 'version'.*publish version 2"):
        processor.process(store, changed)
    # through the driver (arriving after the dedup window forgot the id): a dead letter, state kept
    pinned = {golden_key(TEST): encode_entry(Entry(GoldenHeld(golden=golden(version=1, outputs={"logits": (1.0,)}))))}
    driver = Driver(processor, store=type("Raw", (), {"get": lambda self, key: pinned.get(key)})())
    (letter,) = driver.handle(changed)
    assert letter.TOPIC == "dead-letters" and "field 'version'" in letter.error and "publish version 2" in letter.error
    assert driver.get(golden_key(TEST)).golden.outputs == {"logits": (1.0,)}


def test_tests_without_a_golden_reference_are_not_gated():
    assert feed(CorrectnessGatesProcessor(), Store(), [result(TEST, metrics={"logits": (1.0,)})]) == []


def test_golden_reference_validation_names_the_field():
    with pytest.raises(ValueError, match="same length"):
        golden(loss_curves=((1.0, 2.0), (1.0,)))
    with pytest.raises(ValueError, match="tolerances name outputs the reference does not have: x"):
        golden(outputs={"y": (1.0,)}, tolerances={"x": {"rtol": 0.1, "atol": 0.0}})


def node_result(run: str, minutes: int, node="node-07"):
    return result(TEST, run_id=run, node_id=node, time=T0 + timedelta(minutes=minutes))


def test_results_from_a_quarantined_node_are_excluded_before_and_after_the_change():
    processor, store = BaselineGuardProcessor(), Store()
    old = node_result("old", minutes=-26 * 60)  # before the lookback: stays
    recent = node_result("recent", minutes=-60)
    other = node_result("other", minutes=-60, node="node-01")
    assert feed(processor, store, [old, recent, other]) == []
    quarantine = NodeStateChanged(node_id="node-07", state="quarantined", reason="XID 79 x3", time=T0)
    (exclusion,) = feed(processor, store, [quarantine])
    assert exclusion.result_id == recent.id and exclusion.node_state == "quarantined"
    assert "XID 79 x3" in exclusion.reason and exclusion.test_id == TEST
    (later,) = feed(processor, store, [node_result("later", minutes=30)])
    assert later.cause_id == exclusion.cause_id == quarantine.id  # the change that untrusts them, both ways
    assert (
        feed(processor, store, [NodeStateChanged(node_id="node-07", state="healthy", time=T0 + timedelta(hours=2))])
        == []
    )
    assert feed(processor, store, [node_result("healed", minutes=180)]) == []
    # a result that arrives late, but ran while the node was quarantined, is still excluded
    assert of_topic(feed(processor, store, [node_result("late", minutes=60)]), BaselineExclusion.TOPIC)


def test_a_result_is_excluded_alike_whether_it_arrives_before_or_after_the_node_s_changes():
    changes = [
        NodeStateChanged(node_id="node-07", state="suspect", reason="slow", time=T0),
        NodeStateChanged(node_id="node-07", state="quarantined", reason="XID 79", time=T0 + timedelta(hours=1)),
        NodeStateChanged(node_id="node-07", state="healthy", time=T0 + timedelta(hours=3)),
        NodeStateChanged(node_id="node-07", state="quarantined", reason="again", time=T0 + timedelta(hours=30)),
    ]
    # before the lookback, within it, while suspect, quarantined, healthy again, within the next one's lookback
    minutes = (-26 * 60, -60, 30, 90, 4 * 60, 20 * 60, 31 * 60)
    results = [node_result(f"r{m}", minutes=m) for m in minutes]

    def exclusions(events) -> set[tuple]:
        made = of_topic(feed(BaselineGuardProcessor(), Store(), events), BaselineExclusion.TOPIC)
        assert len(made) == len({e.result_id for e in made})  # one exclusion per result at most
        return {(e.result_id, e.node_state, e.reason, e.cause_id) for e in made}

    # Any order in which a result timed after a change back to healthy comes after the changes before
    # it. (One that comes before them is excluded by the suspicion that reaches back over it: a
    # change cannot know of a later one that has yet to arrive; docs/fleet.md.)
    first = exclusions([*changes, *results])
    assert first == exclusions(sorted([*changes, *results], key=lambda e: e.time))
    assert first == exclusions([*results[:4], *changes[:3], *results[4:], changes[3]])
    assert first == exclusions([changes[0], *results[:3], changes[1], changes[2], *results[3:], changes[3]])
    by_result = {result_id: (state, cause) for result_id, state, _, cause in first}
    r = {m: node_result(f"r{m}", minutes=m).id for m in minutes}
    assert r[-26 * 60] not in by_result  # before the first change's lookback
    assert by_result[r[-60]] == by_result[r[30]] == ("suspect", changes[0].id)  # the earliest change that reaches it
    assert by_result[r[90]] == ("suspect", changes[0].id)  # no trusted state between: still the suspicion's
    assert r[4 * 60] not in by_result  # healthy again
    assert by_result[r[20 * 60]] == by_result[r[31 * 60]] == ("quarantined", changes[3].id)  # the next lookback


def test_the_guard_is_partitioned_by_node():
    assert BaselineGuardProcessor().partition_key(node_result("x", 0, node="node-03")) == "node-03"


def test_the_guard_keeps_a_node_runs_by_hour_and_forgets_those_past_the_lookback():
    processor, store = BaselineGuardProcessor(), Store()
    runs = [node_result(f"r{n}", minutes=-72 * 60 + 6 * n) for n in range(720)]  # three days, one run per 6 min
    assert feed(processor, store, runs) == []
    values = [v for k, v in store.values.items() if k != "node-07"]
    # No value holds more than an hour of runs, and only the hours of the lookback and of the lead over
    # node-state it may run ahead by (and the one after) are kept.
    kept = (24 * 3600 * 1000 + FEEDBACK_LEAD_MS) // (3600 * 1000) + 2
    assert max(len(v.runs) for v in values) == 10 and len(values) <= kept < 72
    assert len(encode_entry(Entry(store.values["node-07"]))) < 2_000
    quarantine = NodeStateChanged(node_id="node-07", state="quarantined", reason="ECC", time=T0)
    excluded = {e.result_id for e in feed(processor, store, [quarantine])}
    assert excluded == {r.id for r in runs if r.time >= T0 - timedelta(hours=24)}
