"""Exact evidence at a cost per unit per test, not per call: every project code unit a test runs,
recorded at its first call in the test, with the calling context of that call.

That a test ran a unit is known at the unit's first call; later calls add only contexts, and
context-aware pruning needs a few of those, not thousands (``docs/selection.md``). So a unit is
watched until it has shown ``contexts`` distinct calling contexts or ``contexts *
CALLS_PER_CONTEXT`` calls, and is then left alone for the rest of the test:

- On ``sys.monitoring`` (3.12+) leaving a unit alone is free: the callback returns ``DISABLE`` and
  the interpreter runs that code location as if nobody watched. When the next test begins, the
  locations disabled during this one are armed again by setting their local events off and on
  (``sys.monitoring.restart_events`` would wake every location outside the project too, and those
  would cost an event each in every test). Two tool ids: a *finder* sees each code object's first
  start anywhere (global PY_START), arms project code for the *recorder* and disables everything
  for good; the recorder sees project code (local PY_START and PY_RESUME, and PY_THROW, which is
  global only and cannot be disabled, but is rare).
- On 3.11 there is only ``sys.setprofile``, a callback on every call and return. It returns at once
  for code outside the project and for units done in this test, by two lookups keyed by the frame's
  module file and line, and never reads ``frame.f_code`` there: that is an audit event, and the reads
  recorder's audit hook would then run on every call. (``sys.settrace`` calls back only at calls,
  but on 3.11 a trace function makes the interpreter look for a new line at every instruction,
  which costs loop-bound code far more: docs/benchmarks.md.)

The context of a call is what ``fastci.selection.graph`` reads of it: the units on the stack above
(project frames only, below the frame the test phase started in), as the innermost test-code unit
and the innermost ``CALLERS`` other units, root first, consecutive repeats (recursion) collapsed.
Deeper callers never change a context the graph computes.

Threads a test starts count for that test, as with the per-call tracer
(``fastci.evidence.tracing``); with ``dimensions`` (a test declaring a workload) every call is
recorded, to place each unit's first run at a step or a layer.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from fastci.core.config import EVIDENCE_CONTEXTS
from fastci.evidence import dimensions as _dimensions
from fastci.evidence.stacks import UnitsCache
from fastci.evidence.tracing import T, _line, profiled
from fastci.planning.shrink import add_point
from fastci.selection.units import LAMBDA, Units, is_test_file

CALLERS = 4  # non-test callers kept per context: the graph reads 3, and whether there is more than 1
CALLS_PER_CONTEXT = 4  # calls a unit may take to show each of its contexts before it is left alone
DEFAULT_CONTEXTS = EVIDENCE_CONTEXTS
MAX_UNITS = 100_000  # per test: a bound on memory, far above any test's code
TOOL_NAME = "fastci evidence"

# (unit name 'path::qualname', whether it is test code), or None for code outside the project.
Resolved = tuple[str, bool] | None
Context = tuple[str, ...]  # unit names root first: the callers, then the unit itself
_UNKNOWN = object()


class ProjectUnits:
    """Which files are the project's, and the unit at a line of one (``fastci.selection.units``)."""

    def __init__(self, root: Path, cwd: Path, units_cache: UnitsCache | None = None) -> None:
        self.root, self.cwd, self.cache = root, cwd, units_cache or UnitsCache()

    def is_project(self, filename: str) -> bool:
        return self.cache.relpath(filename, self.root, self.cwd) is not None

    def unit(self, filename: str, line: int, in_lambda: bool) -> Resolved:
        units, relpath = self._units(filename)
        if units is None:
            return None
        return f"{relpath}::{units.unit_at(line, in_lambda)}", is_test_file(relpath)  # type: ignore[arg-type]

    def lambda_at(self, filename: str, line: int) -> bool:
        """Whether a lambda spans the line: code starting there may be more than one unit's."""
        units, _ = self._units(filename)
        return units is not None and units.lambda_at(line)

    def _units(self, filename: str) -> tuple[Units | None, str | None]:
        relpath = self.cache.relpath(filename, self.root, self.cwd)
        return (None if relpath is None else self.cache.units(self.root, relpath)), relpath


