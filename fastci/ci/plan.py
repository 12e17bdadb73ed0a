"""Asking for a change's plan: the decisions test-selection and test-planner published for its
commits, united into what one CI job runs.

The job publishes the commits fastci does not know yet (the ids are ``fastci changes``' ids, so a
second publish changes nothing), then reads the ``selection`` and ``test-plan`` events of those
commits: on the embedded runtime after processing what is pending itself (or waiting for the
runtime that holds the data dir), on Kafka by waiting for the worker, up to a timeout.

Whenever fastci cannot decide, the answer is to run everything, with the reason: no plan in time,
a broker that does not answer, a shallow clone, a plan made against another base, or a selection
that itself chose the whole suite. A ``Plan`` never fails silently towards running less.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from fastci.ci.change import Change
from fastci.contracts.test_plans import TestPlan
from fastci.core.codec import InvalidEvent
from fastci.core.config import KafkaSettings
from fastci.inputs import CommitEvent
from fastci.planning.risk import cost, order
from fastci.selection.changes import ChangeAnalysisError, analyze_commit
from fastci.selection.events import Selection
from fastci.shared.test_ids import short_id
from fastci.topology import decode

DEFAULT_TIMEOUT_S = 60.0
EVIDENCE_COMMAND = "pytest --fastci-evidence --fastci-results"  # what gives tests evidence (a nightly's run)
UNITS_NAMED = 3  # changed units a job's line names per rule
SEEK_SLACK_S = 86_400.0  # plans are searched from a day before the commit's own time (clock skew)

Say = Callable[[str], None]


@dataclass(frozen=True)
class PlannedRun:
    """One test of the plan, in run order."""

    test_id: str
    reason: str
    risk: float
    expected_s: float
    estimated_s: float
    chips: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    shrunk: dict[str, int] = field(default_factory=dict)
    functions: tuple[str, ...] = ()  # the changed units it runs, as 'path::qualname' (the selection's)


@dataclass
class Plan:
    """What a job runs for a change. ``run_all`` means every test the job collects (the known ones
    first, in risk order), whatever the catalog holds; otherwise ``tests`` in order, plus every
    collected test fastci does not know (``is_known``)."""

    repo: str
    head: str
    commits: tuple[str, ...]
    base: str | None = None
    run_all: bool = True
    reason: str = ""
    answered: bool = False  # a published plan backs this answer (False: fastci could not decide)
    source: str = ""  # where the plan came from: "embedded <dir>" or "kafka <bootstrap>"
    tests: list[PlannedRun] = field(default_factory=list)
    pruned: dict[str, tuple[str, ...]] = field(default_factory=dict)  # pruned test -> kept tests covering it
    known: frozenset[str] = frozenset()  # short ids of the tests the catalog knew
    tests_known: int = 0
    estimated_s_all: float = 0.0  # the known suite's expected duration
    widened: str = ""  # why the selection is wider than the evidence asks (after an audited miss)
    unevidenced: tuple[str, ...] = ()  # changed units no test's evidence shows running (the first of them)
    unevidenced_units: int = 0  # how many there are

    @property
    def estimated_s(self) -> float:
        return sum(t.estimated_s for t in self.tests)

    @property
    def share(self) -> float | None:
        """Estimated share of the suite's time this plan runs (None when unknown)."""
        if self.run_all:
            return 1.0
        # At most the whole: the planner's durations (its recent runs) and the selection's (the
        # catalog's) are two estimates, and the first may sum a little over the second.
        return min(1.0, self.estimated_s / self.estimated_s_all) if self.estimated_s_all > 0 else None

    @property
    def no_evidence(self) -> int:
        """Known tests the plan keeps because fastci has never seen what they execute."""
        return sum(1 for t in self.tests if t.reason == "no-evidence")

    @property
    def nothing_known(self) -> bool:
        """The plan runs everything and its catalog holds no test of the repository: no test has
        evidence or results yet (a new test a commit adds is not in it)."""
        return self.answered and self.run_all and not self.known

    def notes(self) -> list[str]:
        """What a job's line adds to its counts: the tests that lack evidence and what gives them
        some, and, when rules keep every known test, each rule with the units it keeps them for."""
        if self.nothing_known:
            return [f"`{EVIDENCE_COMMAND}` (in a nightly) records what each test runs, so a change runs only its tests"]
        if self.run_all:
            return []  # the reason names the rule and the file (a CI file, a build file...)
        notes = []
        if self.no_evidence:
            notes.append(
                f"{self.no_evidence} of the {self.tests_known} known tests have no evidence and always run: "
                f"`{EVIDENCE_COMMAND}` (in a nightly) gives them some"
            )
        if self.unevidenced_units:
            named = [*self.unevidenced[:UNITS_NAMED]]
            if self.unevidenced_units > len(named):
                named.append(f"{self.unevidenced_units - len(named)} more")
            notes.append(
                f"{self.unevidenced_units} changed unit(s) no test's evidence runs: {', '.join(named)} "
                "(the tests importing their modules run)"
            )
        if self.tests_known and len(self.tests) >= self.tests_known:
            rules = self.kept_by()
            if rules:
                notes.append("every known test is kept: " + ", ".join(rules))
        return notes

    def kept_by(self) -> list[str]:
        """Each rule that keeps tests (but ``no-evidence``, which ``notes`` counts apart), most tests
        first: how many, and the changed units it keeps them for."""
        groups: dict[str, list[PlannedRun]] = {}
        for test in self.tests:
            if test.reason != "no-evidence":
                groups.setdefault(test.reason, []).append(test)
        rules = []
        for reason, tests in sorted(groups.items(), key=lambda group: (-len(group[1]), group[0])):
            units = sorted({unit for test in tests for unit in test.functions})
            named = units[:UNITS_NAMED]
            if len(units) > UNITS_NAMED:
                named.append(f"{len(units) - UNITS_NAMED} more")
            rules.append(f"{len(tests)} {reason}" + (f" for {', '.join(named)}" if named else ""))
        return rules

    def is_known(self, test_id: str) -> bool:
        return short_id(test_id) in self.known

    def to_json(self, with_known: bool = False) -> dict[str, Any]:
        document: dict[str, Any] = {
            "repo": self.repo,
            "head": self.head,
            "base": self.base,
            "commits": list(self.commits),
            "run_all": self.run_all,
            "reason": self.reason,
            "widened": self.widened,
            "answered": self.answered,
            "source": self.source,
            "tests": [{**t.__dict__, "functions": list(t.functions)} for t in self.tests],
            "pruned": [{"test_id": t, "covered_by": list(by)} for t, by in sorted(self.pruned.items())],
            "metrics": {
                "tests_known": self.tests_known,
                "kept": len(self.tests) if not self.run_all else self.tests_known,
                "pruned": len(self.pruned),
                "estimated_s": self.estimated_s,
                "estimated_s_all": self.estimated_s_all,
                "share": self.share,
                "no_evidence": self.no_evidence,
                "unevidenced_units": self.unevidenced_units,
                "unevidenced": list(self.unevidenced),
            },
        }
        if with_known:
            document["known"] = sorted(self.known)
        return document

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Plan:
        return cls(
            repo=document["repo"],
            head=document["head"],
            commits=tuple(document["commits"]),
            base=document["base"],
            run_all=document["run_all"],
            reason=document["reason"],
            widened=document.get("widened", ""),
            answered=document["answered"],
            source=document["source"],
            tests=[PlannedRun(**{**t, "functions": tuple(t.get("functions", ()))}) for t in document["tests"]],
            pruned={p["test_id"]: tuple(p["covered_by"]) for p in document["pruned"]},
            known=frozenset(document.get("known", ())),
            tests_known=document["metrics"]["tests_known"],
            estimated_s_all=document["metrics"]["estimated_s_all"],
            unevidenced=tuple(document["metrics"].get("unevidenced", ())),
            unevidenced_units=document["metrics"].get("unevidenced_units", 0),
        )


