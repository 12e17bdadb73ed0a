"""test-planner: orders every selection riskiest-per-cost first, each test on the smallest config
that proves the change.

Partitioned by repo (results and evidence are repartitioned by their ``repo`` field, as for
test-selection), it keeps small values the repo owns:
- ``(repo, "test", test_id)``: the test's recent runs (run id -> status, duration normalised to its
  full config) and chips: its failure history and cost (``fastci.planning.risk``);
- ``(repo, "workload", test_id)``: the workload block of its latest evidence, when it declares one
  (scope, shrinkable dimensions, where its units first ran: ``fastci.planning.shrink``);
- ``(repo, "catalog", bucket)``: the repo's known tests (64 buckets), for a selection that runs them all.
Runs are keyed by run id and the catalog is a set, so a redelivered event rewrites the same values;
a commit that deletes tests removes theirs (as test-selection does).

For each ``selection`` it emits one ``test-plan`` (pages of ``PAGE_SIZE`` entries). A kept test's
changed units (``KeptTest.functions``) give its exposure to the change and the units its shrunk
config must still execute: the named units themselves, every unit of a file whose module code or
class body changed, and all of its units when the list may be truncated (16 names). Tests kept
because they changed, have no evidence, or run because everything runs keep their full config.
"""

from __future__ import annotations

import math
from typing import ClassVar

from pydantic import Field

from fastci.contracts.test_plans import KNOWN_PAGE_SIZE, PAGE_SIZE, PlanMetrics, PlannedTest, TestPlan
from fastci.core.events import Event, Record
from fastci.core.processor import KeySpace, Processor, StateReader, Step
from fastci.inputs import CommitEvent, EvidenceEvent, ResultEvent, WorkloadEvidence
from fastci.planning import risk as riskmath
from fastci.planning.shrink import Dimension, scale_of, smallest_config
from fastci.selection.events import MAX_FUNCTIONS, UNIT_REASONS, Selection
from fastci.selection.processor import removed_test_ids
from fastci.selection.units import BODY, MODULE
from fastci.shared.test_ids import BUCKETS, DEFAULT_DURATION_S, bucket_of, short_id, untraced

RECENT_RUNS = 32  # runs kept per test: at DECAY 0.9 the 33rd run back would weigh 3%
RECENT_DURATIONS = 8  # of which the latest non-skipped ones give the expected duration
NO_EVIDENCE_EXPOSURE = 0.5  # when no kept test has evidence to compare with


class TestRecord(Record):
    __test__ = False

    test_id: str
    runs: dict[str, tuple[str, float]] = Field(
        default_factory=dict, description="run id -> (status, full-config seconds)"
    )
    traced: tuple[str, ...] = Field(default=(), description="runs measured while evidence was recorded")
    chips: int = 0

    @property
    def statuses(self) -> list[str]:
        return [status for status, _ in self.runs.values()]

    @property
    def expected_s(self) -> float | None:
        ran = {run: seconds for run, (status, seconds) in self.runs.items() if status != "skipped"}
        durations = untraced(ran, self.traced)[-RECENT_DURATIONS:]
        return sum(durations) / len(durations) if durations else None


class CatalogBucket(Record):
    """The tests of one catalog bucket, by short id: what a commit's removed files are matched against."""

    tests: dict[str, str] = Field(default_factory=dict, description="short id -> test id")


# The planner's kinds of state, each under a repo.
TESTS = KeySpace("test", TestRecord, ("test_id",))  # a test's runs
WORKLOADS = KeySpace("workload", WorkloadEvidence, ("test_id",))  # its workload profile, from evidence
CATALOG = KeySpace("catalog", CatalogBucket, ("bucket",))
_NO_TESTS = CatalogBucket()


def test_key(repo: str, test_id: str) -> str:
    return TESTS.key(repo, test_id)


def workload_key(repo: str, test_id: str) -> str:
    return WORKLOADS.key(repo, test_id)


