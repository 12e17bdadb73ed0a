"""Signed webhook posts: a receiver can tell a ticket fastci posted from anything else on its URL.

Each post carries two headers:

- ``X-Fastci-Timestamp``: the Unix time (whole seconds) it was signed;
- ``X-Fastci-Signature``: ``v1=`` and the hex HMAC-SHA256, keyed with the secret shared with the
  receiver (``FASTCI_WEBHOOK_SECRET``), of the timestamp, a ``.``, and the body's exact bytes.

A receiver recomputes the HMAC over the bytes it received, compares in constant time, and refuses
a timestamp further than its tolerance from its own clock (``DEFAULT_TOLERANCE_S``), so a captured
post replayed later is refused; within the window, the ``Idempotency-Key`` header (the ticket id)
lets it drop a second delivery. ``verify`` is that check, for receivers written in Python.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping

SECRET_ENV = "FASTCI_WEBHOOK_SECRET"
TIMESTAMP_HEADER = "X-Fastci-Timestamp"
SIGNATURE_HEADER = "X-Fastci-Signature"
SCHEME = "v1"
DEFAULT_TOLERANCE_S = 300
MIN_SECRET_CHARS = 16


class WebhookSecretError(ValueError):
    """The shared secret is missing or too short; the message names the variable, never the secret."""


def secret_from_env(env: Mapping[str, str] | None = None) -> bytes | None:
    secret = (os.environ if env is None else env).get(SECRET_ENV, "")
    if not secret:
        return None
    if len(secret) < MIN_SECRET_CHARS:
        raise WebhookSecretError(f"{SECRET_ENV} must be at least {MIN_SECRET_CHARS} characters")
    return secret.encode()


def signature(secret: bytes, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret, str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"{SCHEME}={digest}"


def signed_headers(secret: bytes, body: bytes, now: float) -> dict[str, str]:
    timestamp = int(now)
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: signature(secret, timestamp, body)}


def verify(
    secret: bytes, headers: Mapping[str, str], body: bytes, now: float, tolerance_s: float = DEFAULT_TOLERANCE_S
) -> str | None:
    """None when ``body`` was signed with ``secret`` within ``tolerance_s`` of ``now``; else why not."""
    stamp, signed = headers.get(TIMESTAMP_HEADER), headers.get(SIGNATURE_HEADER)
    if not stamp or not signed:
        return f"missing {TIMESTAMP_HEADER if not stamp else SIGNATURE_HEADER} header"
    if not stamp.isdigit():
        return f"{TIMESTAMP_HEADER} is not a Unix time in seconds"
    if not hmac.compare_digest(signature(secret, int(stamp), body), signed):
        return "signature does not match the body and timestamp"
    if abs(now - int(stamp)) > tolerance_s:
        return f"timestamp is {abs(now - int(stamp)):.0f} s from now, outside the {tolerance_s:g} s window (a replay?)"
    return None
