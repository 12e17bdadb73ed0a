"""pytest feature: ``--fastci-evidence`` publishes one ``evidence`` event per test: the project
code the test executed (setup, call and teardown: its fixtures count), as folded stacks.

Methods (``--fastci-evidence-method``):

- ``tracing`` (default): every project code unit each test runs (setup, call and teardown; threads
  the test starts included), with the calling contexts of its first calls
  (``--fastci-evidence-contexts``, default 1): exact, at a cost per unit per test, not per call
  (``fastci.evidence.first_calls``; on ``sys.monitoring`` where the interpreter has it, 3.12+, else
  on ``sys.setprofile``).
- ``sampling``: one ``py-spy record --idle`` attached to this process for the whole session; each
  test's phases run inside a marker frame named for that test, so a sample is attributed by its
  own content (``fastci.evidence.sampling`` says why not by time). Waiting counts (a test blocked on
  a device or a subprocess still runs that code); threads and subprocesses the test starts are not
  seen. Sees what runs long enough to be sampled: tests with no sample in project code get no
  event (no samples is no evidence of no code), and always run.

``bench/evidence_overhead.py`` measures both against a run without evidence.

How a phase comes to run inside the marker or the tracer: ``CallInfo.from_call`` (pytest's public
class that runs each phase of each test) is wrapped for the session. A hook wrapper cannot do it:
pluggy runs the wrapped hooks after the wrapper's generator yielded, so its frame is not on the
stack; and implementing ``pytest_runtest_protocol`` would bypass rerun plugins. Everything a
phase runs, other plugins' hooks included, is inside the marker; only project files count.

Workload (tracing only): a test marked ``@pytest.mark.fastci_workload(scope={...}, dimensions={name:
{"full": F, "minimum": M, "cost_exponent": E}})`` whose code marks its loops with
``fastci.evidence.dimensions.at`` gets a ``workload`` block on its evidence: its declaration and,
per unit, the minimal (step, layer...) points it first ran at (``fastci.planning.shrink``).

Import time, whatever the method: what runs while project modules are imported (conftests,
test modules and what they import, from before the initial conftests load until collection ends)
is traced once, and published per module as ``import`` evidence: the stacks under the module's own
``<module>`` frame, and the test files whose imports reach it (``fastci.evidence.imports``). Such
code runs once per process, under whichever test imported the module first, so no test's own
evidence shows it; a change to it selects every test of those files.

Events are published at the end of the session (the results plugin's spool and targets; the
results' run id when ``--fastci-results`` is on too, so both join on it).
"""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from fastci.core.config import EVIDENCE_CONTEXTS as DEFAULT_CONTEXTS

if TYPE_CHECKING:
    from fastci.inputs import Environment

METHODS = ("tracing", "sampling")
TARGETS = ("embedded", "kafka")
PHASES = frozenset({"setup", "call", "teardown"})
MODULE_FRAME = "<module>"  # fastci.selection.units.MODULE: a module's own top-level code
DEFAULT_RATE_HZ = 200.0  # see bench/evidence_overhead.py: the overhead and recall of each rate


def addoption(group: Any) -> None:
    _incremental_option(group)
    group.addoption(
        "--fastci-evidence",
        action="store_true",
        help="publish one evidence event per test: the project code it executed (folded stacks)",
    )
    group.addoption(
        "--fastci-evidence-method",
        choices=METHODS,
        default="tracing",
        help="tracing (default): every code unit each test runs, exact, at its first calls; "
        "sampling: py-spy samples (sees what runs long enough to be sampled)",
    )
    group.addoption(
        "--fastci-evidence-contexts",
        type=int,
        default=None,
        metavar="K",
        help="tracing: calling contexts recorded per unit per test, for pruning (default "
        f"{DEFAULT_CONTEXTS}; more prunes less often by mistake and costs more)",
    )
    group.addoption(
        "--fastci-evidence-rate",
        type=float,
        default=DEFAULT_RATE_HZ,
        metavar="HZ",
        help=f"py-spy samples per second when sampling (default {DEFAULT_RATE_HZ:g})",
    )
    group.addoption(
        "--fastci-evidence-blocking",
        action="store_true",
        help="py-spy pauses the tests for each sample: never a torn stack, more overhead "
        "(default: it reads them while they run)",
    )
    group.addoption(
        "--fastci-evidence-root",
        default=None,
        metavar="DIR",
        help="project root the stacks' paths are relative to (default: the git work tree of the rootdir)",
    )
    group.addoption(
        "--fastci-evidence-target",
        choices=TARGETS,
        default=None,
        help="where evidence goes: the embedded log (default, in $FASTCI_DATA_DIR or .fastci) or kafka "
        "($FASTCI_KAFKA_BOOTSTRAP, $FASTCI_KAFKA_NAMESPACE); default $FASTCI_EVIDENCE_TARGET, else $FASTCI_TARGET",
    )
    group.addoption(
        "--fastci-evidence-spool",
        default=None,
        metavar="DIR",
        help="spool directory for evidence not yet acknowledged (default <data dir>/spool/<target>)",
    )


