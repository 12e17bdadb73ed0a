"""The event contract: every fact and decision fastci moves, as frozen pydantic models."""

from fastci.events.base import Event, derive_id
from fastci.events.codec import MAX_EVENT_BYTES, InvalidEvent, decode, encode, model_for
from fastci.events.inputs import (
    Bundle,
    ChangedFile,
    ChangedFunction,
    CommitEvent,
    EvidenceEvent,
    FoldedStack,
    NodeHealthEvent,
    ResultEvent,
)
from fastci.events.outputs import DeadLetter, FieldError, TestStatusChanged
from fastci.events.registry import DEAD_LETTERS, INPUT_TOPICS, TOPICS

__all__ = [
    "DEAD_LETTERS",
    "INPUT_TOPICS",
    "MAX_EVENT_BYTES",
    "TOPICS",
    "Bundle",
    "ChangedFile",
    "ChangedFunction",
    "CommitEvent",
    "DeadLetter",
    "Event",
    "EvidenceEvent",
    "FieldError",
    "FoldedStack",
    "InvalidEvent",
    "NodeHealthEvent",
    "ResultEvent",
    "TestStatusChanged",
    "decode",
    "derive_id",
    "encode",
    "model_for",
]