def everything(repo: str, change: Change | None, reason: str, source: str = "") -> Plan:
    """The safe answer: run every test the job collects, because ``reason``."""
    return Plan(
        repo=repo,
        head=change.head if change else "",
        commits=change.commits if change else (),
        base=change.base if change else None,
        run_all=True,
        reason=reason,
        source=source,
    )


@dataclass
class Found:
    """The decisions read so far, by commit event id."""

    selections: dict[str, Selection] = field(default_factory=dict)
    pages: dict[str, dict[int, TestPlan]] = field(default_factory=dict)

    def add(self, event: Selection | TestPlan) -> None:
        if isinstance(event, Selection):
            self.selections[event.commit_id] = event
        else:
            self.pages.setdefault(event.commit_id, {})[event.page] = event

    def complete(self, commit_id: str) -> bool:
        pages = self.pages.get(commit_id)
        return commit_id in self.selections and pages is not None and len(pages) == next(iter(pages.values())).pages


def commit_events(change: Change, repo_name: str | None = None) -> list[CommitEvent]:
    """The commits events of the change, as ``fastci changes`` makes them (the same ids)."""
    return [analyze_commit(change.work_tree, sha, repo_name) for sha in change.commits]


def combine(change: Change, commits: list[CommitEvent], found: Found, source: str) -> Plan:
    """One plan from the plans of the change's commits: the union of what they run, in risk order."""
    repo = commits[0].repo
    selections = [found.selections[c.id] for c in commits]
    plans = [[found.pages[c.id][page] for page in sorted(found.pages[c.id])] for c in commits]
    for commit, selection in zip(commits, selections):
        parent = commit.parents[0] if commit.parents else None
        if selection.base is not None and selection.base != parent:
            return everything(
                repo,
                change,
                f"the plan of {commit.sha[:12]} was made against {selection.base[:12]}, "
                f"not this checkout's parent {str(parent)[:12]}",
                source,
            )
    known = frozenset(k for pages in plans for page in pages for k in page.known)
    tests_known = max(s.metrics.tests_known for s in selections)
    estimated_all = max(s.metrics.estimated_s_all for s in selections)
    run_all = [s for s in selections if s.run_all]
    functions: dict[str, set[str]] = {}  # the changed units each kept test runs, over the commits
    for selection in selections:
        for kept in selection.kept:
            functions.setdefault(kept.test_id, set()).update(kept.functions)
    runs: dict[str, PlannedRun] = {}
    for pages in plans:
        for page in pages:
            for entry in page.entries:
                held = runs.get(entry.test_id)
                if held is None or entry.risk > held.risk:
                    runs[entry.test_id] = PlannedRun(
                        test_id=entry.test_id,
                        reason=entry.reason,
                        risk=entry.risk,
                        expected_s=entry.expected_s,
                        estimated_s=entry.estimated_s,
                        chips=entry.chips,
                        config=dict(entry.config),
                        shrunk=dict(entry.shrunk),
                        functions=tuple(sorted(functions.get(entry.test_id, ()))),
                    )
    # One commit: the planner's own order. Several: the same rule over the union (risk per cost).
    ranked = (
        [e.test_id for page in plans[0] for e in page.entries]
        if len(plans) == 1
        else order({t: r.risk for t, r in runs.items()}, {t: cost(r.estimated_s, r.chips) for t, r in runs.items()})
    )
    pruned: dict[str, tuple[str, ...]] = {}
    for selection in selections:
        for test in selection.pruned:
            if test.test_id not in runs:
                pruned.setdefault(test.test_id, test.covered_by)
    unevidenced = list(dict.fromkeys(u for s in selections for u in s.metrics.unevidenced))
    listed_all = all(s.metrics.unevidenced_units == len(s.metrics.unevidenced) for s in selections)
    reason = ""
    if run_all:
        first = run_all[0]
        reason = first.run_all_reason if len(commits) == 1 else f"{first.sha[:12]}: {first.run_all_reason}"
    return Plan(
        repo=repo,
        head=change.head,
        commits=change.commits,
        base=change.base,
        run_all=bool(run_all),
        reason=reason,
        answered=True,
        source=source,
        tests=[runs[t] for t in ranked],
        pruned={} if run_all else pruned,
        known=known,
        tests_known=tests_known,
        estimated_s_all=estimated_all,
        widened=next((s.widened for s in selections if s.widened), ""),
        unevidenced=tuple(unevidenced),
        # Listed in full, the union is exact; cut short, a unit two commits share may count twice.
        unevidenced_units=len(unevidenced) if listed_all else sum(s.metrics.unevidenced_units for s in selections),
    )


