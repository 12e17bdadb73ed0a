"""selection-auditor: measures the selection's safety in production, from the runs that went beyond it.

Every result of a test the selection did not keep for its commit (a shadow-mode job, a nightly or
any full run, ``subset-and-rest``) audits that selection: the commit is *audited* once, and each
such test that failed is a *miss*, an event naming the commit, the test and what the selection knew
of it. Whether a result's test was kept comes from the result itself when the job asked
(``ResultEvent.selected``, set by ``pytest --fastci-select``), else from the commit's own selection.
test-selection reads the misses and widens the repository's selection for a while.

Partitioned by repo (results are repartitioned by their ``repo`` field); small values the repo owns:
- ``(repo, "commit", sha)``: the commit's changed files, its selection in brief (kept tests as short
  ids, pruned ones with what covered them), and the failures that arrived before the selection;
- ``(repo, "recent")``: the last ``RECENT_COMMITS`` shas, so a commit's value is dropped once it is
  older than that, and the state grows with nothing.
Every write is a set, and each audit event's id derives from (repo, sha, kind, test): a result
redelivered or replayed emits nothing new.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from fastci.core.events import Event, Record
from fastci.core.processor import Processor, StateReader, Step, Transaction, compound_key
from fastci.inputs import CommitEvent, ResultEvent
from fastci.selection.events import MAX_CHANGED_FILES, Selection, SelectionAudit
from fastci.selection.graph import short_id

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


class AuditState(Record):
    commit: AuditedCommit | None = None
    recent: tuple[str, ...] | None = None


def commit_key(repo: str, sha: str) -> str:
    return compound_key(repo, "commit", sha)


def recent_key(repo: str) -> str:
    return compound_key(repo, "recent")


class SelectionAuditProcessor(Processor[AuditState]):
    name: ClassVar[str] = "selection-auditor"  # not "selection-audit": that is the topic (and its view)
    inputs: ClassVar[tuple[str, ...]] = (CommitEvent.TOPIC, Selection.TOPIC, ResultEvent.TOPIC)
    outputs: ClassVar[tuple[str, ...]] = (SelectionAudit.TOPIC,)
    state_model: ClassVar[type[Record]] = AuditState
    partition_by = {ResultEvent.TOPIC: "repo"}

    def process(self, state: StateReader[AuditState], event: Event) -> Step[AuditState]:
        tx = Transaction(state)
        outputs: list[Event] = []
        if isinstance(event, CommitEvent):
            held = _commit(tx, event.repo, event.sha)
            files = tuple(sorted({f.path for f in event.changed_files}))[:MAX_CHANGED_FILES]
            _save(tx, event.repo, event.sha, held.model_copy(update={"changed_files": files}))
        elif isinstance(event, Selection):
            held = _commit(tx, event.repo, event.sha)
            brief = Brief(
                selection_id=event.id,
                run_all=event.run_all,
                kept=tuple(sorted(short_id(k.test_id) for k in event.kept)),
                pruned={short_id(p.test_id): p.covered_by[:MAX_COVERED_BY] for p in event.pruned},
                tests_known=event.metrics.tests_known,
                saved_s=event.metrics.saved_s,
            )
            waiting = held.pending
            held = held.model_copy(update={"selection": brief, "pending": ()})
            for result in waiting:  # the results that came before their selection
                held = _judge(held, event.repo, event.sha, result, outputs)
            _save(tx, event.repo, event.sha, held)
        elif isinstance(event, ResultEvent) and event.status != "skipped":
            held = _commit(tx, event.repo, event.commit)
            waiting = Pending(
                result_id=event.id,
                test_id=event.test_id,
                run_id=event.run_id,
                status=event.status,
                selected=event.selected,
            )
            if held.selection is None and event.selected is None:
                # Held until the selection comes: every failure, and enough passes to tell an audited run.
                room = MAX_PENDING if event.status in FAILING else MAX_PENDING // 4
                if len(held.pending) < room:
                    held = held.model_copy(update={"pending": (*held.pending, waiting)})
            else:
                held = _judge(held, event.repo, event.commit, waiting, outputs)
            _save(tx, event.repo, event.commit, held)
        return Step(writes=tx.writes, outputs=outputs)


def _judge(held: AuditedCommit, repo: str, sha: str, result: Pending, outputs: list[Event]) -> AuditedCommit:
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


def _commit(tx: Transaction[AuditState], repo: str, sha: str) -> AuditedCommit:
    held = tx.get(commit_key(repo, sha))
    return (held.commit if held else None) or AuditedCommit()


def _save(tx: Transaction[AuditState], repo: str, sha: str, held: AuditedCommit) -> None:
    """Store a commit's value, and forget the oldest commit once more than RECENT_COMMITS are held."""
    key = commit_key(repo, sha)
    if tx.get(key) is None:
        recent = (tx.get(recent_key(repo)) or AuditState()).recent or ()
        recent = (*recent, sha)
        for old in recent[:-RECENT_COMMITS]:
            tx.set(commit_key(repo, old), None)
        tx.set(recent_key(repo), AuditState(recent=recent[-RECENT_COMMITS:]))
    tx.set(key, AuditState(commit=held))
