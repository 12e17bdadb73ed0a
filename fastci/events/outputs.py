"""Output events: decisions and alerts written by processors, and dead letters."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fastci.events.base import Event, Name, Record, Sha
from fastci.events.inputs import Status

Health = Literal["passing", "failing"]


class TestStatusChanged(Event):
    """A test flipped between passing and failing. Key: test_id. Id: derived from the result's id."""

    TOPIC: ClassVar[str] = "test-status-changed"
    KEY: ClassVar[str] = "test_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("result_id",)
    __test__ = False  # not a pytest test class, despite the name

    result_id: str = Field(description="Id of the result event that caused the flip.")
    test_id: Name
    run_id: Name
    commit: Sha
    node_id: Name
    previous: Health
    current: Health
    status: Status = Field(description="The status of the result that caused the flip.")
    runs: int = Field(ge=1, description="Runs of this test seen so far, this one included.")


class FieldError(Record):
    field: str = Field(description="Dotted path of the offending field ('' for the whole event).")
    reason: str


class DeadLetter(Event):
    """An event that was refused, kept with the reason. Key: topic (the one it was meant for)."""

    TOPIC: ClassVar[str] = "dead-letters"
    KEY: ClassVar[str] = "topic"
    IDENTITY: ClassVar[tuple[str, ...]] = ("topic", "source", "raw_sha256")

    topic: str = Field(max_length=300, description="The topic the event was sent to.")
    source: str = Field(max_length=300, description="Who refused it: 'publish', 'worker' or a processor.")
    error: str = Field(max_length=8192, description="One-line summary naming the field and the reason.")
    errors: tuple[FieldError, ...] = Field(default=(), max_length=100)
    raw: str = Field(max_length=65_536, description="The refused bytes as text (truncated to 64 KiB).")
    raw_size: int = Field(ge=0)
    raw_sha256: str
    offset: int | None = Field(default=None, description="Offset in the source topic, when read from one.")
