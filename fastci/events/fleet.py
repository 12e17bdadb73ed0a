"""Fleet events: what the node-health processor (the fleet issue) decides about each node."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fastci.events.base import Event, Name, Text, Timestamp

NodeState = Literal["healthy", "suspect", "quarantined", "diagnosing"]
# States whose results must not be trusted as performance or correctness evidence.
UNTRUSTED_STATES: frozenset[str] = frozenset({"suspect", "quarantined", "diagnosing"})


class NodeStateChanged(Event):
    """A node moved to a new health state. Key: node_id.

    Minimal contract for now: the fleet processor will write it; regression detection reads it
    to keep a sick node's results out of baselines.
    """

    TOPIC: ClassVar[str] = "node-state-changed"
    KEY: ClassVar[str] = "node_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("node_id", "state", "time")

    node_id: Name
    state: NodeState
    reason: Text = Field(default="", description="Why, in words (the signals or results behind it).")
    time: Timestamp = Field(description="When the node entered the state.")
    pool: Name = Field(default="default", description="The accelerator pool the node serves.")
