"""The public event contract, in one import: every event model fastci moves and the codec.

Each model is defined beside the capability that owns it (``fastci/<capability>/events.py``); this
package only hands the names on, for producers and analysts. fastci's own code imports from the
defining modules.
"""

from fastci.core.codec import MAX_EVENT_BYTES, InvalidEvent, encode
from fastci.core.dead_letters import DeadLetter, FieldError
from fastci.core.events import Event, derive_id
from fastci.fleet.events import FlakyTest, FlakyVerdict, NodeAttribution, NodeStateChanged, TestStatusChanged
from fastci.inputs import (
    Bundle,
    ChangedFile,
    ChangedFunction,
    CommitEvent,
    EvidenceEvent,
    FoldedStack,
    NodeHealthEvent,
    ResultEvent,
)
from fastci.planning.events import TestPlan
from fastci.regression.events import BaselineExclusion, BisectPlan, BisectStep, GateResult, RegressionAlert
from fastci.regression.references import GoldenReference, OwnerMap
from fastci.release.events import ReleaseEvent
from fastci.scheduling.events import ClockTick, PoolConfig, ScheduleEvent
from fastci.scheduling.runs import RunRequested
from fastci.selection.events import Selection
from fastci.topology import DEAD_LETTERS, INPUT_TOPICS, TOPICS, decode, model_for

__all__ = [
    "DEAD_LETTERS",
    "INPUT_TOPICS",
    "MAX_EVENT_BYTES",
    "TOPICS",
    "BaselineExclusion",
    "BisectPlan",
    "BisectStep",
    "Bundle",
    "ChangedFile",
    "ChangedFunction",
    "ClockTick",
    "CommitEvent",
    "DeadLetter",
    "Event",
    "EvidenceEvent",
    "FieldError",
    "FlakyTest",
    "FlakyVerdict",
    "FoldedStack",
    "GateResult",
    "GoldenReference",
    "InvalidEvent",
    "NodeAttribution",
    "NodeHealthEvent",
    "NodeStateChanged",
    "OwnerMap",
    "PoolConfig",
    "ReleaseEvent",
    "RegressionAlert",
    "ResultEvent",
    "RunRequested",
    "ScheduleEvent",
    "Selection",
    "TestPlan",
    "TestStatusChanged",
    "decode",
    "derive_id",
    "encode",
    "model_for",
]
