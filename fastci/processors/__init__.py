"""Processors: the logic of fastci, one pure module per decision."""

from fastci.processors.base import Processor, StateReader, Step, compound_key, owner_of
from fastci.processors.baseline_guard import BaselineGuardProcessor
from fastci.processors.bisect import BisectProcessor
from fastci.processors.bisect_planner import BisectPlannerProcessor
from fastci.processors.correctness_gates import CorrectnessGatesProcessor
from fastci.processors.regression_detector import RegressionDetectorProcessor
from fastci.processors.selection import SelectionProcessor
from fastci.processors.test_plan import TestPlanProcessor
from fastci.processors.test_history import TestHistoryProcessor

# Every processor both runtimes run, in an order where producers come before their consumers.
ALL_PROCESSORS: tuple[type[Processor], ...] = (
    TestHistoryProcessor,
    CorrectnessGatesProcessor,
    BaselineGuardProcessor,
    RegressionDetectorProcessor,
    BisectPlannerProcessor,
    BisectProcessor,
    SelectionProcessor,
    TestPlanProcessor,  # reads selection
)


def build_processors(names: list[str] | None = None) -> list[Processor]:
    """Instances of the named processors (all when ``names`` is empty), refusing unknown names."""
    known = {cls.name: cls for cls in ALL_PROCESSORS}
    unknown = sorted(set(names or ()) - set(known))
    if unknown:
        raise ValueError(f"unknown processor(s) {', '.join(unknown)} (known: {', '.join(known)})")
    return [cls() for cls in ALL_PROCESSORS if not names or cls.name in names]


__all__ = ["ALL_PROCESSORS", "Processor", "StateReader", "Step", "build_processors", "compound_key", "owner_of"]
