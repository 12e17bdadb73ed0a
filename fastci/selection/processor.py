"""test-selection: keeps the evidence graph of each repository and answers every commit with a selection.

Partitioned by repo (evidence and results are repartitioned by their ``repo`` field), the graph is
kept as many small values under keys the repo owns, never one big one (docs/selection.md and the design's "Big state
without big values"):
- ``(repo, "evidence", test)``: the units the test executed, each with its calling contexts;
- ``(repo, "unit", unit id)``: the tests that executed the unit, each with those contexts;
- ``(repo, "file", path)``: the tests that executed any code in the file;
- ``(repo, "catalog", bucket)``: known tests (from results and evidence) with their mean duration,
  chips, and whether they have evidence; 64 buckets, so a result rewrites one small value;
- and the postings of import evidence, file reads, fixtures and distributions, the repo's audit
  records, its widening and its policy.
Each kind is a ``KeySpace`` with a record of its own (``SelectionProcessor.key_spaces``). New
evidence for a test replaces its old evidence (postings it left are cleared). All of these writes
are sets, not increments, so replaying an event rewrites the same values.

For a commit: tests that executed a modified or deleted unit are selected; a changed module body or
class body selects every test that ran code in that file (such code runs at import, before any
test); a changed non-Python file that is not documentation selects everything; tests without
evidence, and test functions the commit adds or edits, are always kept. Pruning then keeps the
cheapest set covering every changed (unit, context) pair the selection covers
(``fastci.selection.pruning``).

It also audits its own selections (``fastci.selection.audit``): each commit's selection in brief,
under ``(repo, "audit", sha)``, judged by the results of tests it left out; a miss widens the
repository's next selections (``(repo, "widening")``) at once, in event-time order.
"""

from __future__ import annotations

import fnmatch
import functools
import math
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from pydantic import Field

from fastci.contracts.keep_reasons import Reason
from fastci.core.events import Event, Record
from fastci.core.processor import KEY_SEPARATOR, KeySpace, Processor, StateReader, Step, Transaction
from fastci.inputs import CommitEvent, EvidenceEvent, ResultEvent
from fastci.selection.audit import RECENT_COMMITS, AuditedCommit, on_commit, on_result, on_selection
from fastci.selection.events import (
    MAX_CHANGED_FILES,
    MAX_COVERED_BY,
    MAX_FUNCTIONS,
    MAX_KEPT,
    MAX_PRUNED_LISTED,
    MAX_UNEVIDENCED_LISTED,
    KeptTest,
    PrunedTest,
    Selection,
    SelectionAudit,
    SelectionMetrics,
    SelectionPolicy,
)
from fastci.selection.files import effect_of
from fastci.selection.graph import DIRECT_HOPS, executions, unit_executions, unit_name
from fastci.selection.pruning import prune
from fastci.selection.units import BODY, MODULE, is_test_file
from fastci.shared.test_ids import BUCKETS, DEFAULT_DURATION_S, bucket_of, short_id, untraced

EXTENSION_SUFFIXES = (".so", ".pyd")  # compiled modules (import evidence names them by file)
RECENT_RUNS = 8  # durations kept per test; their mean is its expected duration


class CatalogEntry(Record):
    test_id: str
    recent_s: dict[str, float] = Field(default_factory=dict, description="run id -> duration, latest runs")
    traced: tuple[str, ...] = Field(default=(), description="runs of recent_s measured while evidence was recorded")
    chips: int = 0
    evidence: bool = False

    @property
    def mean_s(self) -> float:
        durations = untraced(self.recent_s, self.traced)
        return sum(durations) / len(durations) if durations else DEFAULT_DURATION_S


DEFAULT_WIDEN_COMMITS = 5  # clean audited commits a selection stays widened after a miss (SelectionPolicy)
MAX_MISSED = 32


class Widening(Record):
    """After an audited miss: the files the missed change touched, and how many clean audited commits
    more the repository's selection stays wide (no pruning, every test of those files)."""

    remaining: int
    files: tuple[str, ...] = ()
    missed: tuple[str, ...] = ()  # shas of missed commits: their own audits do not count as clean
    since: str = ""  # the sha of the latest miss


class TestEvidence(Record):
    """What a test's latest evidence says it executed: the postings below are kept in step with it."""

    __test__ = False

    units: dict[str, tuple[str, ...]] = Field(default_factory=dict, description="unit id -> contexts")
    files: tuple[str, ...] = ()
    reads: tuple[str, ...] = Field(default=(), description="the files the test read (when recorded)")
    fixtures: tuple[str, ...] = Field(default=(), description="its fixtures' unit ids")


class UnitPostings(Record):
    """The tests that executed a unit, each with the contexts it ran in."""

    tests: dict[str, tuple[str, ...]] = Field(default_factory=dict, description="short test id -> contexts")


class TestSet(Record):
    """Tests by short id, sorted: those that ran code of a file, read a file, or used a fixture."""

    __test__ = False

    tests: tuple[str, ...] = ()


class CatalogBucket(Record):
    """The known tests of one catalog bucket, by short id."""

    tests: dict[str, CatalogEntry] = Field(default_factory=dict, description="short test id -> its entry")


