"""The first-call collector on sys.monitoring (3.12+) against itself on sys.setprofile (3.11) and
against the per-call tracer: byte-identical evidence events from real pytest sessions on 3.11 and
3.12+; the same units, contexts and points from both collectors in one process; the same tests
selected from its evidence as from the per-call tracer's stacks; and what sys.monitoring buys: code
outside the project costs one event ever, project code one event per unit per test, and the tool ids
are held and released.

The 3.12 side runs in ``make test-evidence-312`` (``make test``); from 3.11 the cross-interpreter
test uses ``.venv312`` when it exists."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import orjson
import pytest
from processor_helpers import Store, feed, of_topic
from test_evidence_collect import CONFTEST, MODULE, TESTS, TRAINING, clean_env, committed_project

from fastci.evidence.first_calls import FirstCalls, ProjectUnits, new_collector
from fastci.evidence.publish import evidence_event
from fastci.evidence.stacks import UnitsCache, folded_stack
from fastci.evidence.tracing import Tracer
from fastci.inputs import CommitEvent
from fastci.runtime.embedded import DataDir
from fastci.selection.processor import SelectionProcessor

ROOT = Path(__file__).resolve().parents[1]
MONITORING = hasattr(sys, "monitoring")
needs_monitoring = pytest.mark.skipif(not MONITORING, reason="sys.monitoring is Python 3.12+: make test-evidence-312")
OTHER_PYTHON = "FASTCI_EVIDENCE_OTHER_PYTHON"
REPO = "acme/proj"

# Calls of every kind the collectors see: generators resumed, an exception thrown into one, a
# coroutine, threads (a target and a Thread subclass's run), nested functions, a workload.
# No list comprehension and no generator left suspended: 3.11 and 3.12 run those differently.
MORE_TESTS = """
import asyncio
import contextlib
import threading

import pytest

from pkg import mod, training


def numbers():
    yield mod.slow_add(1, 1)
    yield mod.slow_add(2, 2)


@contextlib.contextmanager
def guarded():
    try:
        yield
    except ValueError:
        mod.other()


async def fetch():
    await asyncio.sleep(0)
    return mod.Model().forward(1)


class Worker(threading.Thread):
    def run(self):
        mod.helper(3)


def test_generator_and_a_throw():
    assert list(numbers()) == [2, 4]
    with guarded():
        raise ValueError("handled by guarded")


def test_coroutine():
    assert asyncio.run(fetch()) == 2


def test_threads():
    started = [threading.Thread(target=mod.prepare), Worker()]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()


@pytest.mark.parametrize("n", [1, 2])
def test_nested(n):
    def add(x):
        return mod.slow_add(x, n)

    assert add(1) == 1 + n


@pytest.mark.fastci_workload(scope={"precision": "bf16"},
                             dimensions={"steps": {"full": 10, "minimum": 2, "cost_exponent": 1.0}})
def test_train():
    training.train(10)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    files = {
        "pkg/mod.py": MODULE,
        "pkg/training.py": TRAINING,
        "tests/conftest.py": CONFTEST,
        "tests/test_mod.py": TESTS,
        "tests/test_more.py": MORE_TESTS,
    }
    return committed_project(tmp_path / "proj", files)


def other_python() -> str:
    """The interpreter across the 3.12 line from this one: ``$FASTCI_EVIDENCE_OTHER_PYTHON`` (then it
    must exist), else the 3.11 venv from 3.12+ and the 3.12 venv from 3.11."""
    given = os.environ.get(OTHER_PYTHON)
    if given:
        if not Path(given).is_file():
            pytest.fail(f"${OTHER_PYTHON}={given}: no such interpreter")
        return os.path.abspath(given)  # the sessions run in the project's directory; a venv's link stays
    default = ROOT / (".venv" if MONITORING else ".venv312") / "bin" / "python"
    if not default.is_file():
        pytest.skip(f"no {default.relative_to(ROOT)} (make install, make test-evidence-312) and no ${OTHER_PYTHON}")
    return str(default)


