"""The selection audit: a selection's safety measured in production, from the runs that went beyond it.

Every result of a test the selection did not keep for its commit (a shadow-mode job, a nightly or
any full run, ``subset-and-rest``) audits that selection: the commit is *audited* once, and each
such test that failed is a *miss*, an event naming the commit, the test and what the selection knew
of it. Whether a result's test was kept comes from the result itself when the job asked
(``ResultEvent.selected``, set by ``pytest --fastci-select``), else from the commit's own selection.

test-selection runs the audit itself (``fastci.selection.processor``), as it takes each commit,
selection and result, and applies what it finds at once: a miss widens the repository's next
selections. It reads the same topics by the same key, so no topic runs back from the audit to the
selection, and a commit's selection is a function of the events before it in time, however they
were delivered. This module is the audit's logic on one commit's record; the processor keeps the
records, a small value per commit, and the last ``RECENT_COMMITS`` shas per repository, so a
commit's record is dropped once it is older than that. Each audit event's id derives from (repo,
sha, kind, test): a result redelivered or replayed emits nothing new.
"""

from __future__ import annotations

from pydantic import Field

from fastci.core.events import Record
from fastci.inputs import CommitEvent, ResultEvent
from fastci.selection.events import MAX_CHANGED_FILES, Selection, SelectionAudit
from fastci.shared.test_ids import short_id

RECENT_COMMITS = 512  # commits per repo whose selection can still be audited
MAX_PENDING = 256  # results of one commit held until its selection arrives
MAX_COVERED_BY = 3
FAILING = ("failed", "error")


class Pending(Record):
    result_id: str
    test_id: str
    run_id: str
    status: str
    selected: bool | None = None


class Brief(Record):
    """A selection in brief: what the audit needs of it."""

    selection_id: str
    run_all: bool
    kept: tuple[str, ...] = ()  # short ids
    pruned: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # short id -> kept tests covering it
    tests_known: int = 0
    saved_s: float = 0.0


class AuditedCommit(Record):
    changed_files: tuple[str, ...] | None = None  # None until the commit event arrives
    selection: Brief | None = None
    pending: tuple[Pending, ...] = ()
    audited: bool = False
    missed: tuple[str, ...] = ()  # short ids of the tests already reported missed


def on_commit(held: AuditedCommit, commit: CommitEvent) -> AuditedCommit:
    """A commit's record once the commit is known: the files it changed (what a miss widens to)."""
    files = tuple(sorted({f.path for f in commit.changed_files}))[:MAX_CHANGED_FILES]
    return held.model_copy(update={"changed_files": files})


def on_selection(held: AuditedCommit, selection: Selection, outputs: list[SelectionAudit]) -> AuditedCommit:
    """A commit's record once its selection is made: the selection in brief, and the results that
    came before it judged now."""
    brief = Brief(
        selection_id=selection.id,
        run_all=selection.run_all,
        kept=tuple(sorted(short_id(k.test_id) for k in selection.kept)),
        pruned={short_id(p.test_id): p.covered_by[:MAX_COVERED_BY] for p in selection.pruned},
        tests_known=selection.metrics.tests_known,
        saved_s=selection.metrics.saved_s,
    )
    waiting = held.pending
    held = held.model_copy(update={"selection": brief, "pending": ()})
    for result in waiting:
        held = _judge(held, selection.repo, selection.sha, result, outputs)
    return held


def on_result(held: AuditedCommit, result: ResultEvent, outputs: list[SelectionAudit]) -> AuditedCommit | None:
    """The commit's record after one of its results (None: the result says nothing of the selection)."""
    if result.status == "skipped":
        return None
    waiting = Pending(
        result_id=result.id,
        test_id=result.test_id,
        run_id=result.run_id,
        status=result.status,
        selected=result.selected,
    )
    if held.selection is None and result.selected is None:
        # Held until the selection comes: every failure, and enough passes to tell an audited run.
        room = MAX_PENDING if result.status in FAILING else MAX_PENDING // 4
        if len(held.pending) < room and all(p.result_id != result.id for p in held.pending):
            return held.model_copy(update={"pending": (*held.pending, waiting)})
        return held
    return _judge(held, result.repo, result.commit, waiting, outputs)


def _judge(held: AuditedCommit, repo: str, sha: str, result: Pending, outputs: list[SelectionAudit]) -> AuditedCommit:
    """The audit events of one result whose selection is known (from the result or the commit)."""
    brief = held.selection
    tid = short_id(result.test_id)
    if result.selected is not None:  # the job that ran it knew (its plan may span several commits)
        kept = result.selected
    else:
        assert brief is not None
        kept = brief.run_all or tid in brief.kept
    if kept:
        return held
    common = {
        "repo": repo,
        "sha": sha,
        "selection_id": brief.selection_id if brief else "",
        "result_id": result.result_id,
        "run_id": result.run_id,
        "status": result.status,
        "changed_files": held.changed_files or (),
        "kept": len(brief.kept) if brief else 0,
        "tests_known": brief.tests_known if brief else 0,
        "saved_s": brief.saved_s if brief else 0.0,
    }
    if not held.audited:
        outputs.append(SelectionAudit(kind="audited", **common))
        held = held.model_copy(update={"audited": True})
    if result.status in FAILING and tid not in held.missed:
        outputs.append(SelectionAudit(kind="miss", test_id=result.test_id, evidence=_why(brief, tid), **common))
        held = held.model_copy(update={"missed": (*held.missed, tid)})
    return held


def _why(brief: Brief | None, tid: str) -> str:
    if brief is None:
        return "the job's selection did not keep it (the commit's own selection is not known here)"
    if tid in brief.pruned:
        return f"pruned: its changed code was covered by {', '.join(brief.pruned[tid])}"
    return (
        "not selected: its recorded evidence executes none of the changed code "
        "(stale or missing evidence, code run at import, or a change fastci does not see)"
    )
