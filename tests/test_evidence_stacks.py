"""py-spy raw output -> project stacks (pure functions), marker attribution, and the tracer."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

from fastci.evidence.first_calls import FirstCalls, ProjectUnits
from fastci.evidence.sampling import Markers
from fastci.evidence.stacks import (
    Frame,
    UnitsCache,
    merge,
    parse_frame,
    parse_raw,
    project_stacks,
    to_project_stack,
    units_of,
)
from fastci.evidence.tracing import Tracer

# The first-call collectors where the interpreter has them (sys.setprofile everywhere, sys.monitoring 3.12+).
COLLECTORS = [FirstCalls]
if hasattr(sys, "monitoring"):
    from fastci.evidence.first_calls import MonitoredFirstCalls

    COLLECTORS.append(MonitoredFirstCalls)

# The program py-spy 0.4.3 sampled for the lines below, saved as /tmp/ev/busy.py.
BUSY = """\
import time, threading
def slow_add(n):
    t=time.monotonic()
    x=0
    while time.monotonic()-t<n:
        x+=1
    return x
class Model:
    def forward(self):
        return slow_add(0.3)
def outer():
    def inner():
        return slow_add(0.2)
    return inner()
def sleeper():
    time.sleep(0.3)
if __name__=="__main__":
    Model().forward()
    outer()
    sleeper()
    th=threading.Thread(target=lambda: slow_add(0.2)); th.start(); th.join()