def kept_context(callers: Iterable[tuple[str, bool]], unit: str) -> Context:
    """What is kept of a call of ``unit`` whose callers are ``callers`` (innermost first, each a unit
    and whether it is test code): the innermost test-code unit and the innermost ``CALLERS`` other
    units, consecutive repeats collapsed, root first, then ``unit``."""
    test_unit: str | None = None
    kept: list[str] = []  # innermost first
    for name, test_code in callers:
        if len(kept) >= CALLERS:
            break
        if test_code:
            test_unit = test_unit or name
        elif not kept or kept[-1] != name:
            kept.append(name)
    kept.reverse()
    return (test_unit, *kept, unit) if test_unit is not None else (*kept, unit)


class FirstCalls:
    """The 3.11 collector, on ``sys.setprofile``; ``new_collector`` picks the cheapest one."""

    MECHANISM = "sys.setprofile"

    def __init__(self, units: ProjectUnits, contexts: int = DEFAULT_CONTEXTS) -> None:
        if contexts < 1:
            raise ValueError(f"contexts: must be at least 1 (got {contexts})")
        self.units, self.contexts, self.budget = units, contexts, contexts * CALLS_PER_CONTEXT
        self.dimensions = False  # record every call's point (fastci.evidence.dimensions) in this test
        self.points: dict[tuple[str, int, bool], list[dict[str, int]]] = {}  # of the last test ended, by frame
        self._resolved: dict[tuple[str, int, bool], Resolved] = {}
        # A module's __file__ -> False: not the project's; a dict: a project module, the lines whose
        # code is done in this test (True, or the code objects done on a line where a lambda starts);
        # None: globals naming no file (exec'd code), the code tells.
        self._modules: dict[Any, bool | dict[int, Any] | None] = {}
        self._shared: dict[tuple[str, int], bool] = {}  # (module file, line) -> may code of two units start there?
        self._profile = self._profiler()
        self._boundary: Any = None
        self._recording = False
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._calls: dict[str, list[Context]] = {}  # unit -> its distinct contexts in this test
        self._counts: dict[str, int] = {}  # unit -> calls seen while it still shows contexts
        for state in self._modules.values():
            if state.__class__ is dict:
                state.clear()  # type: ignore[union-attr]
        self._points: dict[tuple[str, int, bool], list[dict[str, int]]] = {}
        self._last_point: dict[tuple[str, int, bool], Any] = {}

    # ----- the test's life

    def begin_test(self) -> None:
        self._reset()
        self._recording = True

    def end_test(self) -> dict[str, list[Context]]:
        """Each unit the test ran since ``begin_test``, with the contexts of its first calls."""
        self._recording = False
        calls, self.points = self._calls, self._points
        self._reset()
        return calls

    def run(self, func: Callable[[], T]) -> T:
        """Run ``func`` (a test phase) recorded into the current test."""
        return profiled(self, func)

    def close(self) -> None:
        """Nothing to release: the profile function is only set inside ``run``."""

    def __enter__(self) -> FirstCalls:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----- recording

    def _profiler(self) -> Callable[[Any, str, Any], None]:
        """The profile function: its fast path in locals, as it runs at every call and return."""
        modules, called = self._modules, self._called

        def profile(frame: Any, event: str, arg: Any) -> None:
            if event != "call":
                return
            state = modules.get(frame.f_globals.get("__file__"), _UNKNOWN)
            if state is False:
                return
            if state.__class__ is dict:
                done = state.get(frame.f_lineno)  # type: ignore[union-attr]
                if done is True or (done is not None and frame.f_code in done):
                    return
            called(frame, state)

        return profile

    def _called(self, frame: Any, state: Any) -> None:
        """A call the fast path could not answer: of a module not seen yet, of exec'd code, or of a
        project line not done in this test."""
        module = frame.f_globals.get("__file__")
        if state is _UNKNOWN:
            state = self._modules[module] = self._module_state(module)
            if state is False:
                return
        code, line = frame.f_code, frame.f_lineno
        if self._first(frame, code) and state is not None:
            if self._shared_line(module, line):  # a lambda starts there: done code by code
                state.setdefault(line, set()).add(code)
            else:
                state[line] = True

    def _shared_line(self, module: str, line: int) -> bool:
        """Whether code of more than one unit can start at this line (a lambda spans it): then the
        line is done code object by code object, not as a whole."""
        key = (module, line)
        shared = self._shared.get(key)
        if shared is None:
            shared = self._shared[key] = self.units.lambda_at(module, line)
        return shared

    def _module_state(self, module: Any) -> bool | dict[int, Any] | None:
        if module.__class__ is not str:
            return None
        return {} if self.units.is_project(module) else False

    def _resolve(self, filename: str, line: int, in_lambda: bool) -> Resolved:
        key = (filename, line, in_lambda)
        found = self._resolved.get(key, _UNKNOWN)
        if found is _UNKNOWN:
            found = self._resolved[key] = self.units.unit(filename, line, in_lambda)
        return found  # type: ignore[return-value]

    def _first(self, frame: Any, code: Any) -> bool:
        """Record a call of ``code`` in ``frame`` (just started or resumed); whether its unit is done
        for this test (then its location can be left alone until the next test)."""
        if not self._recording:
            return False
        resolved = self._resolve(code.co_filename, _line(frame, code), code.co_name == LAMBDA)
        if resolved is None:
            return True
        unit = resolved[0]
        if self.dimensions:
            self._record_point((code.co_filename, frame.f_lineno, code.co_name == LAMBDA))
        with self._lock:  # a thread the test started may record too
            contexts = self._calls.get(unit)
            if contexts is None:
                if len(self._calls) >= MAX_UNITS:
                    return True
                contexts = self._calls[unit] = []
            elif len(contexts) >= self.contexts:
                return not self.dimensions
            count = self._counts[unit] = self._counts.get(unit, 0) + 1
            context = self._context(frame, unit)
            if context not in contexts:
                contexts.append(context)
            return not self.dimensions and (len(contexts) >= self.contexts or count >= self.budget)

    def _context(self, frame: Any, unit: str) -> Context:
        """The units above ``frame`` that the graph reads, root first, then ``unit``."""
        return kept_context(self._callers(frame), unit)

    def _callers(self, frame: Any) -> Iterator[tuple[str, bool]]:
        """The project units on the stack above ``frame``, innermost first, below the phase's frame;
        walked only as far as they are asked for."""
        modules, boundary = self._modules, self._boundary
        caller = frame.f_back
        while caller is not None and caller is not boundary:
            module = caller.f_globals.get("__file__")
            state = modules.get(module, _UNKNOWN)
            if state is _UNKNOWN:
                state = modules[module] = self._module_state(module)
            if state is not False:  # else a library's frame, told apart without reading f_code
                code = caller.f_code
                resolved = self._resolve(code.co_filename, _line(caller, code), code.co_name == LAMBDA)
                if resolved is not None:
                    yield resolved
            caller = caller.f_back

    def _record_point(self, key: tuple[str, int, bool]) -> None:
        point = _dimensions.POINT
        if self._last_point.get(key) is point:  # the usual case: called again at the same step
            return
        self._last_point[key] = point
        with self._lock:
            add_point(self._points.setdefault(key, []), dict(point), _dimensions.POINT_LIMIT)


