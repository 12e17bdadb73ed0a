"""failure-attribution: a test's results compared across nodes, told to the nodes concerned."""

from __future__ import annotations

from factories import BUNDLE
from fleet_factories import run
from processor_helpers import Store, feed, of_topic

from fastci.contracts.flaky_verdicts import FlakyVerdict
from fastci.contracts.node_states import NodeStateChanged
from fastci.core.events import derive_id
from fastci.fleet.events import NodeAttribution
from fastci.fleet.failure_attribution import FailureAttributionProcessor
from fastci.fleet.node_state import NodeStateProcessor

TEST = "tests/test_a.py::test_x"
OTHER_KERNELS = {**BUNDLE, "kernels": "kn-2.0"}


def nodes(n: int) -> list[str]:
    return [f"node-{i:02d}" for i in range(n)]


def kinds(outputs) -> list[tuple[str, str]]:
    return [(a.kind, a.node_id) for a in of_topic(outputs, NodeAttribution.TOPIC)]


def test_a_failure_where_other_nodes_pass_is_attributed_to_its_node_once():
    processor, store = FailureAttributionProcessor(), Store()
    passes = [run(TEST, hours=1, node=n) for n in nodes(4)[1:]]
    failed = run(TEST, hours=2, node="node-00", status="error")
    outputs = feed(processor, store, [*passes, failed])
    (attribution,) = of_topic(outputs, NodeAttribution.TOPIC)
    assert (attribution.kind, attribution.node_id, attribution.result_id) == ("failure", "node-00", failed.id)
    assert (attribution.failing_nodes, attribution.passing_nodes) == (1, 3)
    assert attribution.id == derive_id(NodeAttribution.TOPIC, failed.id, "failure", None)  # from the judged result
    assert feed(processor, store, [run(TEST, hours=3, node="node-05")]) == []  # decided: not said again


def test_a_failure_waits_for_passes_that_arrive_after_it():
    processor, store = FailureAttributionProcessor(), Store()
    failed = run(TEST, hours=1, node="node-00", status="failed")
    assert feed(processor, store, [failed, run(TEST, hours=1.1, node="node-01")]) == []  # one other node: too few
    later = run(TEST, hours=1.2, node="node-02")
    (attribution,) = of_topic(feed(processor, store, [later]), NodeAttribution.TOPIC)
    assert attribution.result_id == failed.id and attribution.cause_id == later.id


def test_a_test_failing_on_many_nodes_blames_none_and_withdraws_what_it_said():
    processor, store = FailureAttributionProcessor(), Store()
    feed(processor, store, [run(TEST, hours=1, node=n) for n in nodes(6)[3:]])
    first = feed(processor, store, [run(TEST, hours=2, node="node-00", status="failed")])
    assert kinds(first) == [("failure", "node-00")]
    second = feed(processor, store, [run(TEST, hours=2.1, node="node-01", status="failed")])
    assert kinds(second) == [("failure", "node-01")]
    third = feed(processor, store, [run(TEST, hours=2.2, node="node-02", status="failed")])
    assert sorted(kinds(third)) == [("cleared", "node-00"), ("cleared", "node-01")]
    withdrawn = of_topic(third, NodeAttribution.TOPIC)
    assert {a.clears for a in withdrawn} == {
        of_topic(first, NodeAttribution.TOPIC)[0].id,
        of_topic(second, NodeAttribution.TOPIC)[0].id,
    }
    assert "software regression" in withdrawn[0].detail
    assert feed(processor, store, [run(TEST, hours=2.3, node=n, status="failed") for n in nodes(12)[6:]]) == []


def test_a_software_regression_on_a_new_bundle_suspects_no_node():
    attribution, nodes_state = FailureAttributionProcessor(), NodeStateProcessor()
    a_store, n_store = Store(), Store()
    healthy = [run(TEST, hours=1, node=n) for n in nodes(8)]
    broken = [
        run(TEST, hours=2 + i / 10, node=n, status="failed", bundle=OTHER_KERNELS) for i, n in enumerate(nodes(8))
    ]
    said = feed(attribution, a_store, [*healthy, *broken])
    assert of_topic(said, NodeAttribution.TOPIC) == []  # the new bundle passed nowhere
    assert of_topic(feed(nodes_state, n_store, [*healthy, *broken, *said]), NodeStateChanged.TOPIC) == []


def test_passes_on_another_bundle_or_revision_are_not_passes_elsewhere():
    processor, store = FailureAttributionProcessor(), Store()
    other_stack = [run(TEST, hours=1, node=n, bundle=OTHER_KERNELS) for n in nodes(4)[1:]]
    other_revision = [run(TEST, hours=1, node=n, hardware_revision="rev-b") for n in nodes(8)[4:]]
    assert (
        feed(processor, store, [*other_stack, *other_revision, run(TEST, hours=2, node="node-00", status="failed")])
        == []
    )


def test_a_flaky_test_blames_no_node():
    processor, store = FailureAttributionProcessor(), Store()
    feed(processor, store, [run(TEST, hours=1, node=n) for n in nodes(5)[1:]])
    (said,) = of_topic(
        feed(processor, store, [run(TEST, hours=2, node="node-00", status="failed")]), NodeAttribution.TOPIC
    )
    verdict = FlakyVerdict(
        cause_id="f" * 32,
        test_id=TEST,
        repo="acme/llm-framework",
        flaky=True,
        rule="outcomes-differ",
        reason="failed on 2 nodes",
    )
    (withdrawn,) = of_topic(feed(processor, store, [verdict]), NodeAttribution.TOPIC)
    assert (withdrawn.kind, withdrawn.clears, withdrawn.cause_id) == ("cleared", said.id, verdict.id)
    assert feed(processor, store, [run(TEST, hours=3, node="node-07", status="failed")]) == []


def test_throughput_of_a_run_relative_to_other_nodes():
    processor, store = FailureAttributionProcessor(), Store()
    metric = "throughput_tokens_per_s"
    peers = [
        run(TEST, hours=1, node=n, metrics={metric: (1000.0 + i, 1010.0, 990.0), "latency_ms": (10.0,)})
        for i, n in enumerate(nodes(6)[1:])
    ]
    outputs = feed(processor, store, peers)
    assert [a.node_id for a in of_topic(outputs, NodeAttribution.TOPIC)] == ["node-05", "node-05"]  # 4 peers at last
    slow = run(TEST, hours=2, node="node-00", metrics={metric: (900.0, 905.0, 895.0), "latency_ms": (10.0, 10.0, 10.0)})
    said = {a.metric: a for a in of_topic(feed(processor, store, [slow]), NodeAttribution.TOPIC)}
    assert set(said) == {metric, "latency_ms"}
    assert abs(said[metric].ratio - 900 / (1000 + 2 / 3)) < 1e-9 and said[metric].peer_runs == 5  # trimmed means
    assert abs(said["latency_ms"].ratio - 1.0) < 1e-12  # lower is better: compared as 1 / latency
    other_revision = run(TEST, hours=2, node="node-09", hardware_revision="rev-b", metrics={metric: (500.0,)})
    assert feed(processor, store, [other_revision]) == []  # no peers on rev-b
