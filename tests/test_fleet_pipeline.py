"""The fleet path end to end on the embedded runtime: results and signals in, quarantine, reruns,
diagnostics, flaky tests and the fleet views and report lines out."""

from __future__ import annotations

import orjson
from factories import BUNDLE
from fleet_factories import at, run

from fastci.cli.main import main
from fastci.contracts.node_states import NodeStateChanged
from fastci.contracts.runs import RunRequested
from fastci.inputs import NodeHealthEvent
from fastci.runtime.embedded import DataDir
from fastci.runtime.publish import publish_embedded
from fastci.shared.owners import parse_owner_file

NODES = [f"node-{i:02d}" for i in range(8)]
SICK = "node-03"
INFER, TRAIN = "tests/models/test_llm.py::test_infer", "tests/models/test_llm.py::test_train"
FLAKY = "tests/dist/test_ckpt.py::test_async_save"
BROKEN_BUNDLE = {**BUNDLE, "kernels": "kn-2.1"}


def fastci(root, *args: str) -> int:
    return main(["--data-dir", str(root), *args])


def sql(root, query: str, capsys) -> list[dict]:
    capsys.readouterr()
    assert fastci(root, "sql", query, "--format", "json") == 0
    out = capsys.readouterr().out.strip()
    return [orjson.loads(line) for line in out.splitlines()] if out else []


def read(root, topic: str, model):
    return [model.model_validate_json(r.payload) for r in DataDir(root).log.topic(topic).read()]


def night(hours: float, **kw):
    """Both tests on every node, with chips; the sick node fails both."""
    events = []
    for i, node in enumerate(NODES):
        status = "error" if node == SICK else "passed"
        for test in (INFER, TRAIN):
            events.append(run(test, hours=hours + i / 60, node=node, status=status, chips=8, seed=1, **kw))
    return events


def test_a_sick_node_is_quarantined_its_failures_rerun_elsewhere_and_it_returns_after_diagnostics(tmp_path, capsys):
    root = tmp_path
    flaky = [
        run(
            FLAKY,
            hours=2 + i / 60,
            node=n,
            chips=8,
            seed=1,
            status="failed" if n in ("node-01", "node-05") else "passed",
        )
        for i, n in enumerate(NODES)
    ]
    regression = [
        run(INFER, hours=3 + i / 60, node=n, chips=8, seed=1, bundle=BROKEN_BUNDLE, status="failed")
        for i, n in enumerate(NODES)
        if n != SICK
    ]
    publish_embedded(
        root,
        [
            parse_owner_file("* @models-team\n/tests/dist/ @dist-team\n", repo="acme/llm-framework"),
            *night(1),
            NodeHealthEvent(node_id=SICK, kind="xid", value=31.0, time=at(1.5), detail="MMU fault"),
            *flaky,
            *regression,
        ],
    )
    assert fastci(root, "run") == 0

    changes = read(root, NodeStateChanged.TOPIC, NodeStateChanged)
    assert {c.node_id for c in changes} == {SICK}  # the regression and the flaky test blame no node
    # in event-time order: the node's failures of the night (1.05 h) make it suspect, the xid (1.5 h) quarantines it
    assert [(c.state, c.rule) for c in changes] == [
        ("suspect", "failures-attributed"),
        ("quarantined", "signal-and-failures"),
    ]
    requests = [r for r in read(root, RunRequested.TOPIC, RunRequested) if r.work_class == "rerun"]
    assert sorted(r.test_id for r in requests) == [INFER, TRAIN]
    assert all(
        r.avoid_nodes == (SICK,) and r.hardware_revision == "rev-a" and r.requested_by == "node-state" for r in requests
    )

    # the runner answers the reruns on a healthy node; the operator runs diagnostics, which pass
    answers = [
        run(r.test_id, hours=4, node="node-06", trigger="rerun", commit=r.commit, seed=r.seed, chips=8)
        for r in requests
    ]
    publish_embedded(
        root,
        [
            *answers,
            NodeHealthEvent(node_id=SICK, kind="diagnostic_started", value=600, time=at(5)),
            NodeHealthEvent(node_id=SICK, kind="diagnostic", value=1.0, time=at(6)),
        ],
    )
    assert fastci(root, "run") == 0
    assert fastci(root, "views", "refresh") == 0

    assert sql(root, "SELECT node_id, state, rule FROM fleet_node_states", capsys) == [
        {"node_id": SICK, "state": "healthy", "rule": "diagnostics-passed"}
    ]
    assert sql(root, "SELECT count(*) AS n FROM fleet_quarantined_nodes", capsys) == [{"n": 0}]
    reruns = sql(root, "SELECT test_id, failed_on, rerun_on, rerun_status FROM fleet_reruns ORDER BY test_id", capsys)
    assert reruns == [
        {"test_id": t, "failed_on": SICK, "rerun_on": "node-06", "rerun_status": "passed"} for t in (INFER, TRAIN)
    ]
    assert sql(root, "SELECT test_id, owners FROM fleet_flaky_tests", capsys) == [
        {"test_id": FLAKY, "owners": ["dist-team"]}
    ]
    (day,) = sql(root, "SELECT runs, flaky_runs FROM fleet_hardware_flake_rate", capsys)
    # the sick node's runs are excluded (baseline-guard: its two failures, and its flaky-test run while
    # quarantined); the regression's failures passed nowhere: not flakes
    assert day == {"runs": (len(NODES) * 2 - 2) + (len(flaky) - 1) + len(regression) + len(answers), "flaky_runs": 2}
    marked = sql(root, "SELECT count(*) AS n FROM regression_detector_facts WHERE marked_flaky", capsys)
    assert marked == [{"n": 1}]  # the detector keeps the flaky test out of baselines and regression calls

    capsys.readouterr()
    assert fastci(root, "report", "nightly") == 0
    printed = capsys.readouterr().out
    assert "flaky: " + FLAKY + " (owners: dist-team)" in printed
    assert "flake rate" in printed and "2 by node-state, 2 answered, 2 passed" in printed  # the CI-health lines
