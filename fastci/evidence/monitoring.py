"""Exact evidence on ``sys.monitoring`` (PEP 669, Python 3.12+): the calls that
``fastci.evidence.tracing.Tracer`` records with ``sys.setprofile``, without its cost.

A profile function is called for every call and return of every function, C functions included,
project code or not, and on 3.11 it puts every bytecode on the interpreter's slow path.
``sys.monitoring`` calls back only for the events asked for, and a callback that returns
``sys.monitoring.DISABLE`` switches its event off at that code location: from then on the
interpreter runs that location as if nobody were watching. How this collector uses that:

- The events are PY_START, PY_RESUME and PY_THROW: the three that ``sys.setprofile`` reports as
  "call" (a function starting, a generator or coroutine resuming, an exception thrown into one),
  so it records what the setprofile tracer records, at the same lines.
- Whether code is the project's is decided per file (``co_filename``), so per code object and
  never per test. Code outside the project gets DISABLE at its first event and costs nothing in
  this or any later test. Project code is never disabled: outside a test's phases its callback
  returns without recording, so no event is lost when recording resumes, and no test needs
  ``sys.monitoring.restart_events`` (which wakes every disabled location). PY_THROW cannot be
  disabled; it is rare.
- One tool id (``PROFILER_ID``, else any free one) with its events is held from construction to
  ``close``. Construction calls ``restart_events``: a location stays disabled after its tool is
  freed and registered again, and what an earlier tracer found outside its project may be inside
  this one's (other tools' disabled locations wake too, and fire once more). Within one tracer
  nothing is restarted, so pytest's own code costs its first events once per session.
- Events are per interpreter, the profile function was per thread. So a callback records only in
  the thread inside ``run`` and in threads started while one ran (``threading.setprofile``
  installs a hook there that marks its thread and removes itself), as the setprofile tracer does.
- The stack tree, the dimension points and the limits are ``Tracer``'s own code (``_record``).

Across interpreters the code itself differs, not the collectors: 3.12 inlines list, dict and set
comprehensions (PEP 709: no frame of their own), and 3.12 and 3.13 close some suspended generators
without resuming them, so those frames appear in 3.11's evidence only.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

from fastci.evidence.tracing import ProjectTest, T, Tracer

TOOL_NAME = "fastci evidence"
USER_TOOL_IDS = range(6)  # 6 and 7 are sys.settrace's and sys.setprofile's own


class NoToolId(RuntimeError):
    """Every sys.monitoring tool id is taken by another tool (a debugger, coverage, a profiler)."""


class MonitoringTracer(Tracer):
    MECHANISM = "sys.monitoring"

    def __init__(self, is_project: ProjectTest, **options: Any) -> None:
        super().__init__(is_project, **options)
        self._local = threading.local()  # .traced: this thread's calls count (dies with the thread)
        monitoring = sys.monitoring
        events = monitoring.events
        self._disable = monitoring.DISABLE
        self.tool: int | None = _acquire_tool_id()
        self._events = {
            events.PY_START: self._started,
            events.PY_RESUME: self._started,
            events.PY_THROW: self._thrown,
        }
        for event, callback in self._events.items():
            monitoring.register_callback(self.tool, event, callback)
        # What an earlier tracer disabled (its non-project code) stays disabled through free_tool_id
        # and a new registration; this tracer's project may differ.
        monitoring.restart_events()
        monitoring.set_events(self.tool, sum(self._events))

    def close(self) -> None:
        """Stop the events and release the tool id (3.12's ``free_tool_id`` leaves both set)."""
        if self.tool is None:
            return
        monitoring = sys.monitoring
        monitoring.set_events(self.tool, 0)
        for event in self._events:
            monitoring.register_callback(self.tool, event, None)
        monitoring.free_tool_id(self.tool)
        self.tool = None

    def run(self, func: Callable[[], T]) -> T:
        """Run ``func`` (a test phase) traced into the current test's stacks."""
        if self.tool is None:
            raise RuntimeError("MonitoringTracer.run after close")
        self._boundary = sys._getframe()
        threading.setprofile(self._thread_started)
        self._local.traced = True
        try:
            return func()
        finally:
            self._local.traced = False
            threading.setprofile(None)  # type: ignore[arg-type]
            self._boundary = None

    def _thread_started(self, frame: Any, event: str, arg: Any) -> None:
        # Threads started during a phase count for the test for as long as they run.
        self._local.traced = True
        sys.setprofile(None)

    def _started(self, code: Any, offset: int) -> Any:
        filename = code.co_filename
        keep = self._project.get(filename)
        if keep is None:
            keep = self._project[filename] = self.is_project(filename)
        if not keep:
            return self._disable
        if self._recording and getattr(self._local, "traced", False):
            self._record(sys._getframe(1), filename)
        return None

    def _thrown(self, code: Any, offset: int, exception: BaseException) -> None:
        filename = code.co_filename
        keep = self._project.get(filename)
        if keep is None:
            keep = self._project[filename] = self.is_project(filename)
        if keep and self._recording and getattr(self._local, "traced", False):
            self._record(sys._getframe(1), filename)


def _acquire_tool_id() -> int:
    monitoring = sys.monitoring
    for tool in dict.fromkeys((monitoring.PROFILER_ID, *USER_TOOL_IDS)):
        try:
            monitoring.use_tool_id(tool, TOOL_NAME)
        except ValueError:  # taken
            continue
        return tool
    taken = ", ".join(f"{tool}: {monitoring.get_tool(tool)!r}" for tool in USER_TOOL_IDS)
    raise NoToolId(
        f"sys.monitoring has no free tool id for tracing (taken: {taken}); "
        "run without the tools holding them, or use --fastci-evidence-method sampling"
    )


def new_tracer(is_project: ProjectTest, **options: Any) -> Tracer:
    """The tracer this interpreter runs cheapest: on ``sys.monitoring`` (3.12+), else on
    ``sys.setprofile``. Both record the same stacks; close it (or use ``with``) when done."""
    if hasattr(sys, "monitoring"):
        return MonitoringTracer(is_project, **options)
    return Tracer(is_project, **options)