def _since_ms(commits: list[CommitEvent]) -> int:
    """Where a change's commits and their plans are searched from, in both runtimes: their records
    are timed at the commits' own time, which may be skewed (``SEEK_SLACK_S``)."""
    return max(0, int((min(c.time.timestamp() for c in commits) - SEEK_SLACK_S) * 1000))


# ----- the embedded runtime


def ask_embedded(
    change: Change, data_dir: Path, timeout_s: float = DEFAULT_TIMEOUT_S, repo_name: str | None = None, say: Say = print
) -> Plan:
    """The change's plan from the embedded log in ``data_dir``. What is pending there is applied
    first, within ``timeout_s``, even when the plan was made before: every reader after this job
    (a report, the next plan) then answers from all that was published before it, such as a failing
    presubmit's results. The job says what it applied and what it left."""
    from fastci.ci.pending import apply_pending
    from fastci.runtime.embedded import DataDir
    from fastci.runtime.publish import publish_embedded

    source = f"embedded {data_dir}"
    commits = commit_events(change, repo_name)
    data = DataDir(data_dir)
    wanted = {c.id for c in commits}
    since_ms = _since_ms(commits)
    deadline = time.monotonic() + timeout_s
    busy = False  # whether the last try found another runtime at work on the data dir
    announced = False  # the backlog found on arrival is named once; the job's own commit is not a backlog

    def announce(pending: int) -> None:
        say(f"processing {pending:,} record(s) pending in {data_dir}, for up to {timeout_s:g} s")

    def process() -> int:
        """Apply what is pending, until the deadline; return how many records are left then."""
        nonlocal busy, announced
        applied = apply_pending(data_dir, deadline, None if announced else announce)
        announced = True
        if applied.busy:
            if not busy:
                say(f"another fastci runtime is processing {data_dir}: waiting for it")
            busy = True
            return 0
        busy = False
        return applied.left

    def behind(left: int) -> Plan:
        return everything(
            commits[0].repo,
            change,
            f"{left:,} records in {data_dir} were still to be processed after {timeout_s:g} s (published "
            "before this job: a nightly's evidence and results, an import; `fastci run` applies them)",
            source,
        )

    found = _scan_embedded(data, wanted, since_ms)
    if all(found.complete(i) for i in wanted):
        # The plan was made before: apply what is pending all the same, so nothing reads it stale.
        applied = apply_pending(data_dir, deadline, announce)
        if applied.busy:
            say(
                f"another fastci runtime is processing {data_dir}: it applies the {applied.pending:,} pending record(s)"
            )
        elif applied.left:
            say(
                f"{applied.left:,} record(s) still pending in {data_dir} after {timeout_s:g} s: `fastci run` "
                "applies them (this change's plan was made before them)"
            )
        return combine(change, commits, found, source)

    published = _ids_in(data, "commits", wanted, since_ms)
    new = [c for c in commits if c.id not in published]
    if new:
        # Settle what was published before this job asked (a nightly's results, their audit), so the
        # plan answers from all of it: the embedded runtime would otherwise take the commit first.
        left = process()
        publish_embedded(data_dir, new)  # planned once the backlog is applied, for the jobs after this one
        if left:
            return behind(left)
    while True:
        left = process()
        if left:
            return behind(left)
        found = _scan_embedded(data, wanted, since_ms)
        if all(found.complete(i) for i in wanted):
            return combine(change, commits, found, source)
        if time.monotonic() > deadline:
            why = f"no plan within {timeout_s:g} s from the {source}"
            if busy:
                why += " (another fastci runtime was processing it: a `fastci run` catching up?)"
            return everything(commits[0].repo, change, why, source)
        time.sleep(0.5 if busy else 0.05)  # another runtime at work, or a plan being written: look again


