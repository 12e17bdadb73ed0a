"""The test-history processor, alone: pure (state, event) -> (writes, outputs)."""

from __future__ import annotations

from factories import result

from fastci.fleet.events import TestStatusChanged
from fastci.fleet.test_history import TestHistory, TestHistoryProcessor

TEST = "tests/test_a.py::test_x"


class Store:
    """A plain dict standing in for the runtime's state store."""

    def __init__(self) -> None:
        self.values: dict[str, TestHistory] = {}

    def get(self, key: str) -> TestHistory | None:
        return self.values.get(key)


def feed(statuses: list[str]) -> tuple[TestHistory, list[TestStatusChanged]]:
    processor, store, flips = TestHistoryProcessor(), Store(), []
    for n, status in enumerate(statuses):
        step = processor.process(store, result(TEST, run_id=f"run-{n}", status=status))
        store.values.update(step.writes)
        flips += step.outputs
    return store.values[TEST], flips


def test_counts_every_status():
    history, _ = feed(["passed", "failed", "error", "flaky", "skipped", "passed"])
    assert (history.runs, history.passed, history.failed, history.errors, history.flaky, history.skipped) == (
        6,
        2,
        1,
        1,
        1,
        1,
    )
    assert history.last_status == "passed" and history.last_run_id == "run-5"


def test_flips_are_announced_with_the_result_that_caused_them():
    history, flips = feed(["passed", "passed", "failed", "failed", "passed"])
    assert [(f.previous, f.current, f.run_id, f.runs) for f in flips] == [
        ("passing", "failing", "run-2", 3),
        ("failing", "passing", "run-4", 5),
    ]
    assert flips[0].result_id == result(TEST, run_id="run-2").id
    assert history.health == "passing"


def test_first_result_and_skips_do_not_flip():
    _, flips = feed(["failed", "skipped", "failed"])
    assert flips == []
    history, flips = feed(["skipped", "passed", "skipped", "failed"])
    assert [f.current for f in flips] == ["failing"] and history.health == "failing"


def test_a_flaky_pass_counts_as_passing_and_error_as_failing():
    _, flips = feed(["passed", "flaky", "error", "flaky"])
    assert [(f.previous, f.current, f.status) for f in flips] == [
        ("passing", "failing", "error"),
        ("failing", "passing", "flaky"),
    ]


def test_output_ids_derive_from_the_input():
    _, first = feed(["passed", "failed"])
    _, again = feed(["passed", "failed"])
    assert first[0].id == again[0].id
    assert first[0].id == TestStatusChanged(**first[0].model_dump(exclude={"id"})).id
