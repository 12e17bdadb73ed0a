"""Every topic fastci knows, the event model it carries and the field it is keyed by."""

from __future__ import annotations

from fastci.core.codec import InvalidEvent, decode_as, unknown_topic
from fastci.core.events import Event
from fastci.fleet.events import FlakyTest, FlakyVerdict, NodeAttribution, NodeStateChanged
from fastci.regression.references import GoldenReference, OwnerMap
from fastci.producer.events import CommitEvent, EvidenceEvent, NodeHealthEvent, ResultEvent
from fastci.core.dead_letters import DeadLetter
from fastci.fleet.events import TestStatusChanged
from fastci.planning.events import TestPlan
from fastci.release.events import ReleaseEvent
from fastci.regression.events import BaselineExclusion, BisectPlan, BisectStep, GateResult, RegressionAlert
from fastci.scheduling.runs import RunRequested
from fastci.scheduling.events import ClockTick, PoolConfig, ScheduleEvent
from fastci.selection.events import Selection
from fastci.regression.baseline_guard import BaselineGuardProcessor
from fastci.regression.bisect import BisectProcessor
from fastci.regression.bisect_planner import BisectPlannerProcessor
from fastci.regression.correctness_gates import CorrectnessGatesProcessor
from fastci.fleet.failure_attribution import FailureAttributionProcessor
from fastci.fleet.flaky_detector import FlakyDetectorProcessor
from fastci.fleet.flaky_owners import FlakyOwnersProcessor
from fastci.fleet.node_state import NodeStateProcessor
from fastci.scheduling.processor import PoolSchedulerProcessor
from fastci.regression.detector import RegressionDetectorProcessor
from fastci.selection.processor import SelectionProcessor
from fastci.planning.processor import TestPlanProcessor
from fastci.fleet.test_history import TestHistoryProcessor
from fastci.core.processor import Processor

INPUT_MODELS: tuple[type[Event], ...] = (
    CommitEvent, EvidenceEvent, ResultEvent, NodeHealthEvent, GoldenReference, OwnerMap,
    ClockTick, PoolConfig,  # the pool's time and shape (the simulator or a CI driver publishes them)
    ReleaseEvent,  # written by `fastci release` (a producer, like `fastci owners publish`)
)
OUTPUT_MODELS: tuple[type[Event], ...] = (
    TestStatusChanged,
    NodeStateChanged, NodeAttribution, FlakyVerdict, FlakyTest,  # the fleet processors
    GateResult, BaselineExclusion, RegressionAlert, BisectPlan, BisectStep, RunRequested,
    Selection,
    TestPlan,
    ScheduleEvent,
)
DEAD_LETTERS = DeadLetter.TOPIC

TOPICS: dict[str, type[Event]] = {
    model.TOPIC: model for model in (*INPUT_MODELS, *OUTPUT_MODELS, DeadLetter)
}
INPUT_TOPICS: tuple[str, ...] = tuple(model.TOPIC for model in INPUT_MODELS)

# Every processor both runtimes run, in an order where producers come before their consumers. The fleet
# processors form a loop (node states -> exclusions -> flaky verdicts -> attributions -> node states);
# node-state comes last, so its changes reach baseline-guard in the next round.
ALL_PROCESSORS: tuple[type[Processor], ...] = (
    TestHistoryProcessor,
    CorrectnessGatesProcessor,
    BaselineGuardProcessor,
    FlakyDetectorProcessor,
    FlakyOwnersProcessor,
    RegressionDetectorProcessor,
    BisectPlannerProcessor,
    BisectProcessor,
    SelectionProcessor,
    TestPlanProcessor,  # reads selection
    FailureAttributionProcessor,
    NodeStateProcessor,
    PoolSchedulerProcessor,  # reads run-requested and node-state-changed, so after their writers
)


def build_processors(names: list[str] | None = None) -> list[Processor]:
    """Instances of the named processors (all when ``names`` is empty), refusing unknown names."""
    known = {cls.name: cls for cls in ALL_PROCESSORS}
    unknown = sorted(set(names or ()) - set(known))
    if unknown:
        raise ValueError(f"unknown processor(s) {', '.join(unknown)} (known: {', '.join(known)})")
    return [cls() for cls in ALL_PROCESSORS if not names or cls.name in names]


def model_for(topic: str, raw: bytes = b"") -> type[Event]:
    """The event model a topic carries; ``InvalidEvent`` for a topic the topology does not name."""
    try:
        return TOPICS[topic]
    except KeyError:
        raise unknown_topic(topic, TOPICS, raw) from None


def decode(topic: str, raw: bytes) -> Event:
    """Parse and validate one record of ``topic``; raise ``InvalidEvent`` saying what is wrong."""
    return decode_as(model_for(topic, raw), raw)