WORKLOAD_MARKER = "fastci_workload"
IMPORT_WINDOW = pytest.StashKey["ImportWindow"]()


def _incremental_option(group: Any) -> None:
    group.addoption(
        "--fastci-evidence-since",
        default=None,
        metavar="REV",
        help="re-trace only the tests whose evidence may be stale since REV (the last evidence run's commit): "
        "those the changes since then select (pruned ones too) and those fastci does not know; the rest run "
        "untraced and keep their evidence",
    )


def units_cache() -> Any:
    """A session's source files, each read once, their parses kept on disk by content."""
    from fastci.core import config as fastci_config
    from fastci.evidence.sources import SourceCache
    from fastci.evidence.stacks import UnitsCache

    return UnitsCache(sources=SourceCache(fastci_config.cache_dir() / "sources"))


class ImportWindow:
    """The trace of what runs while modules are imported, from the earliest hook pytest gives a
    plugin (before the initial conftests load) until collection ends."""

    def __init__(self, root: Path, cwd: Path) -> None:
        from fastci.core import config as fastci_config
        from fastci.evidence import reads
        from fastci.evidence.tracing import import_tracer

        self.root, self.cwd, self.units = root, cwd, units_cache()
        self.tracer = import_tracer(
            lambda filename: self.units.relpath(filename, root, cwd) is not None, max_stacks=50_000
        )
        self.stacks: set[Any] | None = None
        self.reads = reads.Reads(root, cwd, excluded=(str(fastci_config.data_dir()),))
        self.reads.module_of = reads.importing_module(lambda filename: self.units.relpath(filename, root, cwd))
        reads.install(self.reads)

    def start(self) -> None:
        self.reads.importing = True
        self.tracer.start()

    def stop(self) -> set[Any]:
        if self.stacks is None:
            self.stacks = self.tracer.stop()
            self.reads.importing = False
        return self.stacks


def early(early_config: Any) -> None:
    """Start the import window when the session collects evidence (not in an xdist controller,
    which imports no test module)."""
    namespace = early_config.known_args_namespace
    if not getattr(namespace, "fastci_evidence", False):
        return
    if getattr(namespace, "numprocesses", None) and not hasattr(early_config, "workerinput"):
        return
    root = getattr(namespace, "fastci_evidence_root", None) or _work_tree(Path(str(early_config.rootpath)))
    window = ImportWindow(Path(root).resolve(), Path(str(early_config.invocation_params.dir)))
    early_config.stash[IMPORT_WINDOW] = window
    early_config.add_cleanup(window.stop)  # whatever happens to the session, tracing ends with it
    window.start()


def stale_tests(config: Any, root: Path, target: str) -> tuple[Any, str] | None:
    """(the plan of the changes since ``--fastci-evidence-since``, what it says) when incremental;
    None otherwise. A plan that runs everything re-traces everything."""
    since = config.getoption("fastci_evidence_since")
    if not since:
        return None
    from fastci.ci.change import ChangeError, change_of
    from fastci.ci.plan import ask
    from fastci.core import config as fastci_config

    try:
        change = change_of(root, "HEAD", since, option="--fastci-evidence-since")
    except ChangeError as error:
        raise pytest.UsageError(f"--fastci-evidence: {error}") from None
    kafka = fastci_config.KafkaSettings.from_env() if target == "kafka" else None  # unread on the embedded log
    plan = ask(change, target, fastci_config.data_dir(), kafka, say=lambda _: None)
    return plan, since


