"""The one place that names every topic, every processor and the order they run in.

The runtimes (``fastci/runtime/``), the faust app (``streams/``), the views and the simulator take
``SYSTEM`` as a value; nothing below this file knows the whole. The pipes between processors follow
from what each reads and writes (``SYSTEM.pipes()``); ``docs/topology.md`` lists them, and
``tests/test_topology.py`` checks the declaration, the documented order and the order the embedded
runtime runs.
"""

from __future__ import annotations

from fastci.core.dead_letters import DeadLetter
from fastci.core.events import Event
from fastci.core.processor import Processor
from fastci.core.system import System
from fastci.fleet.events import FlakyTest, FlakyVerdict, NodeAttribution, NodeStateChanged, TestStatusChanged
from fastci.fleet.failure_attribution import FailureAttributionProcessor
from fastci.fleet.flaky_detector import FlakyDetectorProcessor
from fastci.fleet.flaky_owners import FlakyOwnersProcessor
from fastci.fleet.node_state import NodeStateProcessor
from fastci.fleet.test_history import TestHistoryProcessor
from fastci.inputs import CommitEvent, EvidenceEvent, NodeHealthEvent, ResultEvent
from fastci.planning.events import TestPlan
from fastci.planning.processor import TestPlanProcessor
from fastci.regression.baseline_guard import BaselineGuardProcessor
from fastci.regression.bisect import BisectProcessor
from fastci.regression.bisect_planner import BisectPlannerProcessor
from fastci.regression.correctness_gates import CorrectnessGatesProcessor
from fastci.regression.detector import RegressionDetectorProcessor
from fastci.regression.events import BaselineExclusion, BisectPlan, BisectStep, GateResult, RegressionAlert
from fastci.regression.references import GoldenReference, OwnerMap
from fastci.release.events import ReleaseEvent
from fastci.scheduling.events import ClockTick, PoolConfig, ScheduleEvent
from fastci.scheduling.processor import PoolSchedulerProcessor
from fastci.scheduling.runs import RunRequested
from fastci.selection.events import Selection, SelectionAudit, SelectionPolicy
from fastci.selection.processor import SelectionProcessor

SYSTEM = System(
    inputs=(
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
    ),
    decisions=(
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
    ),
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
TOPICS: dict[str, type[Event]] = dict(SYSTEM.topics)
INPUT_TOPICS: tuple[str, ...] = SYSTEM.input_topics
DEAD_LETTERS = DeadLetter.TOPIC
ALL_PROCESSORS: tuple[type[Processor], ...] = SYSTEM.processors
build_processors = SYSTEM.build
model_for = SYSTEM.model_for
decode = SYSTEM.decode
