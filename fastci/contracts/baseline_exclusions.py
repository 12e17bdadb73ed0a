"""Baseline exclusions: results that must not count as evidence, because their node was not healthy.

- ``baseline-exclusions`` (key test_id): written by ``baseline-guard`` (regression) from node states;
  read by ``regression-detector`` (no baselines or regression calls from them) and by the fleet's
  ``flaky-detector`` (a sick node's failures do not make a test flaky).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from fastci.core.events import Event, Name, Text


class BaselineExclusion(Event):
    """A result that must not count as evidence (its node was not healthy). Key: test_id."""

    TOPIC: ClassVar[str] = "baseline-exclusions"
    KEY: ClassVar[str] = "test_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("result_id",)

    result_id: str = Field(max_length=64)
    test_id: Name
    node_id: Name
    node_state: Name
    reason: Text = ""
    cause_id: str = Field(
        max_length=64,
        description="The node-state event whose state untrusts the result, whether it arrived before the "
        "result or after it.",
    )
