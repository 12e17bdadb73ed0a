"""pytest feature: ``--fastci-select`` runs the tests the change needs, riskiest first.

The change is HEAD against its first parent, or (``--fastci-select-base REV``, for a pull request)
every commit from the merge base with REV to HEAD. Its plan comes from ``fastci.ci.plan``; the
tests it leaves out are deselected through pytest's own hook, after ``-k``, ``-m`` and ``--lf``
(so they compose, and the summary reads "N passed, M deselected").

Never a silent skip: a test marked ``@pytest.mark.fastci_always`` or matching ``[tool.fastci]
always`` runs; a collected test the catalog does not know runs; and when fastci cannot decide (no
evidence, no plan in time, no broker, a plan for another base, a shallow clone) every test runs and
the summary line says why.

Modes (``--fastci-select-mode``): ``subset`` (the default) deselects the rest; ``subset-and-rest``
runs the plan first, then the rest; ``shadow`` runs everything in the collected order, and
``--fastci-results`` records on each result whether the selection kept it (``selected``), which the
selection audit uses to find misses.

With pytest-xdist the controller asks once and hands the plan to its workers, so every worker
deselects the same tests.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from fastci.producer.pytest_results import SELECTED_KEY

MODES = ("subset", "subset-and-rest", "shadow")
TARGETS = ("embedded", "kafka")
ALWAYS_MARKER = "fastci_always"
WORKER_KEY = "fastci_plan"  # the plan, as JSON, in an xdist worker's workerinput


def addoption(group: Any) -> None:
    group.addoption(
        "--fastci-select",
        action="store_true",
        help="run only the tests this change needs (fastci's plan), riskiest first; everything, saying why, "
        "when fastci cannot decide",
    )
    group.addoption(
        "--fastci-select-base",
        default=None,
        metavar="REV",
        help="a pull request's target (e.g. origin/main): the change is every commit from the merge base to HEAD "
        "(default: HEAD against its first parent)",
    )
    group.addoption(
        "--fastci-select-mode",
        choices=MODES,
        default="subset",
        help="subset: deselect the rest (default); subset-and-rest: the plan first, then the rest; "
        "shadow: run everything, recording whether the selection kept each test",
    )
    group.addoption(
        "--fastci-select-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds to wait for the plan before running everything (default 60)",
    )
    group.addoption(
        "--fastci-select-target",
        choices=TARGETS,
        default=None,
        help="where the plan comes from: the embedded runtime (default, in $FASTCI_DATA_DIR or .fastci) or the "
        "Kafka worker ($FASTCI_KAFKA_BOOTSTRAP); default $FASTCI_SELECT_TARGET, else $FASTCI_TARGET",
    )


def configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", f"{ALWAYS_MARKER}: never deselected by --fastci-select (a smoke test, a test of non-code inputs)"
    )
    if not config.getoption("fastci_select"):
        return
    from fastci.selection.settings import SettingsError, load

    root = _work_tree(Path(str(config.rootpath)))
    try:
        settings = load(root)
    except SettingsError as error:
        raise pytest.UsageError(f"--fastci-select: {error}") from None
    worker = getattr(config, "workerinput", None)
    if worker is not None and WORKER_KEY in worker:
        import orjson

        from fastci.ci.plan import Plan

        plan = Plan.from_json(orjson.loads(worker[WORKER_KEY]))
    else:
        plan = _ask(config, root)
        if config.getoption("numprocesses", None):  # the xdist controller: its workers take this plan
            config.pluginmanager.register(_HandOver(plan), "fastci-select-handover")
    config.pluginmanager.register(
        Selector(plan, config.getoption("fastci_select_mode"), settings.always_runs), "fastci-select"
    )


def _ask(config: Any, root: Path) -> Any:
    from fastci.ci.change import ChangeError, change_of
    from fastci.ci.plan import ask
    from fastci.core import config as fastci_config

    timeout = config.getoption("fastci_select_timeout")
    if not timeout > 0:
        raise pytest.UsageError(f"--fastci-select-timeout: must be more than 0 seconds (got {timeout:g})")
    target = (
        config.getoption("fastci_select_target")
        or os.environ.get("FASTCI_SELECT_TARGET")
        or os.environ.get("FASTCI_TARGET")
        or "embedded"
    )
    if target not in TARGETS:
        raise pytest.UsageError(f"--fastci-select: target {target!r} is not one of {', '.join(TARGETS)}")
    try:
        change = change_of(root, "HEAD", config.getoption("fastci_select_base"), option="--fastci-select-base")
    except ChangeError as error:
        raise pytest.UsageError(f"--fastci-select: {error}") from None

    def say(message: str) -> None:
        sys.stderr.write(f"fastci: {message}\n")

    return ask(
        change,
        target,
        fastci_config.data_dir(),
        fastci_config.KafkaSettings.from_env() if target == "kafka" else None,  # unread on the embedded log
        timeout,
        os.environ.get("FASTCI_REPO"),
        say,
    )


class _HandOver:
    """pytest-xdist's controller: every worker gets the plan the controller asked for."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan

    def pytest_configure_node(self, node: Any) -> None:
        import orjson

        node.workerinput[WORKER_KEY] = orjson.dumps(self.plan.to_json(with_known=True)).decode()


