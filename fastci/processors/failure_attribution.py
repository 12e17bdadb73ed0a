"""failure-attribution: compares a test's results across nodes and says what that means for each node.

Keyed by test, so all of a test's results arrive here; state is one small value per (test, bundle,
hardware revision, config): that test's recent runs on that stack, on every node. What it learns
about a node goes out as ``node-attribution`` events keyed by node, which ``node-state`` reads
(this processor never touches a node's state).

Failures (``WINDOW`` either side of the failed run):
- the test failed on this node and on at most ``MAX_FAULTY_NODES`` nodes, and passed on at least
  ``MIN_PASSING_NODES`` other nodes: a ``failure`` attribution (the node may be at fault);
- it failed on ``SOFTWARE_NODES`` or more nodes: a software regression (or a flaky test), not a
  node fault; failures attributed earlier in the window are withdrawn (``cleared``);
- otherwise it waits: a later result can decide it (the passes often arrive after the failure).
Tests marked flaky (``flaky-verdicts``) are not attributed, and their earlier attributions are
withdrawn.

Throughput: every passing run with a throughput-like metric gets a ``throughput`` observation: the
run's level over the median of the same test's other nodes' levels in the ``PEER_WINDOW`` before it
(one value per node, at least ``MIN_PEER_NODES`` nodes), as performance (< 1 is slower). A run's
level is the 20%-trimmed mean of its samples: robust to a few disturbed samples like the median,
and less noisy (measured on the fleet simulation's runs: a robust sd of the log-ratio of 0.039 for
the trimmed mean against 0.052-0.061 for the median).
``node-state`` judges a node's observations together (``fastci.fleet.slowness``).
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import ClassVar, Literal

import numpy as np
import orjson
from pydantic import Field
from scipy import stats

from fastci.events import Event, ResultEvent
from fastci.events.base import Record
from fastci.events.fleet import FlakyVerdict, NodeAttribution
from fastci.events.inputs import Bundle
from fastci.fleet.flakiness import FAILING, PASSING
from fastci.processors.base import Processor, StateReader, Step, compound_key
from fastci.regression.perfstats import as_performance, metric_direction

NAME = "failure-attribution"
WINDOW = timedelta(hours=72)
SOFTWARE_NODES = 3
MAX_FAULTY_NODES = 2
MIN_PASSING_NODES = 2
PEER_WINDOW = timedelta(hours=24)
MIN_PEER_NODES = 4
MAX_RUNS = 160  # per group: about 10 runs of each of 16 nodes
MAX_METRICS = 8
MAX_GROUPS = 64
TRIM = 0.2  # share of a run's samples cut from each end before averaging


class Run(Record):
    result_id: str
    node_id: str
    outcome: Literal["pass", "fail"]
    time: datetime | None = None
    levels: dict[str, float] = Field(default_factory=dict)  # throughput-like metric -> the run's level, as performance
    decided: bool = False  # a failure already judged (attributed, or not a node's fault)
    attributed: bool = False  # a failure currently attributed to its node
    attribution_id: str | None = None


class Group(Record):
    """One test's recent runs on one bundle, hardware revision and config, on every node."""

    bundle: Bundle
    hardware_revision: str
    runs: tuple[Run, ...] = Field(default=(), max_length=MAX_RUNS)


class AttributionState(Record):
    group: Group | None = None
    groups: tuple[str, ...] | None = None  # the test's group keys
    flaky: bool | None = None


def group_key(event: ResultEvent) -> str:
    identity = orjson.dumps([event.bundle.model_dump(), event.hardware_revision, event.config], option=orjson.OPT_SORT_KEYS)
    return compound_key(event.test_id, "group", hashlib.sha256(identity).hexdigest()[:20])


def groups_key(test_id: str) -> str:
    return compound_key(test_id, "groups")


def flaky_key(test_id: str) -> str:
    return compound_key(test_id, "flaky")


class FailureAttributionProcessor(Processor[AttributionState]):
    name: ClassVar[str] = NAME
    inputs: ClassVar[tuple[str, ...]] = (ResultEvent.TOPIC, FlakyVerdict.TOPIC)
    outputs: ClassVar[tuple[str, ...]] = (NodeAttribution.TOPIC,)
    state_model: ClassVar[type[Record]] = AttributionState
    state_key: ClassVar[str] = "key"

    def process(self, state: StateReader[AttributionState], event: Event) -> Step[AttributionState]:
        if isinstance(event, FlakyVerdict):
            return self._verdict(state, event)
        assert isinstance(event, ResultEvent)
        if event.status not in FAILING | PASSING:
            return Step()
        key = group_key(event)
        held = state.get(key)
        group = (held.group if held else None) or Group(bundle=event.bundle, hardware_revision=event.hardware_revision)
        runs = list(group.runs)
        writes: dict[str, AttributionState | None] = {}
        known = state.get(groups_key(event.test_id))
        groups = tuple(known.groups or ()) if known else ()
        if key not in groups:  # a new stack or config for this test; the oldest beyond MAX_GROUPS is forgotten
            groups = (*groups, key)
            writes.update({old: None for old in groups[:-MAX_GROUPS]})
            writes[groups_key(event.test_id)] = AttributionState(groups=groups[-MAX_GROUPS:])
        run = Run(result_id=event.id, node_id=event.node_id, outcome="fail" if event.status in FAILING else "pass",
                  time=event.time, levels=_levels(event))
        outputs: list[Event] = []
        if run.outcome == "pass":
            outputs += _throughput(run, runs, event)
        runs.append(run)
        runs = _recent(runs, event.time)
        flaky = state.get(flaky_key(event.test_id))
        if not (flaky and flaky.flaky):
            outputs += _judge_failures(group, runs, event.test_id, event.id)
        writes[key] = AttributionState(group=group.model_copy(update={"runs": tuple(runs)}))
        return Step(writes=writes, outputs=outputs)

    def _verdict(self, state: StateReader[AttributionState], verdict: FlakyVerdict) -> Step[AttributionState]:
        writes: dict[str, AttributionState] = {flaky_key(verdict.test_id): AttributionState(flaky=verdict.flaky)}
        outputs: list[Event] = []
        if verdict.flaky:  # a flaky test's failures say nothing about nodes: withdraw what it said
            known = state.get(groups_key(verdict.test_id))
            for key in known.groups or () if known else ():
                held = state.get(key)
                if held is None or held.group is None:
                    continue
                runs = list(held.group.runs)
                cleared = _clear(held.group, runs, [i for i, r in enumerate(runs) if r.attributed], verdict.test_id,
                                 verdict.id, "the test was marked flaky")
                if cleared:
                    outputs += cleared
                    writes[key] = AttributionState(group=held.group.model_copy(update={"runs": tuple(runs)}))
        return Step(writes=writes, outputs=outputs)