class MonitoredFirstCalls(FirstCalls):
    """The 3.12+ collector, on ``sys.monitoring``: see the module's docstring."""

    MECHANISM = "sys.monitoring"

    def __init__(self, units: ProjectUnits, contexts: int = DEFAULT_CONTEXTS) -> None:
        super().__init__(units, contexts)
        monitoring = sys.monitoring
        events = monitoring.events
        self._disable = monitoring.DISABLE
        self._project: dict[str, bool] = {}  # co_filename -> project code?
        self._local = threading.local()  # .traced: this thread's calls count (dies with the thread)
        self._armed: set[Any] = set()  # project code the recorder watches
        self._disabled: set[Any] = set()  # of those, code with a location disabled in this test
        self._recorded_events = events.PY_START | events.PY_RESUME
        self.finder, self.recorder = _acquire_tool_ids(2)
        monitoring.register_callback(self.finder, events.PY_START, self._found)
        monitoring.register_callback(self.recorder, events.PY_START, self._started)
        monitoring.register_callback(self.recorder, events.PY_RESUME, self._started)
        monitoring.register_callback(self.recorder, events.PY_THROW, self._thrown)
        # What an earlier collector disabled stays disabled through free_tool_id and a new
        # registration; this one's project may differ.
        monitoring.restart_events()
        monitoring.set_events(self.finder, events.PY_START)
        monitoring.set_events(self.recorder, events.PY_THROW)

    def begin_test(self) -> None:
        set_local = sys.monitoring.set_local_events
        for code in self._disabled:  # off and on again: every location of the code is watched anew
            set_local(self.recorder, code, 0)
            set_local(self.recorder, code, self._recorded_events)
        self._disabled.clear()
        super().begin_test()

    def run(self, func: Callable[[], T]) -> T:
        """Run ``func`` (a test phase) recorded into the current test."""
        if self.recorder is None:
            raise RuntimeError("MonitoredFirstCalls.run after close")
        self._boundary = sys._getframe()
        threading.setprofile(self._thread_started)
        self._local.traced = True
        try:
            return func()
        finally:
            self._local.traced = False
            threading.setprofile(None)  # type: ignore[arg-type]
            self._boundary = None

    def close(self) -> None:
        """Stop the events, clear every code object's local events, release both tool ids."""
        if self.recorder is None:
            return
        monitoring = sys.monitoring
        for tool in (self.finder, self.recorder):
            monitoring.set_events(tool, 0)
            for event in (monitoring.events.PY_START, monitoring.events.PY_RESUME, monitoring.events.PY_THROW):
                monitoring.register_callback(tool, event, None)
        for code in self._armed:
            monitoring.set_local_events(self.recorder, code, 0)
        self._armed.clear()
        monitoring.free_tool_id(self.finder)
        monitoring.free_tool_id(self.recorder)
        self.finder = self.recorder = None  # type: ignore[assignment]

    def _thread_started(self, frame: Any, event: str, arg: Any) -> None:
        # Threads started during a phase count for the test for as long as they run.
        self._local.traced = True
        sys.setprofile(None)

    def _is_project(self, filename: str) -> bool:
        keep = self._project.get(filename)
        if keep is None:
            keep = self._project[filename] = self.units.is_project(filename)
        return keep

    def _found(self, code: Any, offset: int) -> Any:
        if self._is_project(code.co_filename):
            sys.monitoring.set_local_events(self.recorder, code, self._recorded_events)
            self._armed.add(code)
            if self._recording and getattr(self._local, "traced", False):
                self._first(sys._getframe(1), code)
        return self._disable

    def _started(self, code: Any, offset: int) -> Any:
        if not (self._recording and getattr(self._local, "traced", False)):
            return None  # outside a test, or another thread: the location stays watched
        if self._first(sys._getframe(1), code):
            self._disabled.add(code)
            return self._disable
        return None

    def _thrown(self, code: Any, offset: int, exception: BaseException) -> None:
        if self._recording and getattr(self._local, "traced", False) and self._is_project(code.co_filename):
            self._first(sys._getframe(1), code)