class ImportEvidence(Record):
    """A module's latest import evidence (it is not a test)."""

    units: tuple[str, ...] = Field(default=(), description="the units it ran at import, sorted")
    importers: tuple[str, ...] = Field(default=(), description="the test files that import it")
    reads: tuple[str, ...] = Field(default=(), description="the files it read at import")
    distributions: tuple[str, ...] = Field(default=(), description="the distributions it imports")

    @staticmethod
    def from_union_fields(state: dict[str, Any]) -> dict[str, Any]:
        """Stored before key spaces, its units were a dict of unit id -> () (``from_union``)."""
        units = state.get("units")
        return {**state, "units": sorted(units)} if isinstance(units, dict) else state


class ModuleSet(Record):
    """Modules (by path), sorted: those that ran a unit at import, or read a file at import."""

    modules: tuple[str, ...] = ()


class ExtensionModules(Record):
    """The repository's compiled extension modules that import evidence names, sorted."""

    modules: tuple[str, ...] = ()


class DistributionImporters(Record):
    """The modules (test files) whose import evidence imports a distribution, sorted."""

    importers: tuple[str, ...] = ()


class ReadsTracked(Record):
    """Whether some of the repository's evidence records the files its tests read."""

    reads_tracked: bool = False


class DistsTracked(Record):
    """Whether some of the repository's import evidence records the distributions it imports."""

    dists_tracked: bool = False


class WideningPolicy(Record):
    """The repository's published selection policy (``SelectionPolicy``), as far as it is kept."""

    widen_commits: int = DEFAULT_WIDEN_COMMITS


class AuditedShas(Record):
    """The commits of the repository with an audit record, oldest first."""

    shas: tuple[str, ...] = ()


# The kinds of state test-selection keeps, each under a repo; each kind's key names it second.
EVIDENCE = KeySpace("evidence", TestEvidence, ("test_id",))
UNITS = KeySpace("unit", UnitPostings, ("unit",))  # the tests that ran a unit at test time
FILES = KeySpace("file", TestSet, ("path",))  # the tests that ran any code of a file
CATALOG = KeySpace("catalog", CatalogBucket, ("bucket",))  # 64 buckets, so a result rewrites one small value
IMPORTS = KeySpace("import", ImportEvidence, ("module",))
IMPORT_UNITS = KeySpace("import-unit", ModuleSet, ("unit",))  # the modules a unit ran at import of
READS = KeySpace("reads", TestSet, ("path",))  # the tests that read a file
IMPORT_READS = KeySpace("import-reads", ModuleSet, ("path",))  # the modules that read a file at import
FIXTURES = KeySpace("fixture", TestSet, ("unit",))  # the tests whose closure uses a fixture
EXTENSIONS = KeySpace("extensions", ExtensionModules)
DISTS = KeySpace("dist", DistributionImporters, ("distribution",))
DISTS_TRACKED = KeySpace("dists-tracked", DistsTracked)
READS_TRACKED = KeySpace("reads-tracked", ReadsTracked)
WIDENING = KeySpace("widening", Widening)
POLICY = KeySpace("policy", WideningPolicy)
AUDITS = KeySpace("audit", AuditedCommit, ("sha",))  # a commit's audit record
AUDITED_SHAS = KeySpace("audited-shas", AuditedShas)

# What a key never written reads as (frozen: one instance of each does for all).
_NO_EVIDENCE = TestEvidence()
_NO_POSTING = UnitPostings()
_NO_TESTS = TestSet()
_NO_BUCKET = CatalogBucket()
_NO_IMPORT = ImportEvidence()
_NO_MODULES = ModuleSet()
_NO_EXTENSIONS = ExtensionModules()
_NO_IMPORTERS = DistributionImporters()


# compound_key(repo, kind, name), spelled out: these are built for every unit of every evidence event.
def evidence_key(repo: str, test_id: str) -> str:
    return f"{repo}{KEY_SEPARATOR}evidence{KEY_SEPARATOR}{test_id}"


def unit_key(repo: str, uid: str) -> str:
    return f"{repo}{KEY_SEPARATOR}unit{KEY_SEPARATOR}{uid}"


def file_key(repo: str, path: str) -> str:
    return f"{repo}{KEY_SEPARATOR}file{KEY_SEPARATOR}{path}"


def catalog_key(repo: str, bucket: int) -> str:
    return f"{repo}{KEY_SEPARATOR}catalog{KEY_SEPARATOR}{bucket}"


def import_key(repo: str, module: str) -> str:
    return f"{repo}{KEY_SEPARATOR}import{KEY_SEPARATOR}{module}"


def import_unit_key(repo: str, uid: str) -> str:
    return f"{repo}{KEY_SEPARATOR}import-unit{KEY_SEPARATOR}{uid}"


def reads_key(repo: str, path: str) -> str:
    return f"{repo}{KEY_SEPARATOR}reads{KEY_SEPARATOR}{path}"


def import_reads_key(repo: str, path: str) -> str:
    return f"{repo}{KEY_SEPARATOR}import-reads{KEY_SEPARATOR}{path}"


def fixture_key(repo: str, uid: str) -> str:
    return f"{repo}{KEY_SEPARATOR}fixture{KEY_SEPARATOR}{uid}"


def extensions_key(repo: str) -> str:
    return EXTENSIONS.key(repo)


def dist_key(repo: str, distribution: str) -> str:
    return DISTS.key(repo, distribution)


def dists_tracked_key(repo: str) -> str:
    return DISTS_TRACKED.key(repo)


def reads_tracked_key(repo: str) -> str:
    return READS_TRACKED.key(repo)


def widening_key(repo: str) -> str:
    return WIDENING.key(repo)


def policy_key(repo: str) -> str:
    return POLICY.key(repo)


def audit_key(repo: str, sha: str) -> str:
    return AUDITS.key(repo, sha)


