"""How test-selection and test-planner name and group tests, and estimate a test's duration: both
keep a catalog of a repository's tests in buckets, and must agree on the bucket of a test."""

from __future__ import annotations

import functools
import hashlib

BUCKETS = 64  # a repository's test catalog is kept in this many keys
DEFAULT_DURATION_S = 1.0  # cost of a test with no recorded run yet


@functools.lru_cache(maxsize=1 << 16)  # the same frames and test ids recur in every evidence event
def short_id(text: str) -> str:
    """A 12-hex-digit name for a test or unit id, in state keys and evidence contexts."""
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def bucket_of(tid: str) -> int:
    """The catalog bucket of a test, by its ``short_id``."""
    return int(tid[:4], 16) % BUCKETS


def untraced(durations: dict[str, float], traced: tuple[str, ...]) -> list[float]:
    """The durations of runs that recorded no evidence, or all of them when every run did: recording
    makes a run longer than the test is, and an estimate is of the test."""
    own = [seconds for run, seconds in durations.items() if run not in traced]
    return own or list(durations.values())
