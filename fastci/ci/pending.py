"""Applying what is pending in an embedded data dir before answering from it: a CI job's plan, the
nightly report. An answer read from state that the log has moved past is stale (a failing presubmit's
results not yet in the test history), so a reader applies the backlog first, within its time, and
says what it did: how many records it applied, how many it left and what applies them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Applied:
    """What one attempt to apply the backlog did."""

    pending: int  # records the processor furthest behind had to apply when asked
    left: int  # records it still had when the attempt ended (at its deadline, or another runtime's)
    busy: bool = False  # another runtime holds the data dir: it applies them, this attempt applied none

    @property
    def done(self) -> bool:
        return self.left == 0 and not self.busy


def backlog(data_dir: Path) -> int:
    """Records the processor furthest behind in ``data_dir`` has still to apply."""
    from fastci.runtime.embedded import EmbeddedRuntime
    from fastci.topology import SYSTEM

    runtime = EmbeddedRuntime(data_dir, SYSTEM)
    try:
        return runtime.backlog()
    finally:
        runtime.close()


def apply_pending(
    data_dir: Path, deadline: float | None = None, announce: Callable[[int], None] | None = None
) -> Applied:
    """Apply what is pending in ``data_dir`` with every processor, until ``deadline``
    (``time.monotonic()``; None: all of it), calling ``announce`` with the count first when there is
    any. Nothing pending is a no-op that takes no lock."""
    from fastci.runtime.embedded import EmbeddedRuntime, RuntimeBusy
    from fastci.topology import SYSTEM

    runtime = EmbeddedRuntime(data_dir, SYSTEM)
    try:
        pending = runtime.backlog()
        if not pending:
            return Applied(0, 0)
        if announce is not None:
            announce(pending)
        try:
            stats = runtime.run(deadline=deadline)
        except RuntimeBusy:
            return Applied(pending, pending, busy=True)
        return Applied(pending, runtime.backlog() if stats.stopped_early else 0)
    finally:
        runtime.close()


def catch_up(data_dir: Path, views_path: Path, say: Callable[[str], None]) -> None:
    """Before a report of ``data_dir``: apply all that is pending and load what is new into the
    views at ``views_path``, saying so; when another runtime holds the data dir, say what it has
    still to apply and that the report is of what was applied. A folder with no embedded log (views
    refreshed from Kafka, or nothing published yet) is left as it is."""
    from fastci.views.refresh import refresh_embedded
    from fastci.views.store import Views

    if not (Path(data_dir) / "log").is_dir():
        return
    applied = apply_pending(data_dir, None, lambda n: say(f"applying {n:,} record(s) pending in {data_dir} first"))
    if applied.busy:
        say(
            f"another fastci runtime is processing {data_dir} ({applied.pending:,} record(s) pending): this report "
            "is of what it has applied so far; run it again once that runtime has caught up"
        )
    import duckdb

    try:
        views = Views(views_path)
    except duckdb.IOException as error:  # a refresh or a query in another process holds the file
        say(f"cannot load what is new into {views_path} ({error}): the report reads the views as they are")
        return
    try:
        refresh_embedded(data_dir, views)
    finally:
        views.close()
