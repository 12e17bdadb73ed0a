"""A past result as a run request for the same run: same test, commit, bundle, hardware revision,
config and seed, work class ``rerun``.

The request's id derives from the result's id and the attempt (``cause_id`` = the result, ``purpose`` =
``rerun`` or ``rerun:<n>``): asking twice for the same attempt is the same request, and consumers drop
the copy.
"""

from __future__ import annotations

import re

from fastci.contracts.runs import RunRequested
from fastci.inputs import ResultEvent
from fastci.report.nightly import load

REQUESTER = "fastci-rerun"
MAX_REPEATS = 100_000
HEX = re.compile(r"^[0-9a-f]{6,32}$")


class RerunError(ValueError):
    """The result cannot be found or rerun; the message says why."""


def rerun_request(result: ResultEvent, attempt: int = 1, elsewhere: bool = False) -> RunRequested:
    if attempt < 1:
        raise RerunError(f"--attempt: must be at least 1 (got {attempt})")
    if result.bundle is None or result.hardware_revision is None:
        raise RerunError(
            f"result {result.id} names no bundle or hardware revision: a rerun reproduces a run on its stack "
            "and hardware, and this one (a plain repository's) has neither"
        )
    samples = max((len(values) for values in result.metrics.values()), default=1)
    return RunRequested(
        cause_id=result.id,
        purpose="rerun" if attempt == 1 else f"rerun:{attempt}",
        test_id=result.test_id,
        repo=result.repo,
        commit=result.commit,
        bundle=result.bundle,
        hardware_revision=result.hardware_revision,
        work_class="rerun",
        repeats=min(max(samples, 1), MAX_REPEATS),
        seed=result.seed,
        config=result.config,
        avoid_nodes=(result.node_id,) if elsewhere else (),
        requested_by=REQUESTER,
        reason=f"reproduce result {result.id} "
        f"({result.trigger} run {result.run_id} on {result.node_id}: {result.status})",
    )


def find_result(views, given: str) -> ResultEvent:
    """The result whose id is ``given`` or starts with it (at least 6 hex digits, unique)."""
    wanted = given.strip().lower()
    if not HEX.match(wanted):
        raise RerunError(
            f"RESULT_ID: {given!r} is not a result id (6 to 32 hex digits, as in the results view's id column)"
        )
    found = load(views, ResultEvent, where=f"WHERE starts_with(id, '{wanted}')", order="id LIMIT 3")
    if not found:
        raise RerunError(f"no result with id {given!r} in the views (publish it, then 'fastci views refresh')")
    if len(found) > 1:
        raise RerunError(
            f"{given!r} is the start of several result ids ({', '.join(r.id for r in found)}...): give more digits"
        )
    return found[0]