def traced_session(python: str, root: Path, data: Path) -> tuple[list[bytes], str]:
    """The evidence payloads, in order, of a session of ``root``'s tests with the default method (two
    contexts per unit, so later calls count too), and its output."""
    run = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "fastci.pytest_plugin"]
        + ["--fastci-evidence", "--fastci-evidence-contexts", "2", "tests"],
        cwd=root,
        env=clean_env(
            FASTCI_DATA_DIR=str(data), FASTCI_RUN_ID="same-run", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", SPIN_SCALE="0.01"
        ),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, f"{python}:\n{run.stdout}{run.stderr}"
    # The same, but for when each was taken (``time``), which two sessions cannot share, and where
    # (``environment``: each names its own interpreter).
    payloads = [orjson.loads(record.payload) for record in DataDir(data).log.topic("evidence").read()]
    versions = {p["environment"]["python"] for p in payloads}
    assert len(versions) == 1, versions
    ignored = ("time", "environment")
    return [orjson.dumps({k: v for k, v in p.items() if k not in ignored}) for p in payloads], run.stdout


def test_setprofile_on_3_11_and_sys_monitoring_on_3_12_publish_byte_identical_evidence(project, tmp_path):
    other = other_python()
    probe = [other, "-c", "import sys; print(hasattr(sys, 'monitoring'), sys.version.split()[0])"]
    has_monitoring, version = subprocess.run(probe, capture_output=True, text=True, check=True).stdout.split()
    assert (has_monitoring == "True") != MONITORING, f"{other} (Python {version}) is on this interpreter's side of 3.12"
    sessions = {
        python: traced_session(python, project, tmp_path / f"data-{number}")
        for number, python in enumerate((sys.executable, other))
    }
    setprofile, monitoring = (sessions[other], sessions[sys.executable])[:: 1 if MONITORING else -1]
    assert "tracing, sys.setprofile, 2 context(s) per unit)" in setprofile[1]
    assert "tracing, sys.monitoring, 2 context(s) per unit)" in monitoring[1]
    tests = [payload for payload in setprofile[0] if b'"kind":"test"' in payload]
    assert len(tests) == 11  # every test, the two parametrized ones included
    assert len(setprofile[0]) > len(tests)  # and what ran while modules were imported, per module
    assert monitoring[0] == setprofile[0]
    events = {event["test_id"]: event for event in map(orjson.loads, setprofile[0])}
    more, mod = "tests/test_more.py::", "pkg/mod.py::"

    def ran(test: str) -> set[str]:
        return set(events[more + test]["units"])

    # The kinds of call that had to match, present.
    assert {f"{more}numbers", f"{mod}slow_add"} <= ran("test_generator_and_a_throw")  # a generator
    assert {f"{more}guarded", f"{mod}other"} <= ran("test_generator_and_a_throw")  # ValueError thrown into one
    assert {f"{more}fetch", f"{mod}Model.forward"} <= ran("test_coroutine")
    assert {f"{more}Worker.run", f"{mod}helper", f"{mod}prepare"} <= ran("test_threads")  # threads it started
    assert f"{more}test_nested.<locals>.add" in ran("test_nested[2]")
    assert b'"at":[{"steps":4}]' in b"".join(setprofile[0])  # the workload's points


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CALLS = """
import asyncio
import contextlib
import threading

from fastci.evidence.dimensions import at


def leaf(x):
    return x + 1


def squares(n):
    return [leaf(i) for i in range(n)] + list(leaf(i) for i in range(n))


def counting():
    yield leaf(1)
    yield leaf(2)


@contextlib.contextmanager
def guarded():
    try:
        yield
    except ValueError:
        leaf(0)


async def fetch():
    await asyncio.sleep(0)
    return leaf(3)


class Worker(threading.Thread):
    def run(self):
        leaf(5)


def work():
    for step in range(3):
        with at("steps", step):
            squares(2)
            if step:
                leaf(step)
    left = counting()
    next(left)
    del left  # closed while suspended
    with guarded():
        raise ValueError
    asyncio.run(fetch())
    started = [threading.Thread(target=lambda: leaf(4)), Worker()]
    for thread in started:
        thread.start()
    for thread in started:
        thread.join()
"""


