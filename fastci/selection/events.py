"""The selection decision for one commit: which tests to run, which were pruned, what it saves."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fastci.contracts.keep_reasons import Reason
from fastci.core.events import Event, FiniteFloat, Name, Record, Sha, Text, Timestamp

# The reasons a kept test's ``functions`` name the changed units it reaches (its exposure to them).
UNIT_REASONS: frozenset[Reason] = frozenset(
    {"executes-changed-code", "module-code", "import-time", "uses-changed-fixture", "runs-enclosing-code"}
)
MAX_KEPT = 5000  # tests listed per selection; more means run_all (the event stays under Kafka's 1 MiB)
MAX_PRUNED_LISTED = 2000  # pruned tests explained per selection (metrics.pruned counts them all)
MAX_COVERED_BY = 8  # kept tests named per pruned test
MAX_FUNCTIONS = 16  # changed functions named per kept test
MAX_UNEVIDENCED_LISTED = 16  # changed units no evidence contains, named per selection


class KeptTest(Record):
    test_id: Name
    reason: Reason
    functions: tuple[Name, ...] = Field(
        default=(), max_length=MAX_FUNCTIONS, description="Changed units it executes, as 'path::qualname'."
    )
    estimated_s: FiniteFloat = Field(ge=0, description="Expected duration (mean of its recorded runs).")


class PrunedTest(Record):
    test_id: Name
    covered_by: tuple[Name, ...] = Field(
        min_length=1,
        max_length=MAX_COVERED_BY,
        description="Kept tests that together execute every changed (function, calling context) it executes "
        "(the first 8 when more are needed).",
    )


class SelectionMetrics(Record):
    tests_known: int = Field(ge=0)
    selected: int = Field(ge=0, description="Tests affected by the change, before pruning.")
    kept: int = Field(ge=0)
    pruned: int = Field(ge=0)
    skipped: int = Field(ge=0, description="Known tests the change cannot affect.")
    selection_ratio: FiniteFloat = Field(ge=0, le=1, description="kept / tests_known (1 when nothing is known).")
    estimated_s_all: FiniteFloat = Field(ge=0)
    estimated_s_kept: FiniteFloat = Field(ge=0)
    saved_s: FiniteFloat = Field(ge=0)
    saved_gpu_s: FiniteFloat = Field(ge=0, description="Chip-seconds saved versus running every known test.")
    changed_units: int = Field(ge=0)
    pairs_covered_by_all: int = Field(ge=0, description="Changed (function, context) pairs the full suite executes.")
    pairs_covered_by_kept: int = Field(ge=0)
    unevidenced_units: int = Field(
        default=0,
        ge=0,
        description="Changed units no test's evidence shows running (at test time, import or as a fixture).",
    )
    unevidenced: tuple[Name, ...] = Field(
        default=(), max_length=MAX_UNEVIDENCED_LISTED, description="The first of them, as 'path::qualname'."
    )
    coverage_retention: FiniteFloat = Field(
        ge=0,
        le=1,
        description="pairs_covered_by_kept / (pairs_covered_by_all + unevidenced_units): a changed unit no "
        "evidence contains is a pair nobody covers (1 when nothing is to cover, or everything runs).",
    )


class Selection(Event):
    """The tests a commit needs. Key: repo. Id: derived from the commit event's id."""

    TOPIC: ClassVar[str] = "selection"
    KEY: ClassVar[str] = "repo"
    IDENTITY: ClassVar[tuple[str, ...]] = ("commit_id",)

    commit_id: str = Field(description="Id of the commits event this selection answers.")
    repo: Name
    sha: Sha
    base: Sha | None = Field(
        default=None, description="The commit's first parent: the change is the diff from it (None for a root)."
    )
    hardware_path: bool = Field(
        default=False, description="The commit's: the change can alter what runs on the accelerator."
    )
    run_all: bool = Field(description="Run every test (kept is then empty): a rule selected the whole suite.")
    run_all_reason: Text = ""
    widened: Text = Field(
        default="", description="Why the selection is wider than the evidence asks (after an audited miss)."
    )
    kept: tuple[KeptTest, ...] = Field(default=(), max_length=MAX_KEPT)
    pruned: tuple[PrunedTest, ...] = Field(
        default=(), max_length=MAX_PRUNED_LISTED, description="The first 2000 pruned tests by test id."
    )
    metrics: SelectionMetrics


MAX_CHANGED_FILES = 200  # changed files a miss names (the files a widened selection then covers)


class SelectionPolicy(Event):
    """A repository's selection settings, as its owners publish them (the latest wins). Key: repo."""

    TOPIC: ClassVar[str] = "selection-policy"
    KEY: ClassVar[str] = "repo"
    IDENTITY: ClassVar[tuple[str, ...]] = ("repo", "time")

    repo: Name
    time: Timestamp
    widen_commits: int = Field(
        default=5,
        ge=0,
        le=10_000,
        description="After an audited miss, how many clean audited commits the selection stays widened for "
        "(no pruning, every test of the files the missed change touched); 0 turns widening off.",
    )


class SelectionAudit(Event):
    """What a run beyond the selection showed about it: a commit was audited (a test the selection
    did not keep ran), or a miss (such a test failed). Key: repo. Id: from the commit, kind and test."""

    TOPIC: ClassVar[str] = "selection-audit"
    KEY: ClassVar[str] = "repo"
    IDENTITY: ClassVar[tuple[str, ...]] = ("repo", "sha", "kind", "test_id")

    repo: Name
    sha: Sha
    kind: Literal["audited", "miss"]
    test_id: Name | None = Field(default=None, description="The missed test (a miss).")
    selection_id: str = Field(max_length=64, description="The selection audited.")
    result_id: str = Field(max_length=64, description="The result that showed it.")
    run_id: Name
    status: Literal["passed", "failed", "error", "skipped", "flaky"]
    evidence: Text = Field(
        default="", description="What the selection knew of the missed test, and why it left it out."
    )
    changed_files: tuple[Name, ...] = Field(
        default=(), max_length=MAX_CHANGED_FILES, description="Files the audited commit changed (for widening)."
    )
    kept: int = Field(ge=0, description="Tests the selection kept.")
    tests_known: int = Field(ge=0)
    saved_s: FiniteFloat = Field(ge=0, description="Suite time the selection saved on this commit (its estimate).")
