"""baseline-guard: results from nodes that were not healthy must not count as evidence.

Keyed by node: it folds ``node-state-changed`` and the node's results (repartitioned by node_id)
and emits a ``baseline-exclusions`` event, keyed by test, for every result that ran while its node
was suspect, quarantined or diagnosing, including results that arrived before the node's state
changed (a node is usually sick before anyone says so: results from ``LOOKBACK`` before the change
count too). Consumers drop the excluded results from baselines whenever the exclusion arrives.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import ClassVar

from pydantic import Field

from fastci.contracts.baseline_exclusions import BaselineExclusion
from fastci.contracts.node_states import UNTRUSTED_STATES, NodeStateChanged
from fastci.core.events import Event, Record
from fastci.core.processor import KeySpace, Processor, StateReader, Step
from fastci.core.system import FEEDBACK_LEAD_MS
from fastci.inputs import ResultEvent

LOOKBACK = timedelta(hours=24)
RUNS_PER_HOUR = 256  # per node; a node hosts a few dozen runs an hour
TRANSITIONS = 16


class Transition(Record):
    state: str
    time: datetime
    reason: str = ""
    cause_id: str = ""  # the node-state-changed event (empty in state written before it was kept)


class RecentRun(Record):
    result_id: str
    test_id: str
    time: datetime | None
    excluded: bool = False


class HourRuns(Record):
    """One hour of a node's runs (a compound key, ``hour_key``).

    The node's runs of the lookback are kept by hour under keys of their own, so a result rewrites
    only the runs of its hour, not a whole day's: every write is a changelog record on Kafka, and a
    value holding a day of runs was 38 KB, rewritten for every batch.
    """

    runs: tuple[RecentRun, ...] = Field(default=(), max_length=RUNS_PER_HOUR)


class NodeRecord(Record):
    """The node's state (its own key, written per result): its changes of state, and which hours have runs."""

    transitions: tuple[Transition, ...] = Field(default=(), max_length=TRANSITIONS)
    hours: tuple[str, ...] = Field(default=(), description="the hours that have runs, oldest first")

    def state_at(self, time: datetime | None) -> Transition | None:
        """The transition in force at ``time`` (the latest one when time is unknown)."""
        applicable = [t for t in self.transitions if time is None or t.time <= time]
        return max(applicable, key=lambda t: t.time) if applicable else None

    def untrusting(self, time: datetime | None) -> Transition | None:
        """The change that untrusts a run at ``time``, if any: the earliest change to an untrusted
        state whose reach holds it, from ``LOOKBACK`` before the change to the next change to a
        trusted state. The same rule the change applies to the runs it finds when it comes second,
        so a result is judged alike whichever of the two arrives first."""
        if time is None:
            latest = self.state_at(None)
            return latest if latest is not None and latest.state in UNTRUSTED_STATES else None
        for i, change in enumerate(self.transitions):  # in time order
            if change.time - LOOKBACK > time:
                break
            if change.state in UNTRUSTED_STATES and not _trusted_between(self.transitions[i + 1 :], change.time, time):
                return change
        return None


def _trusted_between(transitions: tuple[Transition, ...], after: datetime, until: datetime) -> bool:
    return any(t.state not in UNTRUSTED_STATES and after < t.time <= until for t in transitions)


_NO_TIME = "none"  # the hour of results that say no time: kept until the newer hours push it out
# The lookback's hours, whole, plus the no-time one, plus how far this processor may run ahead of
# node-state (a feedback pipe): a change that comes that late still finds every run it reaches back over.
_KEPT_HOURS = int((LOOKBACK + timedelta(milliseconds=FEEDBACK_LEAD_MS)) / timedelta(hours=1)) + 2


def hour_of(time: datetime | None) -> str:
    return _NO_TIME if time is None else time.strftime("%Y-%m-%dT%H")


# The guard's kinds of state, each under a node.
NODES = KeySpace("", NodeRecord)  # the node's own key
HOURS = KeySpace("runs", HourRuns, ("hour",))