class NoToolId(RuntimeError):
    """The sys.monitoring tool ids are taken by other tools (a debugger, coverage, a profiler)."""


# Which ids to try first: the profiler's, then ids no convention names; coverage's and the
# debugger's last, so those tools still find theirs free.
_TOOL_ORDER = (2, 3, 4, 5, 1, 0)


def _acquire_tool_ids(count: int) -> list[int]:
    monitoring = sys.monitoring
    taken: list[int] = []
    for tool in _TOOL_ORDER:
        if len(taken) == count:
            break
        try:
            monitoring.use_tool_id(tool, TOOL_NAME)
        except ValueError:  # held by another tool
            continue
        taken.append(tool)
    if len(taken) < count:
        for tool in taken:
            monitoring.free_tool_id(tool)
        held = ", ".join(f"{tool}: {monitoring.get_tool(tool)!r}" for tool in sorted(_TOOL_ORDER))
        raise NoToolId(
            f"sys.monitoring has fewer than {count} free tool ids for evidence (held: {held}); "
            "run without the tools holding them, or use --fastci-evidence-method sampling"
        )
    return taken


def new_collector(units: ProjectUnits, contexts: int = DEFAULT_CONTEXTS) -> FirstCalls:
    """The collector this interpreter runs cheapest: on ``sys.monitoring`` (3.12+), else on
    ``sys.setprofile``. Both record the same units and contexts; close it when done."""
    if hasattr(sys, "monitoring"):
        return MonitoredFirstCalls(units, contexts)
    return FirstCalls(units, contexts)
