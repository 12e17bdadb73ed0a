"""The sys.monitoring collector against the sys.setprofile one: byte-identical evidence events from
real pytest sessions on 3.11 (setprofile) and 3.12+ (sys.monitoring), the same stacks and points
from both collectors in one 3.12 process, and what sys.monitoring adds: code outside the project
is disabled after its first event, project code never is, and the tool id is held and released.

The 3.12 side runs in ``make test-evidence-312`` (``.ci/run``); from 3.11 the cross-interpreter
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
from test_evidence_collect import CONFTEST, MODULE, TESTS, TRAINING, clean_env, committed_project

from fastci.evidence.tracing import Tracer
from fastci.runtime.embedded import DataDir

ROOT = Path(__file__).resolve().parents[1]
MONITORING = hasattr(sys, "monitoring")
needs_monitoring = pytest.mark.skipif(not MONITORING, reason="sys.monitoring is Python 3.12+: make test-evidence-312")
OTHER_PYTHON = "FASTCI_EVIDENCE_OTHER_PYTHON"

# Calls of every kind the setprofile tracer reports: generators resumed, an exception thrown into
# one, a coroutine, threads (a target and a Thread subclass's run), nested functions, a workload.
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
    """The evidence payloads, in order, of a tracing session of ``root``'s tests, and its output."""
    run = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "fastci.pytest_plugin"]
        + ["--fastci-evidence", "--fastci-evidence-method", "tracing", "tests"],
        cwd=root,
        env=clean_env(
            FASTCI_DATA_DIR=str(data), FASTCI_RUN_ID="same-run", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", SPIN_SCALE="0.01"
        ),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, f"{python}:\n{run.stdout}{run.stderr}"
    # The same, but for when each was taken (``time``): two sessions cannot share it.
    payloads = [orjson.loads(record.payload) for record in DataDir(data).log.topic("evidence").read()]
    return [orjson.dumps({k: v for k, v in p.items() if k != "time"}) for p in payloads], run.stdout


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
    assert "tracing, sys.setprofile)" in setprofile[1] and "tracing, sys.monitoring)" in monitoring[1]
    tests = [payload for payload in setprofile[0] if b'"kind":"test"' in payload]
    assert len(tests) == 11  # every test, the two parametrized ones included
    assert len(setprofile[0]) > len(tests)  # and what ran while modules were imported, per module
    assert monitoring[0] == setprofile[0]
    stacks = b"".join(setprofile[0])  # the kinds of call that had to match, present
    for stack in (
        b'numbers (tests/test_more.py:13)"',  # the generator resumed at its second yield
        b'guarded (tests/test_more.py:19)"',  # ValueError thrown into it at its yield
        b'fetch (tests/test_more.py:25)"',  # the coroutine resumed after its await
        b'"Worker.run (tests/test_more.py:31);helper (pkg/mod.py:29)',  # threads the test started
        b'"prepare (pkg/mod.py:34)',
        b"test_nested.<locals>.add (tests/test_more.py:55);slow_add",
        b'"at":[{"steps":4}]',  # the workload's points
    ):
        assert stack in stacks


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
def test_in_one_3_12_process_both_collectors_record_the_same_stacks_and_points(tmp_path):
    (tmp_path / "calls.py").write_text(CALLS)
    calls = load(tmp_path / "calls.py", "calls_compared")
    from fastci.evidence.monitoring import MonitoringTracer

    def two_tests(tracer: Tracer) -> list:
        wake, done = threading.Event(), threading.Event()
        # A thread started outside every phase: neither collector counts its calls.
        background = threading.Thread(target=lambda: (wake.wait(60), calls.leaf(7), done.set()), daemon=True)
        background.start()
        found = []
        with tracer:
            for _ in range(2):
                tracer.dimensions = True
                tracer.begin_test()
                tracer.run(calls.work)
                calls.leaf(8)  # between phases: not the test's
                tracer.run(lambda: (wake.set(), done.wait(60)))
                found.append((tracer.end_test(), tracer.points, tracer.overflowed))
        background.join(60)
        return found

    is_project = str(tmp_path / "calls.py").__eq__
    setprofile, monitoring = two_tests(Tracer(is_project)), two_tests(MonitoringTracer(is_project))
    assert monitoring == setprofile
    stacks, points = setprofile[0][0], setprofile[0][1]
    # 3.12 closes the suspended generator by throwing into it; 3.13 closes it without running it.
    thrown_at_close = sys.version_info < (3, 13)
    assert len(stacks) == 18 + thrown_at_close and setprofile[1][0] == stacks  # the second test alike

    def frame(text: str) -> tuple[str, int]:
        return str(tmp_path / "calls.py"), 1 + next(n for n, line in enumerate(CALLS.splitlines()) if text in line)

    leaf, squares = frame("def leaf(x)"), frame("return [leaf(i)")
    assert {(frame("def run(self)"),), (frame("leaf(5)"), leaf)} <= stacks  # Worker.run, in its own thread
    assert ((frame("del left"), frame("yield leaf(1)")) in stacks) == thrown_at_close
    assert (frame("squares(2)"), squares, leaf) in stacks  # the list comprehension has no frame on 3.12
    assert (frame("squares(2)"), squares, squares, leaf) in stacks  # the generator expression has one
    assert points[frame("def squares")] == [{"steps": 0}]


