"""The order a ``--fastci-select`` job runs its tests in: the plan's risk order, by blocks of module
and class, so a module's fixtures are set up once and its tests never take turns with another's."""

from __future__ import annotations

import pytest

from fastci.ci.plan import Plan, PlannedRun
from fastci.ci.pytest_select import Selector
from fastci.shared.test_ids import short_id

pytest_plugins = ["pytester"]

MODULE_A = """
import pytest

SETUPS = []


@pytest.fixture(scope="module")
def registry():
    SETUPS.append("a")
    return {}


def test_a1(registry):
    pass


def test_a2(registry):
    pass


class TestA:
    def test_a3(self, registry):
        pass

    def test_a4(self, registry):
        assert SETUPS == ["a"]  # set up once for the whole module
"""

MODULE_B = """
def test_b1():
    pass


def test_b2():
    pass
"""

# Risk order as a planner may give it: the two modules' tests alternate.
RISK_ORDER = [
    "test_a.py::TestA::test_a4",
    "test_b.py::test_b2",
    "test_a.py::test_a1",
    "test_b.py::test_b1",
    "test_a.py::TestA::test_a3",
    "test_a.py::test_a2",
]


def plan(order: list[str]) -> Plan:
    tests = [PlannedRun(test_id, "risk", 1.0 - i / 10, 1.0, 1.0) for i, test_id in enumerate(order)]
    known = frozenset(short_id(test_id) for test_id in RISK_ORDER)  # every collected test is known
    return Plan(repo="r", head="abc1234", commits=("abc1234",), run_all=False, answered=True, tests=tests, known=known)


def ran(pytester: pytest.Pytester, order: list[str]) -> tuple[list[str], pytest.RunResult]:
    pytester.makepyfile(test_a=MODULE_A, test_b=MODULE_B)
    result = pytester.runpytest("-v", "-p", "no:randomly", plugins=[Selector(plan(order), "subset", lambda _: False)])
    lines = [line.split(" ")[0] for line in result.outlines if " PASSED" in line or " FAILED" in line]
    return lines, result


def test_modules_and_classes_run_as_blocks_ranked_by_their_riskiest_test(pytester):
    order, result = ran(pytester, RISK_ORDER)
    result.assert_outcomes(passed=6)  # test_a4 sees the module fixture set up once
    assert order == [
        "test_a.py::TestA::test_a4",  # the riskiest test first, with its class
        "test_a.py::TestA::test_a3",
        "test_a.py::test_a1",  # then the rest of its module, by risk
        "test_a.py::test_a2",
        "test_b.py::test_b2",  # then the next module, by risk
        "test_b.py::test_b1",
    ]


def test_a_plan_that_keeps_some_tests_orders_what_it_keeps_the_same_way(pytester):
    order, result = ran(pytester, ["test_b.py::test_b1", "test_a.py::test_a2", "test_b.py::test_b2"])
    assert order == ["test_b.py::test_b1", "test_b.py::test_b2", "test_a.py::test_a2"]
    assert "3 passed, 3 deselected" in result.stdout.str()