def audited_shas_key(repo: str) -> str:
    return AUDITED_SHAS.key(repo)


class SelectionProcessor(Processor[Record]):
    name: ClassVar[str] = "test-selection"  # not "selection": that is the topic (and its view)
    inputs: ClassVar[tuple[str, ...]] = (
        EvidenceEvent.TOPIC,
        ResultEvent.TOPIC,
        CommitEvent.TOPIC,
        SelectionPolicy.TOPIC,
    )
    outputs: ClassVar[tuple[str, ...]] = (Selection.TOPIC, SelectionAudit.TOPIC)
    key_spaces = (
        EVIDENCE,
        UNITS,
        FILES,
        CATALOG,
        IMPORTS,
        IMPORT_UNITS,
        READS,
        IMPORT_READS,
        FIXTURES,
        EXTENSIONS,
        DISTS,
        DISTS_TRACKED,
        READS_TRACKED,
        WIDENING,
        POLICY,
        AUDITS,
        AUDITED_SHAS,
    )
    partition_by = {EvidenceEvent.TOPIC: "repo", ResultEvent.TOPIC: "repo"}

    def __init__(self, pruning: bool = True, run_everything: bool = False, direct_hops: int = DIRECT_HOPS) -> None:
        """The defaults are what runs in production; the simulator's ablation turns pruning off
        (keep every selected test) or selection off (every commit runs every known test);
        ``direct_hops`` 0 prunes as recordings made before wrappers counted as direct calls did
        (``fastci.selection.graph``)."""
        self.pruning = pruning
        self.run_everything = run_everything
        self.direct_hops = direct_hops

    def process(self, state: StateReader[Record], event: Event) -> Step[Record]:
        if isinstance(event, EvidenceEvent) and event.kind == "import":
            return Step(writes=_record_import(state, event))
        if isinstance(event, EvidenceEvent):
            return Step(writes=_record_evidence(state, event, self.direct_hops))
        if isinstance(event, ResultEvent):
            tx = Transaction(state)
            tx.writes.update(_record_result(tx, event))
            audits: list[SelectionAudit] = []
            _audit(tx, event.repo, event.commit, lambda held: on_result(held, event, audits))
            return Step(writes=_widened(tx, audits), outputs=audits)
        if isinstance(event, CommitEvent):
            tx = Transaction(state)
            _audit(tx, event.repo, event.sha, lambda held: on_commit(held, event))
            catalog = _catalog(tx, event.repo)
            gone = removed_tests(event, catalog)
            selection = select(tx, event, gone, catalog, pruning=self.pruning, run_everything=self.run_everything)
            tx.writes.update(_forget_tests(tx, event.repo, gone))
            audits = []
            _audit(tx, event.repo, event.sha, lambda held: on_selection(held, selection, audits))
            return Step(writes=_widened(tx, audits), outputs=(selection, *audits))
        if isinstance(event, SelectionPolicy):
            return Step(writes={policy_key(event.repo): WideningPolicy(widen_commits=event.widen_commits)})
        return Step()


def _audit(
    tx: Transaction[Record],
    repo: str,
    sha: str,
    change: Callable[[AuditedCommit], AuditedCommit | None],
) -> None:
    """Update a commit's audit record (``change`` returns None to leave it as it is); a record for a
    new commit pushes the oldest out once more than RECENT_COMMITS are kept."""
    key = audit_key(repo, sha)
    stored = AUDITS.get(tx, key)
    held = change(stored or AuditedCommit())
    if held is None:
        return
    if stored is None:
        known = AUDITED_SHAS.get(tx, audited_shas_key(repo))
        shas = (*(known.shas if known else ()), sha)
        for old in shas[:-RECENT_COMMITS]:
            tx.set(audit_key(repo, old), None)
        tx.set(audited_shas_key(repo), AuditedShas.trusted({"shas": shas[-RECENT_COMMITS:]}))
    tx.set(key, held)


def _widened(tx: Transaction[Record], audits: list[SelectionAudit]) -> dict[str, Record | None]:
    """The writes so far, with what the audits found applied: at once, so the next commit's
    selection sees every miss before it in time."""
    for audit in audits:
        tx.writes.update(_widen(tx, audit))
    return tx.writes


def _widen(state: StateReader[Record], audit: SelectionAudit) -> dict[str, Record | None]:
    """A miss widens the repo's selection for the policy's number of clean audited commits; each
    audited commit without a miss counts one down."""
    held = WIDENING.get(state, widening_key(audit.repo)) or Widening(remaining=0)
    if audit.kind == "miss":
        policy = POLICY.get(state, policy_key(audit.repo))
        commits = DEFAULT_WIDEN_COMMITS if policy is None else policy.widen_commits
        if commits == 0:
            return {}
        files = tuple(dict.fromkeys((*held.files, *audit.changed_files)))[-MAX_CHANGED_FILES:]
        missed = tuple(dict.fromkeys((*held.missed, audit.sha)))[-MAX_MISSED:]
        widened = Widening(remaining=commits, files=files, missed=missed, since=audit.sha)
    elif held.remaining == 0 or audit.sha in held.missed:
        return {}
    else:
        left = held.remaining - 1
        widened = held.model_copy(update={"remaining": left, "files": held.files if left else ()})
    return {widening_key(audit.repo): widened}


