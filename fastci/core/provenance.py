"""Who produced a result: the producing principal's HMAC-SHA256 signature over the result.

Kafka does not tell a consumer which principal wrote a record, and the embedded runtime has no
principals at all, so a result carries its own provenance: the ``principal`` (a producer role's
name, e.g. ``qualifier``), the ``digest`` (sha256 of the result's canonical content) and the
``signature`` (HMAC-SHA256, with the principal's key, over the result id, the principal, the run
id and the digest). Each principal has its own key: holding the ``ci`` key does not let a
producer sign as ``qualifier``.

Two checks, at two places: every reader checks the digest against the content when it decodes
(no key needed), so a result changed after it was signed never gets in; a release gate, which
holds the keys (``FASTCI_PROVENANCE_KEYS``), checks the signature and whether the principal may
qualify a release (``fastci.release.gates``).

Producers sign with ``FASTCI_PROVENANCE_PRINCIPAL`` and ``FASTCI_PROVENANCE_KEY`` set
(``Signer.from_env``); a result published without them carries no provenance and counts for no
release gate. Keys are never logged, stored or put in an error message: errors name the variable.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

import orjson
from pydantic import Field, StringConstraints

from fastci.core.events import Event, Name, Record

PRINCIPAL_ENV = "FASTCI_PROVENANCE_PRINCIPAL"
KEY_ENV = "FASTCI_PROVENANCE_KEY"
KEYS_ENV = "FASTCI_PROVENANCE_KEYS"  # the verifier's keyring: principal:key,principal:key
MIN_KEY_CHARS = 16
PROVENANCE_MISMATCH = "provenance_mismatch"  # pydantic error type of a digest that is not the content's
_SCHEME = "fastci-provenance-v1"

Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


class ProvenanceError(ValueError):
    """Signing or verifying is misconfigured; the message names the variable, never a key."""


class Provenance(Record):
    """Who signed a result, over which content."""

    principal: Name = Field(description="The producer role that signed it (its key signed it), e.g. 'qualifier'.")
    digest: Hex64 = Field(
        description="sha256 (hex) of the result's canonical content: its JSON without id and provenance, fields at "
        "their default left out, keys sorted, no whitespace."
    )
    signature: Hex64 = Field(
        description="HMAC-SHA256 (hex) with the principal's key over 'fastci-provenance-v1', id, principal, run_id "
        "and digest joined by U+001F."
    )


def content_digest(event: Event) -> str:
    """sha256 of the event's canonical content. Fields at their default are left out, so a field
    added to the model later (with a default) does not change the digest of results signed before."""
    document = event.model_dump(mode="json", exclude={"id", "provenance"}, exclude_defaults=True)
    return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _message(event_id: str, principal: str, run_id: str, digest: str) -> bytes:
    return "\x1f".join((_SCHEME, event_id, principal, run_id, digest)).encode()


def signature(key: bytes, event_id: str, principal: str, run_id: str, digest: str) -> str:
    return hmac.new(key, _message(event_id, principal, run_id, digest), hashlib.sha256).hexdigest()


def _check_key(key: str, where: str) -> bytes:
    if len(key) < MIN_KEY_CHARS:
        raise ProvenanceError(f"{where}: a key must be at least {MIN_KEY_CHARS} characters")
    return key.encode()


@dataclass(frozen=True)
class Signer:
    """A producer's principal and key: signs the results it publishes."""

    principal: str
    key: bytes = field(repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Signer | None:
        """The signer configured in the environment, or None when neither variable is set."""
        env = os.environ if env is None else env
        principal, key = env.get(PRINCIPAL_ENV, ""), env.get(KEY_ENV, "")
        if not principal and not key:
            return None
        if not principal or not key:
            missing = PRINCIPAL_ENV if not principal else KEY_ENV
            raise ProvenanceError(f"{missing} is not set: results are signed with both a principal and its key")
        return cls(principal, _check_key(key, KEY_ENV))

    def sign(self, event: Any) -> Any:
        """The event with its provenance (the same event when it has one already)."""
        if getattr(event, "provenance", "absent") is not None:
            return event  # not a result, or signed by its producer
        digest = content_digest(event)
        signed = signature(self.key, event.id, self.principal, event.run_id, digest)
        return event.model_copy(
            update={"provenance": Provenance(principal=self.principal, digest=digest, signature=signed)}
        )


def sign_all(events: Iterable[Event], signer: Signer | None) -> list[Event]:
    events = list(events)
    return events if signer is None else [signer.sign(e) for e in events]


def load_keyring(env: Mapping[str, str] | None = None) -> dict[str, bytes]:
    """The verifier's keys, principal -> key, from ``FASTCI_PROVENANCE_KEYS`` (empty when unset)."""
    env = os.environ if env is None else env
    keys: dict[str, bytes] = {}
    for number, entry in enumerate(env.get(KEYS_ENV, "").split(","), 1):
        entry = entry.strip()
        if not entry:
            continue
        principal, sep, key = entry.partition(":")
        if not sep or not principal:
            raise ProvenanceError(f"{KEYS_ENV}: entry {number} is not principal:key")
        keys[principal] = _check_key(key, f"{KEYS_ENV}: the key of principal {principal!r}")
    return keys


@dataclass(frozen=True)
class Verdict:
    """What a verifier makes of a result's provenance."""

    principal: str | None  # as the result names it
    problem: str | None = None  # None: the named principal's key signed this result id, run and digest
    forged: bool = False  # a signature that does not verify under a key the verifier holds


def verify(keys: Mapping[str, bytes], event_id: str, run_id: str, provenance: Mapping[str, str] | None) -> Verdict:
    """Check a result's signature (its digest was checked against its content when it was decoded)."""
    if not provenance:
        return Verdict(None, f"no provenance (published without {PRINCIPAL_ENV} and {KEY_ENV})")
    principal = provenance["principal"]
    key = keys.get(principal)
    if key is None:
        return Verdict(principal, f"signed by principal {principal!r}, which has no key in {KEYS_ENV}")
    expected = signature(key, event_id, principal, run_id, provenance["digest"])
    if not hmac.compare_digest(expected, provenance["signature"]):
        return Verdict(principal, f"signature does not verify with the key of principal {principal!r}", forged=True)
    return Verdict(principal)
