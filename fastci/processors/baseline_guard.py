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

from fastci.events import Event, ResultEvent
from fastci.events.base import Record
from fastci.events.fleet import UNTRUSTED_STATES, NodeStateChanged
from fastci.events.regression import BaselineExclusion
from fastci.processors.base import Processor, StateReader, Step

LOOKBACK = timedelta(hours=24)
RECENT_RUNS = 256
TRANSITIONS = 16


class Transition(Record):
    state: str
    time: datetime
    reason: str = ""


class RecentRun(Record):
    result_id: str
    test_id: str
    time: datetime | None
    excluded: bool = False


class NodeRecord(Record):
    transitions: tuple[Transition, ...] = Field(default=(), max_length=TRANSITIONS)
    recent: tuple[RecentRun, ...] = Field(default=(), max_length=RECENT_RUNS)

    def state_at(self, time: datetime | None) -> Transition | None:
        """The transition in force at ``time`` (the latest one when time is unknown)."""
        applicable = [t for t in self.transitions if time is None or t.time <= time]
        return max(applicable, key=lambda t: t.time) if applicable else None


class BaselineGuardProcessor(Processor[NodeRecord]):
    name: ClassVar[str] = "baseline-guard"
    inputs: ClassVar[tuple[str, ...]] = (NodeStateChanged.TOPIC, ResultEvent.TOPIC)
    outputs: ClassVar[tuple[str, ...]] = (BaselineExclusion.TOPIC,)
    state_model: ClassVar[type[Record]] = NodeRecord
    state_key: ClassVar[str] = "node_id"
    partition_by = {ResultEvent.TOPIC: "node_id"}

    def process(self, state: StateReader[NodeRecord], event: Event) -> Step[NodeRecord]:
        if isinstance(event, NodeStateChanged):
            return self._state_changed(state.get(event.node_id) or NodeRecord(), event)
        assert isinstance(event, ResultEvent)
        record = state.get(event.node_id) or NodeRecord()
        in_force = record.state_at(event.time)
        excluded = in_force is not None and in_force.state in UNTRUSTED_STATES
        # Both built from validated values, without validating again: this runs for every result.
        run = RecentRun.trusted({"result_id": event.id, "test_id": event.test_id, "time": event.time, "excluded": excluded})
        after = NodeRecord.trusted({"transitions": record.transitions, "recent": (*record.recent, run)[-RECENT_RUNS:]})
        outputs = [_exclusion(run, event.node_id, in_force, event.id)] if excluded and in_force else []
        return Step(writes={event.node_id: after}, outputs=outputs)

    def _state_changed(self, record: NodeRecord, event: NodeStateChanged) -> Step[NodeRecord]:
        change = Transition(state=event.state, time=event.time, reason=event.reason)
        transitions = tuple(sorted((*record.transitions, change), key=lambda t: t.time))[-TRANSITIONS:]
        recent, outputs = list(record.recent), []
        if event.state in UNTRUSTED_STATES:
            since = event.time - LOOKBACK
            for i, run in enumerate(recent):
                if not run.excluded and (run.time is None or run.time >= since):
                    recent[i] = run.model_copy(update={"excluded": True})
                    outputs.append(_exclusion(run, event.node_id, change, event.id))
        return Step(writes={event.node_id: NodeRecord(transitions=transitions, recent=tuple(recent))}, outputs=outputs)


def _exclusion(run: RecentRun, node_id: str, state: Transition, cause_id: str) -> BaselineExclusion:
    reason = f"node {node_id} {state.state} since {state.time.isoformat()}" + (f": {state.reason}" if state.reason else "")
    return BaselineExclusion(
        result_id=run.result_id, test_id=run.test_id, node_id=node_id, node_state=state.state,
        reason=reason[:4096], cause_id=cause_id,
    )