def _record_evidence(
    state: StateReader[Record], event: EvidenceEvent, direct_hops: int = DIRECT_HOPS
) -> dict[str, Record | None]:
    units, files = executed_by(event, direct_hops)
    tx = Transaction(state)
    _set_evidence(tx, event.repo, event.test_id, units, files, event.reads, event.fixtures)
    if event.reads is not None and not _reads_tracked(tx, event.repo):
        tx.set(reads_tracked_key(event.repo), ReadsTracked(reads_tracked=True))
    tid = short_id(event.test_id)
    bucket_key = catalog_key(event.repo, bucket_of(tid))
    catalog = (CATALOG.get(tx, bucket_key) or _NO_BUCKET).tests
    entry = catalog.get(tid)
    if entry is None or not entry.evidence:  # the usual case, a test's next evidence, writes nothing here
        updated = (entry or CatalogEntry(test_id=event.test_id)).model_copy(update={"evidence": True})
        tx.set(bucket_key, _bucket(_with(catalog, tid, updated)))
    return tx.writes


def _record_import(state: StateReader[Record], event: EvidenceEvent) -> dict[str, Record | None]:
    """A module's import evidence replaces its last: the units it ran at import (their postings name
    the module) and the test files that import it. Not a test: the catalog does not count it."""
    units, _ = executed_by(event)
    tx = Transaction(state)
    key = import_key(event.repo, event.test_id)
    old = IMPORTS.get(tx, key) or _NO_IMPORT
    read = tuple(sorted(set(event.reads or ())))
    distributions = tuple(sorted(set(event.distributions)))
    tx.set(
        key,
        ImportEvidence.trusted(
            {
                "units": tuple(sorted(units)),
                "importers": tuple(event.importers),
                "reads": read,
                "distributions": distributions,
            }
        ),
    )
    _set_postings(tx, IMPORT_READS, "modules", event.repo, event.test_id, set(old.reads), set(read))
    if event.test_id.endswith(EXTENSION_SUFFIXES):  # the repo's known extension modules, for the build map
        known = set((EXTENSIONS.get(tx, extensions_key(event.repo)) or _NO_EXTENSIONS).modules)
        if event.test_id not in known:
            modules = tuple(sorted(known | {event.test_id}))
            tx.set(extensions_key(event.repo), ExtensionModules.trusted({"modules": modules}))
    # A test file's distributions: a re-pinned one selects the tests of the files that import it.
    old_dists, new_dists = set(old.distributions), set(distributions)
    _set_postings(tx, DISTS, "importers", event.repo, event.test_id, old_dists, new_dists)
    if not _dists_tracked(tx, event.repo):
        tx.set(dists_tracked_key(event.repo), DistsTracked(dists_tracked=True))
    _set_postings(tx, IMPORT_UNITS, "modules", event.repo, event.test_id, set(old.units), set(units))
    return tx.writes


def executed_by(
    event: EvidenceEvent, direct_hops: int = DIRECT_HOPS
) -> tuple[dict[str, tuple[str, ...]], frozenset[str]]:
    """Unit id -> its sorted context ids (none: not recorded), and the files that ran, of evidence of
    either shape (units and calls, or stacks); shared, never mutated."""
    if event.units:
        return _executed_units(event.units, event.calls, direct_hops)
    return _executed(tuple(s.stack for s in event.stacks), direct_hops)


@functools.lru_cache(maxsize=1024)  # a traced test's evidence repeats run after run until its code changes
def _executed(
    stacks: tuple[str, ...], direct_hops: int = DIRECT_HOPS
) -> tuple[dict[str, tuple[str, ...]], frozenset[str]]:
    units, files = executions(stacks, direct_hops)
    return {u: tuple(sorted(c)) for u, c in units.items()}, frozenset(files)


@functools.lru_cache(maxsize=1024)
def _executed_units(
    units: tuple[str, ...], calls: tuple[tuple[int, ...], ...], direct_hops: int = DIRECT_HOPS
) -> tuple[dict[str, tuple[str, ...]], frozenset[str]]:
    found, files = unit_executions(units, calls, direct_hops)
    return {u: tuple(sorted(c)) for u, c in found.items()}, frozenset(files)


def _forget_tests(state: StateReader[Record], repo: str, tests: set[str]) -> dict[str, Record | None]:
    """Writes that remove tests a commit deleted or renamed: their evidence, their postings and
    their catalog entries (a kept test id that no longer exists would make pytest run nothing)."""
    tx = Transaction(state)
    for test in sorted(tests):
        _set_evidence(tx, repo, test, {}, set())
        tx.set(evidence_key(repo, test), None)
        bucket_key = catalog_key(repo, bucket_of(short_id(test)))
        catalog = dict((CATALOG.get(tx, bucket_key) or _NO_BUCKET).tests)
        catalog.pop(short_id(test), None)
        tx.set(bucket_key, _bucket(catalog))
    return tx.writes


