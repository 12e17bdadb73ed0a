"""pytest feature: ``--fastci-results`` publishes one ``results`` event per test.

Each event carries the test's status (passed, failed, error, skipped, or flaky when a rerun plugin
retried it into passing), its duration, the run context (bundle, node, hardware revision, repo,
commit, trigger; see ``fastci.producer.context``), the seed and the test's parameters as config.
A test can add metrics, a loss curve, an eval score, a seed or config through the ``fastci_result``
fixture (inert without the flag). Events go through the producer's spool, so a suite whose target
is down still finishes; its events are sent by the next session or ``fastci spool drain``.
"""

from __future__ import annotations

import math
import numbers
import os
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

# Loaded in every pytest session of an environment with fastci installed: import the producer
# (pydantic, aiokafka) only when --fastci-results is given.

TARGETS = ("embedded", "kafka")


@dataclass
class TestRecord:
    """What a test adds to its result through the ``fastci_result`` fixture."""

    __test__ = False  # not a test class, whatever pytest's collection thinks of the name

    metrics: dict[str, list[float]] = field(default_factory=dict)
    loss_curve: list[float] = field(default_factory=list)
    eval_score: float | None = None
    seed: int | None = None
    config: dict[str, Any] = field(default_factory=dict)
    chips: int = 0

    def metric(self, name: str, *samples: float) -> None:
        self.metrics.setdefault(name, []).extend(float(s) for s in samples)


RECORD_KEY = pytest.StashKey[TestRecord]()
# Set by --fastci-select on each item it decided about: whether its selection kept the test.
SELECTED_KEY = pytest.StashKey[bool]()
TRACED_KEY = pytest.StashKey[bool]()  # set by --fastci-evidence for a test it records


def addoption(group: Any) -> None:
    group.addoption(
        "--fastci-results",
        action="store_true",
        help="publish one results event per test (status, duration, bundle, node, trigger, seed, config)",
    )
    group.addoption(
        "--fastci-results-target",
        choices=TARGETS,
        default=None,
        help="where results go: the embedded log (default, in $FASTCI_DATA_DIR or .fastci) or kafka "
        "($FASTCI_KAFKA_BOOTSTRAP, $FASTCI_KAFKA_NAMESPACE); default $FASTCI_RESULTS_TARGET, else $FASTCI_TARGET",
    )
    group.addoption(
        "--fastci-results-spool",
        default=None,
        help="spool directory for results not yet acknowledged (default <data dir>/spool/<target>)",
    )
    group.addoption(
        "--fastci-bundle",
        default=None,
        help="bundle file (TOML: node_id, hardware_revision, [bundle] versions); default $FASTCI_BUNDLE_FILE",
    )


def configure(config: Any) -> None:
    config.pluginmanager.register(_Fixtures(), "fastci-results-fixture")
    if not config.getoption("fastci_results"):
        return
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        return  # the pytest-xdist controller runs no tests; its workers publish
    from fastci.producer.client import Producer, RetryPolicy
    from fastci.producer.context import ContextError, load_context, this_environment
    from fastci.producer.spool import Spool

    try:
        context = load_context(
            config.getoption("fastci_bundle"),
            cwd=Path(str(config.rootpath)),
            environment=this_environment(config.getoption("fastci_env", None)),
        )
    except ContextError as error:
        raise pytest.UsageError(f"--fastci-results: {error}") from None
    target_name = (
        config.getoption("fastci_results_target")
        or os.environ.get("FASTCI_RESULTS_TARGET")
        or os.environ.get("FASTCI_TARGET", "embedded")
    )
    if target_name not in TARGETS:
        raise pytest.UsageError(
            f"--fastci-results: target {target_name!r} (FASTCI_RESULTS_TARGET or FASTCI_TARGET) is not one of "
            f"{', '.join(TARGETS)}"
        )
    target, default_spool = build_target(target_name)
    spool = Spool(config.getoption("fastci_results_spool") or default_spool)
    producer = Producer(target, spool, context, retry=RetryPolicy(attempts=2, first_backoff_s=0.5, cooldown_s=60))
    config.pluginmanager.register(ResultsPublisher(producer, run_id_of(config), config), "fastci-results")