def _levels(event: ResultEvent) -> dict[str, float]:
    levels: dict[str, float] = {}
    for metric in sorted(event.metrics):
        samples = event.metrics[metric]
        direction = metric_direction(metric)
        if direction is None or not samples or any(s <= 0 for s in samples) or len(levels) >= MAX_METRICS:
            continue
        levels[metric] = float(stats.trim_mean(as_performance(samples, direction), TRIM))
    return levels


def _recent(runs: list[Run], now: datetime | None) -> list[Run]:
    if now is not None:
        runs = [r for r in runs if r.time is None or r.time >= now - WINDOW - WINDOW]
    return runs[-MAX_RUNS:]


def _near(run: Run, other: Run, span: timedelta) -> bool:
    return run.time is None or other.time is None or abs(other.time - run.time) <= span


def _judge_failures(group: Group, runs: list[Run], test_id: str, cause_id: str) -> list[Event]:
    """Decide the failures that the runs now allow to be decided."""
    outputs: list[Event] = []
    for i, run in enumerate(runs):
        if run.outcome != "fail" or (run.decided and not run.attributed):
            continue
        around = [r for r in runs if _near(run, r, WINDOW)]
        failing = {r.node_id for r in around if r.outcome == "fail"}
        passing = {r.node_id for r in around if r.outcome == "pass"} - {run.node_id}
        if len(failing) >= SOFTWARE_NODES:
            if run.attributed:
                outputs += _clear(group, runs, [i], test_id, cause_id,
                                  f"the test failed on {len(failing)} nodes: a software regression, not a node fault")
            else:
                runs[i] = run.model_copy(update={"decided": True})
        elif not run.decided and len(failing) <= MAX_FAULTY_NODES and len(passing) >= MIN_PASSING_NODES:
            attribution = NodeAttribution(
                node_id=run.node_id, kind="failure", result_id=run.result_id, cause_id=cause_id, test_id=test_id,
                bundle=group.bundle, hardware_revision=group.hardware_revision, time=run.time,
                failing_nodes=len(failing), passing_nodes=len(passing),
                detail=f"{test_id} failed on {run.node_id} and passed on {len(passing)} other node(s) "
                       f"with the same bundle and config",
            )
            runs[i] = run.model_copy(update={"decided": True, "attributed": True, "attribution_id": attribution.id})
            outputs.append(attribution)
    return outputs


def _clear(group: Group, runs: list[Run], indexes: list[int], test_id: str, cause_id: str, why: str) -> list[Event]:
    outputs: list[Event] = []
    for i in indexes:
        run = runs[i]
        outputs.append(NodeAttribution(
            node_id=run.node_id, kind="cleared", result_id=run.result_id, cause_id=cause_id, test_id=test_id,
            bundle=group.bundle, hardware_revision=group.hardware_revision, time=run.time, clears=run.attribution_id,
            detail=f"withdrawn: {why}",
        ))
        runs[i] = run.model_copy(update={"decided": True, "attributed": False})
    return outputs


def _throughput(run: Run, runs: list[Run], event: ResultEvent) -> list[Event]:
    outputs: list[Event] = []
    for metric, level in run.levels.items():
        by_node: dict[str, list[float]] = {}
        for other in runs:
            if other.node_id == run.node_id or metric not in other.levels or other.outcome != "pass":
                continue
            if run.time is not None and other.time is not None and not (run.time - PEER_WINDOW <= other.time <= run.time):
                continue
            by_node.setdefault(other.node_id, []).append(other.levels[metric])
        if len(by_node) < MIN_PEER_NODES:
            continue
        reference = float(np.median([np.median(values) for values in by_node.values()]))
        outputs.append(NodeAttribution(
            node_id=run.node_id, kind="throughput", result_id=run.result_id, cause_id=event.id, test_id=event.test_id,
            bundle=event.bundle, hardware_revision=event.hardware_revision, time=run.time, metric=metric,
            ratio=level / reference, peer_runs=sum(len(v) for v in by_node.values()),
            detail=f"{metric}: {level / reference:.3f}x the median of {len(by_node)} other nodes",
        ))
    return outputs