def _set_evidence(
    tx: Transaction[Record],
    repo: str,
    test: str,
    new_units: dict[str, tuple[str, ...]],
    files: set[str] | frozenset[str],
    reads: tuple[str, ...] | None = None,
    fixtures: tuple[str, ...] = (),
) -> None:
    """Replace what ``test`` executed (and the files it read, when recorded), keeping the unit,
    file and read postings in step with it."""
    tid = short_id(test)
    old = EVIDENCE.get(tx, evidence_key(repo, test)) or _NO_EVIDENCE
    old_units, old_files = old.units, set(old.files)
    new_fixtures = {short_id(f) for f in fixtures}
    tx.set(
        evidence_key(repo, test),
        TestEvidence.trusted(
            {
                "units": new_units,
                "files": tuple(sorted(files)),
                "reads": tuple(sorted(set(reads or ()))),
                "fixtures": tuple(sorted(new_fixtures)),
            }
        ),
    )
    _set_postings(tx, READS, "tests", repo, tid, set(old.reads), set(reads or ()))
    _set_postings(tx, FIXTURES, "tests", repo, tid, set(old.fixtures), new_fixtures)
    # A posting is rewritten only when its entry for this test differs: a popular unit's posting
    # lists thousands of tests, and a test's next evidence mostly repeats its last. The check reads
    # the posting itself, not the test's old evidence, so a replay after a crash that persisted only
    # some of an event's writes still repairs the rest.
    for uid in old_units.keys() | new_units.keys():
        contexts = new_units.get(uid)
        key = unit_key(repo, uid)
        tests = (UNITS.get(tx, key) or _NO_POSTING).tests
        if tests.get(tid) != contexts:
            tx.set(key, UnitPostings.trusted({"tests": _with(tests, tid, contexts)}))
    for path in old_files | files:
        key = file_key(repo, path)
        members = (FILES.get(tx, key) or _NO_TESTS).tests
        if (tid in members) != (path in files):
            updated = set(members) | {tid} if path in files else set(members) - {tid}
            tx.set(key, TestSet.trusted({"tests": tuple(sorted(updated))}))


def _set_postings(
    tx: Transaction[Record], space: KeySpace[Any], field: str, repo: str, member: str, old: set[str], new: set[str]
) -> None:
    """Keep ``member`` in the postings (``field``, a space's one field) of exactly the names in ``new``
    (left ``old``); a posting left empty is deleted."""
    for name in old | new:
        key = space.key(repo, name)
        held = space.get(tx, key)
        members = getattr(held, field) if held is not None else ()
        if (member in members) != (name in new):
            updated = set(members) | {member} if name in new else set(members) - {member}
            tx.set(key, space.record.trusted({field: tuple(sorted(updated))}) if updated else None)


def _record_result(state: StateReader[Record], event: ResultEvent) -> dict[str, Record | None]:
    tid = short_id(event.test_id)
    key = catalog_key(event.repo, bucket_of(tid))
    catalog = (CATALOG.get(state, key) or _NO_BUCKET).tests
    entry = catalog.get(tid) or CatalogEntry(test_id=event.test_id)
    # Keyed by run id, so a redelivered result rewrites the same value (this key is not the
    # partition key, whose dedup window would catch it).
    recent = {**entry.recent_s, event.run_id: event.duration_s}
    recent = dict(list(recent.items())[-RECENT_RUNS:])
    traced = tuple(run for run in recent if run in entry.traced or (event.traced and run == event.run_id))
    # A hardware test run in its CPU/simulator form holds no chips; that says nothing of what it needs.
    updated = entry.model_copy(update={"recent_s": recent, "traced": traced, "chips": event.chips or entry.chips})
    return {key: _bucket(_with(catalog, tid, updated))}


def _with(mapping: dict, key: str, value: object | None) -> dict:
    """A copy of a sorted mapping with ``key`` set to ``value`` (removed when None), still sorted.
    Postings and catalog buckets stay in key order, so a value's encoding does not depend on the
    order its events arrived in (which differs between runtimes); only an insertion re-sorts."""
    updated = dict(mapping)
    if value is None:
        updated.pop(key, None)
        return updated
    inserted = key not in updated
    updated[key] = value
    return dict(sorted(updated.items())) if inserted else updated


# The values of postings and catalog buckets are built by this module from validated parts, so not
# validated again (``Record.trusted``, every field given): doing so on every event cost more than the
# rest of the processor.
def _bucket(catalog: dict[str, CatalogEntry]) -> CatalogBucket:
    return CatalogBucket.trusted({"tests": catalog})


def _reads_tracked(state: StateReader[Record], repo: str) -> bool:
    held = READS_TRACKED.get(state, reads_tracked_key(repo))
    return held is not None and held.reads_tracked


def _dists_tracked(state: StateReader[Record], repo: str) -> bool:
    held = DISTS_TRACKED.get(state, dists_tracked_key(repo))
    return held is not None and held.dists_tracked


def _catalog(state: StateReader[Record], repo: str) -> dict[str, CatalogEntry]:
    catalog: dict[str, CatalogEntry] = {}
    for bucket in range(BUCKETS):
        catalog.update((CATALOG.get(state, catalog_key(repo, bucket)) or _NO_BUCKET).tests)
    return catalog


def removed_tests(commit: CommitEvent, catalog: dict[str, CatalogEntry]) -> set[str]:
    """Known tests the commit deletes: deleted test functions, and every test of a deleted test
    class or of a test file deleted or renamed (its node ids change with its path)."""
    return removed_test_ids(commit, {entry.test_id for entry in catalog.values()})


def removed_test_ids(commit: CommitEvent, known: set[str]) -> set[str]:
    """Of the ``known`` test ids, those the commit deletes (see ``removed_tests``)."""
    gone = {test for c in commit.changed_functions if c.change == "deleted" and (test := test_of(c.path, c.qualname))}
    prefixes = [
        f"{c.path}::{c.qualname.removesuffix(f'.{BODY}').replace('.', '::')}::"
        for c in commit.changed_functions
        if c.change == "deleted" and c.qualname.endswith(f".{BODY}") and is_test_file(c.path)
    ]
    prefixes += [
        f"{f.old_path or f.path}::"
        for f in commit.changed_files
        if f.change in ("deleted", "renamed") and is_test_file(f.old_path or f.path)
    ]
    return {test for test in known if test in gone or (prefixes and test.startswith(tuple(prefixes)))}