def bucket_key(repo: str, bucket: int) -> str:
    return CATALOG.key(repo, str(bucket))


def catalog_key(repo: str, test_id: str) -> str:
    return bucket_key(repo, bucket_of(short_id(test_id)))


class TestPlanProcessor(Processor[Record]):
    __test__ = False

    name: ClassVar[str] = "test-planner"  # not "test-plan": that is the topic (and its view)
    inputs: ClassVar[tuple[str, ...]] = (
        ResultEvent.TOPIC,
        EvidenceEvent.TOPIC,
        CommitEvent.TOPIC,
        Selection.TOPIC,
    )
    outputs: ClassVar[tuple[str, ...]] = (TestPlan.TOPIC,)
    key_spaces = (TESTS, WORKLOADS, CATALOG)
    partition_by = {ResultEvent.TOPIC: "repo", EvidenceEvent.TOPIC: "repo"}

    def __init__(self, order: str = "risk", shrink: bool = True) -> None:
        """The defaults are what runs in production; the simulator's ablation plans in the order the
        selection lists its tests (``order="declared"``) or on full configs (``shrink=False``)."""
        if order not in ("risk", "declared"):
            raise ValueError(f"order must be 'risk' or 'declared', not {order!r}")
        self.order = order
        self.shrink = shrink

    def process(self, state: StateReader[Record], event: Event) -> Step[Record]:
        if isinstance(event, ResultEvent):
            return Step(writes=_record_result(state, event))
        if isinstance(event, EvidenceEvent):
            return Step(writes=_record_evidence(state, event))
        if isinstance(event, CommitEvent):
            return Step(writes=_forget_removed(state, event))
        if isinstance(event, Selection):
            return Step(outputs=plan(state, event, order=self.order, shrink=self.shrink))
        return Step()


# ----- keeping state


def _catalog_writes(state: StateReader[Record], repo: str, test_id: str) -> dict[str, Record]:
    key = catalog_key(repo, test_id)
    tests = (CATALOG.get(state, key) or _NO_TESTS).tests
    tid = short_id(test_id)
    if tests.get(tid) == test_id:
        return {}
    return {key: CatalogBucket(tests=dict(sorted({**tests, tid: test_id}.items())))}


def _record_result(state: StateReader[Record], event: ResultEvent) -> dict[str, Record | None]:
    key = test_key(event.repo, event.test_id)
    before = TESTS.get(state, key) or TestRecord(test_id=event.test_id)
    profile = WORKLOADS.get(state, workload_key(event.repo, event.test_id))
    seconds = event.duration_s / _config_scale(profile, event.config)
    runs = {**before.runs, event.run_id: (event.status, seconds)}
    runs = dict(list(runs.items())[-RECENT_RUNS:])
    traced = tuple(run for run in runs if run in before.traced or (event.traced and run == event.run_id))
    # A model also runs in a CPU/simulator form (0 chips); its chips are those of its latest run that held chips.
    record = before.model_copy(update={"runs": runs, "traced": traced, "chips": event.chips or before.chips})
    return {key: record, **_catalog_writes(state, event.repo, event.test_id)}


def _config_scale(profile: WorkloadEvidence | None, config: dict) -> float:
    """How much shorter than its full config a run with ``config`` is expected to be (1: full)."""
    if profile is None:
        return 1.0
    values = {}
    for d in profile.dimensions:
        value = config.get(d.name)
        ran = isinstance(value, int) and not isinstance(value, bool) and 0 < value < d.full
        values[d.name] = value if ran else d.full
    if all(values[d.name] == d.full for d in profile.dimensions):
        return 1.0
    return scale_of(
        [Dimension(d.name, d.full, d.minimum, d.cost_exponent) for d in profile.dimensions], values, profile.fixed_share
    )


