"""The base of every event: frozen pydantic models with a stable, content-derived id.

An event's id is a hash of the fields that identify the fact it records (its
``IDENTITY``), so the same fact published twice, by any producer in any language,
carries the same id, and every consumer can drop the second copy. Output events
derive their id from the id of the input event that caused them (``derive_id``).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, ClassVar, Self

from pydantic import AfterValidator, AllowInfNan, BaseModel, ConfigDict, Field, StringConstraints, model_validator
from pydantic_core import PydanticCustomError

ID_HEX_CHARS = 32  # 128 bits of sha256: collisions are not a practical concern
_SEPARATOR = "\x1f"  # ASCII unit separator: cannot occur in any validated name
ID_MISMATCH = "id_mismatch"  # pydantic error type of a given id that is not the derived one
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)


def derive_id(*parts: object) -> str:
    """The stable id of the fact identified by ``parts`` (sha256 of their canonical text)."""
    text = _SEPARATOR.join([part if type(part) is str else _canonical(part) for part in parts])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:ID_HEX_CHARS]


def _canonical(part: object) -> str:
    if isinstance(part, datetime):
        return part.astimezone(UTC).isoformat()
    if isinstance(part, float):
        return repr(part)
    return str(part)


# Checked by pydantic's core (no Python call per string); the codec words the error.
PRINTABLE_PATTERN = r"^[^\x00-\x1f\x7f]*$"
NO_NUL_PATTERN = r"^[^\x00]*$"


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


# An identifier (repo, test id, node id, version...): one printable line, bounded.
Name = Annotated[str, StringConstraints(min_length=1, max_length=1024, pattern=PRINTABLE_PATTERN)]
# Free text (titles, authors, details): bounded, anything but NUL.
Text = Annotated[str, StringConstraints(max_length=4096, pattern=NO_NUL_PATTERN)]
# A git object name, abbreviated or full.
Sha = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{7,64}$")]
# Timestamps must say their zone; they are stored in UTC.
Timestamp = Annotated[datetime, AfterValidator(lambda v: _utc(_require_aware(v)))]
# A config value: JSON scalars or flat lists of them (a test's knobs, not a document).
Scalar = str | int | float | bool | None
ConfigValue = Annotated[Scalar | list[Scalar], Field(union_mode="left_to_right")]
Config = Annotated[dict[Name, ConfigValue], Field(max_length=256)]


# A model instance's four slots, set past the frozen model's ``__setattr__`` (``Record.trusted``).
_new_instance = object.__new__
_SET_DICT = BaseModel.__dict__["__dict__"].__set__
_SET_FIELDS_SET = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_SET_EXTRA = BaseModel.__dict__["__pydantic_extra__"].__set__
_SET_PRIVATE = BaseModel.__dict__["__pydantic_private__"].__set__


def _require_aware(value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("must include a timezone offset (for example 2026-12-01T02:00:00Z)")
    return value


class Record(BaseModel):
    """Strict, immutable data: unknown fields, NaN and infinity are refused."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", allow_inf_nan=False, str_max_length=1_000_000, defer_build=True
    )

    @classmethod
    def trusted(cls, values: dict[str, Any]) -> Self:
        """An instance from values already validated (taken from validated records, or computed by
        the caller from them), every field given: for processors' hot paths, where validating a
        large posting again per event cost more than the logic. What pydantic's ``model_construct``
        does, without its per-field default handling (5x slower)."""
        instance = _new_instance(cls)
        _SET_DICT(instance, values)
        _SET_FIELDS_SET(instance, set(values))
        _SET_EXTRA(instance, None)
        _SET_PRIVATE(instance, None)
        return instance


# Per event class, its fields as ``trusted_event`` fills them: (name, default factory, required, default).
_TRUSTED_FIELDS: dict[type, list[tuple[str, Any, bool, Any]]] = {}


class Event(Record):
    """An immutable fact on a topic.

    Subclasses set ``TOPIC`` (where the event lives), ``KEY`` (the field it is
    partitioned by) and ``IDENTITY`` (the fields that identify the fact).
    ``id`` may be omitted on input; when given it must equal the derived id.
    """

    TOPIC: ClassVar[str]
    KEY: ClassVar[str]
    IDENTITY: ClassVar[tuple[str, ...]]
    # Fields that name what an event stands for when a later event with the same values replaces it
    # for every processor reading the topic (a test's evidence): compaction keeps only the latest.
    # Empty: every event counts (results, signals), and the topic is never compacted.
    REPLACED_BY_SAME: ClassVar[tuple[str, ...]] = ()

    id: str = Field(
        default="",
        max_length=64,
        description="Stable id: the first 32 hex digits of the sha256 of the topic and the identity "
        "fields (x-identity) joined by U+001F, times written as UTC ISO 8601 (2026-12-01T02:00:00+00:00). "
        "Omit it and it is derived; give it and it must match.",
    )

    @model_validator(mode="after")
    def _stable_id(self) -> Event:
        expected = self.expected_id()
        if not self.id:
            object.__setattr__(self, "id", expected)
        elif self.id != expected:
            raise PydanticCustomError(
                ID_MISMATCH,
                "{given} does not match the id derived from {identity} ({expected}); omit it to have it derived",
                {"given": repr(self.id), "identity": ", ".join(self.IDENTITY), "expected": repr(expected)},
            )
        return self

    def expected_id(self) -> str:
        return derive_id(self.TOPIC, *(getattr(self, name) for name in self.IDENTITY))

    @classmethod
    def trusted_event(cls, values: dict[str, Any]) -> Self:
        """``trusted`` for an event a processor builds from values already validated: the fields
        not given take their defaults and the id is derived, as validation would."""
        fields = _TRUSTED_FIELDS.get(cls)
        if fields is None:
            fields = _TRUSTED_FIELDS[cls] = [
                (name, field.default_factory, field.is_required(), field.default)
                for name, field in cls.model_fields.items()
            ]
        full: dict[str, Any] = {}
        for name, factory, required, default in fields:
            if name in values:
                full[name] = values[name]
            elif factory is not None:
                full[name] = factory()  # type: ignore[call-arg]
            elif required:
                raise TypeError(f"{cls.__name__}.trusted_event: {name!r} is required")
            else:
                full[name] = default
        full["id"] = derive_id(cls.TOPIC, *(full[name] for name in cls.IDENTITY))
        return cls.trusted(full)

    @property
    def key(self) -> str:
        return str(getattr(self, self.KEY))

    def time_ms(self) -> int | None:
        """When the fact happened, in ms since the epoch: the ``time`` field, where the model has
        one and it is set. The embedded runtime orders a processor's inputs by it."""
        time = getattr(self, "time", None)
        return None if time is None else (time - _EPOCH) // _MILLISECOND


def record_times(events: list[Event], now_ms: int) -> list[int]:
    """The time each record carries, in both runtimes, by which a processor's input topics are
    merged: the event's own time; for an event without one (a golden reference, an owner map), the
    time of the timed event before it in ``events``, else after it, else ``now_ms``: it is ordered
    where it was published among the events published with it."""
    own = [event.time_ms() for event in events]
    latest = next((time_ms for time_ms in own if time_ms is not None), now_ms)
    times = []
    for time_ms in own:
        latest = latest if time_ms is None else time_ms
        times.append(latest)
    return times


# NaN and infinity are refused in the core even inside lists and dicts, where the model-level
# ``allow_inf_nan=False`` does not reach.
FiniteFloat = Annotated[float, AllowInfNan(False)]