class Selector:
    """Deselects and orders the collected tests by the plan, and says what it did in one line."""

    def __init__(self, plan: Any, mode: str, always: Any) -> None:
        self.plan = plan
        self.mode = mode
        self.always = always
        self.counts: dict[str, int] = {}

    @pytest.hookimpl(trylast=True)  # after -k, -m and --lf have deselected theirs
    def pytest_collection_modifyitems(self, session: Any, config: Any, items: list[Any]) -> None:
        rank = {t.test_id: i for i, t in enumerate(self.plan.tests)}
        planned, extra, skipped = [], [], []
        counts = {"planned": 0, "always": 0, "new": 0, "skipped": 0, "collected": len(items)}
        for item in items:
            kind = self._kind(item, rank)
            counts[kind] += 1
            item.stash[SELECTED_KEY] = kind != "skipped"
            (planned if kind == "planned" else skipped if kind == "skipped" else extra).append(item)
        planned.sort(key=_grouped_risk_order(planned, rank))
        self.counts = counts
        if self.mode == "shadow":
            return  # everything runs, in the collected order; the results say what was kept
        if self.mode == "subset-and-rest":
            items[:] = [*planned, *extra, *skipped]
            return
        if skipped:
            config.hook.pytest_deselected(items=skipped)
        items[:] = [*planned, *extra]

    def _kind(self, item: Any, rank: dict[str, int]) -> str:
        if item.nodeid in rank:
            return "planned"
        if self.plan.run_all:
            return "new"  # everything runs: the tests the catalog lacks too
        if item.get_closest_marker(ALWAYS_MARKER) is not None or self.always(item.nodeid):
            return "always"
        if not self.plan.is_known(item.nodeid):
            return "new"
        return "skipped"

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: Any, exitstatus: int) -> None:
        # The plan needs none of the collected tests (a docs-only change): that is a success, not
        # pytest's "no tests collected" (exit 5), which would fail the job.
        counts = self.counts
        kept = counts.get("planned", 0) + counts.get("always", 0) + counts.get("new", 0)
        if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and counts.get("skipped") and not kept:
            session.exitstatus = pytest.ExitCode.OK

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminalreporter.write_line(self.line())

    def line(self) -> str:
        """The job's summary: what ran and why, what lacks evidence and what gives it some."""
        text = self._counts()
        return "; ".join([text, *self.plan.notes()]) if self.counts else text

    def _counts(self) -> str:
        plan, counts = self.plan, self.counts
        if not counts:
            return "fastci: no tests collected"
        head = plan.head[:12] if plan.head else "?"
        what = f"commit {head}" if len(plan.commits) <= 1 else f"{len(plan.commits)} commits up to {head}"
        if plan.repo:
            what += f" of {plan.repo}"
        if plan.run_all:
            return f"fastci: {what}: running all {counts['collected']} collected tests: {plan.reason}"
        share = f", ~{plan.share:.0%} of the suite's time" if plan.share is not None else ""
        if plan.widened:
            share += f" ({plan.widened})"
        kept = counts["planned"] + counts["always"] + counts["new"]
        extras = ", ".join(f"{counts[k]} {k}" for k in ("always", "new") if counts[k])
        kept_text = f"{counts['planned']} of {plan.tests_known} known tests" + (f" (+{extras})" if extras else "")
        if self.mode == "shadow":
            return (
                f"fastci: {what}: shadow mode, ran all {counts['collected']} collected tests; "
                f"the selection keeps {kept_text}{share}"
            )
        if self.mode == "subset-and-rest":
            rest = counts["skipped"]
            return f"fastci: {what}: ran the plan's {kept} tests first ({kept_text}{share}), then the other {rest}"
        if not kept:
            return f"fastci: {what}: nothing to run: the change reaches none of the {plan.tests_known} known tests"
        return f"fastci: {what}: running {kept_text}{share}; {counts['skipped']} deselected"


def _grouped_risk_order(items: list[Any], rank: dict[str, int]) -> Any:
    """A sort key for risk order that never interleaves modules or classes: a module (a directory, a
    class) runs as one block, ranked by its riskiest test, and its tests by risk within it. Tests of
    one module taking turns with another's would tear down and set up its module fixtures at every
    turn, and break tests that share a module's state; pytest-randomly shuffles by the same blocks."""
    best: dict[str, int] = {}
    for item in items:
        for node in item.listchain()[1:-1]:  # the blocks around the test: not the session, not itself
            best[node.nodeid] = min(best.get(node.nodeid, rank[item.nodeid]), rank[item.nodeid])

    def key(item: Any) -> list[int]:
        # A test directly in a module stands beside the module's classes with its own rank.
        return [best[node.nodeid] for node in item.listchain()[1:-1]] + [rank[item.nodeid]]

    return key


def _work_tree(path: Path) -> Path:
    from fastci.selection.repos import git_line

    top = git_line(path, "rev-parse", "--show-toplevel")
    return Path(top) if top else path
