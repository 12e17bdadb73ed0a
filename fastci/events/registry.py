"""Every topic fastci knows, the event model it carries and the field it is keyed by."""

from __future__ import annotations

from fastci.events.base import Event
from fastci.events.fleet import FlakyTest, FlakyVerdict, NodeAttribution, NodeStateChanged
from fastci.events.golden import GoldenReference, OwnerMap
from fastci.events.inputs import CommitEvent, EvidenceEvent, NodeHealthEvent, ResultEvent
from fastci.events.outputs import DeadLetter, TestStatusChanged
from fastci.events.release import ReleaseEvent
from fastci.events.regression import BaselineExclusion, BisectPlan, BisectStep, GateResult, RegressionAlert
from fastci.events.runs import RunRequested
from fastci.events.schedule import ClockTick, PoolConfig, ScheduleEvent
from fastci.events.selection import Selection

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
    ScheduleEvent,
)
DEAD_LETTERS = DeadLetter.TOPIC

TOPICS: dict[str, type[Event]] = {
    model.TOPIC: model for model in (*INPUT_MODELS, *OUTPUT_MODELS, DeadLetter)
}
INPUT_TOPICS: tuple[str, ...] = tuple(model.TOPIC for model in INPUT_MODELS)
