"""test-history: per test, its run counts and health; announces flips between passing and failing."""

from __future__ import annotations

from typing import ClassVar

from fastci.core.events import Event, Record
from fastci.core.processor import Processor, StateReader, Step
from fastci.fleet.events import Health, TestStatusChanged
from fastci.inputs import ResultEvent, Status

# What each status says about the test's health; 'skipped' says nothing.
HEALTH_OF: dict[str, Health | None] = {
    "passed": "passing",
    "flaky": "passing",  # failed, then passed on retry: passing, but counted as a flake
    "failed": "failing",
    "error": "failing",
    "skipped": None,
}


class TestHistory(Record):
    __test__ = False  # not a pytest test class

    runs: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    flaky: int = 0
    skipped: int = 0
    health: Health | None = None
    last_status: Status | None = None
    last_run_id: str | None = None
    last_commit: str | None = None


_COUNTER: dict[str, str] = {
    "passed": "passed",
    "failed": "failed",
    "error": "errors",
    "flaky": "flaky",
    "skipped": "skipped",
}


class TestHistoryProcessor(Processor[TestHistory]):
    __test__ = False

    name: ClassVar[str] = "test-history"
    inputs: ClassVar[tuple[str, ...]] = (ResultEvent.TOPIC,)
    outputs: ClassVar[tuple[str, ...]] = (TestStatusChanged.TOPIC,)
    state_model: ClassVar[type[Record]] = TestHistory
    state_key: ClassVar[str] = "test_id"

    def process(self, state: StateReader[TestHistory], event: Event) -> Step[TestHistory]:
        assert isinstance(event, ResultEvent)
        before = state.get(event.test_id) or TestHistory()
        counter = _COUNTER[event.status]
        health = HEALTH_OF[event.status] or before.health
        # Built from the validated state and event without validating again (the hot path of
        # every result; model_copy cost as much as the rest of the processor).
        after = TestHistory.trusted(
            {
                **before.__dict__,
                "runs": before.runs + 1,
                counter: getattr(before, counter) + 1,
                "health": health,
                "last_status": event.status,
                "last_run_id": event.run_id,
                "last_commit": event.commit,
            }
        )
        outputs: list[Event] = []
        if before.health is not None and health != before.health:
            outputs.append(
                TestStatusChanged(
                    result_id=event.id,
                    test_id=event.test_id,
                    run_id=event.run_id,
                    commit=event.commit,
                    node_id=event.node_id,
                    previous=before.health,
                    current=health,
                    status=event.status,
                    runs=after.runs,
                )
            )
        return Step(writes={event.test_id: after}, outputs=outputs)
