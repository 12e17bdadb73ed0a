"""flaky-detector: marks a test flaky when its runs disagree, and stable again when they stop.

Keyed by test. Per (test, commit, bundle, config, seed) it keeps the outcomes of the runs of that
exact code on that exact stack, with the node each ran on; ``baseline-exclusions`` says which ran
on a node that was not healthy (those do not count: a sick node's failure is not the test's). The
rules are ``fastci.shared.flakiness`` (shared with ``regression-detector``). A change of verdict
goes out on ``flaky-verdicts``: ``regression-detector`` keeps a flaky test out of baselines and
regression calls, ``failure-attribution`` stops blaming nodes for its failures, ``flaky-owners``
names its owners.
"""

from __future__ import annotations

import hashlib
from typing import ClassVar

import orjson
from pydantic import Field

from fastci.contracts.baseline_exclusions import BaselineExclusion
from fastci.contracts.flaky_verdicts import FlakyVerdict, RunOutcome
from fastci.core.events import Event, Record
from fastci.core.processor import KeySpace, Processor, StateReader, Step
from fastci.inputs import ResultEvent
from fastci.shared.flakiness import FAILING, PASSING, RECENT, STABLE_AFTER, flaky_by_retries, outcomes_differ

NAME = "flaky-detector"
RUNS_PER_GROUP = 32
GROUPS = 32  # the newest (commit, bundle, config, seed) groups of a test kept; older ones are deleted
INDEXED_FAILURES = 64  # recent failures with their group, so an exclusion finds its run


class HeldOutcome(Record):
    result_id: str
    node_id: str
    status: str
    trigger: str
    excluded: bool = False


class TestFlakiness(Record):
    __test__ = False
    flaky: bool = False
    rule: str | None = None
    statuses: tuple[str, ...] = Field(default=(), max_length=RECENT)
    clean_runs: int = 0  # runs since the last flake evidence
    groups: tuple[str, ...] = Field(default=(), max_length=GROUPS)  # digests of the newest groups, oldest first
    failures: tuple[tuple[str, str], ...] = Field(default=(), max_length=INDEXED_FAILURES)  # (result id, digest)
    excluded: tuple[str, ...] = Field(default=(), max_length=INDEXED_FAILURES)  # exclusions that came first
    marked_by: str | None = None  # the digest of the group whose disagreeing runs made the test flaky
    repo: str | None = None


class HeldOutcomes(Record):
    """The outcomes of one group's runs (one commit, bundle, config and seed), oldest first."""

    outcomes: tuple[HeldOutcome, ...] = Field(default=(), max_length=RUNS_PER_GROUP)


# The detector's kinds of state, each under a test.
FLAKINESS = KeySpace("flakiness", TestFlakiness)  # the test's verdict and recent statuses
RUNS = KeySpace("runs", HeldOutcomes, ("digest",))  # one group's outcomes


def test_key(test_id: str) -> str:
    return FLAKINESS.key(test_id)