def select(
    state: StateReader[Record],
    commit: CommitEvent,
    gone: frozenset[str] | set[str] = frozenset(),
    catalog: dict[str, CatalogEntry] | None = None,
    pruning: bool = True,
    run_everything: bool = False,
) -> Selection:
    """The selection for one commit, from the repo's graph as the store holds it now, leaving out
    the tests the commit removes (``gone``); ``catalog`` is the repo's, when already read. Without
    ``pruning`` every selected test is kept; with ``run_everything`` every known test is."""
    repo = commit.repo
    gone_ids = {short_id(test) for test in gone}
    known_tests = _catalog(state, repo) if catalog is None else catalog
    catalog = {tid: entry for tid, entry in known_tests.items() if tid not in gone_ids}
    affected = _Affected(gone_ids)
    importers = _Importers(state, repo, catalog)
    widening = WIDENING.get(state, widening_key(repo))
    widened = ""
    if widening is not None and widening.remaining > 0:
        pruning = False  # after a miss, the evidence is not trusted to prune
        widened = (
            f"widened after the miss at {widening.since[:12]}: no pruning, and every test of the "
            f"{len(widening.files)} file(s) the missed change touched, for {widening.remaining} more clean "
            "audited commit(s)"
        )
    run_all_reason = (
        "every test runs on every commit (selection off)"
        if run_everything
        else _affected_by_files(state, commit, importers, affected)
    )
    _affected_by_units(state, commit, importers, affected)
    for tid, entry in catalog.items():
        if not entry.evidence:
            affected.reasons[tid] = "no-evidence"
    # A doctest is the one test a docstring is code to: a changed library file keeps its doctests.
    changed_modules = tuple(
        f"{f.path}::" for f in commit.changed_files if f.path.endswith(".py") and not is_test_file(f.path)
    )
    if changed_modules:
        affected.keep(
            (tid for tid, entry in catalog.items() if entry.test_id.startswith(changed_modules)), "changed-test"
        )
    if widened:
        for path in widening.files:  # type: ignore[union-attr]
            for tid in (FILES.get(state, file_key(repo, path)) or _NO_TESTS).tests:
                if tid not in gone_ids:
                    affected.reasons.setdefault(tid, "widened")
    return _selection(commit, catalog, affected, pruning, run_all_reason, widened)


class _Affected:
    """What a commit's changes reach, gathered rule by rule: each test's reason, the changed units it
    is kept for, its (unit, context) pairs for pruning, and the changed units no evidence contains."""

    def __init__(self, gone_ids: set[str]) -> None:
        self.gone_ids = gone_ids  # tests the commit removes: never kept
        self.reasons: dict[str, Reason] = {}
        self.names: dict[str, str] = {}  # test ids of tests the catalog does not know yet (new tests)
        self.functions: dict[str, list[str]] = {}
        self.pairs: dict[str, set[tuple[str, str]]] = {}
        self.unevidenced: list[str] = []  # changed units no evidence shows running

    def keep(self, tids: Iterable[str], reason: Reason, unit: str | None = None) -> None:
        """Keep these tests (but those the commit removes) for ``reason``, naming ``unit`` if given."""
        for tid in sorted(set(tids) - self.gone_ids):
            _mark(self.reasons, tid, reason)
            if unit is not None:
                self.functions.setdefault(tid, []).append(unit)


def _affected_by_files(
    state: StateReader[Record], commit: CommitEvent, importers: _Importers, affected: _Affected
) -> str | None:
    """Keep the tests the commit's changed files reach by their kind (native code, dependency pins,
    data files); a file whose effect fastci cannot bound returns why every test must run."""
    repo = commit.repo
    for changed in commit.changed_files:
        effect, why = effect_of(changed)
        if effect == "suite":
            return why
        if effect == "extensions":
            known = (EXTENSIONS.get(state, extensions_key(repo)) or _NO_EXTENSIONS).modules
            built = [m for m in known if any(fnmatch.fnmatchcase(m, pattern) for pattern in changed.extensions)]
            if not built:
                return f"{why}: no evidence yet of a test importing {', '.join(changed.extensions)}"
            for module in built:
                affected.keep(importers.tests_of_module(module), "native-code-changed")
        elif effect == "dependencies":
            if not _dists_tracked(state, repo):
                return f"{why} (no evidence yet records which tests import which distributions)"
            for distribution in changed.distributions:
                files = (DISTS.get(state, dist_key(repo, distribution)) or _NO_IMPORTERS).importers
                affected.keep(importers.tests_of_files(files), "dependency-changed")
        elif effect == "readers":
            if not _reads_tracked(state, repo):
                return f"data file changed: {changed.path} (no evidence yet records which tests read files)"
            for path in {changed.path, changed.old_path or changed.path}:
                readers = set((READS.get(state, reads_key(repo, path)) or _NO_TESTS).tests)
                for module in (IMPORT_READS.get(state, import_reads_key(repo, path)) or _NO_MODULES).modules:
                    readers |= importers.tests_of_module(module)
                affected.keep(readers, "reads-changed-file")
    return None