"""

STDLIB = "/root/.pyenv/versions/3.11.7/lib/python3.11"
# Real lines of `py-spy record --format raw --full-filenames` on it (with --threads, --subprocesses,
# --nolineno where said), copied as printed.
REAL = {
    "plain": "<module> (/tmp/ev/busy.py:18);Model.forward (/tmp/ev/busy.py:10);slow_add (/tmp/ev/busy.py:5) 41",
    "nested": "<module> (/tmp/ev/busy.py:19);outer (/tmp/ev/busy.py:14);"
    "outer.<locals>.inner (/tmp/ev/busy.py:13);slow_add (/tmp/ev/busy.py:5) 25",
    "empty": " 2",
    "thread": f"Thread._bootstrap ({STDLIB}/threading.py:1002);Thread._bootstrap_inner ({STDLIB}/threading.py:1045);"
    f"Thread.run ({STDLIB}/threading.py:982);<lambda> (/tmp/ev/busy.py:21);slow_add (/tmp/ev/busy.py:6) 7",
    "threads": "thread (8079): MainThread;<module> (/tmp/ev/busy.py:18);Model.forward (/tmp/ev/busy.py:10);"
    "slow_add (/tmp/ev/busy.py:6) 15",
    "named_thread": f"thread (8082): Thread-1 (<lambda>);Thread._bootstrap ({STDLIB}/threading.py:1002);"
    f"<lambda> (/tmp/ev/busy.py:21);slow_add (/tmp/ev/busy.py:5) 27",
    "subprocess": 'process 10054:"/work/main/.venv/bin/python parent.py";process 10059:"/work/main/.venv/bin/python -c '
    'import busy; busy.slow_add(0.2)";<module> (<string>:1);slow_add (/tmp/ev/busy.py:5) 16',
    "frozen": "_find_and_load (<frozen importlib._bootstrap>:1176);"
    "_load_unlocked (<frozen importlib._bootstrap>:690) 1",
    "nolineno": "<module> (busy.py);outer (busy.py);outer.<locals>.inner (busy.py);slow_add (busy.py) 21",
}


def project(tmp_path: Path) -> Path:
    root = tmp_path / "ev"
    root.mkdir()
    (root / "busy.py").write_text(BUSY)
    return root


def in_project(line: str, root: Path) -> str:
    return line.replace("/tmp/ev/", f"{root}/")


def test_parse_raw_reads_stacks_counts_and_skips_what_is_not_code():
    parsed = parse_raw("\n".join(REAL.values()) + "\nnot a stack\n")
    frames, count = parsed[0]
    assert count == 41
    assert frames == [
        Frame("<module>", "/tmp/ev/busy.py", 18),
        Frame("Model.forward", "/tmp/ev/busy.py", 10),
        Frame("slow_add", "/tmp/ev/busy.py", 5),
    ]
    by_name = dict(zip(REAL, parsed))
    assert by_name["empty"] == ([], 2)
    assert [f.name for f in by_name["threads"][0]] == ["<module>", "Model.forward", "slow_add"]  # thread prefix gone
    assert [f.name for f in by_name["named_thread"][0]] == ["Thread._bootstrap", "<lambda>", "slow_add"]
    # A command line holding ';' stays one pseudo-frame.
    assert by_name["subprocess"] == ([Frame("<module>", "<string>", 1), Frame("slow_add", "/tmp/ev/busy.py", 5)], 16)
    assert by_name["frozen"][0][0] == Frame("_find_and_load", "<frozen importlib._bootstrap>", 1176)
    assert by_name["nolineno"][0][-1] == Frame("slow_add", "busy.py", None)
    assert len(parsed) == len(REAL)  # the garbage line is skipped


def test_a_command_line_with_a_newline_splits_the_line_but_keeps_the_frames():
    # py-spy prints the command line as is: a newline in it cuts the stack line in two.
    text = 'process 7:"python -c import x\nx.main()";f (/p/x.py:3);g (/p/x.py:9) 5'
    assert parse_raw(text) == [([Frame("f", "/p/x.py", 3), Frame("g", "/p/x.py", 9)], 5)]


def test_frames_keep_the_project_only_with_qualnames_from_the_source(tmp_path):
    root = project(tmp_path)
    cache = UnitsCache()

    def stack(name: str) -> str | None:
        [(frames, _)] = parse_raw(in_project(REAL[name], root))
        return to_project_stack(frames, root, cache)

    assert stack("plain") == "<module> (busy.py:18);Model.forward (busy.py:10);slow_add (busy.py:5)"
    assert (
        stack("nested")
        == "<module> (busy.py:19);outer (busy.py:14);outer.<locals>.inner (busy.py:13);slow_add (busy.py:5)"
    )
    # The stdlib goes; a module-level lambda is a unit of its own, as change analysis sees it.
    assert stack("thread") == "<lambda> (busy.py:21);slow_add (busy.py:6)"
    assert stack("subprocess") == "slow_add (busy.py:5)"  # <string> code is no file of the project
    assert stack("frozen") is None and stack("empty") is None
    assert stack("nolineno") is None  # no line, no unit


def test_relative_paths_are_taken_from_the_process_directory(tmp_path):
    root = project(tmp_path)
    (root / "sub").mkdir()
    (root / "sub" / "m.py").write_text("def f():\n    return 1\n")
    frames = [Frame("f", "m.py", 2)]
    assert to_project_stack(frames, root, UnitsCache(), cwd=root / "sub") == "f (sub/m.py:2)"
    assert to_project_stack(frames, root, UnitsCache()) is None  # no m.py at the root


def test_installed_code_inside_the_root_and_files_outside_it_are_not_the_project(tmp_path):
    root = project(tmp_path)
    source = "def f():\n    return 1\n"
    for path in (
        ".venv/lib/python3.11/site-packages/pkg/m.py",
        "env/lib/python3.11/json/m.py",
        "vendor/dist-packages/m.py",
    ):
        (root / path).parent.mkdir(parents=True)
        (root / path).write_text(source)
    (tmp_path / "elsewhere.py").write_text(source)
    (root / "broken.py").write_text("def f(:\n")
    (root / "ok.py").write_text(source)
    cache = UnitsCache()
    frames = [
        Frame("f", str(root / p), 2)
        for p in (
            ".venv/lib/python3.11/site-packages/pkg/m.py",
            "env/lib/python3.11/json/m.py",
            "vendor/dist-packages/m.py",
            "../elsewhere.py",
            "broken.py",
            "missing.py",
            "ok.py",
        )
    ]
    assert to_project_stack(frames, root, cache) == "f (ok.py:2)"
    # The interpreter's own virtualenv is excluded even when its files look like the project's.
    assert to_project_stack([Frame("f", str(root / "ok.py"), 2)], root, UnitsCache(exclude_dirs=[str(root)])) is None


def test_merge_sums_identical_stacks_drops_empty_ones_and_orders_deterministically():
    merged = merge([("b (x.py:1)", 2), (None, 9), ("a (x.py:1)", 3), ("b (x.py:1)", 1), ("c (x.py:1)", 3)])
    assert merged == [("a (x.py:1)", 3), ("b (x.py:1)", 3), ("c (x.py:1)", 3)]


def test_project_stacks_and_units_of_round_trip(tmp_path):
    root = project(tmp_path)
    raw = "\n".join(in_project(REAL[name], root) for name in ("plain", "threads", "empty", "nested"))
    stacks = project_stacks(raw, root)
    assert stacks[0] == ("<module> (busy.py:18);Model.forward (busy.py:10);slow_add (busy.py:5)", 41)
    assert len(stacks) == 3
    assert units_of(stacks[0][0]) == [("busy.py", "<module>"), ("busy.py", "Model.forward"), ("busy.py", "slow_add")]
    assert parse_frame("Model.<body> (pkg/a b.py:3)") == Frame("Model.<body>", "pkg/a b.py", 3)


def test_markers_attribute_each_sample_to_its_test_by_the_frames_under_its_marker():
    markers = Markers("abc")
    assert markers.marker(3).__code__.co_qualname == "fastci_evidence_abc_test_3"
    assert markers.marker(3)(lambda: 42) == 42
    pytest_frame = Frame("pytest_runtest_call", "/venv/site-packages/_pytest/runner.py", 170)
    test_a = [
        Frame("main", "/venv/_pytest/main.py", 1),
        Frame("fastci_evidence_abc_test_0", "/fastci/evidence/sampling.py", 30),
        pytest_frame,
        Frame("test_a", "/p/tests/test_x.py", 4),
    ]
    fixture = [
        Frame("fastci_evidence_abc_test_1", "/fastci/evidence/sampling.py", 30),
        Frame("resource", "/p/conftest.py", 8),
    ]
    other_session = [Frame("fastci_evidence_zzz_test_0", "/fastci/evidence/sampling.py", 30), Frame("f", "/p/x.py", 1)]
    by_test, outside = markers.attribute([(test_a, 5), (fixture, 2), (other_session, 4), ([], 1), (test_a, 1)])
    assert by_test == {0: [(test_a[2:], 5), (test_a[2:], 1)], 1: [(fixture[1:], 2)]}
    assert outside == 5


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_tracer_records_every_project_call_once_per_distinct_stack(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "calc.py").write_text(
        textwrap.dedent("""\
        import json


        def leaf(x):
            return x + 1


        def twice(x):
            return leaf(leaf(x))


        class Model:
            def forward(self, xs):
                return [twice(x) for x in xs] + [json.loads("1", object_hook=lambda d: d)]


        def deep(n):
            return leaf(n) if n == 0 else deep(n - 1)
        """)
    )
    calc = load(root / "calc.py", "calc_traced")
    cache = UnitsCache()
    with Tracer(lambda filename: cache.relpath(filename, root) is not None, max_depth=4) as tracer:
        tracer.begin_test()
        assert tracer.run(lambda: calc.Model().forward([1, 2, 3])) == [3, 4, 5, 1]
        tracer.run(lambda: calc.deep(6))
        raw = tracer.end_test()
        stacks = {to_project_stack([Frame("", f, n) for f, n, _ in s], root, cache) for s in raw}
        # 3.11 runs a list comprehension as a function of its own; 3.12 inlines it (PEP 709).
        listcomp = "Model.forward (calc.py:14);" if sys.version_info < (3, 12) else ""
        assert stacks == {
            "Model.forward (calc.py:13)",
            *(["Model.forward (calc.py:14);Model.forward (calc.py:14)"] if listcomp else []),
            f"Model.forward (calc.py:14);{listcomp}twice (calc.py:8)",
            f"Model.forward (calc.py:14);{listcomp}twice (calc.py:9);leaf (calc.py:4)",
            # Innermost max_depth=4 frames of the recursion; json is not the project.
            "deep (calc.py:17)",
            "deep (calc.py:18);deep (calc.py:17)",
            "deep (calc.py:18);deep (calc.py:18);deep (calc.py:17)",
            "deep (calc.py:18);deep (calc.py:18);deep (calc.py:18);deep (calc.py:17)",
            "deep (calc.py:18);deep (calc.py:18);deep (calc.py:18);leaf (calc.py:4)",
        }
        assert not tracer.overflowed
        tracer.begin_test()
        assert tracer.end_test() == set()  # nothing carried over to the next test


def test_the_tracer_stops_keeping_stacks_at_its_limit(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "many.py").write_text(
        "def f(i):\n    return i\n\n\ndef run():\n" + "".join(f"    f({i})\n" for i in range(10))
    )
    many = load(root / "many.py", "many_traced")
    with Tracer(lambda filename: filename == str(root / "many.py"), max_stacks=5) as tracer:
        tracer.begin_test()
        tracer.run(many.run)
        assert len(tracer.end_test()) == 5 and tracer.overflowed


CALC = """\
import json