def build_target(name: str) -> tuple[Any, Path]:
    """The target and its default spool directory (one per target, so a drain never sends events
    meant for one target to another)."""
    from fastci.core import config as fastci_config
    from fastci.producer.targets import EmbeddedTarget, KafkaTarget

    data_dir = fastci_config.data_dir()
    if name == "kafka":
        settings = fastci_config.KafkaSettings.from_env()
        where = settings.namespace.rstrip("-") or "default"
        return KafkaTarget(settings), data_dir / "spool" / "kafka" / where
    return EmbeddedTarget(data_dir), data_dir / "spool" / "embedded"


def run_id_of(config: Any) -> str:
    """``$FASTCI_RUN_ID``, else the pytest-xdist run id shared by all workers, else a new one."""
    given = os.environ.get("FASTCI_RUN_ID")
    if given:
        return given
    worker = getattr(config, "workerinput", None)
    if worker and worker.get("testrunuid"):
        return f"pytest-{worker['testrunuid']}"
    return f"pytest-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


class _Fixtures:
    @pytest.fixture
    def fastci_result(self, request: Any) -> TestRecord:
        """Add metrics, a loss curve, an eval score, a seed or config to this test's result."""
        record = TestRecord()
        request.node.stash[RECORD_KEY] = record
        return record


@dataclass
class _Outcome:
    reports: list[Any] = field(default_factory=list)

    def status(self) -> str:
        final = {r.when: r for r in self.reports if r.outcome != "rerun"}
        reran = any(r.outcome == "rerun" for r in self.reports)
        setup, call, teardown = final.get("setup"), final.get("call"), final.get("teardown")
        if setup is not None and setup.failed:
            return "error"
        if setup is not None and setup.skipped:
            return "skipped"
        if call is not None and call.failed:
            return "failed"
        if call is not None and call.skipped:
            return "skipped"  # includes expected failures (xfail)
        if teardown is not None and teardown.failed:
            return "error"
        return "flaky" if reran else "passed"

    def duration(self) -> float:
        return float(sum(getattr(r, "duration", 0.0) for r in self.reports))


class ResultsPublisher:
    def __init__(self, producer: Any, run_id: str, config: Any) -> None:
        self.producer = producer
        self.run_id = run_id
        self.config = config
        self.published = 0
        self.unpublishable: list[str] = []
        self.report: Any = None  # the producer's FlushReport once the session closed it
        self._outcomes: dict[str, _Outcome] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any):
        self._outcomes[item.nodeid] = _Outcome()
        yield
        outcome = self._outcomes.pop(item.nodeid)
        self._publish(item, outcome)

    def pytest_runtest_logreport(self, report: Any) -> None:
        outcome = self._outcomes.get(report.nodeid)
        if outcome is not None:
            outcome.reports.append(report)

    def _publish(self, item: Any, outcome: _Outcome) -> None:
        from pydantic import ValidationError

        record = item.stash.get(RECORD_KEY, None) or TestRecord()
        seed = record.seed if record.seed is not None else self.config.getoption("randomly_seed", None)
        try:
            self.producer.result(
                test_id=item.nodeid,
                run_id=self.run_id,
                status=outcome.status(),
                duration_s=outcome.duration(),
                chips=record.chips,
                metrics=record.metrics,
                loss_curve=record.loss_curve,
                eval_score=record.eval_score,
                seed=seed if isinstance(seed, int) else None,
                config={**_parameters(item), **{k: config_value(v) for k, v in record.config.items()}},
                selected=item.stash.get(SELECTED_KEY, None),
                traced=item.stash.get(TRACED_KEY, False),
            )
            self.published += 1
        except ValidationError as error:  # a test recorded something the contract refuses
            first = error.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            self.unpublishable.append(f"{item.nodeid}: field '{where}': {first['msg']}")

    def pytest_sessionfinish(self, session: Any) -> None:
        self.report = self.producer.close()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        report = self.report
        if report is None:
            return
        write = terminalreporter.write_line
        target = self.producer.target.description
        if report.error:
            write(
                f"fastci: {self.published} result(s) of run {self.run_id} spooled, {target} did not acknowledge "
                f"({report.error}); {report.pending} event(s) wait in {self.producer.spool.directory} for the next "
                f"session or 'fastci spool drain'"
            )
        else:
            write(
                f"fastci: {self.published} result(s) of run {self.run_id} published to {target} "
                f"({report.sent} event(s) acknowledged in this flush)"
            )
        for problem in self.unpublishable:
            write(f"fastci: result not published: {problem}")