def hour_key(node_id: str, hour: str) -> str:
    return HOURS.key(node_id, hour)


def _node(state: StateReader[Record], node_id: str) -> NodeRecord:
    """The node's record; a node never seen has no changes of state and no runs."""
    return NODES.get(state, NODES.key(node_id)) or NodeRecord()


def _runs(state: StateReader[Record], node_id: str, hour: str) -> tuple[RecentRun, ...]:
    held = HOURS.get(state, hour_key(node_id, hour))
    return held.runs if held is not None else ()


class BaselineGuardProcessor(Processor[Record]):
    name: ClassVar[str] = "baseline-guard"
    inputs: ClassVar[tuple[str, ...]] = (NodeStateChanged.TOPIC, ResultEvent.TOPIC)
    outputs: ClassVar[tuple[str, ...]] = (BaselineExclusion.TOPIC,)
    key_spaces = (NODES, HOURS)
    state_key: ClassVar[str] = "node_id"
    partition_by = {ResultEvent.TOPIC: "node_id"}

    def process(self, state: StateReader[Record], event: Event) -> Step[Record]:
        if isinstance(event, NodeStateChanged):
            return self._state_changed(state, _node(state, event.node_id), event)
        assert isinstance(event, ResultEvent)
        node = event.node_id
        record = _node(state, node)
        untrusting = record.untrusting(event.time)
        excluded = untrusting is not None
        hour = hour_of(event.time)
        # Built from validated values, without validating again: this runs for every result.
        run = RecentRun.trusted(
            {"result_id": event.id, "test_id": event.test_id, "time": event.time, "excluded": excluded}
        )
        writes: dict[str, Record | None] = {
            hour_key(node, hour): HourRuns.trusted({"runs": (*_runs(state, node, hour), run)[-RUNS_PER_HOUR:]})
        }
        if hour not in record.hours:
            hours = sorted((*record.hours, hour), key=lambda h: (h != _NO_TIME, h))
            writes.update({hour_key(node, gone): None for gone in hours[:-_KEPT_HOURS]})
            record = record.model_copy(update={"hours": tuple(hours[-_KEPT_HOURS:])})
        writes[node] = record
        outputs = [_exclusion(run, node, untrusting, untrusting.cause_id or event.id)] if untrusting else []
        return Step(writes=writes, outputs=outputs)

    def _state_changed(self, state: StateReader[Record], record: NodeRecord, event: NodeStateChanged) -> Step[Record]:
        change = Transition(state=event.state, time=event.time, reason=event.reason, cause_id=event.id)
        transitions = tuple(sorted((*record.transitions, change), key=lambda t: t.time))[-TRANSITIONS:]
        writes: dict[str, Record | None] = {event.node_id: record.model_copy(update={"transitions": transitions})}
        outputs: list[Event] = []
        if event.state in UNTRUSTED_STATES:
            since = event.time - LOOKBACK
            for hour in record.hours:
                if hour != _NO_TIME and hour < hour_of(since):
                    continue
                key = hour_key(event.node_id, hour)
                runs = list(_runs(state, event.node_id, hour))
                for i, run in enumerate(runs):
                    if run.excluded or (run.time is not None and run.time < since):
                        continue
                    if run.time is None or not _trusted_between(transitions, change.time, run.time):
                        runs[i] = run.model_copy(update={"excluded": True})
                        outputs.append(_exclusion(run, event.node_id, change, change.cause_id))
                writes[key] = HourRuns(runs=tuple(runs))
        return Step(writes=writes, outputs=outputs)


def _exclusion(run: RecentRun, node_id: str, state: Transition, cause_id: str) -> BaselineExclusion:
    reason = f"node {node_id} {state.state} since {state.time.isoformat()}" + (
        f": {state.reason}" if state.reason else ""
    )
    return BaselineExclusion(
        result_id=run.result_id,
        test_id=run.test_id,
        node_id=node_id,
        node_state=state.state,
        reason=reason[:4096],
        cause_id=cause_id,
    )
