"""node-state: each node's health state machine, and reruns of what failed on a node it quarantines.

Keyed by node. Reads ``node-health`` (the node's signals), ``results`` repartitioned by node (which
tests failed there: the reruns' contexts) and ``node-attribution`` (what comparing tests across
nodes says about this node: failures that passed elsewhere, throughput ratios to other nodes).

    healthy ──evidence──> suspect ──more evidence──> quarantined ──diagnostic_started──> diagnosing
       ^  <──evidence expired or withdrawn──┘            ^   (quarantine rules also act from healthy)   │
       └─────────────────── diagnostic passed ──────────┼──────────────────────────────────────────────┘
                                                         └──────────── diagnostic failed ──────────────┘

The thresholds are ``fastci.fleet.rules`` (the README's table). Time comes from events: windows
end at the newest event time seen for the node. Only a passing diagnostic returns a quarantined or
diagnosing node to service, and it starts the node's evidence afresh.

On entering quarantine it asks for one ``run-requested`` per test that failed on the node in the
``rerun_window`` before (the newest failure of each test): work class 'rerun', the failed run's
commit, bundle, config and seed, its hardware revision, and ``avoid_nodes`` naming the node. The
request's id derives from the failed result's id (purpose 'quarantine-rerun'), so a replay never asks
twice; a failure that ran in the window before the node's latest quarantine but arrives after it
(even after the node is back) is asked for when it arrives.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from pydantic import Field

from fastci.contracts.node_states import OUT_OF_SERVICE_STATES, NodeEvidence, NodeState, NodeStateChanged
from fastci.contracts.runs import RunRequested
from fastci.core.events import Config, Event, Record
from fastci.core.processor import Processor, StateReader, Step, UnitOfWork
from fastci.fleet.events import NodeAttribution
from fastci.fleet.rules import RULES, Assessment, NodeRules, assess
from fastci.inputs import Bundle, NodeHealthEvent, ResultEvent
from fastci.shared.flakiness import FAILING
from fastci.shared.perfstats import seed_from

NAME = "node-state"
HELD_EVIDENCE = 64
HELD_FAILURES = 32
REMEMBERED_RERUNS = 64
RERUN_PURPOSE = "quarantine-rerun"  # distinct from a person's `fastci rerun` of the same result


class FailedRun(Record):
    """What a rerun of a failed result must repeat."""

    result_id: str
    run_id: str
    test_id: str
    repo: str
    commit: str
    bundle: Bundle
    hardware_revision: str
    time: datetime | None = None
    seed: int | None = None
    config: Config = Field(default_factory=dict)
    repeats: int = 1
    chips: int = 0


class NodeHealth(Record):
    state: NodeState = "healthy"
    since: datetime | None = None
    rule: str | None = None
    hardware_revision: str | None = None
    pool: str = "default"
    clock: datetime | None = None  # the newest event time seen for the node
    evidence: tuple[NodeEvidence, ...] = Field(default=(), max_length=HELD_EVIDENCE)
    ratios: tuple[NodeEvidence, ...] = Field(default=(), max_length=64)
    hot_readings: int = 0  # consecutive temperature readings over the limit
    failed: tuple[FailedRun, ...] = Field(default=(), max_length=HELD_FAILURES)
    rerun: tuple[str, ...] = Field(default=(), max_length=REMEMBERED_RERUNS)  # failed results already asked again
    quarantined_at: datetime | None = None  # the latest entry into quarantine (late failures before it are rerun)


class NodeStateProcessor(Processor[NodeHealth]):
    name: ClassVar[str] = NAME
    inputs: ClassVar[tuple[str, ...]] = (NodeHealthEvent.TOPIC, ResultEvent.TOPIC, NodeAttribution.TOPIC)
    outputs: ClassVar[tuple[str, ...]] = (NodeStateChanged.TOPIC, RunRequested.TOPIC)
    state_model: ClassVar[type[Record]] = NodeHealth
    state_key: ClassVar[str] = "node_id"
    partition_by = {ResultEvent.TOPIC: "node_id"}

    def __init__(self, rules: NodeRules = RULES) -> None:
        self.rules = rules

    def process(self, state: StateReader[NodeHealth], event: Event) -> Step[NodeHealth]:
        node = self.partition_key(event)
        held = state.get(node) or NodeHealth()
        if isinstance(event, NodeHealthEvent) and self._routine(held, event):  # most signals: only time moves
            return Step(writes={node: _moved_on(held, event.time)})
        if isinstance(event, ResultEvent) and held.state == "healthy" and event.status not in FAILING:
            # a pass on a healthy node: nothing to hold, nothing to rerun, and time cannot make it suspect
            return Step(
                writes={node: _moved_on(held, event.time, hardware_revision=event.hardware_revision, pool=event.pool)}
            )
        work = _Work(state, self.rules, node, held, event.time, event.id)
        if isinstance(event, NodeHealthEvent):
            work.signal(event)
        elif isinstance(event, ResultEvent):
            work.result(event)
        else:
            assert isinstance(event, NodeAttribution)
            work.attribution(event)
        work.finish()
        return work.step()

    def _routine(self, held: NodeHealth, event: NodeHealthEvent) -> bool:
        """A signal that says all is well, to a healthy node: nothing to hold, and the passing of time
        cannot make a healthy node suspect (windows only forget)."""
        if held.state != "healthy":
            return False
        if event.kind == "heartbeat":
            return event.value <= self.rules.heartbeat_suspect_s
        if event.kind == "temperature":
            return event.value <= self.rules.temperature_limit_c and held.hot_readings == 0
        return event.kind in ("ecc", "nccl_timeout") and event.value <= 0


def _moved_on(held: NodeHealth, time: datetime | None, **updates) -> NodeHealth:
    """The node's state with its clock moved to ``time`` (and ``updates``), nothing else changed."""
    clock = held.clock if time is None else time if held.clock is None else max(held.clock, time)
    return NodeHealth.trusted({**held.__dict__, "clock": clock, **updates})