def _scan_embedded(data: Any, wanted: set[str], since_ms: int) -> Found:
    found = Found()
    needles = [i.encode() for i in wanted]
    for topic in (Selection.TOPIC, TestPlan.TOPIC):
        log = data.log.topic(topic)
        for record in log.read(log.position_at(since_ms)):
            if any(n in record.payload for n in needles):  # a cheap test before decoding
                _add(found, topic, record.payload, wanted)
    return found


def _ids_in(data: Any, topic: str, wanted: set[str], since_ms: int) -> set[str]:
    needles = {i: i.encode() for i in wanted}
    seen: set[str] = set()
    log = data.log.topic(topic)
    for record in log.read(log.position_at(since_ms)):
        for event_id, needle in needles.items():
            if needle in record.payload and orjson.loads(record.payload).get("id") == event_id:
                seen.add(event_id)
    return seen


def _add(found: Found, topic: str, payload: bytes, wanted: set[str]) -> None:
    try:
        event = decode(topic, payload)
    except InvalidEvent:
        return
    if isinstance(event, Selection | TestPlan) and event.commit_id in wanted:
        found.add(event)


# ----- Kafka


def ask_kafka(
    change: Change,
    settings: KafkaSettings,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    repo_name: str | None = None,
    say: Say = print,
) -> Plan:
    """The change's plan from the Kafka worker: read what it published, publish the commits it has
    not planned, and wait up to ``timeout_s`` for their plans."""
    source = f"kafka {settings.bootstrap}"
    commits = commit_events(change, repo_name)
    try:
        found = asyncio.run(asyncio.wait_for(_ask_kafka(settings, commits, say), timeout_s))
    except TimeoutError:
        return everything(commits[0].repo, change, f"no plan within {timeout_s:g} s from Kafka at {settings.bootstrap}")
    except Exception as error:  # the broker went away, refused us...: fastci cannot decide
        return everything(
            commits[0].repo, change, f"Kafka at {settings.bootstrap} did not answer ({type(error).__name__}: {error})"
        )
    return combine(change, commits, found, source)


