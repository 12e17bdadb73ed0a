"""Node states: what the fleet's ``node-state`` processor decides about a node, and what the states mean.

- ``node-state-changed`` (key node_id): the ``node-state`` processor moved a node to a new state,
  with the rule that fired and the evidence behind it. Read by ``baseline-guard`` (a sick node's
  results stay out of baselines) and the pool scheduler (quarantined nodes get no work).

``UNTRUSTED_STATES`` and ``OUT_OF_SERVICE_STATES`` say what a state means to those readers.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fastci.core.events import Event, FiniteFloat, Name, Record, Text, Timestamp

NodeState = Literal["healthy", "suspect", "quarantined", "diagnosing"]
# States whose results must not be trusted as performance or correctness evidence.
UNTRUSTED_STATES: frozenset[str] = frozenset({"suspect", "quarantined", "diagnosing"})
# States the scheduler must not place work on (reruns go to 'healthy' nodes only).
OUT_OF_SERVICE_STATES: frozenset[str] = frozenset({"quarantined", "diagnosing"})

EvidenceKind = Literal[
    "xid",
    "ecc",
    "temperature",
    "nccl_timeout",
    "heartbeat",
    "diagnostic",
    "diagnostic_started",
    "failure",
    "throughput",
]
MAX_EVIDENCE = 32  # items of evidence one fleet event carries at most


class NodeEvidence(Record):
    """One signal or attribution behind a state change."""

    kind: EvidenceKind
    event_id: str = Field(max_length=64, description="The node-health or node-attribution event.")
    time: Timestamp
    value: FiniteFloat | None = Field(default=None, description="The signal's value, or a run's throughput ratio.")
    test_id: Name | None = None
    detail: Text = ""


class NodeStateChanged(Event):
    """A node moved to a new health state. Key: node_id. Id: from the node, state, time and cause.

    ``reason`` says why in words; ``rule`` names the threshold that fired (see the README's table)
    and ``evidence`` lists the signals and attributions it counted.
    """

    TOPIC: ClassVar[str] = "node-state-changed"
    KEY: ClassVar[str] = "node_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("node_id", "state", "time", "cause_id")

    node_id: Name
    state: NodeState
    reason: Text = Field(default="", description="Why, in words (the signals or results behind it).")
    time: Timestamp = Field(description="When the node entered the state (the causing event's time).")
    previous: NodeState | None = Field(default=None, description="The state it left.")
    cause_id: str = Field(default="", max_length=64, description="The event that caused the change.")
    rule: Name | None = Field(default=None, description="The threshold that fired, e.g. 'xid-fatal'.")
    hardware_revision: Name | None = None
    evidence: tuple[NodeEvidence, ...] = Field(default=(), max_length=MAX_EVIDENCE)
    reruns_requested: int = Field(default=0, ge=0, description="Tests asked to run again elsewhere with this change.")
    pool: Name = Field(default="default", description="The accelerator pool the node serves.")
