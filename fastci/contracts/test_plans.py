"""The run plan of a selection: its tests in the order to run them, each on the config to run it with.

The test planner writes it; the pool scheduler and the CI job (``fastci/ci/plan.py``) read it.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StringConstraints

from fastci.contracts.keep_reasons import Reason
from fastci.core.events import Config, Event, FiniteFloat, Name, Record, Sha, Text

PAGE_SIZE = 1000  # planned tests per event (an event stays well under Kafka's 1 MiB); more go on further pages
KNOWN_PAGE_SIZE = 20_000  # known-test ids per event (13 bytes each in JSON)
ShortId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{12}$")]


class PlannedTest(Record):
    test_id: Name
    reason: Reason | Literal["run-all"] = Field(
        description="Why selection kept it ('run-all': a rule selected every test)."
    )
    risk: FiniteFloat = Field(ge=0, le=1, description="Estimated probability that this run fails for a real fault.")
    history_risk: FiniteFloat = Field(
        ge=0, le=1, description="Recency-weighted posterior failure rate of its own runs."
    )
    exposure: FiniteFloat = Field(ge=0, le=1, description="Share of the change's executed units this test executes.")
    flaky_rate: FiniteFloat = Field(
        ge=0, le=1, description="Recency-weighted posterior rate of flaky runs (discounts risk)."
    )
    expected_s: FiniteFloat = Field(ge=0, description="Mean measured duration of its recent runs (full config).")
    estimated_s: FiniteFloat = Field(ge=0, description="Expected duration of the config to run (shrunk or full).")
    chips: int = Field(ge=0, description="Accelerator chips it holds (0: a CPU test).")
    config: Config = Field(
        default_factory=dict,
        description="The config to run it with: the declared full config with shrunk dimensions replaced; "
        "empty when it declares none (run it as it is).",
    )
    shrunk: dict[Name, int] = Field(
        default_factory=dict, max_length=32, description="Dimensions shrunk below the full config: name -> value."
    )
    saved_chip_s: FiniteFloat = Field(ge=0, description="Estimated chip-seconds the shrunk config saves (0: full).")


class PlanMetrics(Record):
    tests: int = Field(ge=0, description="Planned tests over all pages.")
    expected_s: FiniteFloat = Field(ge=0, description="Sum of full-config durations.")
    estimated_s: FiniteFloat = Field(ge=0, description="Sum of planned-config durations.")
    estimated_chip_s: FiniteFloat = Field(ge=0)
    saved_chip_s: FiniteFloat = Field(ge=0, description="Chip-seconds saved by shrunk configs.")
    shrunk: int = Field(ge=0, description="Tests planned on a shrunk config.")


class TestPlan(Event):
    """One selection's tests, riskiest per unit of cost first. Key: repo. Id: the selection's id and page."""

    __test__ = False  # not a pytest test class

    TOPIC: ClassVar[str] = "test-plan"
    KEY: ClassVar[str] = "repo"
    IDENTITY: ClassVar[tuple[str, ...]] = ("selection_id", "page")

    selection_id: str = Field(max_length=64, description="Id of the selection this plan orders.")
    commit_id: str = Field(max_length=64, description="Id of the commits event the selection answers.")
    repo: Name
    sha: Sha
    base: Sha | None = Field(default=None, description="The commit's first parent, the selection's base.")
    pool: Name = Field(default="default", description="The accelerator pool to run it in.")
    hardware_path: bool = Field(description="The change can alter what runs on the accelerator (from the commit).")
    run_all: bool = Field(
        description="Run the whole suite: every test the job collects, of which the entries are the known ones "
        "in risk order (the catalog may lack tests fastci has not seen yet)."
    )
    run_all_reason: Text = Field(default="", description="Why the whole suite runs (the selection's reason).")
    page: int = Field(ge=0, description="This event's part of the plan; entries continue page after page.")
    pages: int = Field(ge=1, description="How many events the plan has.")
    first_rank: int = Field(ge=0, description="Run-order position of this page's first entry (page * PAGE_SIZE).")
    entries: tuple[PlannedTest, ...] = Field(default=(), max_length=PAGE_SIZE, description="In run order.")
    known: tuple[ShortId, ...] = Field(
        default=(),
        max_length=KNOWN_PAGE_SIZE,
        description="Short ids (fastci.selection.graph.short_id) of the tests the catalog knew, sorted, in pages: "
        "a collected test that is in none of them is new to fastci, and runs.",
    )
    metrics: PlanMetrics = Field(description="Of the whole plan (every page carries the same).")