def outcomes_digest(event: ResultEvent) -> str:
    identity = orjson.dumps([event.commit, _bundle(event), event.config, event.seed], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(identity).hexdigest()[:20]


def outcomes_key(test_id: str, digest: str) -> str:
    return RUNS.key(test_id, digest)


def _flakiness(state: StateReader[Record], test_id: str) -> TestFlakiness:
    """The test's flakiness record; a test never seen is not flaky and has no runs."""
    return FLAKINESS.get(state, test_key(test_id)) or TestFlakiness()


class FlakyDetectorProcessor(Processor[Record]):
    name: ClassVar[str] = NAME
    inputs: ClassVar[tuple[str, ...]] = (ResultEvent.TOPIC, BaselineExclusion.TOPIC)
    outputs: ClassVar[tuple[str, ...]] = (FlakyVerdict.TOPIC,)
    key_spaces = (FLAKINESS, RUNS)
    state_key: ClassVar[str] = "key"

    def ignores(self, event: Event) -> bool:
        return isinstance(event, ResultEvent) and event.status not in FAILING | PASSING  # skipped: no outcome

    def process(self, state: StateReader[Record], event: Event) -> Step[Record]:
        if isinstance(event, BaselineExclusion):
            return self._exclusion(state, event)
        assert isinstance(event, ResultEvent)
        if self.ignores(event):
            return Step()
        test = dict(_flakiness(state, event.test_id).__dict__)
        digest = outcomes_digest(event)
        key = outcomes_key(event.test_id, digest)
        before = RUNS.get(state, key)
        outcomes = before.outcomes if before is not None else ()
        if any(o.result_id == event.id for o in outcomes):
            return Step()  # the group (not the test's own entry) already holds it: applied before a crash
        previous = outcomes
        outcome = HeldOutcome.trusted(
            {
                "result_id": event.id,
                "node_id": event.node_id,
                "status": event.status,
                "trigger": event.trigger,
                "excluded": event.id in test["excluded"],
            }
        )
        outcomes = (*outcomes, outcome)[-RUNS_PER_GROUP:]
        differs = outcomes_differ(outcomes)
        statuses = (*test["statuses"], event.status)[-RECENT:]
        retries = flaky_by_retries(statuses) and event.status == "flaky"
        # new evidence: the runs disagree now and did not before (or this run is a failure among them)
        evidence = bool((differs and (event.status in FAILING or not outcomes_differ(previous))) or retries)
        groups, forgotten = test["groups"], ()
        if digest not in groups:
            groups = (*groups, digest)
            forgotten, groups = groups[:-GROUPS], groups[-GROUPS:]
        failures = test["failures"]
        if event.status in FAILING:
            failures = (*failures, (event.id, digest))[-INDEXED_FAILURES:]
        if forgotten:
            failures = tuple(f for f in failures if f[1] not in forgotten)
        test.update(
            statuses=statuses,
            clean_runs=0 if evidence else test["clean_runs"] + 1,
            groups=groups,
            failures=failures,
            repo=event.repo,
        )
        verdict: FlakyVerdict | None = None
        if evidence and not test["flaky"]:
            rule = "outcomes-differ" if differs else "retries"
            reason = differs or f"{statuses.count('flaky')} of its last {len(statuses)} runs passed only on retry"
            verdict = _verdict(event, True, rule, reason, outcomes if differs else ())
        elif test["flaky"] and test["clean_runs"] >= STABLE_AFTER:
            verdict = _verdict(event, False, "stable", f"{test['clean_runs']} runs in a row without a flake", ())
        if verdict is not None:
            test.update(
                flaky=verdict.flaky, rule=verdict.rule, marked_by=digest if verdict.rule == "outcomes-differ" else None
            )
        writes: dict[str, Record | None] = {outcomes_key(event.test_id, d): None for d in forgotten}  # too old
        writes[test_key(event.test_id)] = TestFlakiness.trusted(test)
        writes[key] = HeldOutcomes.trusted({"outcomes": outcomes})
        return Step(writes=writes, outputs=[verdict] if verdict else [])

    def _exclusion(self, state: StateReader[Record], event: BaselineExclusion) -> Step[Record]:
        """A failure on a sick node stops counting. An exclusion can arrive before its result (then the
        result arrives excluded) or after it (then the index of recent failures finds its group); one
        that arrives after a passed result changes nothing: a pass is a pass on any node."""
        test = _flakiness(state, event.test_id)
        digests = [digest for result_id, digest in test.failures if result_id == event.result_id]
        if not digests:
            if event.result_id in test.excluded:
                return Step()
            excluded = (*test.excluded, event.result_id)[-INDEXED_FAILURES:]
            test = TestFlakiness.trusted({**test.__dict__, "excluded": excluded})
            return Step(writes={test_key(event.test_id): test})
        digest = digests[-1]
        key = outcomes_key(event.test_id, digest)
        held = RUNS.get(state, key)
        if held is None or not held.outcomes:
            return Step()
        marked = tuple(
            HeldOutcome.trusted({**o.__dict__, "excluded": True}) if o.result_id == event.result_id else o
            for o in held.outcomes
        )
        writes: dict[str, Record | None] = {key: HeldOutcomes.trusted({"outcomes": marked})}
        if not (test.flaky and test.marked_by == digest and outcomes_differ(marked) is None):
            return Step(writes=writes)
        # the disagreement that made the test flaky was a sick node's doing: withdraw the verdict
        withdrawn = FlakyVerdict(
            cause_id=event.id,
            test_id=event.test_id,
            repo=test.repo or "unknown",
            flaky=False,
            rule="withdrawn",
            reason=f"the runs that disagreed no longer do without {event.node_id}'s, which ran while it was "
            f"{event.node_state}"[:4096],
        )
        writes[test_key(event.test_id)] = TestFlakiness.trusted(
            {**test.__dict__, "flaky": False, "rule": "withdrawn", "marked_by": None}
        )
        return Step(writes=writes, outputs=[withdrawn])


def _verdict(event: ResultEvent, flaky: bool, rule: str, reason: str, outcomes) -> FlakyVerdict:
    return FlakyVerdict(
        cause_id=event.id,
        test_id=event.test_id,
        repo=event.repo,
        flaky=flaky,
        rule=rule,
        reason=reason,
        time=event.time,
        commit=event.commit,
        bundle=event.bundle,
        config=event.config,
        seed=event.seed,
        chips=event.chips,
        outcomes=tuple(
            RunOutcome(result_id=o.result_id, node_id=o.node_id, status=o.status, trigger=o.trigger) for o in outcomes
        )[-32:],
    )


def _bundle(event: ResultEvent) -> dict | None:
    return event.bundle.model_dump() if event.bundle is not None else None  # a plain repository names none
