"""The per-call tracer: every project function called, with its stack, once per distinct stack.

It records what runs while modules are imported (``fastci.evidence.pytest_evidence.ImportWindow``),
where a unit's every caller matters (which module's import ran it), and serves the tests as the
reference the first-call collector (``fastci.evidence.first_calls``) is held to.

``sys.setprofile`` reports each Python call; for a call into a project file the tracer records the
stack of project frames, root first, as (filename, line, runs a lambda), resolved to units at the
end (``fastci.evidence.stacks``); the innermost ``max_depth`` frames are kept. Stacks start below
the frame tracing started in. Stacks are kept as a tree: a call's stack is its nearest project
caller's stack (the node recorded when that caller was called, plus the line it is at now) plus
itself; finding that caller is usually one step up, where walking the whole stack on every call
cost most of a traced run. On 3.12+ the import window goes on ``sys.monitoring`` once collection
starts (``MonitoredImports``); before that, and on 3.11, the profile function is on only while a
project module's own code runs (``ExecGate``).

setprofile rather than settrace: it leaves ``sys.settrace`` to coverage and debuggers. With
``dimensions=True`` it also keeps, per called (filename, line), the minimal points of
``fastci.evidence.dimensions`` (step, layer...) it was called at: ``points`` after ``end_test``.
"""

from __future__ import annotations

import builtins
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from fastci.evidence import dimensions as _dimensions
from fastci.planning.shrink import add_point
from fastci.selection.units import LAMBDA

T = TypeVar("T")
ProjectTest = Callable[[str], bool]  # co_filename -> is it the project's own code?
RawStack = tuple[tuple[str, int, bool], ...]  # (filename, line, runs a lambda) root first
_ROOT = 0