class _Work(UnitOfWork[NodeHealth]):
    """One event's effect on one node: ``held`` is the node's record as the event changes it, stored
    under the node's key by ``finish``."""

    def __init__(
        self,
        state: StateReader[NodeHealth],
        rules: NodeRules,
        node: str,
        held: NodeHealth,
        time: datetime | None,
        cause_id: str,
    ) -> None:
        super().__init__(state)
        self.rules, self.node, self.cause_id = rules, node, cause_id
        clock = held.clock if time is None else time if held.clock is None else max(held.clock, time)
        self.time = time or clock  # when this event happened (a result without a time: the node's clock)
        self.held = held.model_copy(update={"clock": clock})

    @property
    def clock(self) -> datetime | None:
        return self.held.clock

    # ----- inputs

    def signal(self, event: NodeHealthEvent) -> None:
        kind, value = event.kind, event.value
        item = NodeEvidence(kind=kind, event_id=event.id, time=event.time, value=value, detail=event.detail[:200])
        if kind == "diagnostic_started":
            if self.held.state == "quarantined":
                self._move("diagnosing", "diagnostic-started", "a diagnostic run started", (item,))
            return
        if kind == "diagnostic":
            self._diagnostic(item, passed=value >= 0.5)
            return
        if kind == "temperature":
            hot = value > self.rules.temperature_limit_c
            self.held = self.held.model_copy(update={"hot_readings": self.held.hot_readings + 1 if hot else 0})
            if hot:
                self._hold(item)
        elif kind == "heartbeat":
            if value > self.rules.heartbeat_suspect_s:
                self._hold(item)
        elif kind in ("ecc", "nccl_timeout"):
            if value > 0:
                self._hold(item)
        else:  # xid
            self._hold(item)
        self._reassess()

    def result(self, event: ResultEvent) -> None:
        revision = event.hardware_revision or self.held.hardware_revision
        self.held = self.held.model_copy(update={"hardware_revision": revision, "pool": event.pool})
        # A rerun repeats a run on its stack and hardware: a plain repository's results name neither.
        if event.status in FAILING and event.bundle is not None and event.hardware_revision is not None:
            failed = FailedRun(
                result_id=event.id,
                run_id=event.run_id,
                test_id=event.test_id,
                repo=event.repo,
                commit=event.commit,
                bundle=event.bundle,
                hardware_revision=event.hardware_revision,
                time=event.time,
                seed=event.seed,
                config=dict(event.config),
                repeats=max([len(s) for s in event.metrics.values()] or [1]),
                chips=event.chips,
            )
            self.held = self.held.model_copy(update={"failed": (*self.held.failed, failed)[-HELD_FAILURES:]})
            late = failed.time is not None or self.held.state in OUT_OF_SERVICE_STATES
            if late and self._rerunnable(failed, self.held.quarantined_at):  # ran before a quarantine, reported after
                self._request_reruns([failed])
        self._reassess()

    def attribution(self, event: NodeAttribution) -> None:
        if self.time is None:  # neither the result nor anything before it said when: no window to count it in
            return
        if event.kind == "throughput" and event.ratio is not None:
            item = NodeEvidence(
                kind="throughput",
                event_id=event.id,
                time=self.time,
                value=event.ratio,
                test_id=event.test_id,
                detail=f"{event.metric} vs {event.peer_runs} runs of other nodes",
            )
            self.held = self.held.model_copy(update={"ratios": (*self.held.ratios, item)[-64:]})
        elif event.kind == "failure":
            self._hold(
                NodeEvidence(
                    kind="failure", event_id=event.id, time=self.time, test_id=event.test_id, detail=event.detail[:200]
                )
            )
        elif event.kind == "cleared":
            kept = tuple(e for e in self.held.evidence if e.event_id != event.clears)
            self.held = self.held.model_copy(update={"evidence": kept})
        self._reassess()

    # ----- the state machine

    def _reassess(self) -> None:
        if self.held.state in OUT_OF_SERVICE_STATES or self.clock is None:
            return
        found = self._assess()
        if found.level == "quarantine":
            self._move("quarantined", found.rule, found.reason, found.evidence)
        elif found.level == "suspect" and self.held.state == "healthy":
            self._move("suspect", found.rule, found.reason, found.evidence)
        elif found.level == "healthy" and self.held.state == "suspect":
            self._move("healthy", "evidence-expired", f"no longer {self.held.rule}: {found.reason}", ())

    def _assess(self) -> Assessment:
        assert self.clock is not None
        return assess(
            self.held.evidence,
            self.held.hot_readings,
            self.held.ratios,
            self.clock,
            seed_from(self.node, self.cause_id),
            self.rules,
        )

    def _diagnostic(self, item: NodeEvidence, passed: bool) -> None:
        if passed:
            if self.held.state != "healthy":
                note = "" if self.held.state != "quarantined" else " (no diagnostic start was seen)"
                self._move("healthy", "diagnostics-passed", f"diagnostics passed{note}", (item,))
                self.held = self.held.model_copy(update={"evidence": (), "ratios": (), "hot_readings": 0, "failed": ()})
        elif self.held.state != "quarantined":
            self._move("quarantined", "diagnostics-failed", "diagnostics failed", (item,))

    def _move(self, state: NodeState, rule: str | None, reason: str, evidence) -> None:
        previous = self.held.state
        time = self.time if self.held.since is None else max(self.time, self.held.since)
        self.held = self.held.model_copy(update={"state": state, "since": time, "rule": rule})
        if state == "quarantined" and previous not in OUT_OF_SERVICE_STATES:
            self.held = self.held.model_copy(update={"quarantined_at": time})
        change_index = len(self.outputs)
        reruns = self._request_reruns(self._failures_before(time)) if state == "quarantined" else 0
        self.outputs.insert(
            change_index,
            NodeStateChanged(
                node_id=self.node,
                state=state,
                previous=previous,
                time=time,
                cause_id=self.cause_id,
                rule=rule,
                reason=f"{state}: {reason}"[:4096],
                hardware_revision=self.held.hardware_revision,
                evidence=tuple(evidence)[-32:],
                reruns_requested=reruns,
                pool=self.held.pool,
            ),
        )

    # ----- reruns

    def _rerunnable(self, failed: FailedRun, quarantined_at: datetime | None) -> bool:
        if failed.result_id in self.held.rerun or quarantined_at is None:
            return False
        if failed.time is None:
            return True
        return quarantined_at - self.rules.rerun_window <= failed.time <= quarantined_at

    def _failures_before(self, quarantined_at: datetime) -> list[FailedRun]:
        newest: dict[str, FailedRun] = {}
        for failed in self.held.failed:
            if self._rerunnable(failed, quarantined_at):
                newest[failed.test_id] = failed  # the newest failure of each test
        return list(newest.values())

    def _request_reruns(self, failures: list[FailedRun]) -> int:
        for failed in failures:
            self.emit(
                RunRequested(
                    cause_id=failed.result_id,
                    purpose=RERUN_PURPOSE,
                    test_id=failed.test_id,
                    repo=failed.repo,
                    commit=failed.commit,
                    bundle=failed.bundle,
                    hardware_revision=failed.hardware_revision,
                    work_class="rerun",
                    repeats=failed.repeats,
                    seed=failed.seed,
                    config=failed.config,
                    avoid_nodes=(self.node,),
                    requested_by=NAME,
                    pool=self.held.pool,
                    chips=failed.chips,
                    reason=f"rerun {failed.run_id} on a healthy {failed.hardware_revision} node: it failed on "
                    f"{self.node}, quarantined ({self.held.rule})",
                )
            )
        asked = tuple(f.result_id for f in failures)
        if asked:
            self.held = self.held.model_copy(update={"rerun": (*self.held.rerun, *asked)[-REMEMBERED_RERUNS:]})
        return len(asked)

    # ----- state

    def _hold(self, item: NodeEvidence) -> None:
        self.held = self.held.model_copy(update={"evidence": (*self.held.evidence, item)[-HELD_EVIDENCE:]})

    def finish(self) -> None:
        """Store the node's record, forgetting evidence, ratios and failures older than any rule looks back."""
        if self.clock is not None:
            horizon = self.clock - max(self.rules.window, self.rules.slow.window, self.rules.rerun_window)
            keep = lambda time: time is None or time > horizon  # noqa: E731
            self.held = self.held.model_copy(
                update={
                    "evidence": tuple(e for e in self.held.evidence if keep(e.time)),
                    "ratios": tuple(e for e in self.held.ratios if keep(e.time))[-self.rules.slow.max_runs :],
                    "failed": tuple(f for f in self.held.failed if keep(f.time)),
                }
            )
        self.set(self.node, self.held)
