"""node-state: every transition of the node health state machine, its reasoning, and the reruns."""

from __future__ import annotations

import numpy as np
import pytest
from fleet_factories import NODE, at, cleared, failure, run, signal, throughput
from processor_helpers import Store, feed, of_topic

from fastci.contracts.node_states import NodeStateChanged
from fastci.contracts.runs import RunRequested
from fastci.core.events import derive_id
from fastci.fleet.node_state import RERUN_PURPOSE, NodeStateProcessor
from fastci.runtime.driver import Driver, Origin

TEST_A, TEST_B = "tests/test_a.py::test_x", "tests/test_b.py::test_y"


def changes(outputs) -> list[tuple[str, str | None]]:
    return [(c.state, c.rule) for c in of_topic(outputs, NodeStateChanged.TOPIC)]


def fresh():
    return NodeStateProcessor(), Store()


def state_of(store: Store, node: str = NODE):
    return store.values[node].state


def test_a_non_fatal_xid_makes_a_node_suspect_and_the_change_says_why():
    processor, store = fresh()
    xid = signal("xid", 31, hours=1, detail="MMU fault")
    (change,) = of_topic(feed(processor, store, [xid]), NodeStateChanged.TOPIC)
    assert (change.previous, change.state, change.rule) == ("healthy", "suspect", "xid")
    assert change.cause_id == xid.id and change.time == xid.time
    assert "XID 31" in change.reason and [e.event_id for e in change.evidence] == [xid.id]


def test_a_fatal_xid_quarantines_at_once():
    processor, store = fresh()
    outputs = feed(processor, store, [signal("xid", 79, hours=1)])
    assert changes(outputs) == [("quarantined", "xid-fatal")]
    assert "fallen off the bus" in of_topic(outputs, NodeStateChanged.TOPIC)[0].reason


def test_repeated_xids_within_the_window_quarantine_but_spread_out_they_do_not():
    processor, store = fresh()
    spread = feed(
        processor, store, [signal("xid", 31, hours=0), signal("xid", 13, hours=25), signal("xid", 31, hours=50)]
    )
    # each one suspects, the window forgets it, and the next heartbeat returns the node
    assert "quarantined" not in [state for state, _ in changes(spread)]
    processor, store = fresh()
    close = feed(processor, store, [signal("xid", 31, hours=0), signal("xid", 13, hours=3), signal("xid", 31, hours=6)])
    assert changes(close) == [("suspect", "xid"), ("quarantined", "xid-repeated")]


def test_uncorrectable_ecc_quarantines_and_zero_counts_are_not_evidence():
    processor, store = fresh()
    assert feed(processor, store, [signal("ecc", 0, hours=1)]) == []
    assert changes(feed(processor, store, [signal("ecc", 2, hours=2)])) == [("quarantined", "ecc-uncorrectable")]


def test_temperature_needs_consecutive_hot_readings_and_a_cool_one_returns_a_suspect_node():
    processor, store = fresh()
    readings = [signal("temperature", t, hours=i / 4) for i, t in enumerate([95, 96, 70, 93, 94])]
    assert feed(processor, store, readings) == []  # never three in a row
    hot = feed(processor, store, [signal("temperature", 95, hours=2)])
    assert changes(hot) == [("suspect", "temperature-high")]
    (back,) = of_topic(feed(processor, store, [signal("temperature", 60, hours=2.25)]), NodeStateChanged.TOPIC)
    assert (back.state, back.rule) == ("healthy", "evidence-expired") and "temperature-high" in back.reason
    processor, store = fresh()
    sustained = feed(processor, store, [signal("temperature", 97, hours=i / 4) for i in range(8)])
    assert changes(sustained) == [("suspect", "temperature-high"), ("quarantined", "temperature-sustained")]


def test_heartbeat_gaps():
    processor, store = fresh()
    assert feed(processor, store, [signal("heartbeat", 30, hours=0)]) == []
    assert changes(feed(processor, store, [signal("heartbeat", 180, hours=1)])) == [("suspect", "heartbeat-missed")]
    assert changes(feed(processor, store, [signal("heartbeat", 900, hours=2)])) == [("quarantined", "heartbeat-lost")]


def test_nccl_timeouts_one_suspects_three_in_a_day_quarantine():
    processor, store = fresh()
    assert changes(feed(processor, store, [signal("nccl_timeout", 1, hours=1)])) == [("suspect", "nccl-timeout")]
    assert feed(processor, store, [signal("nccl_timeout", 1, hours=5)]) == []
    (change,) = of_topic(feed(processor, store, [signal("nccl_timeout", 1, hours=9)]), NodeStateChanged.TOPIC)
    assert (change.state, change.rule) == ("quarantined", "nccl-repeated") and len(change.evidence) == 3