def _parameters(item: Any) -> dict[str, Any]:
    """The test's parametrization as config (``config_value`` of each parameter)."""
    params = getattr(getattr(item, "callspec", None), "params", {}) or {}
    return {name: config_value(value) for name, value in params.items()}


MAX_TEXT = 200  # characters of a parameter's text: enough to tell values apart, not a document
MAX_STRING = 4096  # a string parameter kept as it is (a longer one is cut as its text)
_INT64 = range(-(2**63), 2**63)  # what JSON readers (and orjson) hold as an integer
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # CPython's default repr: differs per process


def config_value(value: Any) -> Any:
    """A parameter as a config value: a JSON scalar or a flat list of them as it is, anything the
    contract cannot hold (NaN, infinities, objects, bytes, nested containers, 65-bit integers) by a
    text that is the same in every run and process (``stable_text``), so the result is never lost
    and a test's runs stay comparable."""
    scalar = _scalar(value)
    if scalar is not _NOT_SCALAR:
        return scalar
    if type(value) in (list, tuple):
        items = [_scalar(v) for v in value]
        if _NOT_SCALAR not in items:
            return items
    return stable_text(value)


_NOT_SCALAR = object()


def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value[:] if len(value) <= MAX_STRING and _encodable(value) else stable_text(value)
    if isinstance(value, numbers.Integral):  # int, numpy's integers
        return int(value) if int(value) in _INT64 else stable_text(value)
    if isinstance(value, float):  # float, numpy's floats
        return float(value) if math.isfinite(value) else repr(float(value))  # 'nan', 'inf', '-inf'
    return _NOT_SCALAR


def stable_text(value: Any) -> str:
    """``repr(value)``, but the same in every process: containers by their items' stable text (a
    set's sorted), no memory address, floats as Python prints them; cut at ``MAX_TEXT``."""
    return _text(value, 0)[:MAX_TEXT]


def _text(value: Any, depth: int) -> str:
    if depth > 4:
        return "..."
    if isinstance(value, float):
        return repr(float(value))
    if type(value) in (list, tuple, set, frozenset, dict):
        items = list(value.items() if isinstance(value, dict) else value)
        if not isinstance(value, set | frozenset):
            items = items[:MAX_TEXT]  # more would be cut from the text anyway (a set's are sorted first)
        if isinstance(value, dict):
            inner = [f"{_text(k, depth + 1)}: {_text(v, depth + 1)}" for k, v in items]
        else:
            inner = [_text(v, depth + 1) for v in items]
        if isinstance(value, set | frozenset):
            inner.sort()  # a set's order follows string hashing, which differs per process
        body = ", ".join(inner)
        if type(value) is list:
            return f"[{body}]"
        if type(value) is tuple:
            return f"({body},)" if len(inner) == 1 else f"({body})"
        if type(value) is frozenset:
            return f"frozenset({{{body}}})"
        return f"{{{body}}}" if inner else ("{}" if type(value) is dict else "set()")
    try:
        text = repr(value)
    except Exception:  # a parameter whose repr fails still has a type
        text = f"<{type(value).__module__}.{type(value).__qualname__}>"
    return _ADDRESS.sub("", text)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")  # a lone surrogate is no JSON text
    except UnicodeEncodeError:
        return False
    return True