def _record_evidence(state: StateReader[Record], event: EvidenceEvent) -> dict[str, Record | None]:
    if event.kind == "import":
        return {}  # a module's import-time evidence: not a test
    key = workload_key(event.repo, event.test_id)
    writes: dict[str, Record | None] = {}
    if event.workload is not None:
        writes[key] = event.workload
    elif state.get(key) is not None:  # the test no longer declares a workload
        writes[key] = None
    return {**writes, **_catalog_writes(state, event.repo, event.test_id)}


def _forget_removed(state: StateReader[Record], commit: CommitEvent) -> dict[str, Record | None]:
    buckets = {
        bucket: (CATALOG.get(state, bucket_key(commit.repo, bucket)) or _NO_TESTS).tests for bucket in range(BUCKETS)
    }
    known = {test_id for tests in buckets.values() for test_id in tests.values()}
    writes: dict[str, Record | None] = {}
    for test_id in sorted(removed_test_ids(commit, known)):
        writes[test_key(commit.repo, test_id)] = None
        writes[workload_key(commit.repo, test_id)] = None
        key = catalog_key(commit.repo, test_id)
        tests = dict((writes.get(key) or CATALOG.get(state, key) or _NO_TESTS).tests)
        tests.pop(short_id(test_id), None)
        writes[key] = CatalogBucket(tests=tests)
    return writes


# ----- the plan