def leaf(x):
    return x + 1


def twice(x):
    return leaf(leaf(x))


class Model:
    def forward(self, xs):
        return [twice(x) for x in xs] + [json.loads("1", object_hook=lambda d: d)] + [(lambda y: leaf(y))(0)]


def deep(n):
    return leaf(n) if n == 0 else deep(n - 1)


def chain(n):
    return link1(n)


def link1(n):
    return link2(n)


def link2(n):
    return link3(n)


def link3(n):
    return link4(n)


def link4(n):
    return leaf(n)
"""

TEST_CALC = """\
import calc


def test_calc():
    calc.chain(1)
    calc.deep(3)
    return calc.Model().forward([1, 2])
"""


@pytest.mark.parametrize("collector_class", COLLECTORS)
def test_the_collector_records_each_unit_at_its_first_calls_with_what_the_graph_reads_of_their_context(
    tmp_path, collector_class
):
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text(CALC)
    (root / "tests" / "test_calc.py").write_text(TEST_CALC)
    sys.path.insert(0, str(root))
    try:
        test = load(root / "tests" / "test_calc.py", "test_calc_collected")
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("calc", None)
    unit = "calc.py::{}".format
    for contexts in (1, 2):
        with collector_class(ProjectUnits(root, root), contexts=contexts) as collector:
            for _ in range(2):  # the second test records the same: nothing is carried over
                collector.begin_test()
                assert collector.run(test.test_calc) == [3, 4, 1, 1]
                calls = collector.end_test()
                # One context per unit, the first; with two, leaf's second (under twice) too. Past 4
                # callers that are not test code, the test's frame is not kept: the graph reads 3 callers,
                # and the test only for a unit called within one hop of it.
                assert calls[unit("leaf")][0] == tuple(map(unit, ("link1", "link2", "link3", "link4", "leaf")))
                assert len(calls[unit("leaf")]) == contexts
                assert calls[unit("link4")] == [tuple(map(unit, ("chain", "link1", "link2", "link3", "link4")))]
                assert calls[unit("link3")] == [
                    ("tests/test_calc.py::test_calc", *map(unit, ("chain", "link1", "link2", "link3")))
                ]
                # Recursion collapses to one frame.
                assert calls[unit("deep")][0] == ("tests/test_calc.py::test_calc", unit("deep"))
                if contexts == 2:
                    assert calls[unit("deep")][1] == ("tests/test_calc.py::test_calc", unit("deep"), unit("deep"))
                # A lambda is a unit of its own; json's hook lambda is not the project's code.
                assert calls[unit("Model.forward.<locals>.<lambda>")] == [
                    ("tests/test_calc.py::test_calc", unit("Model.forward"), unit("Model.forward.<locals>.<lambda>"))
                ]
                assert set(calls) == {
                    "tests/test_calc.py::test_calc",
                    *map(unit, ("chain", "link1", "link2", "link3", "link4", "leaf", "deep", "twice")),
                    *map(unit, ("Model.forward", "Model.forward.<locals>.<lambda>")),
                }


def test_an_event_too_big_for_kafka_keeps_the_test_frame_and_the_innermost_frames():
    from fastci.core.codec import MAX_EVENT_BYTES, encode
    from fastci.evidence.publish import KEPT_FRAMES, evidence_event

    deep = [
        (";".join(["test_x (tests/test_x.py:3)", *(f"f{i}_{j} (pkg/m{j}.py:{j})" for j in range(15))]), 1)
        for i in range(8000)
    ]
    event = evidence_event("tests/test_x.py::test_x", "r1", "acme/x", "abcdef1", "tracing", deep)
    assert len(encode(event)) <= MAX_EVENT_BYTES
    assert all(s.stack.startswith("test_x (tests/test_x.py:3);") for s in event.stacks)
    assert {len(s.stack.split(";")) for s in event.stacks} == {KEPT_FRAMES}
    assert event.config["stacks_shortened_to_frames"] == KEPT_FRAMES
    small = evidence_event("tests/test_x.py::test_x", "r1", "acme/x", "abcdef1", "tracing", deep[:10])
    assert [s.stack for s in small.stacks] == [stack for stack, _ in deep[:10]] and small.config == {}


def test_a_frame_path_with_a_null_byte_is_not_the_projects_code(tmp_path):
    """py-spy reads a frame's file name from the live process; a torn read once held a NUL, which
    os.path.realpath refuses (a .ci/run failed on it in test_evidence_collect)."""
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    cache = UnitsCache()
    assert cache.relpath("m.py", tmp_path) == "m.py"
    assert cache.relpath("m\0.py", tmp_path) is None


def test_a_source_is_parsed_once_and_read_back_from_the_cache_until_its_bytes_change(tmp_path, monkeypatch):
    from fastci.evidence import sources

    path = tmp_path / "mod.py"
    path.write_text(CALC)
    cache = sources.SourceCache(tmp_path / "cache")
    first = cache.read(str(path))
    parses = []
    real_parse = sources.parse
    monkeypatch.setattr(sources, "parse", lambda data, name: parses.append(name) or real_parse(data, name))
    again = sources.SourceCache(tmp_path / "cache").read(str(path))  # another session
    assert parses == []
    assert again.imports == first.imports == (sources.ImportStatement(None, ("json",), 0, False),)
    assert again.units.spans() == first.units.spans()
    assert [again.units.unit_at(n, n == 15) for n in range(1, 40)] == [
        first.units.unit_at(n, n == 15) for n in range(1, 40)
    ]
    path.write_text(CALC.replace("return x + 1", "return x + 2"))
    changed = sources.SourceCache(tmp_path / "cache").read(str(path))
    assert parses == [str(path)] and changed.units.spans() == first.units.spans()
    # Unreadable and unparsable files, and a cache that cannot be written, still answer.
    assert sources.SourceCache(tmp_path / "cache").read(str(tmp_path / "absent.py")) == sources.UNREADABLE
    (tmp_path / "broken.py").write_text("def broken(:\n")
    assert sources.SourceCache(tmp_path / "cache").read(str(tmp_path / "broken.py")).units is None
    (tmp_path / "a-file").write_text("")
    assert sources.SourceCache(tmp_path / "a-file").read(str(path)).units.spans() == first.units.spans()


def test_the_source_cache_keeps_the_entries_written_last(tmp_path, monkeypatch):
    import os

    from fastci.evidence import sources

    monkeypatch.setattr(sources, "KEEP", 3)
    cache = sources.SourceCache(tmp_path / "cache")
    for n in range(5):
        (tmp_path / f"m{n}.py").write_text(f"def f{n}():\n    return {n}\n")
        cache.read(str(tmp_path / f"m{n}.py"))
    entries = sorted((tmp_path / "cache").rglob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    for age, entry in enumerate(entries):
        os.utime(entry, ns=(age, age))  # written in this order
    cache.prune()
    assert sorted((tmp_path / "cache").rglob("*.json")) == sorted(entries[2:])


def test_on_3_11_the_collector_leaves_a_trace_function_in_place(tmp_path):
    """Coverage or a debugger traces on sys.settrace: the collector, on the profile function, records
    the same beside it and leaves it as it was."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "calc.py").write_text(CALC)
    calc = load(root / "calc.py", "calc_beside_a_tracer")
    seen = []

    def other_tool(frame, event, arg):
        seen.append(event)

    found = []
    for tracing in (None, other_tool):
        collector = FirstCalls(ProjectUnits(root, root))
        sys.settrace(tracing)
        try:
            collector.begin_test()
            collector.run(lambda: calc.chain(1))
            found.append(collector.end_test())
            assert sys.gettrace() is tracing  # as it was found
        finally:
            sys.settrace(None)
    assert found[0] == found[1] and "calc.py::leaf" in found[0]
    assert "call" in seen  # the other tool went on tracing meanwhile


