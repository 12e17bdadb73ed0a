"""flaky-detector: marks a test flaky when its runs disagree, and stable again when they stop.

Keyed by test. Per (test, commit, bundle, config, seed) it keeps the outcomes of the runs of that
exact code on that exact stack, with the node each ran on; ``baseline-exclusions`` says which ran
on a node that was not healthy (those do not count: a sick node's failure is not the test's). The
rules are ``fastci.fleet.flakiness`` (shared with ``regression-detector``). A change of verdict
goes out on ``flaky-verdicts``: ``regression-detector`` keeps a flaky test out of baselines and
regression calls, ``failure-attribution`` stops blaming nodes for its failures, ``flaky-owners``
names its owners.
"""

from __future__ import annotations

import hashlib
from typing import ClassVar

import orjson
from pydantic import Field

from fastci.events import Event, ResultEvent
from fastci.events.base import Record
from fastci.events.fleet import FlakyVerdict, RunOutcome
from fastci.events.regression import BaselineExclusion
from fastci.fleet.flakiness import FAILING, PASSING, RECENT, STABLE_AFTER, Outcome, flaky_by_retries, outcomes_differ
from fastci.processors.base import Processor, StateReader, Step, compound_key

NAME = "flaky-detector"
RUNS_PER_GROUP = 32
INDEXED_RESULTS = 256  # recent result ids of a test with their group, so an exclusion finds its run


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
    index: tuple[tuple[str, str], ...] = Field(default=(), max_length=INDEXED_RESULTS)  # (result id, group key)
    excluded: tuple[str, ...] = Field(default=(), max_length=INDEXED_RESULTS)  # exclusions that came first


class FlakyState(Record):
    test: TestFlakiness | None = None
    outcomes: tuple[HeldOutcome, ...] | None = None


def test_key(test_id: str) -> str:
    return compound_key(test_id, "flakiness")


def outcomes_key(event: ResultEvent) -> str:
    identity = orjson.dumps([event.commit, event.bundle.model_dump(), event.config, event.seed], option=orjson.OPT_SORT_KEYS)
    return compound_key(event.test_id, "runs", hashlib.sha256(identity).hexdigest()[:20])


class FlakyDetectorProcessor(Processor[FlakyState]):
    name: ClassVar[str] = NAME
    inputs: ClassVar[tuple[str, ...]] = (ResultEvent.TOPIC, BaselineExclusion.TOPIC)
    outputs: ClassVar[tuple[str, ...]] = (FlakyVerdict.TOPIC,)
    state_model: ClassVar[type[Record]] = FlakyState
    state_key: ClassVar[str] = "key"

    def process(self, state: StateReader[FlakyState], event: Event) -> Step[FlakyState]:
        if isinstance(event, BaselineExclusion):
            return self._exclusion(state, event)
        assert isinstance(event, ResultEvent)
        if event.status not in FAILING | PASSING:
            return Step()
        held = state.get(test_key(event.test_id))
        test = (held.test if held else None) or TestFlakiness()
        key = outcomes_key(event)
        before = state.get(key)
        outcomes = tuple(before.outcomes or ()) if before else ()
        differed = outcomes_differ(_outcomes(outcomes))
        outcome = HeldOutcome(result_id=event.id, node_id=event.node_id, status=event.status, trigger=event.trigger,
                              excluded=event.id in test.excluded)
        outcomes = (*outcomes, outcome)[-RUNS_PER_GROUP:]
        differs = outcomes_differ(_outcomes(outcomes))
        statuses = (*test.statuses, event.status)[-RECENT:]
        retries = flaky_by_retries(statuses) and event.status == "flaky"
        evidence = (differs and (not differed or event.status in FAILING)) or retries
        index = (*test.index, (event.id, key))
        kept = index[-INDEXED_RESULTS:]
        forgotten = {group for _, group in index[:-INDEXED_RESULTS]} - {group for _, group in kept}
        test = test.model_copy(update={
            "statuses": statuses, "clean_runs": 0 if evidence else test.clean_runs + 1, "index": kept,
        })
        verdict: FlakyVerdict | None = None
        if evidence and not test.flaky:
            rule = "outcomes-differ" if differs else "retries"
            reason = differs or f"{statuses.count('flaky')} of its last {len(statuses)} runs passed only on retry"
            verdict = _verdict(event, True, rule, reason, outcomes if differs else ())
        elif test.flaky and test.clean_runs >= STABLE_AFTER:
            verdict = _verdict(event, False, "stable", f"{test.clean_runs} runs in a row without a flake", ())
        if verdict is not None:
            test = test.model_copy(update={"flaky": verdict.flaky, "rule": verdict.rule})
        writes: dict[str, FlakyState | None] = {group: None for group in forgotten}  # runs too old to index
        writes.update({test_key(event.test_id): FlakyState(test=test), key: FlakyState(outcomes=outcomes)})
        return Step(writes=writes, outputs=[verdict] if verdict else [])

    def _exclusion(self, state: StateReader[FlakyState], event: BaselineExclusion) -> Step[FlakyState]:
        """A run on a sick node stops counting (an exclusion can also arrive before its result)."""
        held = state.get(test_key(event.test_id))
        test = (held.test if held else None) or TestFlakiness()
        groups = [key for result_id, key in test.index if result_id == event.result_id]
        if not groups:
            if event.result_id in test.excluded:
                return Step()
            test = test.model_copy(update={"excluded": (*test.excluded, event.result_id)[-INDEXED_RESULTS:]})
            return Step(writes={test_key(event.test_id): FlakyState(test=test)})
        key = groups[-1]
        outcomes = state.get(key)
        if outcomes is None or not outcomes.outcomes:
            return Step()
        marked = tuple(o.model_copy(update={"excluded": True}) if o.result_id == event.result_id else o
                       for o in outcomes.outcomes)
        return Step(writes={key: FlakyState(outcomes=marked)})


def _outcomes(held) -> list[Outcome]:
    return [Outcome(o.node_id, o.status, o.excluded) for o in held]


def _verdict(event: ResultEvent, flaky: bool, rule: str, reason: str, outcomes) -> FlakyVerdict:
    return FlakyVerdict(
        cause_id=event.id, test_id=event.test_id, repo=event.repo, flaky=flaky, rule=rule, reason=reason,
        time=event.time, commit=event.commit, bundle=event.bundle, config=event.config, seed=event.seed,
        chips=event.chips,
        outcomes=tuple(RunOutcome(result_id=o.result_id, node_id=o.node_id, status=o.status, trigger=o.trigger)
                       for o in outcomes)[-32:],
    )