def test_failures_attributed_to_the_node():
    processor, store = fresh()
    assert feed(processor, store, [failure(TEST_A, hours=1)]) == []  # one failure: not enough
    assert changes(feed(processor, store, [failure(TEST_A, hours=2)])) == [("suspect", "failures-attributed")]
    assert feed(processor, store, [failure(TEST_A, hours=3)]) == []  # three, all one test: still suspect
    (change,) = of_topic(feed(processor, store, [failure(TEST_B, hours=4)]), NodeStateChanged.TOPIC)
    assert (change.state, change.rule) == ("quarantined", "failures-attributed")
    assert "4 failures on 2 tests" in change.reason and {e.test_id for e in change.evidence} == {TEST_A, TEST_B}


def test_a_hardware_signal_with_attributed_failures_quarantines():
    processor, store = fresh()
    outputs = feed(
        processor, store, [signal("heartbeat", 150, hours=1), failure(TEST_A, hours=2), failure(TEST_B, hours=3)]
    )
    assert changes(outputs) == [("suspect", "heartbeat-missed"), ("quarantined", "signal-and-failures")]
    assert {e.kind for e in of_topic(outputs, NodeStateChanged.TOPIC)[-1].evidence} == {"heartbeat", "failure"}


def test_withdrawn_attributions_return_a_suspect_node():
    processor, store = fresh()
    first, second = failure(TEST_A, hours=1), failure(TEST_B, hours=2)
    assert changes(feed(processor, store, [first, second])) == [("suspect", "failures-attributed")]
    (back,) = of_topic(feed(processor, store, [cleared(second, hours=3)]), NodeStateChanged.TOPIC)
    assert (back.previous, back.state, back.rule) == ("suspect", "healthy", "evidence-expired")


def test_a_suspect_node_returns_once_its_evidence_leaves_the_window():
    processor, store = fresh()
    feed(processor, store, [signal("xid", 31, hours=0)])
    assert feed(processor, store, [signal("heartbeat", 30, hours=23)]) == []
    assert changes(feed(processor, store, [signal("heartbeat", 30, hours=24.5)])) == [("healthy", "evidence-expired")]


def test_quarantine_ends_only_when_diagnostics_pass():
    processor, store = fresh()
    feed(processor, store, [signal("xid", 79, hours=0)])
    # time passes, the evidence leaves every window: still quarantined
    assert feed(processor, store, [signal("heartbeat", 30, hours=100), signal("xid", 31, hours=101)]) == []
    assert state_of(store) == "quarantined"
    assert changes(feed(processor, store, [signal("diagnostic_started", 3600, hours=102)])) == [
        ("diagnosing", "diagnostic-started")
    ]
    assert changes(feed(processor, store, [signal("diagnostic", 0.0, hours=103)])) == [
        ("quarantined", "diagnostics-failed")
    ]
    assert feed(processor, store, [signal("diagnostic", 0.0, hours=104)]) == []  # failing again: no news
    feed(processor, store, [signal("diagnostic_started", 3600, hours=120)])
    (back,) = of_topic(feed(processor, store, [signal("diagnostic", 1.0, hours=121)]), NodeStateChanged.TOPIC)
    assert (back.previous, back.state, back.rule) == ("diagnosing", "healthy", "diagnostics-passed")
    assert store.values[NODE].evidence == () and store.values[NODE].failed == ()  # a fresh start after repair


def test_a_pass_without_a_recorded_start_also_returns_the_node_and_says_so():
    processor, store = fresh()
    feed(processor, store, [signal("ecc", 1, hours=0)])
    (back,) = of_topic(feed(processor, store, [signal("diagnostic", 1.0, hours=5)]), NodeStateChanged.TOPIC)
    assert back.state == "healthy" and "no diagnostic start was seen" in back.reason


def test_a_failed_diagnostic_quarantines_a_node_in_service():
    processor, store = fresh()
    assert changes(feed(processor, store, [signal("diagnostic", 0.0, hours=1)])) == [
        ("quarantined", "diagnostics-failed")
    ]


def test_diagnostic_start_means_nothing_to_a_node_in_service():
    processor, store = fresh()
    assert feed(processor, store, [signal("diagnostic_started", 60, hours=1)]) == []


def test_a_node_whose_runs_sit_below_its_peers_is_suspect_then_quarantined():
    processor, store = fresh()
    rng = np.random.default_rng(7)
    ratios = 0.9 * np.exp(0.05 * rng.standard_normal(16))
    outputs = feed(processor, store, [throughput(float(r), hours=i, n=i) for i, r in enumerate(ratios)])
    assert changes(outputs) == [("suspect", "throughput-slow"), ("quarantined", "throughput-slow")]
    quarantine = of_topic(outputs, NodeStateChanged.TOPIC)[-1]
    suspect = of_topic(outputs, NodeStateChanged.TOPIC)[0]
    assert len(suspect.evidence) == 7  # the fewest runs the rule calls (7 below their peers: p = 0.0078)
    assert "median throughput 0.888x other nodes' over 9 runs" in quarantine.reason
    assert quarantine.evidence[0].kind == "throughput" and len(quarantine.evidence) == 9


def test_a_healthy_node_with_noisy_ratios_is_never_slow():
    processor, store = fresh()
    rng = np.random.default_rng(3)
    ratios = np.exp(0.12 * rng.standard_normal(40))
    assert feed(processor, store, [throughput(float(r), hours=i, n=i) for i, r in enumerate(ratios)]) == []