def test_the_import_window_profiles_a_project_modules_code_and_not_the_libraries_it_imports(tmp_path):
    """pytest's rewriting of test modules and the imports of libraries run without the profile
    function; what a project module's code calls at import is traced."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "lib_import_gate.py").write_text("import sys\n\nPROFILED = sys.getprofile() is not None\n")
    (tmp_path / "proj" / "helpers_gate.py").write_text("def bump(x):\n    return x + 1\n")
    (tmp_path / "proj" / "mod_gate.py").write_text(
        "import sys\n\nimport lib_import_gate\nfrom helpers_gate import bump\n\n"
        "PROFILED = sys.getprofile() is not None\nVALUE = bump(1)\n"
    )
    cache = UnitsCache()
    tracer = Tracer(lambda filename: cache.relpath(filename, tmp_path / "proj") is not None)
    sys.path[:0] = [str(tmp_path / "proj"), str(tmp_path / "lib")]
    try:
        tracer.start()
        import mod_gate  # imports lib_import_gate from inside its own code

        lib_import_gate = sys.modules["lib_import_gate"]

        stacks = {to_project_stack([Frame("", f, n) for f, n, _ in s], tmp_path / "proj", cache) for s in tracer.stop()}
        assert mod_gate.PROFILED and not lib_import_gate.PROFILED
    finally:
        del sys.path[:2]
        for name in ("mod_gate", "helpers_gate", "lib_import_gate"):
            sys.modules.pop(name, None)
    assert sys.getprofile() is None
    import builtins

    assert builtins.exec.__module__ == "builtins"  # the gate closed
    assert stacks >= {"<module> (mod_gate.py:0)", "<module> (mod_gate.py:0);bump (helpers_gate.py:1)"}


def test_exec_behaves_as_the_builtin_while_the_import_window_is_open():
    from fastci.evidence.tracing import ExecGate

    gate = ExecGate(lambda filename: False, lambda *args: None)
    gate.open()
    try:
        namespace: dict = {}
        exec("x = 1", namespace)
        local: dict = {}
        exec("y = x + 1", namespace, local)
        exec(compile("z = 3", "<test>", "exec"), namespace)
        assert (namespace["x"], local["y"], namespace["z"]) == (1, 2, 3)

        def inner():
            exec("global EXECUTED_IN_THE_CALLERS_GLOBALS; EXECUTED_IN_THE_CALLERS_GLOBALS = 1")
            seen: dict = {}
            exec("value = 7", None, seen)
            return seen

        assert inner() == {"value": 7} and globals().pop("EXECUTED_IN_THE_CALLERS_GLOBALS") == 1
    finally:
        gate.close()
    import builtins

    assert builtins.exec.__module__ == "builtins"
