"""Processors: the logic of fastci, one pure module per decision."""

from fastci.processors.base import Processor, StateReader, Step, compound_key, owner_of
from fastci.processors.baseline_guard import BaselineGuardProcessor
from fastci.processors.bisect import BisectProcessor
from fastci.processors.bisect_planner import BisectPlannerProcessor
from fastci.processors.correctness_gates import CorrectnessGatesProcessor
from fastci.processors.failure_attribution import FailureAttributionProcessor
from fastci.processors.flaky_detector import FlakyDetectorProcessor
from fastci.processors.flaky_owners import FlakyOwnersProcessor
from fastci.processors.node_state import NodeStateProcessor
from fastci.processors.pool_scheduler import PoolSchedulerProcessor
from fastci.processors.regression_detector import RegressionDetectorProcessor
from fastci.processors.selection import SelectionProcessor
from fastci.processors.test_history import TestHistoryProcessor

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


__all__ = ["ALL_PROCESSORS", "Processor", "StateReader", "Step", "build_processors", "compound_key", "owner_of"]
