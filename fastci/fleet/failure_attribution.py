"""failure-attribution: compares a test's results across nodes and says what that means for each node.

Keyed by test, so all of a test's results arrive here. Per (test, bundle, hardware revision, config)
it keeps small values: when each node last passed, the recent failures, and per throughput metric
each node's newest run levels. What it learns about a node goes out as ``node-attribution`` events
keyed by node, which ``node-state`` reads (this processor never touches a node's state).

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
and it uses more of them (bench/fleet_slow_gate.py compares the two on real runs; on this host
neither was consistently less noisy).

Cost: a result rewrites its group (one entry per node that passed in the last two windows, and at
most ``MAX_FAILURES`` failures) and, when it carries throughput, one small value per metric; nothing
grows with the history.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import ClassVar

import numpy as np
import orjson
from pydantic import Field

from fastci.contracts.flaky_verdicts import FlakyVerdict
from fastci.core.events import Event, Record
from fastci.core.lazy import scipy_stats
from fastci.core.processor import KeySpace, Processor, StateReader, Step
from fastci.fleet.events import NodeAttribution
from fastci.inputs import Bundle, ResultEvent
from fastci.shared.flakiness import FAILING, PASSING
from fastci.shared.perfstats import as_performance, metric_direction

NAME = "failure-attribution"
WINDOW = timedelta(hours=72)
SOFTWARE_NODES = 3
MAX_FAULTY_NODES = 2
MIN_PASSING_NODES = 2
PEER_WINDOW = timedelta(hours=24)
MIN_PEER_NODES = 4
LEVELS_PER_NODE = 3  # a node's newest run levels kept per metric
MAX_FAILURES = 64
MAX_NODES = 4096
MAX_METRICS = 8
MAX_GROUPS = 64
TRIM = 0.2  # share of a run's samples cut from each end before averaging


class Failure(Record):
    result_id: str
    node_id: str
    time: datetime | None = None
    decided: bool = False  # judged: attributed, or not a node's fault
    attributed: bool = False  # currently attributed to its node
    attribution_id: str | None = None


class Group(Record):
    """One test on one bundle, hardware revision and config: who passed when, and what failed."""

    bundle: Bundle | None  # None: a plain repository's runs
    hardware_revision: str | None
    passed: dict[str, datetime | None] = Field(default_factory=dict, max_length=MAX_NODES)  # node -> newest pass
    failures: tuple[Failure, ...] = Field(default=(), max_length=MAX_FAILURES)
    metrics: tuple[str, ...] = Field(default=(), max_length=MAX_METRICS)  # those with a levels key


class Levels(Record):
    """One throughput metric of one group: each node's newest run levels (time, level as performance)."""

    by_node: dict[str, tuple[tuple[datetime | None, float], ...]] = Field(default_factory=dict, max_length=MAX_NODES)


class KnownGroups(Record):
    """The digests of a test's groups, oldest first."""

    digests: tuple[str, ...] = Field(default=(), max_length=MAX_GROUPS)


class FlakyMark(Record):
    """Whether the test is flaky, as ``flaky-verdicts`` last said."""

    flaky: bool = False


# The attribution's kinds of state, each under a test.
GROUPS = KeySpace("group", Group, ("digest",))  # one group: who passed when, what failed
LEVELS = KeySpace("levels", Levels, ("digest", "metric"))  # one group's levels of one metric
KNOWN_GROUPS = KeySpace("groups", KnownGroups)  # which groups the test has
FLAKY = KeySpace("flaky", FlakyMark)


def group_digest(event: ResultEvent) -> str:
    identity = orjson.dumps(
        [event.bundle.model_dump() if event.bundle else None, event.hardware_revision, event.config],
        option=orjson.OPT_SORT_KEYS,
    )
    return hashlib.sha256(identity).hexdigest()[:20]


def group_key(test_id: str, digest: str) -> str:
    return GROUPS.key(test_id, digest)


def levels_key(test_id: str, digest: str, metric: str) -> str:
    return LEVELS.key(test_id, digest, metric)


def groups_key(test_id: str) -> str:
    return KNOWN_GROUPS.key(test_id)


def flaky_key(test_id: str) -> str:
    return FLAKY.key(test_id)


def _known_groups(state: StateReader[Record], test_id: str) -> tuple[str, ...]:
    known = KNOWN_GROUPS.get(state, groups_key(test_id))
    return known.digests if known is not None else ()