def _affected_by_units(
    state: StateReader[Record], commit: CommitEvent, importers: _Importers, affected: _Affected
) -> None:
    """Keep the tests the commit's changed code units reach: module code, fixtures, code run at
    import, changed tests, and the tests whose evidence ran a changed unit (with their contexts)."""
    repo = commit.repo
    for change in commit.changed_functions:
        if change.qualname.endswith(f".{BODY}") and change.change == "added":
            continue  # a new class: no test ran it yet (its new tests are changed tests)
        if change.qualname.endswith(f".{BODY}") and change.change == "deleted" and is_test_file(change.path):
            continue  # a deleted test class: its tests went with it; what named it is listed as changed
        name = unit_name(change.path, change.qualname)
        if change.qualname == MODULE or change.qualname.endswith(f".{BODY}"):
            # Module code runs at import: the tests that ran code of the file, and every test whose
            # imports reach it (a registration made at import is used by code elsewhere).
            found = set((FILES.get(state, file_key(repo, change.path)) or _NO_TESTS).tests)
            affected.keep(found | importers.tests_of_module(change.path), "module-code", name)
            continue
        uid = short_id(name)
        if change.change != "added":
            # A fixture: every test whose closure uses it (a wider-scoped one ran for the first only).
            used_by = (FIXTURES.get(state, fixture_key(repo, uid)) or _NO_TESTS).tests
            affected.keep(used_by, "uses-changed-fixture", name)
            # A function that ran while a module was imported: every test importing that module.
            for module in (IMPORT_UNITS.get(state, import_unit_key(repo, uid)) or _NO_MODULES).modules:
                affected.keep(importers.tests_of_module(module), "import-time", name)
        test = test_of(change.path, change.qualname) if change.change != "deleted" else None
        if test is not None:
            tid = short_id(test)
            _mark(affected.reasons, tid, "changed-test")
            affected.names[tid] = test
        if change.change == "added":
            continue  # nothing ran it yet: the tests that call it changed too (or are new), and select
        posting = (UNITS.get(state, unit_key(repo, uid)) or _NO_POSTING).tests
        affected.keep(posting, "executes-changed-code", name)
        for tid, contexts in posting.items():
            if tid not in affected.gone_ids:
                # A unit the test ran in no recorded context: a context of its own, so no other test covers it.
                affected.pairs.setdefault(tid, set()).update((uid, context) for context in contexts or (f"test:{tid}",))
        if not posting and not is_test_file(change.path) and not _evidenced_elsewhere(state, repo, uid):
            makers = _tests_running_enclosing(state, repo, change.path, change.qualname, importers)
            if makers:
                # A lambda or inner def no test ran: only its enclosing unit makes it, so only the tests
                # that ran that unit can ever run it (a fallback never called, a key never used).
                affected.keep(makers, "runs-enclosing-code", name)
                continue
            # A blind spot: no test's evidence ran it, at test time, at import or as a fixture. It is
            # named, counts against coverage, and every test whose imports reach its module runs.
            affected.unevidenced.append(name)
            affected.keep(importers.tests_of_module(change.path), "import-time", name)


def _selection(
    commit: CommitEvent,
    catalog: dict[str, CatalogEntry],
    affected: _Affected,
    pruning: bool,
    run_all_reason: str | None,
    widened: str,
) -> Selection:
    """The selection event: the affected tests pruned by their pairs (unless a reason runs every
    known test), with what they cost and what they cover against every known test."""
    reasons, pairs, unevidenced = affected.reasons, affected.pairs, affected.unevidenced
    duration = _durations(catalog)
    cost = {tid: duration(tid) for tid in reasons}
    forced = frozenset(tid for tid, reason in reasons.items() if reason != "executes-changed-code" or not pruning)
    candidates = {tid: frozenset(pairs.get(tid, ())) for tid in reasons}
    pruned = prune(candidates, cost, forced)
    everything = set().union(*candidates.values()) if candidates else set()
    kept_pairs = set().union(*(candidates[t] for t in pruned.kept)) if pruned.kept else set()

    known = set(catalog) | set(reasons)
    if run_all_reason is None and not known:
        # Nothing known of this repo (no results, no evidence yet, or a repo name that does not
        # match theirs): selecting nothing would run nothing.
        run_all_reason = f"no test of {commit.repo} is known yet"
    if run_all_reason is None and len(pruned.kept) > MAX_KEPT:
        run_all_reason = f"more than {MAX_KEPT} tests are affected"
    run_all = run_all_reason is not None
    kept_ids = sorted(known) if run_all else list(pruned.kept)
    # fsum: a set's order differs between processes (string hashing), and a plain float sum with it
    all_s = math.fsum(duration(t) for t in known)
    kept_s = math.fsum(duration(t) for t in kept_ids)
    all_gpu = math.fsum(duration(t) * _chips(catalog.get(t)) for t in known)
    kept_gpu = math.fsum(duration(t) * _chips(catalog.get(t)) for t in kept_ids)
    name = {tid: (catalog[tid].test_id if tid in catalog else affected.names.get(tid, tid)) for tid in known}
    metrics = SelectionMetrics(
        tests_known=len(known),
        selected=len(reasons) if not run_all else len(known),
        kept=len(kept_ids),
        pruned=0 if run_all else len(pruned.covered_by),
        skipped=len(known) - len(kept_ids) - (0 if run_all else len(pruned.covered_by)),
        selection_ratio=len(kept_ids) / len(known) if known else 1.0,
        estimated_s_all=all_s,
        estimated_s_kept=kept_s,
        saved_s=max(0.0, all_s - kept_s),
        saved_gpu_s=max(0.0, all_gpu - kept_gpu),
        changed_units=len(commit.changed_functions),
        pairs_covered_by_all=len(everything),
        unevidenced_units=len(unevidenced),
        unevidenced=tuple(unevidenced[:MAX_UNEVIDENCED_LISTED]),
        pairs_covered_by_kept=len(everything) if run_all else len(kept_pairs),
        # Each unevidenced unit is a pair no test is known to cover: a blind spot is never perfect coverage.
        coverage_retention=1.0
        if run_all or not (everything or unevidenced)
        else len(kept_pairs) / (len(everything) + len(unevidenced)),
    )
    kept = (
        ()
        if run_all
        else tuple(
            KeptTest(
                test_id=name[tid],
                reason=reasons[tid],
                functions=tuple(sorted(set(affected.functions.get(tid, ()))))[:MAX_FUNCTIONS],
                estimated_s=duration(tid),
            )
            for tid in kept_ids
        )
    )
    pruned_tests = (
        ()
        if run_all
        else tuple(
            PrunedTest(test_id=name[tid], covered_by=tuple(name[k] for k in by[:MAX_COVERED_BY]))
            for tid, by in sorted(pruned.covered_by.items(), key=lambda item: name[item[0]])[:MAX_PRUNED_LISTED]
        )
    )
    return Selection(
        commit_id=commit.id,
        repo=commit.repo,
        sha=commit.sha,
        base=commit.parents[0] if commit.parents else None,
        hardware_path=commit.hardware_path,
        run_all=run_all,
        run_all_reason=run_all_reason or "",
        widened=widened,
        kept=kept,
        pruned=pruned_tests,
        metrics=metrics,
    )