class Tracer:
    MECHANISM = "sys.setprofile"  # named in pytest's summary

    def __init__(
        self, is_project: ProjectTest, max_depth: int = 16, max_stacks: int = 20_000, dimensions: bool = False
    ) -> None:
        self.is_project = is_project
        self.dimensions = dimensions
        self.points: dict[tuple[str, int], list[dict[str, int]]] = {}  # of the last test ended
        self.max_depth, self.max_stacks = max_depth, max_stacks
        self._project: dict[str, bool] = {}  # co_filename -> project code? (decided once per file)
        self._foreign: dict[str, bool] = {}  # a module's __file__ -> outside the project?
        self._boundary: Any = None
        self._lock = threading.Lock()
        self._recording = False
        self.overflowed = False
        self._reset()

    def _reset(self) -> None:
        self._nodes: dict[tuple[int, str, int, bool], int] = {}  # (parent node, *frame) -> node
        self._parents: list[int] = [-1]  # by node; node 0 is the empty stack
        self._frames: list[tuple[str, int, bool]] = [("", 0, False)]  # (filename, line, runs a lambda)
        self._callers: dict[int, int] = {}  # hash(frame) -> the node of its callers when it was called
        self._leaves: set[int] = set()
        self._points: dict[tuple[str, int], list[dict[str, int]]] = {}
        self._last_point: dict[tuple[str, int], tuple] = {}  # the point object a call was last seen at

    def close(self) -> None:
        """Nothing to release here: the profile function is only set inside ``run``."""

    def __enter__(self) -> Tracer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def begin_test(self) -> None:
        self._reset()
        self.overflowed = False  # the test hit max_stacks; later stacks were not kept
        self._recording = True

    def end_test(self, fold: Callable[[tuple[str, int]], str | None] | None = None) -> set[Any]:
        """The distinct stacks of the test since ``begin_test`` (innermost max_depth frames): raw, or
        folded with ``fold`` (a frame as folded stacks write it, None to drop it; empty stacks go).
        Each node's stack is built once, from its parent's: a test can have thousands of stacks."""
        self._recording = False
        parents, frames, depth = self._parents, self._frames, self.max_depth
        built: dict[int, tuple] = {_ROOT: ()}
        for leaf in self._leaves:
            path, node = [], leaf
            while node not in built:
                path.append(node)
                node = parents[node]
            stack = built[node]
            for node in reversed(path):
                frame = frames[node] if fold is None else fold(frames[node])
                stack = built[node] = (*stack, frame)[-depth:]
        stacks: set[Any] = {built[leaf] for leaf in self._leaves}
        if fold is not None:
            stacks = {folded for stack in stacks if (folded := ";".join(filter(None, stack)))}
        self.points = self._points
        self._reset()
        return stacks

    def start(self) -> None:
        """Trace every project call from here until ``stop`` that runs while a project module's own
        code runs, with no boundary frame: the window in which modules are imported (conftests,
        collection), where no test phase wraps the calls. The profile function is on only inside
        those modules' code (``ExecGate``): the imports of other modules, and pytest's rewriting of
        each test module, run at full speed."""
        self.begin_test()
        self._boundary = None
        self._gate = ExecGate(self.is_project, self._profile)
        self._gate.open()

    def stop(self) -> set[RawStack]:
        """End ``start``'s window; its distinct stacks, root first."""
        self._gate.close()
        return self.end_test()

    def run(self, func: Callable[[], T]) -> T:
        """Run ``func`` (a test phase) traced into the current test's stacks."""
        return profiled(self, func)

    def _record_point(self, filename: str, line: int) -> None:
        point = _dimensions.POINT
        key = (filename, line)
        if self._last_point.get(key) is point:  # the usual case: called again at the same step
            return
        self._last_point[key] = point
        with self._lock:
            add_point(self._points.setdefault(key, []), dict(point), _dimensions.POINT_LIMIT)

    def _new_node(self, key: tuple[int, str, int, bool]) -> int:
        with self._lock:  # a thread the test started may add nodes too
            node = self._nodes.get(key)
            if node is None:
                node = self._nodes[key] = len(self._parents)
                self._parents.append(key[0])
                self._frames.append(key[1:])
        return node

    def _foreign_module(self, globals_: dict) -> bool:
        """Whether a frame with these globals runs a module outside the project: its code is then
        not project code either, and ``f_code`` (an audit event) need not be read. Frames of a
        project module, or with globals naming no file (exec'd code), are judged by their code."""
        module = globals_.get("__file__")
        foreign = self._foreign.get(module) if module.__class__ is str else False
        if foreign is None:
            foreign = self._foreign[module] = not self.is_project(module)
        return foreign

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call" or self._foreign_module(frame.f_globals):
            return
        code = frame.f_code
        filename = code.co_filename
        keep = self._project.get(filename)
        if keep is None:
            keep = self._project[filename] = self.is_project(filename)
        if keep and self._recording:
            self._record(frame, code)

    def _record(self, frame: Any, code: Any) -> None:
        """Keep a call into project code (``frame``, running ``code``, just started or resumed): its
        point, and its stack as a node of the tree. Shared with ``fastci.evidence.monitoring``; runs
        at every project call, hence the locals. ``frame.f_code``, ``id()`` and ``sys._getframe``
        are audit events: each runs every audit hook (the reads recorder's among them), so this reads
        a frame's code once and keys frames by ``hash()``, which is their identity too."""
        filename = code.co_filename
        if self.dimensions:
            self._record_point(filename, frame.f_lineno)
        if self.overflowed:
            return
        # The nearest project caller, below the frame tracing started in.
        project, boundary, caller = self._project, self._boundary, frame.f_back
        while caller is not None and caller is not boundary:
            if self._foreign_module(caller.f_globals):
                caller = caller.f_back
                continue
            caller_code = caller.f_code
            name = caller_code.co_filename
            known = project.get(name)
            if known is None:
                known = project[name] = self.is_project(name)
            if known:
                break
            caller = caller.f_back
        nodes, callers_of = self._nodes, self._callers  # node ids start at 1: "get(key) or new" is the fast path
        if caller is None or caller is boundary:
            callers = _ROOT
        else:
            key = (
                callers_of.get(hash(caller), _ROOT),
                name,
                _line(caller, caller_code),
                caller_code.co_name == LAMBDA,
            )
            callers = nodes.get(key) or self._new_node(key)  # every project caller was seen called
        callers_of[hash(frame)] = callers  # an identity reused by a later frame is set again at its call
        key = (callers, filename, _line(frame, code), code.co_name == LAMBDA)
        leaf = nodes.get(key) or self._new_node(key)
        leaves = self._leaves
        if leaf not in leaves:
            if len(leaves) >= self.max_stacks:
                self.overflowed = True
                return
            leaves.add(leaf)


def profiled(collector: Any, func: Callable[[], T]) -> T:
    """Run ``func`` (a test phase) with ``collector``'s profile function set, in this thread and in
    the threads it starts, and this call's frame as the collector's boundary (stacks start below it)."""
    collector._boundary = sys._getframe()
    threading.setprofile(collector._profile)
    sys.setprofile(collector._profile)
    try:
        return func()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        collector._boundary = None