def configure(config: Any) -> None:
    config.addinivalue_line(
        "markers",
        f"{WORKLOAD_MARKER}(scope, dimensions): the test's validation scope and shrinkable dimensions "
        "(name -> full, minimum, cost_exponent), for --fastci-evidence tracing",
    )
    if not config.getoption("fastci_evidence"):
        return
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        return  # the pytest-xdist controller runs no tests; each worker samples itself
    from fastci.core import config as fastci_config
    from fastci.evidence.publish import NoCommit, code_under_test, producer_for
    from fastci.producer.context import this_environment

    root = Path(config.getoption("fastci_evidence_root") or _work_tree(Path(str(config.rootpath)))).resolve()
    try:
        repo, commit = code_under_test(root)
    except NoCommit as error:
        raise pytest.UsageError(f"--fastci-evidence: {error}") from None
    target = (
        config.getoption("fastci_evidence_target")
        or os.environ.get("FASTCI_EVIDENCE_TARGET")
        or os.environ.get("FASTCI_TARGET", "embedded")
    )
    if target not in TARGETS:
        raise pytest.UsageError(
            f"--fastci-evidence: target {target!r} (FASTCI_EVIDENCE_TARGET or FASTCI_TARGET) is not one of "
            f"{', '.join(TARGETS)}"
        )
    rate = config.getoption("fastci_evidence_rate")
    if not rate > 0:
        raise pytest.UsageError(f"--fastci-evidence-rate: must be more than 0 samples per second (got {rate:g})")
    contexts = config.getoption("fastci_evidence_contexts")
    if contexts is not None and contexts < 1:
        raise pytest.UsageError(f"--fastci-evidence-contexts: must be at least 1 (got {contexts})")
    kafka = fastci_config.KafkaSettings.from_env() if target == "kafka" else None
    spool = config.getoption("fastci_evidence_spool")
    producer = producer_for(target == "kafka", fastci_config.data_dir(), kafka, Path(spool) if spool else None)
    from fastci.evidence.first_calls import NoToolId

    try:
        collector = EvidenceCollector(
            config.getoption("fastci_evidence_method"),
            rate,
            not config.getoption("fastci_evidence_blocking"),
            root,
            Path(str(config.invocation_params.dir)),
            repo,
            commit,
            _run_id(config),
            producer,
            config.stash.get(IMPORT_WINDOW, None),
            contexts or DEFAULT_CONTEXTS,
            this_environment(config.getoption("fastci_env", None)),
        )
    except NoToolId as error:
        raise pytest.UsageError(f"--fastci-evidence-method tracing: {error}") from None
    collector.incremental = stale_tests(config, root, target)
    config.pluginmanager.register(collector, "fastci-evidence")
    collector.wrap_phases()
    config.add_cleanup(collector.close)


@functools.cache  # asked for before the conftests load and again at configure: one git call
def _work_tree(path: Path) -> Path:
    from fastci.selection.repos import git_line

    top = git_line(path, "rev-parse", "--show-toplevel")
    return Path(top) if top else path


def _run_id(config: Any) -> str:
    results = config.pluginmanager.get_plugin("fastci-results")  # registered before us (FEATURES order)
    if results is not None:
        return results.run_id
    from fastci.producer.pytest_results import run_id_of

    return run_id_of(config)