@needs_monitoring
def test_in_one_3_12_process_both_collectors_record_the_same_units_contexts_and_points(tmp_path):
    from fastci.evidence.first_calls import MonitoredFirstCalls

    (tmp_path / "calls.py").write_text(CALLS)
    calls = load(tmp_path / "calls.py", "calls_compared")

    def two_tests(collector: FirstCalls, dimensions: bool) -> list:
        wake, done = threading.Event(), threading.Event()
        # A thread started outside every phase: neither collector counts its calls.
        background = threading.Thread(target=lambda: (wake.wait(60), calls.leaf(7), done.set()), daemon=True)
        background.start()
        found = []
        with collector:
            for _ in range(2):
                collector.dimensions = dimensions
                collector.begin_test()
                collector.run(calls.work)
                calls.leaf(8)  # between phases: not the test's
                collector.run(lambda: (wake.set(), done.wait(60)))
                found.append((collector.end_test(), collector.points))
        background.join(60)
        return found

    units = ProjectUnits(tmp_path, tmp_path)
    for dimensions in (False, True):
        traced = two_tests(FirstCalls(units, contexts=3), dimensions)
        monitoring = two_tests(MonitoredFirstCalls(units, contexts=3), dimensions)
        assert monitoring == traced
        executed, points = traced[0]
        assert traced[1][0] == executed  # the second test alike
    unit = "calls.py::{}".format
    assert set(executed) == set(
        map(unit, ("work", "squares", "leaf", "counting", "guarded", "fetch", "Worker.run", "work.<locals>.<lambda>"))
    )
    # Comprehensions are their unit's (3.11 runs them as code of their own, 3.12 inlines some):
    # three contexts of leaf, the first three seen, alike on both interpreters.
    assert executed[unit("leaf")] == [
        (unit("work"), unit("squares"), unit("leaf")),
        (unit("work"), unit("leaf")),
        (unit("work"), unit("counting"), unit("leaf")),
    ]
    assert executed[unit("Worker.run")] == [(unit("Worker.run"),)]  # its own thread's root
    squares = (str(tmp_path / "calls.py"), 1 + CALLS.splitlines().index("def squares(n):"), False)
    assert points[squares] == [{"steps": 0}]


LIBRARY = """
import functools


def leaf(x):
    return x + 1


def wrapper(x):
    return leaf(x)


def deep(x):
    return wrapper(x) + helper(x)


def helper(x):
    return leaf(x) * 2


class Model:
    def forward(self, x):
        return deep(x) + self.head(x)

    def head(self, x):
        return (lambda y: leaf(y) - 1)(x)


def numbers(n):
    for i in range(n):
        yield helper(i)


@functools.lru_cache
def cached(x):
    return leaf(x)


def recurse(n):
    return leaf(n) if n == 0 else recurse(n - 1)
"""

LIBRARY_TESTS = """
from pkg import lib


def test_leaf():
    assert lib.leaf(1) == 2


def test_wrapper():
    assert lib.wrapper(1) == 2


def test_model():
    assert lib.Model().forward(1) > 0


def test_numbers():
    assert sum(lib.numbers(3)) > 0


def test_cached():
    assert lib.cached(2) == lib.cached(2) == 3


def test_recurse():
    assert lib.recurse(4) == 1


def test_nothing():
    assert True
"""