def counting_tracer(is_project):
    from fastci.evidence.monitoring import MonitoringTracer

    class Counting(MonitoringTracer):
        """Counts the events the interpreter delivers (this wrapper breaks stacks: record nothing)."""

        seen: Counter

        def _started(self, code, offset):
            self.seen[code.co_name] += 1
            return super()._started(code, offset)

    Counting.seen = Counter()
    return Counting(is_project)


@needs_monitoring
def test_code_outside_the_project_is_disabled_at_its_first_event_and_project_code_never(tmp_path):
    (tmp_path / "lib_noise.py").write_text("def noise(x):\n    return x\n")
    (tmp_path / "mine.py").write_text("from lib_noise import noise\n\n\ndef leaf(x):\n    return noise(x)\n")
    sys.path.insert(0, str(tmp_path))
    try:
        mine = load(tmp_path / "mine.py", "mine")
    finally:
        sys.path.remove(str(tmp_path))
    with counting_tracer(str(tmp_path / "mine.py").__eq__) as tracer:
        for _ in range(3):  # three phases, and calls between them
            tracer.run(lambda: [mine.leaf(i) for i in range(50)])
            mine.leaf(0)
        assert tracer.seen["noise"] == 1
        assert tracer.seen["leaf"] == 153  # every call, inside phases or not
    # A new tracer wakes what the last one disabled: another project's code may be this one's.
    with counting_tracer(str(tmp_path / "mine.py").__eq__) as fresh:
        mine.leaf(0)
        mine.leaf(0)
        assert (fresh.seen["noise"], fresh.seen["leaf"]) == (1, 2)


@needs_monitoring
def test_project_code_first_run_outside_a_test_is_recorded_in_the_next_one(tmp_path):
    from fastci.evidence.monitoring import MonitoringTracer

    (tmp_path / "lib_through.py").write_text("def through(f):\n    return f()\n")
    (tmp_path / "mine.py").write_text("from lib_through import through\n\n\ndef leaf():\n    return 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        mine = load(tmp_path / "mine.py", "mine_outside")
        lib = sys.modules["lib_through"]
    finally:
        sys.path.remove(str(tmp_path))
    path = str(tmp_path / "mine.py")
    with MonitoringTracer(path.__eq__) as tracer:
        lib.through(mine.leaf)  # before any test: lib is disabled, leaf is not
        tracer.begin_test()
        assert tracer.end_test() == set()
        tracer.begin_test()
        lib.through(mine.leaf)  # between phases of this test
        tracer.run(lambda: lib.through(mine.leaf))
        assert tracer.end_test() == {((path, 4),)}  # lib's frame is not the project: leaf is the root


@needs_monitoring
def test_the_tool_id_is_one_nobody_holds_and_is_released_on_close():
    from fastci.evidence.monitoring import USER_TOOL_IDS, MonitoringTracer, NoToolId

    monitoring = sys.monitoring
    held = []
    try:
        monitoring.use_tool_id(monitoring.PROFILER_ID, "another profiler")
        held.append(monitoring.PROFILER_ID)
        tracer = MonitoringTracer(lambda filename: False)
        assert tracer.tool != monitoring.PROFILER_ID and monitoring.get_tool(tracer.tool) == "fastci evidence"
        tool = tracer.tool
        tracer.close()
        tracer.close()  # twice is fine
        assert monitoring.get_tool(tool) is None and monitoring.get_events(tool) == 0
        for tool in USER_TOOL_IDS:
            if monitoring.get_tool(tool) is None:
                monitoring.use_tool_id(tool, f"tool {tool}")
                held.append(tool)
        with pytest.raises(NoToolId, match="no free tool id for tracing .*'another profiler'"):
            MonitoringTracer(lambda filename: False)
    finally:
        for tool in held:
            monitoring.free_tool_id(tool)


@needs_monitoring
def test_with_every_tool_id_taken_a_tracing_session_stops_with_a_usage_error(project, tmp_path):
    (project / "tests" / "conftest.py").write_text(
        "import sys\n\nfor tool in range(6):\n    sys.monitoring.use_tool_id(tool, f'held {tool}')\n"
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "fastci.pytest_plugin", "--fastci-evidence"]
        + ["--fastci-evidence-method", "tracing", "tests"],
        cwd=project,
        env=clean_env(FASTCI_DATA_DIR=str(tmp_path / "data"), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 4, run.stdout + run.stderr
    assert "--fastci-evidence-method tracing: sys.monitoring has no free tool id for tracing" in run.stderr