class EvidenceCollector:
    def __init__(
        self,
        method: str,
        rate_hz: float,
        nonblocking: bool,
        root: Path,
        cwd: Path,
        repo: str,
        commit: str,
        run_id: str,
        producer: Any,
        imports: ImportWindow | None = None,
        contexts: int = DEFAULT_CONTEXTS,
        environment: Environment | None = None,
    ) -> None:
        self.method, self.rate_hz, self.nonblocking, self.root, self.cwd = method, rate_hz, nonblocking, root, cwd
        self.environment = environment  # the matrix cell every event of this session is taken in
        self.contexts = contexts
        self.repo, self.commit, self.run_id, self.producer = repo, commit, run_id, producer
        self.units = imports.units if imports is not None else units_cache()  # each file read once a session
        self.imports = imports
        # (module, stacks, importers, files read at import, distributions a test file's imports reach)
        self.import_evidence: list[tuple[str, list[str], list[str], list[str], list[str]]] = []
        if imports is not None:
            self.reads = imports.reads
        else:  # no import window (an xdist worker started otherwise): record the tests' reads alone
            from fastci.core import config as fastci_config
            from fastci.evidence import reads

            self.reads = reads.Reads(root, cwd, excluded=(str(fastci_config.data_dir()),))
            reads.install(self.reads)
        self.test_ids: list[str] = []  # by test index (a marker's number)
        self.fixtures: dict[str, list[str]] = {}  # by test id: its fixture closure's project fixtures
        self.incremental: tuple[Any, str] | None = None  # (plan since the last evidence run, that commit)
        self.untraced: set[str] = set()  # tests whose evidence is still fresh: run, not traced
        self.phase_runner: Callable[[Callable[[], Any]], Any] | None = None  # set while a test runs
        self.problem: str | None = None  # why there is no evidence, when there is none
        self.published = self.without_evidence = 0
        self.too_big: list[str] = []  # tests whose units would not fit in one event
        self.report: Any = None
        self._recording: Any = None
        self._traced: dict[int, Any] = {}
        self._workloads: dict[int, tuple[dict[str, Any], Any]] = {}  # the marker's arguments, the points
        self._sampled: dict[int, list[Any]] = {}
        self._samples = self._outside = self._errors = 0
        if method == "sampling":
            from fastci.evidence.sampling import Markers

            self.markers = Markers()
        else:
            from fastci.evidence.first_calls import ProjectUnits, new_collector

            self.tracer = new_collector(ProjectUnits(root, cwd, self.units), contexts)

    # ----- running each test phase inside a marker or the tracer

    def wrap_phases(self) -> None:
        from _pytest.runner import CallInfo

        self._original_from_call = CallInfo.__dict__["from_call"]
        original = self._original_from_call.__func__
        collector = self

        def from_call(cls: Any, func: Callable[[], Any], when: str, reraise: Any = None) -> Any:
            run = collector.phase_runner
            if run is None or when not in PHASES:
                return original(cls, func, when, reraise)
            return original(cls, lambda: run(func), when, reraise)

        CallInfo.from_call = classmethod(from_call)  # type: ignore[method-assign,assignment]

    def unwrap_phases(self) -> None:
        from _pytest.runner import CallInfo

        CallInfo.from_call = self._original_from_call  # type: ignore[method-assign]

    def close(self) -> None:
        self.unwrap_phases()
        if self.method == "tracing":
            self.tracer.close()  # sys.monitoring's tool id and events are process-wide

    # ----- hooks

    def pytest_sessionstart(self, session: Any) -> None:
        if self.method != "sampling":
            return
        from fastci.evidence.pyspy import Attached, PySpyError, Sampling

        self._output = Path(tempfile.mkdtemp(prefix="fastci-evidence-")) / "raw.txt"
        self._recording = Attached(
            os.getpid(), Sampling(rate_hz=self.rate_hz, nonblocking=self.nonblocking), self._output
        )
        try:
            self._recording.start()
        except PySpyError as error:
            self.problem, self._recording = str(error), None
            self._output.parent.rmdir()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session: Any) -> None:
        """The import window moves off the profile function, where it can (``MonitoredImports``)."""
        monitor = getattr(self.imports.tracer, "monitor", None) if self.imports is not None else None
        if monitor is not None:
            monitor()

    def pytest_collection_modifyitems(self, session: Any, config: Any, items: list[Any]) -> None:
        """A workload marker that does not validate stops the session before any test runs."""
        for item in items:
            marker = item.get_closest_marker(WORKLOAD_MARKER)
            if marker is not None:
                if self.method != "tracing":
                    raise pytest.UsageError(
                        f"{item.nodeid}: @pytest.mark.{WORKLOAD_MARKER} needs "
                        "--fastci-evidence-method tracing (sampling cannot place calls at a step)"
                    )
                self._workload(item.nodeid, marker.kwargs, {})

    def pytest_collection_finish(self, session: Any) -> None:
        """End the import window: each imported module's import-time stacks, and the test files
        whose imports reach it."""
        if self.imports is None:
            return
        import importlib.machinery

        from fastci.evidence.imports import ImportGraph
        from fastci.evidence.stacks import Frame, to_project_stack
        from fastci.selection.units import LAMBDA

        window, raw_stacks = self.imports, self.imports.stop()
        by_module: dict[str, set[str]] = {}
        for raw in raw_stacks:
            stack = to_project_stack(
                [Frame(LAMBDA if in_lambda else "", f, n) for f, n, in_lambda in raw],
                window.root,
                window.units,
                window.cwd,
            )
            frames = stack.split(";") if stack else []
            starts = [i for i, frame in enumerate(frames) if frame.startswith(f"{MODULE_FRAME} (")]
            if starts:  # the code under the innermost module being imported ran for that import
                module = frames[starts[-1]].rsplit(" (", 1)[1].rsplit(":", 1)[0]
                by_module.setdefault(module, set()).add(";".join(frames[starts[-1] :]))
        graph = ImportGraph(self.root, self.units)
        test_files = sorted({str(Path(str(item.path)).resolve()) for item in session.items})
        importers: dict[str, set[str]] = {}
        distributions: dict[str, list[str]] = {}  # test file -> the third-party distributions it reaches
        for path in test_files:
            relative = self.units.relpath(path, self.root, self.cwd)
            if relative is None:
                continue
            closure = graph.closure_of_test_file(Path(path))
            distributions[relative] = sorted(graph.distributions_of(closure))
            for module in closure:
                importers.setdefault(module, set()).add(relative)
        every_file = sorted({f for files in importers.values() for f in files})
        read_at_import = window.reads.by_module
        # Extension modules run no traced frame: their import evidence is who imports them.
        extensions = {m for m in importers if m.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))}
        for module in sorted(by_module.keys() | read_at_import.keys() | distributions.keys() | extensions):
            # Imported where the sources do not say (importlib, a plugin): every test may depend on it.
            files = sorted(importers.get(module, every_file))
            self.import_evidence.append(
                (
                    module,
                    sorted(by_module.get(module, ())),
                    files,
                    sorted(read_at_import.get(module, ())),
                    distributions.get(module, []),
                )
            )

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any):
        index = len(self.test_ids)
        self.test_ids.append(item.nodeid)
        if not self._stale(item.nodeid):
            self.untraced.add(item.nodeid)
            yield
            return
        self.fixtures.setdefault(item.nodeid, self._fixtures_of(item))
        if self.method == "tracing":
            from fastci.producer.pytest_results import TRACED_KEY

            item.stash[TRACED_KEY] = True  # its result's duration includes what recording cost
        self.reads.test = index
        workload = item.get_closest_marker(WORKLOAD_MARKER)
        if self.method == "tracing":
            self.tracer.dimensions = workload is not None  # a point per call costs: only where declared
            self.tracer.begin_test()
            self.phase_runner = self.tracer.run
        elif self._recording is not None:
            self.phase_runner = self.markers.marker(index)
        try:
            yield
        finally:
            self.phase_runner = None
            self.reads.test = None
            if self.method == "tracing":
                self._traced[index] = self.tracer.end_test()
                if workload is not None:
                    self._workloads[index] = (workload.kwargs, self.tracer.points)

    def _stale(self, test_id: str) -> bool:
        """Whether the test's evidence may be stale: always, unless incremental says otherwise."""
        if self.incremental is None:
            return True
        plan, _ = self.incremental
        if plan.run_all or not plan.is_known(test_id):
            return True
        return test_id in self._stale_ids

    @functools.cached_property
    def _stale_ids(self) -> frozenset[str]:
        plan, _ = self.incremental  # type: ignore[misc]
        return frozenset(t.test_id for t in plan.tests) | frozenset(plan.pruned)

    def _fixtures_of(self, item: Any) -> list[str]:
        """The project fixtures in the test's closure, as units (``path::qualname`` of their functions)."""
        info = getattr(item, "_fixtureinfo", None)  # pytest's own per-item record of its fixture closure
        found = {
            unit
            for definitions in getattr(info, "name2fixturedefs", {}).values()
            for definition in definitions
            if (unit := self._fixture_unit(definition)) is not None
        }
        return sorted(found)

    def _fixture_unit(self, definition: Any) -> str | None:
        """A fixture definition as a unit of the project, or None for a fixture from elsewhere."""
        code = getattr(getattr(definition, "func", None), "__code__", None)
        if code is None:
            return None
        relative = self.units.relpath(code.co_filename, self.root, self.cwd)
        return None if relative is None else f"{relative}::{code.co_qualname}"

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any):
        """Files read while a project fixture is set up are the fixture's, for every test using it."""
        unit = self._fixture_unit(fixturedef)
        outer, self.reads.fixture = self.reads.fixture, unit or self.reads.fixture
        try:
            yield
        finally:
            self.reads.fixture = outer

    def pytest_sessionfinish(self, session: Any) -> None:
        if self._recording is not None:
            from fastci.evidence.pyspy import PySpyError

            try:
                self._collect_samples(self._recording.stop())
            except PySpyError as error:
                self.problem = str(error)
            finally:
                self._output.unlink(missing_ok=True)
                self._output.parent.rmdir()
        self._publish()
        self.report = self.producer.close()
        self.units.sources.prune()

    def _collect_samples(self, recorded: Any) -> None:
        from fastci.evidence.stacks import parse_raw

        samples = parse_raw(recorded.raw)
        self._sampled, self._outside = self.markers.attribute(samples)
        self._samples = sum(count for _, count in samples)
        self._errors = recorded.errors

    def _publish(self) -> None:
        from fastci.evidence.publish import TooMuchEvidence, evidence_event
        from fastci.evidence.stacks import units_of

        workloads = {
            self.test_ids[index]: self._workload(self.test_ids[index], *declared)
            for index, declared in self._workloads.items()
        }
        for module, module_stacks, importers, read, distributions in self.import_evidence:
            ran = {f"{path}::{qualname}" for stack in module_stacks for path, qualname in units_of(stack)}
            self.producer.publish(
                evidence_event(
                    module,
                    self.run_id,
                    self.repo,
                    self.commit,
                    "tracing",
                    [],
                    kind="import",
                    importers=importers,
                    reads=None if self.reads.disabled else read,
                    distributions=distributions,
                    executed={unit: () for unit in ran},
                    environment=self.environment,
                )
            )
        read_by_test: dict[str, set[str]] = {}
        for index, test_id in enumerate(self.test_ids):
            read_by_test.setdefault(test_id, set()).update(self.reads.by_test.get(index, ()))
            for fixture in self.fixtures.get(test_id, ()):
                read_by_test[test_id].update(self.reads.by_fixture.get(fixture, ()))
        for test_id, (stacks, executed, config) in self._evidence().items():
            if test_id in self.untraced:
                continue  # its evidence from an earlier run still holds
            if not stacks and self.method == "sampling":
                self.without_evidence += 1
                continue
            try:
                event = evidence_event(
                    test_id,
                    self.run_id,
                    self.repo,
                    self.commit,
                    self.method,
                    stacks,
                    self.rate_hz,
                    config,
                    workloads.get(test_id),
                    reads=None if self.reads.disabled else sorted(read_by_test.get(test_id, ())),
                    fixtures=self.fixtures.get(test_id, ()),
                    executed=executed,
                    environment=self.environment,
                )
            except TooMuchEvidence as error:
                self.too_big.append(str(error))
                continue
            self.producer.publish(event)
            self.published += 1

    def _workload(self, test_id: str, marker: dict[str, Any], points: Any) -> Any:
        """The evidence's workload block from a test's marker and the points it ran at; a marker that
        does not validate is a usage error naming the field."""
        scope, declared = marker.get("scope", {}), marker.get("dimensions", {})
        unknown = sorted(set(marker) - {"scope", "dimensions", "fixed_share"})
        if unknown:
            raise pytest.UsageError(
                f"{test_id}: @pytest.mark.{WORKLOAD_MARKER}: unknown argument(s) {', '.join(unknown)} "
                "(it takes scope, dimensions, fixed_share)"
            )
        from pydantic import ValidationError

        from fastci.evidence.dimensions import first_executions
        from fastci.inputs import WorkloadEvidence

        if not isinstance(declared, dict) or not isinstance(scope, dict):
            raise pytest.UsageError(f"{test_id}: @pytest.mark.{WORKLOAD_MARKER}: scope and dimensions must be dicts")
        first = first_executions(points, self.root, self.units, self.cwd, dimensions=set(declared))
        try:
            return WorkloadEvidence.model_validate(
                {
                    "scope": scope,
                    "dimensions": [{"name": name, **spec} for name, spec in declared.items()],
                    "fixed_share": marker.get("fixed_share", 0.0),
                    "first_executions": [{"unit": unit, "at": at} for unit, at in first.items()],
                }
            )
        except (ValidationError, TypeError) as error:
            detail = (
                "; ".join(f"{'.'.join(map(str, e['loc'])) or 'workload'}: {e['msg']}" for e in error.errors())
                if isinstance(error, ValidationError)
                else str(error)
            )
            raise pytest.UsageError(f"{test_id}: @pytest.mark.{WORKLOAD_MARKER}: {detail}") from None

    def _evidence(
        self,
    ) -> dict[str, tuple[list[tuple[str, int]], dict[str, list[tuple[str, ...]]] | None, dict[str, Any]]]:
        """By test id (a test run twice in the session counts once): its sampled stacks, merged, or
        the units it ran with their contexts; and the event's config."""
        if self.method == "tracing":
            executed: dict[str, dict[str, list[tuple[str, ...]]]] = {}
            for index, test_id in enumerate(self.test_ids):
                units = executed.setdefault(test_id, {})
                for unit, contexts in self._traced.get(index, {}).items():
                    known = units.setdefault(unit, [])
                    known += [context for context in contexts if context not in known]
            return {test_id: ([], units, {"contexts_per_unit": self.contexts}) for test_id, units in executed.items()}
        from fastci.evidence.stacks import merge, to_project_stack

        pairs: dict[str, list[tuple[str | None, int]]] = {}
        config: dict[str, dict[str, Any]] = {}
        for index, test_id in enumerate(self.test_ids):
            sampled = self._sampled.get(index, [])
            pairs.setdefault(test_id, []).extend(
                (to_project_stack(frames, self.root, self.units, self.cwd), count) for frames, count in sampled
            )
            config.setdefault(test_id, {"samples": 0})["samples"] += sum(count for _, count in sampled)
        return {test_id: (merge(found), None, config[test_id]) for test_id, found in pairs.items()}

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write = terminalreporter.write_line
        if self.incremental is not None:
            plan, since = self.incremental
            traced = len(set(self.test_ids) - self.untraced)
            why = f"everything: {plan.reason}" if plan.run_all else f"the {traced} its changes may have made stale"
            write(
                f"fastci: evidence since {since}: re-traced {traced} of {len(set(self.test_ids))} tests ({why}); "
                f"{len(self.untraced)} keep their evidence"
            )
        how = (
            f"sampling at {self.rate_hz:g} Hz"
            if self.method == "sampling"
            else f"tracing, {self.tracer.MECHANISM}, {self.contexts} context(s) per unit"
        )
        if self.problem:
            write(f"fastci: no evidence ({how}): {self.problem}")
        report = self.report
        if report is None or (self.problem and not self.published):
            return
        target = self.producer.target.description
        detail = (
            f"; {self._samples - self._outside} of {self._samples} sample(s) in tests"
            if self.method == "sampling"
            else ""
        )
        if self._errors:
            detail += f", {self._errors} unreadable"
        if self.without_evidence:
            detail += (
                f"; {self.without_evidence} test(s) with no sample in project code got none (they always run; "
                "--fastci-evidence-method tracing gives every test evidence)"
            )
        if self.too_big:
            detail += f"; {len(self.too_big)} test(s) ran too many units for one event and got none ({self.too_big[0]})"
        if report.error:
            write(
                f"fastci: evidence of {self.published} test(s) ({how}{detail}) of run {self.run_id} spooled, "
                f"{target} did not "
                f"acknowledge ({report.error}); it waits in {self.producer.spool.directory} for 'fastci spool drain'"
            )
        else:
            write(
                f"fastci: evidence of {self.published} test(s) ({how}{detail}) of run {self.run_id} "
                f"published to {target}"
            )
