"""Dead letters: events refused at the door or by a processor, kept with the field and the reason."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from fastci.core.events import Event, Record


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