def test_the_first_call_collectors_evidence_selects_the_tests_the_per_call_tracers_stacks_select(tmp_path):
    root = committed_project(tmp_path / "proj", {"pkg/lib.py": LIBRARY, "tests/test_lib.py": LIBRARY_TESTS})
    cache = UnitsCache()
    tracers = {
        "stacks": Tracer(lambda f: cache.relpath(f, root) is not None),
        "units": new_collector(ProjectUnits(root, root)),
    }
    events: dict[str, list] = {"stacks": [], "units": []}
    for shape, tracer in tracers.items():
        sys.path.insert(0, str(root))
        try:  # each collector on the library freshly imported: a cache filled by one run would hide calls
            tests = load(root / "tests" / "test_lib.py", f"test_lib_{shape}")
        finally:
            sys.path.remove(str(root))
            for name in ("pkg", "pkg.lib"):
                sys.modules.pop(name, None)
        with tracer:
            for name in sorted(name for name in vars(tests) if name.startswith("test_")):
                test_id = f"tests/test_lib.py::{name}"
                tracer.begin_test()
                tracer.run(getattr(tests, name))
                if shape == "stacks":
                    stacks = sorted({s for raw in tracer.end_test() if (s := folded_stack(raw, root, cache))})
                    event = evidence_event(test_id, "r1", REPO, "abcdef1", "tracing", [(s, 1) for s in stacks])
                else:
                    event = evidence_event(test_id, "r1", REPO, "abcdef1", "tracing", [], executed=tracer.end_test())
                events[shape].append(event)
    every_unit = {unit for event in events["units"] for unit in event.units}
    assert "pkg/lib.py::Model.head.<locals>.<lambda>" in every_unit  # a lambda is a unit of its own
    for unit in sorted(every_unit):
        path, qualname = unit.split("::")
        change = CommitEvent(
            repo=REPO,
            sha="1234567",
            author="dev",
            time="2026-12-01T00:00:00Z",
            title=f"change {qualname}",
            changed_files=[{"path": path, "change": "modified"}],
            changed_functions=[{"path": path, "qualname": qualname, "change": "modified"}],
        )
        selected = {}
        for shape, evidence in events.items():
            outputs = feed(SelectionProcessor(pruning=False), Store(), [*evidence, change])
            (selection,) = of_topic(outputs, "selection")
            assert not selection.run_all, selection.run_all_reason
            selected[shape] = {kept.test_id for kept in selection.kept}
        assert selected["units"] == selected["stacks"], unit
        assert selected["units"], unit  # every unit some test ran selects that test


class CountingCollector:
    """A MonitoredFirstCalls that counts the events the interpreter delivers, by code name (the
    wrapping frame hides the caller's: what it records is not the test's)."""

    @staticmethod
    def make(units: ProjectUnits):
        from fastci.evidence.first_calls import MonitoredFirstCalls

        class Counting(MonitoredFirstCalls):
            found: Counter
            started: Counter

            def _found(self, code, offset):
                self.found[code.co_name] += 1
                return super()._found(code, offset)

            def _started(self, code, offset):
                self.started[code.co_name] += 1
                return super()._started(code, offset)

        Counting.found, Counting.started = Counter(), Counter()
        return Counting(units)