async def _ask_kafka(settings: KafkaSettings, commits: list[CommitEvent], say: Say) -> Found:
    from aiokafka import AIOKafkaConsumer

    from fastci.runtime.kafka import broker

    wanted = {c.id for c in commits}
    names = [settings.topic(Selection.TOPIC), settings.topic(TestPlan.TOPIC)]
    await broker.ensure_topics(settings, [CommitEvent.TOPIC, Selection.TOPIC, TestPlan.TOPIC])
    tps = await broker.topic_partitions(settings, names)
    consumer = AIOKafkaConsumer(enable_auto_commit=False, auto_offset_reset="earliest", **settings.client_options())
    await consumer.start()
    try:
        consumer.assign(tps)
        offsets = await consumer.offsets_for_times({tp: _since_ms(commits) for tp in tps})
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            start = offsets.get(tp)
            consumer.seek(tp, start.offset if start is not None else ends[tp])
        found = Found()
        asked = False
        while True:
            batches = await consumer.getmany(timeout_ms=500)
            for tp, records in batches.items():
                topic = tp.topic.removeprefix(settings.namespace)
                for record in records:
                    if record.value and any(i.encode() in record.value for i in wanted):
                        _add(found, topic, record.value, wanted)
            if all(found.complete(i) for i in wanted):
                return found
            caught_up = all([await consumer.position(tp) >= ends[tp] for tp in tps])
            if caught_up and not asked:
                new = [c for c in commits if not found.complete(c.id)]
                say(f"asking the fastci worker for {len(new)} plan(s) at Kafka {settings.bootstrap}")
                await broker.publish(settings, new)  # known ones are dropped by id: this changes nothing
                asked = True
    finally:
        await consumer.stop()


def ask(
    change: Change,
    target: str,
    data_dir: Path,
    settings: KafkaSettings,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    repo_name: str | None = None,
    say: Say = print,
) -> Plan:
    """The plan for ``change`` from ``target`` ("embedded" or "kafka"); the safe answer (run
    everything, with the reason) whenever there is none."""
    if change.incomplete:
        return everything(repo_name or "", change, change.incomplete)
    try:
        if target == "kafka":
            return ask_kafka(change, settings, timeout_s, repo_name, say)
        return ask_embedded(change, data_dir, timeout_s, repo_name, say)
    except ChangeAnalysisError as error:
        return everything(repo_name or "", change, f"the change could not be analysed: {error}")
