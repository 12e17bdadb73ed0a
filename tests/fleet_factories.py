"""Builders for the fleet tests: signals, attributions and results at given times on given nodes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from factories import BUNDLE, result

from fastci.fleet.events import NodeAttribution
from fastci.inputs import NodeHealthEvent

T0 = datetime(2026, 12, 1, 0, tzinfo=UTC)
NODE = "node-05"


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


def signal(kind: str, value: float, hours: float, node: str = NODE, detail: str = "") -> NodeHealthEvent:
    return NodeHealthEvent(node_id=node, kind=kind, value=value, time=at(hours), detail=detail)


def failure(test_id: str, hours: float, node: str = NODE, run: str | None = None) -> NodeAttribution:
    """A failure attribution, as failure-attribution emits it, for a failed run at ``hours``."""
    failed = result(test_id, run_id=run or f"run-{test_id}-{hours}", node_id=node, status="failed", time=at(hours))
    return NodeAttribution(
        node_id=node,
        kind="failure",
        result_id=failed.id,
        cause_id=failed.id,
        test_id=test_id,
        bundle=BUNDLE,
        hardware_revision="rev-a",
        time=at(hours),
        failing_nodes=1,
        passing_nodes=5,
        detail=f"{test_id} failed on {node} and passed on 5 other node(s)",
    )


def cleared(attribution: NodeAttribution, hours: float) -> NodeAttribution:
    return NodeAttribution(
        node_id=attribution.node_id,
        kind="cleared",
        result_id=attribution.result_id,
        cause_id="c" * 32,
        test_id=attribution.test_id,
        bundle=BUNDLE,
        hardware_revision="rev-a",
        time=at(hours),
        clears=attribution.id,
        detail="withdrawn: a software regression",
    )


def throughput(ratio: float, hours: float, n: int, node: str = NODE) -> NodeAttribution:
    run = result("tests/perf.py::test_tokens", run_id=f"perf-{n}", node_id=node, time=at(hours))
    return NodeAttribution(
        node_id=node,
        kind="throughput",
        result_id=run.id,
        cause_id=run.id,
        test_id=run.test_id,
        bundle=BUNDLE,
        hardware_revision="rev-a",
        time=at(hours),
        metric="tokens_per_s",
        ratio=ratio,
        peer_runs=8,
    )


def run(test_id: str, hours: float, node: str = NODE, status: str = "passed", **fields: Any):
    fields.setdefault("run_id", f"{test_id}-{node}-{hours}")
    return result(test_id, node_id=node, status=status, time=at(hours), **fields)