class ExecGate:
    """A profile function switched on while a project module's code runs, and off while another
    module's does. A module's import runs its code through ``exec`` (importlib, pytest's assertion
    rewriter, runpy, zipimport alike), with the module's namespace as globals: ``builtins.exec`` is
    wrapped while the gate is open, and the module's ``__file__`` tells whose code it runs. Code run
    by a project module (the functions it calls) is traced; a library it imports is not."""

    def __init__(self, is_project: ProjectTest, profile: Callable[..., Any]) -> None:
        self.is_project, self.profile = is_project, profile
        self._real: Callable[..., Any] = builtins.exec
        self._wrapper = self._exec  # one bound method, to put in place and to find there again
        self._on = False  # whether the profile function is set now
        self._judged: dict[str, bool] = {}

    def open(self) -> None:
        builtins.exec = self._wrapper  # type: ignore[assignment]

    def close(self) -> None:
        if builtins.exec is self._wrapper:  # type: ignore[comparison-overlap]
            builtins.exec = self._real
        if self._on:
            sys.setprofile(None)
            self._on = False

    def _exec(self, source: Any, *args: Any, **kwargs: Any) -> None:
        __tracebackhide__ = True  # noqa: F841  (pytest leaves this frame out of tracebacks)
        given = args[0] if args else kwargs.get("globals")
        if given is None:  # exec(code): the caller's namespaces, as the builtin would take them
            caller = sys._getframe(1)
            local = args[1] if len(args) > 1 else kwargs.get("locals")
            given = caller.f_globals
            args = (given, caller.f_locals if local is None else local)
            kwargs = {k: v for k, v in kwargs.items() if k not in ("globals", "locals")}
        module = given.get("__file__") if given.__class__ is dict else None
        wanted = module.__class__ is str and self._project(module)
        if wanted is self._on:
            return self._real(source, *args, **kwargs)
        self._on = wanted
        sys.setprofile(self.profile if wanted else None)
        try:
            return self._real(source, *args, **kwargs)
        finally:
            self._on = not wanted
            sys.setprofile(None if wanted else self.profile)

    def _project(self, module: str) -> bool:
        judged = self._judged.get(module)
        if judged is None:
            judged = self._judged[module] = self.is_project(module)
        return judged


def _line(frame: Any, code: Any) -> int:
    """The frame's line, except 0 for a module's own code: its lines run inside a decorator or a
    class statement as often as not, and a module frame must read as ``<module>`` (import time), not
    as the def whose decorator it is executing."""
    return 0 if code.co_name == "<module>" else frame.f_lineno


class MonitoredImports(Tracer):
    """The import window's tracer on ``sys.monitoring`` (3.12+): the calls ``Tracer`` records while
    modules are imported, in the thread that opened the window, without a profile function. Code
    outside the project is disabled at its first event, so pytest's assertion rewriting of every test
    module (its heaviest work while collecting) runs at full speed; project code never is.

    It starts on the profile function, as on 3.11, while the initial conftests and plugins load, and
    moves to ``sys.monitoring`` when collection starts (``monitor``): a conftest or plugin claiming a
    tool id as it loads must find it free. Its tool id is one no convention names (4, then 3); when
    both are held, the window stays on the profile function."""

    MECHANISM = "sys.monitoring"
    TOOL_IDS = (4, 3)
    tool: int | None = None

    def monitor(self) -> None:
        """Go on recording on ``sys.monitoring`` instead of the profile function."""
        monitoring = sys.monitoring
        events = monitoring.events
        tool = next((t for t in self.TOOL_IDS if monitoring.get_tool(t) is None), None)
        if tool is None or not self._recording or self.tool is not None:
            return
        self.tool = tool
        self._gate.close()
        monitoring.use_tool_id(self.tool, "fastci evidence (imports)")
        self._thread = threading.get_ident()
        self._disable = monitoring.DISABLE
        monitoring.register_callback(self.tool, events.PY_START, self._started)
        monitoring.register_callback(self.tool, events.PY_RESUME, self._started)
        monitoring.register_callback(self.tool, events.PY_THROW, self._thrown)
        monitoring.restart_events()  # what an earlier window disabled with this id may be this project's
        monitoring.set_events(self.tool, events.PY_START | events.PY_RESUME | events.PY_THROW)

    def stop(self) -> set[RawStack]:
        if self.tool is None:
            return super().stop()
        monitoring = sys.monitoring
        monitoring.set_events(self.tool, 0)
        for event in (monitoring.events.PY_START, monitoring.events.PY_RESUME, monitoring.events.PY_THROW):
            monitoring.register_callback(self.tool, event, None)
        monitoring.free_tool_id(self.tool)
        self.tool = None
        return self.end_test()

    def _is_project(self, filename: str) -> bool:
        keep = self._project.get(filename)
        if keep is None:
            keep = self._project[filename] = self.is_project(filename)
        return keep

    def _started(self, code: Any, offset: int) -> Any:
        if not self._is_project(code.co_filename):
            return self._disable
        if self._recording and threading.get_ident() == self._thread:
            self._record(sys._getframe(1), code)
        return None

    def _thrown(self, code: Any, offset: int, exception: BaseException) -> None:
        if self._is_project(code.co_filename) and self._recording and threading.get_ident() == self._thread:
            self._record(sys._getframe(1), code)


def import_tracer(is_project: ProjectTest, **options: Any) -> Tracer:
    """The tracer for the import window this interpreter runs cheapest (``start`` and ``stop``)."""
    return MonitoredImports(is_project, **options) if hasattr(sys, "monitoring") else Tracer(is_project, **options)