class FailureAttributionProcessor(Processor[Record]):
    name: ClassVar[str] = NAME
    inputs: ClassVar[tuple[str, ...]] = (ResultEvent.TOPIC, FlakyVerdict.TOPIC)
    outputs: ClassVar[tuple[str, ...]] = (NodeAttribution.TOPIC,)
    key_spaces = (GROUPS, LEVELS, KNOWN_GROUPS, FLAKY)
    state_key: ClassVar[str] = "key"

    def ignores(self, event: Event) -> bool:
        return isinstance(event, ResultEvent) and event.status not in FAILING | PASSING  # skipped: no outcome

    def process(self, state: StateReader[Record], event: Event) -> Step[Record]:
        if isinstance(event, FlakyVerdict):
            return self._verdict(state, event)
        assert isinstance(event, ResultEvent)
        if self.ignores(event):
            return Step()
        test, digest = event.test_id, group_digest(event)
        key = group_key(test, digest)
        group = GROUPS.get(state, key) or Group.trusted(
            {
                "bundle": event.bundle,
                "hardware_revision": event.hardware_revision,
                "passed": {},
                "failures": (),
                "metrics": (),
            }
        )
        writes: dict[str, Record | None] = {}
        outputs: list[Event] = []
        self._remember_group(state, test, digest, writes)
        now = event.time
        passed, failures = _recent(group, now)
        if event.status in FAILING:
            if any(f.result_id == event.id for f in failures):
                return Step()  # applied before (the group is not the test's own entry: a crash can replay it)
            failures.append(
                Failure.trusted(
                    {
                        "result_id": event.id,
                        "node_id": event.node_id,
                        "time": now,
                        "decided": False,
                        "attributed": False,
                        "attribution_id": None,
                    }
                )
            )
        else:
            previous = passed.get(event.node_id)
            passed[event.node_id] = now if previous is None or now is None else max(previous, now)
            metrics = group.metrics
            for metric, level in _levels(event).items():
                outputs += self._throughput(state, writes, test, digest, metric, level, event)
                if metric not in metrics and len(metrics) < MAX_METRICS:
                    metrics = (*metrics, metric)
            group = Group.trusted({**group.__dict__, "metrics": metrics})
        flaky = FLAKY.get(state, flaky_key(test))
        if not (flaky is not None and flaky.flaky):
            outputs += _judge(group, passed, failures, test, event.id, clearing=event.status in FAILING)
        group = Group.trusted({**group.__dict__, "passed": passed, "failures": tuple(failures[-MAX_FAILURES:])})
        writes[key] = group
        return Step(writes=writes, outputs=outputs)

    def _remember_group(self, state, test: str, digest: str, writes) -> None:
        """A new stack or config for the test: note it; the oldest beyond MAX_GROUPS is forgotten."""
        digests = _known_groups(state, test)
        if digest in digests:
            return
        digests = (*digests, digest)
        for old in digests[:-MAX_GROUPS]:
            held = GROUPS.get(state, group_key(test, old))
            for metric in held.metrics if held is not None else ():
                writes[levels_key(test, old, metric)] = None
            writes[group_key(test, old)] = None
        writes[groups_key(test)] = KnownGroups.trusted({"digests": digests[-MAX_GROUPS:]})

    def _throughput(
        self, state, writes, test: str, digest: str, metric: str, level: float, event: ResultEvent
    ) -> list[Event]:
        """The run's level over its peers' (other nodes, the PEER_WINDOW before it); then note the level."""
        key = levels_key(test, digest, metric)
        held = LEVELS.get(state, key)
        by_node = dict(held.by_node) if held is not None else {}
        now = event.time
        peers: list[float] = []
        runs = 0
        for node, levels in by_node.items():
            if node == event.node_id:
                continue
            recent = [v for t, v in levels if now is None or t is None or now - PEER_WINDOW <= t <= now]
            if recent:
                peers.append(float(np.median(recent)))
                runs += len(recent)
        if (now, level) not in by_node.get(event.node_id, ()):  # (a replayed result is noted once)
            by_node[event.node_id] = (*by_node.get(event.node_id, ()), (now, level))[-LEVELS_PER_NODE:]
        if now is not None:  # forget nodes with nothing in the window
            by_node = {n: v for n, v in by_node.items() if any(t is None or t >= now - PEER_WINDOW for t, _ in v)}
        writes[key] = Levels.trusted({"by_node": by_node})
        if len(peers) < MIN_PEER_NODES:
            return []
        ratio = level / float(np.median(peers))
        return [
            NodeAttribution(
                node_id=event.node_id,
                kind="throughput",
                result_id=event.id,
                cause_id=event.id,
                test_id=test,
                bundle=event.bundle,
                hardware_revision=event.hardware_revision,
                time=now,
                metric=metric,
                ratio=ratio,
                peer_runs=runs,
                detail=f"{metric}: {ratio:.3f}x the median of {len(peers)} other nodes",
            )
        ]

    def _verdict(self, state: StateReader[Record], verdict: FlakyVerdict) -> Step[Record]:
        writes: dict[str, Record | None] = {flaky_key(verdict.test_id): FlakyMark.trusted({"flaky": verdict.flaky})}
        outputs: list[Event] = []
        if verdict.flaky:  # a flaky test's failures say nothing about nodes: withdraw what it said
            for digest in _known_groups(state, verdict.test_id):
                key = group_key(verdict.test_id, digest)
                group = GROUPS.get(state, key)
                if group is None:
                    continue
                failures = list(group.failures)
                cleared = _clear(
                    group,
                    failures,
                    [i for i, f in enumerate(failures) if f.attributed],
                    verdict.test_id,
                    verdict.id,
                    "the test was marked flaky",
                )
                if cleared:
                    outputs += cleared
                    writes[key] = Group.trusted({**group.__dict__, "failures": tuple(failures)})
        return Step(writes=writes, outputs=outputs)