def plan(state: StateReader[Record], selection: Selection, order: str = "risk", shrink: bool = True) -> list[TestPlan]:
    """The plan of one selection: ``order`` "risk" (riskiest per unit of cost first) or "declared"
    (the selection's own order); ``shrink`` False runs every test on its full config."""
    repo = selection.repo
    catalog = {
        tid: test_id
        for bucket in range(BUCKETS)
        for tid, test_id in (CATALOG.get(state, bucket_key(repo, bucket)) or _NO_TESTS).tests.items()
    }
    if selection.run_all:
        kept = {test_id: ("run-all", (), None) for test_id in sorted(catalog.values())}
    else:
        kept = {k.test_id: (k.reason, k.functions, k.estimated_s) for k in selection.kept}

    functions = {t: names for t, (reason, names, _) in kept.items() if reason in UNIT_REASONS}
    exposure = riskmath.exposures(functions)
    unknown = sum(exposure.values()) / len(exposure) if exposure else NO_EVIDENCE_EXPOSURE
    records = {t: TESTS.get(state, test_key(repo, t)) for t in kept}
    measured = sorted(s for r in records.values() if r is not None and (s := r.expected_s) is not None)
    # A test never run (a new one) is expected to cost what the median planned test costs, not a
    # constant that may be a thousand times the suite's typical test.
    typical_s = measured[len(measured) // 2] if measured else None
    entries: dict[str, PlannedTest] = {}
    for test_id, (reason, names, selection_s) in kept.items():
        share = {
            "changed-test": 1.0,
            "reads-changed-file": 1.0,
            "dependency-changed": 1.0,
            "native-code-changed": 1.0,
            "no-evidence": unknown,
            "run-all": 0.0,
        }.get(reason, exposure.get(test_id, 0.0))
        record = records[test_id]
        expected_s = next(
            s
            for s in (record.expected_s if record else None, typical_s, selection_s, DEFAULT_DURATION_S)
            if s is not None
        )
        profile = WORKLOADS.get(state, workload_key(repo, test_id))
        workload = _workload(profile, reason, names, shrink)
        entries[test_id] = _planned_test(test_id, reason, record, share, expected_s, workload)

    risks = {t: e.risk for t, e in entries.items()}
    costs = {t: riskmath.cost(e.estimated_s, e.chips) for t, e in entries.items()}
    ordered = [entries[t] for t in (riskmath.order(risks, costs) if order == "risk" else kept)]
    metrics = PlanMetrics(
        tests=len(ordered),
        expected_s=sum(e.expected_s for e in ordered),
        estimated_s=sum(e.estimated_s for e in ordered),
        estimated_chip_s=sum(e.estimated_s * e.chips for e in ordered),
        saved_chip_s=sum(e.saved_chip_s for e in ordered),
        shrunk=sum(1 for e in ordered if e.shrunk),
    )
    # The known tests travel with the plan, so a job can tell a test the selection skipped from one
    # fastci has never seen (which runs). Tests the commit removed left the catalog with its event.
    known = sorted(catalog)
    pages = max(1, math.ceil(len(ordered) / PAGE_SIZE), math.ceil(len(known) / KNOWN_PAGE_SIZE))
    return [
        TestPlan(
            selection_id=selection.id,
            commit_id=selection.commit_id,
            repo=repo,
            sha=selection.sha,
            base=selection.base,
            hardware_path=selection.hardware_path,
            run_all=selection.run_all,
            run_all_reason=selection.run_all_reason,
            page=page,
            pages=pages,
            first_rank=page * PAGE_SIZE,
            entries=tuple(ordered[page * PAGE_SIZE : (page + 1) * PAGE_SIZE]),
            known=tuple(known[page * KNOWN_PAGE_SIZE : (page + 1) * KNOWN_PAGE_SIZE]),
            metrics=metrics,
        )
        for page in range(pages)
    ]


def _planned_test(
    test_id: str,
    reason: str,
    record: TestRecord | None,
    share: float,
    expected_s: float,
    workload: tuple[dict, dict[str, int], float],
) -> PlannedTest:
    """One test's plan entry: its risk from its history, its exposure ``share`` and its flakiness,
    and its cost on the config the workload rule chose (``_workload``: config, shrunk, time scale)."""
    counts = riskmath.weighted_counts(record.statuses if record else ())
    history = riskmath.history_risk(counts)
    flaky = riskmath.flaky_rate(counts)
    config, shrunk, scale = workload
    estimated_s = expected_s * scale
    chips = record.chips if record else 0
    return PlannedTest(
        test_id=test_id,
        reason=reason,
        risk=_unit(riskmath.combined_risk(history, share, flaky)),
        history_risk=_unit(history),
        exposure=_unit(share),
        flaky_rate=_unit(flaky),
        expected_s=expected_s,
        estimated_s=estimated_s,
        chips=chips,
        config=config,
        shrunk=shrunk,
        saved_chip_s=max(0.0, (expected_s - estimated_s) * chips),
    )


def _unit(value: float) -> float:
    return min(1.0, max(0.0, value))


def _workload(
    profile: WorkloadEvidence | None, reason: str, names: tuple[str, ...], shrink: bool = True
) -> tuple[dict, dict[str, int], float]:
    """(config to run, shrunk dimensions, duration scale) for one kept test."""
    if profile is None:
        return {}, {}, 1.0
    dimensions = [Dimension(d.name, d.full, d.minimum, d.cost_exponent) for d in profile.dimensions]
    full_config = {**profile.scope, **{d.name: d.full for d in dimensions}}
    if not shrink or reason not in ("executes-changed-code", "module-code"):
        # Shrinking off, or no evidence of what the change runs where: prove it on the full config.
        return full_config, {}, 1.0
    requirements = {first.unit: first.at for first in profile.first_executions}
    needed = {unit: requirements[unit] for unit in needed_units(names, requirements)}
    shrink = smallest_config(dimensions, needed, profile.fixed_share)
    return {**full_config, **shrink.values}, shrink.shrunk(dimensions), shrink.scale


def needed_units(names: tuple[str, ...], units: dict) -> list[str]:
    """The units of a test's profile its shrunk config must still execute, for these changed-unit names."""
    if len(names) >= MAX_FUNCTIONS:  # selection lists at most 16: there may be more
        return sorted(units)
    needed: set[str] = set()
    for name in names:
        path, _, qualname = name.partition("::")
        if qualname == MODULE or qualname.endswith(f".{BODY}"):  # module code feeds every unit of its file
            needed.update(unit for unit in units if unit.partition("::")[0] == path)
        elif name in units:
            needed.add(name)
    return sorted(needed)
