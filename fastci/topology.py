"""The one place that names every topic, every processor and the order they run in.

The runtimes (``fastci/runtime/``), the faust app (``streams/``), the views and the simulator take
``SYSTEM`` as a value; nothing below this file knows the whole. The pipes between processors follow
from what each reads and writes (``SYSTEM.pipes()``); ``docs/topology.md`` lists them, and
``tests/test_topology.py`` checks the declaration, the documented order and the order the embedded
runtime runs.
"""

from __future__ import annotations

from typing import Any

from fastci.contracts.owner_maps import OwnerMap
from fastci.core.codec import decode_as
from fastci.core.dead_letters import DeadLetter
from fastci.core.events import Event
from fastci.core.system import System, model_in
from fastci.inputs import CommitEvent, EvidenceEvent, NodeHealthEvent, ResultEvent
from fastci.regression.references import GoldenReference
from fastci.release.events import ReleaseEvent
from fastci.scheduling.events import ClockTick, PoolConfig
from fastci.selection.events import SelectionPolicy

# What producers append. The rest (the decisions, the processors) is imported when first asked for
# (``__getattr__`` below): a producer, such as the pytest plugins, needs these and nothing more, and
# importing every capability's events and processors (numpy, scipy) costs a pytest session more
# than half a second.
INPUTS: tuple[type[Event], ...] = (
    CommitEvent,
    EvidenceEvent,
    ResultEvent,
    NodeHealthEvent,
    GoldenReference,
    OwnerMap,
    ClockTick,  # the pool's time (the simulator or a CI driver publishes it)
    PoolConfig,  # the pool's shape
    ReleaseEvent,  # written by `fastci release`, a producer like `fastci owners publish`
    SelectionPolicy,  # a repository's selection settings (`fastci selection policy`)
)


def _decisions() -> tuple[type[Event], ...]:
    """What processors emit."""
    from fastci.contracts.baseline_exclusions import BaselineExclusion
    from fastci.contracts.flaky_verdicts import FlakyVerdict
    from fastci.contracts.node_states import NodeStateChanged
    from fastci.contracts.regression_alerts import RegressionAlert
    from fastci.contracts.runs import RunRequested
    from fastci.contracts.test_plans import TestPlan
    from fastci.fleet.events import FlakyTest, NodeAttribution, TestStatusChanged
    from fastci.regression.events import BisectPlan, BisectStep, GateResult
    from fastci.scheduling.events import ScheduleEvent
    from fastci.selection.events import Selection, SelectionAudit

    return (
        TestStatusChanged,
        NodeStateChanged,
        NodeAttribution,
        FlakyVerdict,
        FlakyTest,
        GateResult,
        BaselineExclusion,
        RegressionAlert,
        BisectPlan,
        BisectStep,
        RunRequested,
        Selection,
        SelectionAudit,
        TestPlan,
        ScheduleEvent,
    )


def _system() -> System:
    """SYSTEM: every topic, and the processors in the order they run."""
    from fastci.fleet.failure_attribution import FailureAttributionProcessor
    from fastci.fleet.flaky_detector import FlakyDetectorProcessor
    from fastci.fleet.flaky_owners import FlakyOwnersProcessor
    from fastci.fleet.node_state import NodeStateProcessor
    from fastci.fleet.test_history import TestHistoryProcessor
    from fastci.planning.processor import TestPlanProcessor
    from fastci.regression.baseline_guard import BaselineGuardProcessor
    from fastci.regression.bisect import BisectProcessor
    from fastci.regression.bisect_planner import BisectPlannerProcessor
    from fastci.regression.correctness_gates import CorrectnessGatesProcessor
    from fastci.regression.detector import RegressionDetectorProcessor
    from fastci.scheduling.processor import PoolSchedulerProcessor
    from fastci.selection.processor import SelectionProcessor

    return System(
        inputs=INPUTS,
        decisions=_decisions(),
        # Writers before their readers, so one embedded round settles a chain. Where a pipe must run back
        # (the fleet's loop), it is declared below and its events reach the reader in the next round.
        processors=(
            TestHistoryProcessor,
            CorrectnessGatesProcessor,
            BaselineGuardProcessor,
            FlakyDetectorProcessor,
            FlakyOwnersProcessor,
            RegressionDetectorProcessor,
            BisectPlannerProcessor,
            BisectProcessor,
            SelectionProcessor,  # and the audit of its selections, which widens the next ones
            TestPlanProcessor,
            FailureAttributionProcessor,
            NodeStateProcessor,
            PoolSchedulerProcessor,
        ),
        feedback={
            # The fleet's loop: node states -> exclusions -> flaky verdicts -> attributions -> node states.
            # node-state runs last, so a node's new state reaches baseline-guard in the next round.
            ("node-state", "baseline-guard"): "node states exclude a sick node's results from baselines",
            # bisect's own alerts (culprit, unresolved) are not 'detected' alerts: the planner drops them.
            ("bisect", "bisect-planner"): "bisect ends an alert that the planner started; the planner ignores it",
        },
    )


# The names most callers want, spelled once.
INPUT_TOPICS: tuple[str, ...] = tuple(model.TOPIC for model in INPUTS)
INPUT_MODELS: dict[str, type[Event]] = {model.TOPIC: model for model in INPUTS}
DEAD_LETTERS = DeadLetter.TOPIC


def model_for(topic: str, raw: bytes = b"") -> type[Event]:
    """The event model a topic carries; ``InvalidEvent`` for a topic the system does not name."""
    model = INPUT_MODELS.get(topic)
    return model if model is not None else model_in(__getattr__("TOPICS"), topic, raw)


def decode(topic: str, raw: bytes) -> Event:
    """Parse and validate one record of ``topic``; raise ``InvalidEvent`` saying what is wrong."""
    return decode_as(model_for(topic, raw), raw)


def __getattr__(name: str) -> Any:
    """``SYSTEM`` and what needs the decisions or the processors, built at the first use (PEP 562)."""
    if name in ("DECISIONS", "TOPICS"):
        decisions = _decisions()
        topics = {model.TOPIC: model for model in (*INPUTS, *decisions, DeadLetter)}
        globals().update(DECISIONS=decisions, TOPICS=topics)
    elif name in ("SYSTEM", "ALL_PROCESSORS", "build_processors"):
        system = _system()
        globals().update(SYSTEM=system, ALL_PROCESSORS=system.processors, build_processors=system.build)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return globals()[name]