def _levels(event: ResultEvent) -> dict[str, float]:
    levels: dict[str, float] = {}
    for metric in sorted(event.metrics):
        samples = event.metrics[metric]
        direction = metric_direction(metric)
        if direction is None or not samples or any(s <= 0 for s in samples) or len(levels) >= MAX_METRICS:
            continue
        levels[metric] = float(scipy_stats().trim_mean(as_performance(samples, direction), TRIM))
    return levels


def _recent(group: Group, now: datetime | None) -> tuple[dict[str, datetime | None], list[Failure]]:
    """Passes and failures a failure in the window could still be judged against (two windows back)."""
    if now is None:
        return dict(group.passed), list(group.failures)
    horizon = now - 2 * WINDOW
    passed = {n: t for n, t in group.passed.items() if t is None or t >= horizon}
    return passed, [f for f in group.failures if f.time is None or f.time >= horizon]


def _near(time: datetime | None, other: datetime | None) -> bool:
    return time is None or other is None or abs(other - time) <= WINDOW


def _judge(
    group: Group,
    passed: dict[str, datetime | None],
    failures: list[Failure],
    test_id: str,
    cause_id: str,
    clearing: bool,
) -> list[Event]:
    """Decide the failures the new result lets us decide. A pass can only decide waiting failures; a
    failure can also show that failures attributed earlier were a software regression."""
    outputs: list[Event] = []
    for i, failure in enumerate(failures):
        if failure.decided and not (clearing and failure.attributed):
            continue
        failing = {f.node_id for f in failures if _near(failure.time, f.time)}
        if len(failing) >= SOFTWARE_NODES:
            if failure.attributed:
                outputs += _clear(
                    group,
                    failures,
                    [i],
                    test_id,
                    cause_id,
                    f"the test failed on {len(failing)} nodes: a software regression, not a node fault",
                )
            else:
                failures[i] = Failure.trusted({**failure.__dict__, "decided": True})
            continue
        if failure.decided:
            continue
        passing = [n for n, t in passed.items() if n != failure.node_id and _near(failure.time, t)]
        if len(failing) <= MAX_FAULTY_NODES and len(passing) >= MIN_PASSING_NODES:
            attribution = NodeAttribution(
                node_id=failure.node_id,
                kind="failure",
                result_id=failure.result_id,
                cause_id=cause_id,
                test_id=test_id,
                bundle=group.bundle,
                hardware_revision=group.hardware_revision,
                time=failure.time,
                failing_nodes=len(failing),
                passing_nodes=len(passing),
                detail=f"{test_id} failed on {failure.node_id} and passed on {len(passing)} other node(s) "
                f"with the same bundle and config",
            )
            failures[i] = Failure.trusted(
                {**failure.__dict__, "decided": True, "attributed": True, "attribution_id": attribution.id}
            )
            outputs.append(attribution)
    return outputs


def _clear(
    group: Group, failures: list[Failure], indexes: list[int], test_id: str, cause_id: str, why: str
) -> list[Event]:
    outputs: list[Event] = []
    for i in indexes:
        failure = failures[i]
        outputs.append(
            NodeAttribution(
                node_id=failure.node_id,
                kind="cleared",
                result_id=failure.result_id,
                cause_id=cause_id,
                test_id=test_id,
                bundle=group.bundle,
                hardware_revision=group.hardware_revision,
                time=failure.time,
                clears=failure.attribution_id,
                detail=f"withdrawn: {why}",
            )
        )
        failures[i] = Failure.trusted({**failure.__dict__, "decided": True, "attributed": False})
    return outputs