# ----- reruns


def quarantine_after(failed_runs, hours: float, processor=None, store=None):
    processor, store = processor or NodeStateProcessor(), store or Store()
    outputs = feed(processor, store, [*failed_runs, signal("xid", 79, hours=hours)])
    return processor, store, outputs


def test_quarantine_reruns_each_test_that_failed_in_the_window_once_on_the_same_revision_elsewhere():
    failed = [
        run(TEST_A, hours=-30, status="failed"),  # before the window: not rerun
        run(TEST_A, hours=2, status="failed"),
        run(TEST_A, hours=5, status="error", seed=9, config={"model": "lm"}),  # the newest failure of TEST_A
        run(TEST_B, hours=6, status="failed", hardware_revision="rev-b"),
        run("tests/test_c.py::test_ok", hours=6),  # passed: nothing to rerun
    ]
    _, _, outputs = quarantine_after(failed, hours=8)
    (change,) = of_topic(outputs, NodeStateChanged.TOPIC)
    assert change.reruns_requested == 2 and change.hardware_revision == "rev-a"  # the node's, from its latest result
    requests = of_topic(outputs, RunRequested.TOPIC)
    assert [r.test_id for r in requests] == [TEST_A, TEST_B]
    newest = failed[2]
    a = requests[0]
    assert a.id == derive_id(RunRequested.TOPIC, newest.id, RERUN_PURPOSE)  # derived from the failed result alone
    assert (a.cause_id, a.purpose, a.work_class) == (newest.id, RERUN_PURPOSE, "rerun")
    assert (a.commit, a.bundle, a.seed, a.config) == (newest.commit, newest.bundle, 9, {"model": "lm"})
    assert a.avoid_nodes == (NODE,) and a.hardware_revision == "rev-a" and a.requested_by == "node-state"
    assert a.chips == 0 and a.pool == "default"  # the failed run's: 0 = CPU/simulator capacity for the scheduler
    assert requests[1].hardware_revision == "rev-b"


def test_reruns_are_not_asked_twice_on_replay_or_by_a_second_quarantine():
    failed = [run(TEST_A, hours=1, status="failed")]
    events = [*failed, signal("xid", 79, hours=2)]
    processor, raw = NodeStateProcessor(), {}
    driver = Driver(processor, type("Raw", (), {"get": lambda self, key: raw.get(key)})())
    first = [out for i, e in enumerate(events) for out in driver.handle(e, Origin("x/0", i))]
    raw.update(driver.drain_writes())
    replay = [out for i, e in enumerate(events) for out in driver.handle(e, Origin("x/0", i))]
    assert len(of_topic(first, RunRequested.TOPIC)) == 1 and replay == []
    # repaired, failing again later: only the new failure is rerun
    processor, store, _ = quarantine_after(failed, hours=2)
    feed(processor, store, [signal("diagnostic", 1.0, hours=3)])
    again = feed(processor, store, [run(TEST_A, hours=4, status="failed"), signal("xid", 79, hours=5)])
    (request,) = of_topic(again, RunRequested.TOPIC)
    assert request.cause_id == run(TEST_A, hours=4, status="failed").id


def test_a_failure_reported_after_the_quarantine_is_rerun_if_it_ran_before():
    processor, store, _ = quarantine_after([], hours=10)
    late = run(TEST_A, hours=9, status="failed")  # ran before the quarantine, published after
    (request,) = of_topic(feed(processor, store, [late]), RunRequested.TOPIC)
    assert request.cause_id == late.id
    during = run(TEST_B, hours=11, status="failed")  # ran on the quarantined node (a diagnostic): not rerun
    assert of_topic(feed(processor, store, [during]), RunRequested.TOPIC) == []
    feed(processor, store, [signal("diagnostic", 1.0, hours=12)])
    very_late = run(TEST_B, hours=8, status="failed")  # reported after the node is back: still rerun
    (request,) = of_topic(feed(processor, store, [very_late]), RunRequested.TOPIC)
    assert request.cause_id == very_late.id
    assert of_topic(feed(processor, store, [run(TEST_B, hours=13, status="failed")]), RunRequested.TOPIC) == []


@pytest.mark.parametrize("state_events", [[], [signal("xid", 31, hours=0)]])
def test_results_alone_never_change_a_state(state_events):
    processor, store = fresh()
    feed(processor, store, state_events)
    before = store.values[NODE].state if state_events else "healthy"
    outputs = feed(processor, store, [run(TEST_A, hours=h, status="failed") for h in (1, 2, 3, 4)])
    assert of_topic(outputs, NodeStateChanged.TOPIC) == []
    assert store.values[NODE].state == before


def test_partitioned_by_node():
    processor = NodeStateProcessor()
    assert processor.partition_key(run(TEST_A, hours=0, node="node-09")) == "node-09"
    assert processor.partition_key(failure(TEST_A, hours=0, node="node-02")) == "node-02"
    assert at(0).tzinfo is not None
