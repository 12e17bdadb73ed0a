"""Run requests: a processor asks for a test to be run (the pool scheduler decides where and when)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from fastci.core.events import Config, Event, FiniteFloat, Name, Sha, Text
from fastci.inputs import Bundle, Trigger


class RunRequested(Event):
    """Run one test on an exact commit and stack bundle. Key: test_id.

    The scheduler places it by ``work_class`` (its priority class: presubmit, nightly, release,
    bisect, dev, rerun). The runner publishes the outcome as a ``results`` event with
    ``trigger = work_class`` and the same test, commit, bundle and hardware revision; that is
    how the requester recognises the results it asked for (no id plumbing through the runner).
    """

    TOPIC: ClassVar[str] = "run-requested"
    KEY: ClassVar[str] = "test_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("cause_id", "purpose")

    cause_id: str = Field(max_length=64, description="Id of the event that caused the request.")
    purpose: Name = Field(
        description="What the run is for, unique per cause, e.g. 'confirm' or 'bisect:<regression>:3:1'."
    )
    test_id: Name
    repo: Name
    commit: Sha = Field(description="The code to run.")
    bundle: Bundle = Field(description="The exact stack to run it on (every layer's version).")
    hardware_revision: Name = Field(description="The revision to run on; 'any' accepts every revision.")
    work_class: Trigger = Field(description="Priority class; results carry it as their trigger.")
    repeats: int = Field(ge=1, le=100_000, description="Samples per metric wanted after warmup.")
    seed: int | None = None
    config: Config = Field(default_factory=dict, description="The test config to use (as in the run being checked).")
    avoid_nodes: tuple[Name, ...] = Field(default=(), max_length=64, description="Nodes not to place it on.")
    regression_id: str | None = Field(default=None, max_length=64)
    requested_by: Name = Field(description="The processor that asked.")
    reason: Text = ""
    pool: Name = Field(default="default", description="The accelerator pool to run it in.")
    chips: int | None = Field(
        default=None,
        ge=0,
        le=65_536,
        description="Chips the run needs: None for one node's, 0 for CPU/simulator capacity; more than a node "
        "holds means whole nodes placed together on one hardware revision.",
    )
    estimated_s: FiniteFloat | None = Field(default=None, ge=0, description="Expected seconds (for backfilling).")