def project_and_library(tmp_path: Path, mine: str, library: str, name: str) -> tuple[Path, object, object]:
    """``proj/mine.py`` (the project) importing ``lib/<library>.py`` (not the project's)."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "lib").mkdir()
    module = library.split("\n", 1)[0].removeprefix("# ")
    (tmp_path / "lib" / f"{module}.py").write_text(library)
    (tmp_path / "proj" / "mine.py").write_text(mine)
    sys.path.insert(0, str(tmp_path / "lib"))
    try:
        return tmp_path / "proj", load(tmp_path / "proj" / "mine.py", name), importlib.import_module(module)
    finally:
        sys.path.remove(str(tmp_path / "lib"))


@needs_monitoring
def test_code_outside_the_project_costs_one_event_ever_and_project_code_one_per_unit_per_test(tmp_path):
    root, mine, _ = project_and_library(
        tmp_path,
        "from lib_noise import noise\n\n\ndef leaf(x):\n    return noise(x)\n",
        "# lib_noise\ndef noise(x):\n    return x\n",
        "mine_counted",
    )
    with CountingCollector.make(ProjectUnits(root, root)) as collector:
        for _ in range(3):  # three tests of 50 calls each, and calls between them
            collector.begin_test()
            collector.run(lambda: [mine.leaf(i) for i in range(50)])
            collector.end_test()
            mine.leaf(0)
        assert (collector.found["noise"], collector.found["leaf"]) == (1, 1)  # the first start of each code, ever
        assert collector.started["noise"] == 0  # never armed: outside the project
        # leaf: the second call of the first test (the first was the finder's), the first of the others.
        assert collector.started["leaf"] == 3
    # A new collector wakes what the last one disabled: another project's code may be this one's.
    with CountingCollector.make(ProjectUnits(root, root)) as fresh:
        mine.leaf(0)
        assert (fresh.found["noise"], fresh.found["leaf"]) == (1, 1)


@needs_monitoring
def test_project_code_first_run_outside_a_test_is_recorded_in_the_next_one(tmp_path):
    from fastci.evidence.first_calls import MonitoredFirstCalls

    root, mine, lib = project_and_library(
        tmp_path,
        "def leaf():\n    return 1\n",
        "# lib_through\ndef through(f):\n    return f()\n",
        "mine_outside",
    )
    with MonitoredFirstCalls(ProjectUnits(root, root)) as collector:
        lib.through(mine.leaf)  # before any test: the finder arms leaf for the recorder
        collector.begin_test()
        assert collector.end_test() == {}
        collector.begin_test()
        lib.through(mine.leaf)  # between phases of this test
        collector.run(lambda: lib.through(mine.leaf))
        # lib's frame is not the project: leaf is the root of its context.
        assert collector.end_test() == {"mine.py::leaf": [("mine.py::leaf",)]}


@needs_monitoring
def test_the_tool_ids_are_two_nobody_holds_and_are_released_on_close(tmp_path):
    from fastci.evidence.first_calls import MonitoredFirstCalls, NoToolId

    monitoring = sys.monitoring
    held = []
    units = ProjectUnits(tmp_path, tmp_path)
    try:
        monitoring.use_tool_id(monitoring.PROFILER_ID, "another profiler")
        held.append(monitoring.PROFILER_ID)
        collector = MonitoredFirstCalls(units)
        tools = (collector.finder, collector.recorder)
        assert monitoring.PROFILER_ID not in tools and len(set(tools)) == 2
        assert {monitoring.get_tool(tool) for tool in tools} == {"fastci evidence"}
        collector.close()
        collector.close()  # twice is fine
        assert all(monitoring.get_tool(tool) is None and monitoring.get_events(tool) == 0 for tool in tools)
        free = [tool for tool in range(6) if monitoring.get_tool(tool) is None]
        for tool in free[1:]:  # one left: not enough
            monitoring.use_tool_id(tool, f"tool {tool}")
            held.append(tool)
        with pytest.raises(NoToolId, match="fewer than 2 free tool ids for evidence .*'another profiler'"):
            MonitoredFirstCalls(units)
        assert monitoring.get_tool(free[0]) is None  # the one it took, given back
    finally:
        for tool in held:
            monitoring.free_tool_id(tool)


@needs_monitoring
def test_with_every_tool_id_taken_a_tracing_session_stops_with_a_usage_error(project, tmp_path):
    (project / "tests" / "conftest.py").write_text(
        "import sys\n\nfor tool in range(6):\n    sys.monitoring.use_tool_id(tool, f'held {tool}')\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "fastci.pytest_plugin", "--fastci-evidence", "tests"],
        cwd=project,
        env=clean_env(FASTCI_DATA_DIR=str(tmp_path / "data"), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 4, run.stdout + run.stderr
    assert "--fastci-evidence-method tracing: sys.monitoring has fewer than 2 free tool ids" in run.stderr
