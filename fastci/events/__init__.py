"""The public event contract, in one import: every event model fastci moves and the codec.

Each model is defined beside the capability that owns it (``fastci/<capability>/events.py``), or in
``fastci/contracts/`` when several capabilities read or write it, and is registered in ``SYSTEM``
(``fastci/topology.py``); this package names each one, for producers, analysts, editors and type
checkers (``tests/test_topology.py`` holds it to ``SYSTEM``). fastci's own code imports from the
defining modules.
"""

from fastci.contracts.baseline_exclusions import BaselineExclusion
from fastci.contracts.flaky_verdicts import FlakyVerdict
from fastci.contracts.node_states import NodeStateChanged
from fastci.contracts.owner_maps import OwnerMap
from fastci.contracts.regression_alerts import RegressionAlert
from fastci.contracts.runs import RunRequested
from fastci.contracts.test_plans import TestPlan
from fastci.core.codec import MAX_EVENT_BYTES, InvalidEvent, encode
from fastci.core.dead_letters import DeadLetter, FieldError
from fastci.core.events import Event, derive_id
from fastci.fleet.events import FlakyTest, NodeAttribution, TestStatusChanged
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
from fastci.regression.events import BisectPlan, BisectStep, GateResult
from fastci.regression.references import GoldenReference
from fastci.release.events import ReleaseEvent
from fastci.scheduling.events import ClockTick, PoolConfig, ScheduleEvent
from fastci.selection.events import Selection, SelectionAudit, SelectionPolicy
from fastci.topology import DEAD_LETTERS, INPUT_TOPICS, TOPICS, decode, model_for

# Every topic's model, by class name.
MODELS: dict[str, type[Event]] = {model.__name__: model for model in TOPICS.values()}

__all__ = [
    "DEAD_LETTERS",
    "INPUT_TOPICS",
    "MAX_EVENT_BYTES",
    "MODELS",
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
    "RegressionAlert",
    "ReleaseEvent",
    "ResultEvent",
    "RunRequested",
    "ScheduleEvent",
    "Selection",
    "SelectionAudit",
    "SelectionPolicy",
    "TestPlan",
    "TestStatusChanged",
    "decode",
    "derive_id",
    "encode",
    "model_for",
]
