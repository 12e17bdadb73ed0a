"""JUnit XML (pytest's ``--junitxml``, and most CI test reporters) read as test outcomes.

Streamed with expat, so a file of any size reads in constant memory and every outcome keeps the
line it came from (a bad one is reported as ``FILE:LINE``). A ``<testcase>`` becomes:

- its test id: pytest's node id, rebuilt from ``classname`` and ``name`` (pytest writes
  ``tests.test_mod.TestX`` and ``test_a[1]`` for ``tests/test_mod.py::TestX::test_a[1]``). The
  module is the longest dotted prefix that is a ``.py`` file under ``root``; without the files, the
  parts from the first one named ``Test*`` on are classes (pytest's default ``python_classes``).
  A ``file`` attribute (xunit1) names the module outright;
- its status: ``failed`` with a ``<failure>``, ``error`` with an ``<error>``, ``skipped`` with a
  ``<skipped>``, else ``passed``;
- its duration (``time``) and when it finished: the suite's ``timestamp`` plus the durations of
  the suite's cases up to it (no timestamp: the file's modification time).

Suite and case ``<property>`` elements named ``commit``, ``repo`` or ``run_id`` override the
command line's for the cases under them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from xml.parsers import expat

_PROPERTIES = ("commit", "repo", "run_id")
_CHUNK = 1 << 20


class JUnitError(ValueError):
    """The file is not well-formed XML; the message names the file and line."""


@dataclass
class Case:
    """One ``<testcase>``: where it is in its file, and what it says."""

    line: int
    byte: int  # where it starts in the file
    attributes: dict[str, str]
    status: str = "passed"
    finished: datetime | None = None
    properties: dict[str, str] = field(default_factory=dict)  # its suite's, then its own


@dataclass
class _Suite:
    started: datetime | None
    elapsed: float = 0.0
    properties: dict[str, str] = field(default_factory=dict)


def read_cases(path: Path) -> Iterator[Case]:
    """Every test case of ``path``, in file order."""
    fallback = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    parser = expat.ParserCreate()
    suites: list[_Suite] = []
    ready: list[Case] = []
    case: Case | None = None

    def start(name: str, attributes: dict[str, str]) -> None:
        nonlocal case
        if name == "testsuite":
            outer = suites[-1].properties if suites else {}
            suites.append(_Suite(_timestamp(attributes.get("timestamp")), properties=dict(outer)))
        elif name == "testcase":
            case = Case(parser.CurrentLineNumber, parser.CurrentByteIndex, dict(attributes))
            if suites:
                case.properties.update(suites[-1].properties)
        elif name in ("failure", "error", "skipped") and case is not None:
            order = ("passed", "skipped", "failed", "error")  # an error in teardown after a failure is an error
            if order.index(_STATUS[name]) > order.index(case.status):
                case.status = _STATUS[name]
        elif name == "property" and attributes.get("name") in _PROPERTIES:
            target = case.properties if case is not None else (suites[-1].properties if suites else None)
            if target is not None:
                target[attributes["name"]] = attributes.get("value", "")

    def end(name: str) -> None:
        nonlocal case
        if name == "testcase" and case is not None:
            suite = suites[-1] if suites else _Suite(None)
            suite.elapsed += _seconds(case.attributes.get("time"))
            case.finished = (suite.started or fallback) + timedelta(seconds=suite.elapsed)
            ready.append(case)
            case = None
        elif name == "testsuite" and suites:
            suites.pop()

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    with open(path, "rb") as file:
        while True:
            chunk = file.read(_CHUNK)
            try:
                parser.Parse(chunk, not chunk)
            except expat.ExpatError as error:
                raise JUnitError(f"{path}:{error.lineno}: not JUnit XML ({expat.ErrorString(error.code)})") from None
            yield from ready
            ready.clear()
            if not chunk:
                return


_STATUS = {"failure": "failed", "error": "error", "skipped": "skipped"}


def _timestamp(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)  # pytest writes local time without a zone


def _seconds(text: str | None) -> float:
    try:
        return max(0.0, float(text)) if text else 0.0
    except ValueError:
        return 0.0


def test_id(attributes: dict[str, str], root: Path | None, modules: dict[str, int]) -> str | None:
    """pytest's node id for a test case, or None when it has no name. ``modules``: where the module
    ends in each classname seen so far, kept by the caller across one import (resolving it looks for
    files under ``root``, a few system calls per case otherwise: a class's cases share it)."""
    name = attributes.get("name")
    if not name:
        return None
    classname = attributes.get("classname", "")
    parts = [part for part in classname.split(".") if part] if classname else []
    explicit = attributes.get("file")
    if explicit and explicit.endswith(".py"):
        module = explicit.removesuffix(".py").replace("\\", "/").split("/")
        classes = parts[len(module) :] if parts[: len(module)] == module else []
        return "::".join([explicit.replace("\\", "/"), *classes, name])
    if not parts:
        return name
    split = modules.get(classname)
    if split is None:
        split = modules[classname] = _module_length(parts, root)
    module, classes = parts[:split], parts[split:]
    return "::".join(["/".join(module) + ".py", *classes, name])


_CLASS = re.compile(r"^Test")


def _module_length(parts: list[str], root: Path | None) -> int:
    if root is not None:
        for length in range(len(parts), 0, -1):
            if (root.joinpath(*parts[:length]).with_suffix(".py")).is_file():
                return length
    for index, part in enumerate(parts[1:], start=1):
        if _CLASS.match(part):
            return index
    return len(parts)
