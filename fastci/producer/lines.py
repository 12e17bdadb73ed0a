"""The door for events from outside: validate each line, keep the good, dead-letter the bad.

Lines are JSON documents. With a topic given, each line is one event for it; without, each line is an
envelope ``{"topic": "results", "event": {...}}``. Only input topics accept events from outside;
decision topics belong to their processor.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from fastci import topology
from fastci.core.codec import InvalidEvent
from fastci.core.dead_letters import FieldError
from fastci.core.events import Event
from fastci.topology import INPUT_TOPICS, decode

SOURCE = "publish"
_NO_TOPIC = "(none)"


@dataclass
class Refusal:
    line: int
    error: InvalidEvent

    def __str__(self) -> str:
        return f"line {self.line}: {self.error}"


@dataclass
class Checked:
    accepted: list[Event] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)

    def dead_letters(self) -> list[Event]:
        return [r.error.dead_letter(SOURCE) for r in self.refused]


def check_lines(lines: Iterable[bytes], topic: str | None) -> Checked:
    """Validate every non-blank line; keep what passes, explain what does not."""
    checked = Checked()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            checked.accepted.append(_check_line(line.strip(), topic))
        except InvalidEvent as error:
            checked.refused.append(Refusal(number, error))
    return checked


def _check_line(line: bytes, topic: str | None) -> Event:
    if topic is not None:
        return check_event(topic, line)
    try:
        envelope = orjson.loads(line)
    except orjson.JSONDecodeError as error:
        raise InvalidEvent(_NO_TOPIC, [FieldError(field="", reason=f"malformed JSON: {error}")], line) from None
    if not isinstance(envelope, dict) or not isinstance(envelope.get("topic"), str) or "event" not in envelope:
        reason = 'must be an envelope {"topic": "<topic>", "event": {...}} (or pass --topic)'
        raise InvalidEvent(_NO_TOPIC, [FieldError(field="", reason=reason)], line)
    return check_event(envelope["topic"], orjson.dumps(envelope["event"]))


def check_event(topic: str, raw: bytes) -> Event:
    if topic not in INPUT_TOPICS:
        known = ", ".join(INPUT_TOPICS)
        if topic in topology.TOPICS:  # the decisions' models, imported for this message only
            reason = f"'{topic}' is written by its processor; producers publish to: {known}"
        else:
            reason = f"unknown topic (producers publish to: {known})"
        raise InvalidEvent(topic, [FieldError(field="topic", reason=reason)], raw)
    return decode(topic, raw)


def read_lines(source: str | Path) -> Iterator[bytes]:
    """Lines of a file, or of standard input for '-'."""
    if str(source) == "-":
        yield from sys.stdin.buffer
    else:
        with open(source, "rb") as file:
            yield from file