class _Importers:
    """The tests whose files import a module, by its import evidence (read once per module)."""

    def __init__(self, state: StateReader[Record], repo: str, catalog: dict[str, CatalogEntry]) -> None:
        self.state, self.repo, self.catalog = state, repo, catalog
        self._by_file: dict[str, set[str]] | None = None

    def tests_of_module(self, module: str) -> set[str]:
        return self.tests_of_files((IMPORTS.get(self.state, import_key(self.repo, module)) or _NO_IMPORT).importers)

    def tests_of_files(self, files: tuple[str, ...] | list[str]) -> set[str]:
        if not files:
            return set()
        if self._by_file is None:
            self._by_file = {}
            for tid, entry in self.catalog.items():
                self._by_file.setdefault(entry.test_id.split("::", 1)[0], set()).add(tid)
        return set().union(*(self._by_file.get(path, set()) for path in files))


LOCALS = ".<locals>."  # how a nested unit's qualname spells its enclosing one


def _tests_running_enclosing(
    state: StateReader[Record], repo: str, path: str, qualname: str, importers: _Importers
) -> set[str]:
    """The tests that ran the innermost unit enclosing a nested one (``f.<locals>.<lambda>`` is made
    by ``f``, and runs only after ``f`` ran), at test time, as a fixture or at import; none for a unit
    nested in no function (a module's or a class body's lambdas: their maker is module code)."""
    while LOCALS in qualname:
        qualname = qualname.rsplit(LOCALS, 1)[0]
        uid = short_id(unit_name(path, qualname))
        found = set((UNITS.get(state, unit_key(repo, uid)) or _NO_POSTING).tests)
        found |= set((FIXTURES.get(state, fixture_key(repo, uid)) or _NO_TESTS).tests)
        for module in (IMPORT_UNITS.get(state, import_unit_key(repo, uid)) or _NO_MODULES).modules:
            found |= importers.tests_of_module(module)
        if found:
            return found
    return set()


def _evidenced_elsewhere(state: StateReader[Record], repo: str, uid: str) -> bool:
    """Whether evidence shows the unit running at import or as a fixture (not at test time)."""
    return bool(
        (IMPORT_UNITS.get(state, import_unit_key(repo, uid)) or _NO_MODULES).modules
        or (FIXTURES.get(state, fixture_key(repo, uid)) or _NO_TESTS).tests
    )


def _mark(reasons: dict[str, Reason], tid: str, reason: Reason) -> None:
    """Record why a test is selected; any reason that keeps it unconditionally wins over
    'executes-changed-code', which pruning may drop, whatever order the changes come in."""
    if reason != "executes-changed-code" and reasons.get(tid, "executes-changed-code") == "executes-changed-code":
        reasons[tid] = reason
    else:
        reasons.setdefault(tid, reason)


def test_of(path: str, qualname: str) -> str | None:
    """The pytest node id of a test function or method (``tests/test_x.py::TestY::test_z``), or None
    when the unit is not one (pytest's default discovery: ``test*`` functions in test files)."""
    if not is_test_file(path) or "<" in qualname:
        return None
    parts = qualname.split(".")
    if not parts[-1].startswith("test"):
        return None
    return "::".join([path, *parts])


def _durations(catalog: dict[str, CatalogEntry]) -> Callable[[str], float]:
    """A test's expected duration: the mean of its recorded runs; a test never run (a new one) costs
    what the repo's median test costs, as in the test plan, not a constant that may be a thousand
    times the suite's typical test (five new tests once made a 2 s suite look like 7 s)."""
    measured = sorted(entry.mean_s for entry in catalog.values() if entry.recent_s)
    typical_s = measured[len(measured) // 2] if measured else DEFAULT_DURATION_S

    def duration(tid: str) -> float:
        entry = catalog.get(tid)
        return entry.mean_s if entry is not None and entry.recent_s else typical_s

    return duration


def _chips(entry: CatalogEntry | None) -> int:
    return entry.chips if entry is not None else 0
