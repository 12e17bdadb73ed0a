"""Files a test reads: the data, configs and fixtures under the repository its outcome depends on.

Python's audit hooks (PEP 578) see every ``open`` (``open()``, ``pathlib``, ``importlib.resources``
and most libraries' loaders go through it), whatever code makes the call. A hook cannot be removed
once added, so one hook per process records into whichever recorder is active: the current test,
or, while modules are imported, the module being imported (the innermost ``<module>`` frame of a
project file on the stack): a file read at import belongs to every test that imports that module.
Likewise a file read while a project fixture is set up belongs to every test using the fixture: a
session or module fixture runs once, inside the first test that asks for it.

Only files under the project root count, and not its Python sources (evidence of code already says
what ran), nor virtualenvs, ``.git`` or fastci's own data dir. Writes are left out: a file a test
writes is its output, not its input.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_SKIPPED_SUFFIXES = (".py", ".pyc", ".pyo", ".pyi")
_SKIPPED_DIRS = (".git", "__pycache__", ".pytest_cache", ".hypothesis", ".fastci", ".tox", ".nox")


class Reads:
    """Project files opened for reading, by test index and by imported module."""

    def __init__(self, root: Path, cwd: Path, excluded: tuple[str, ...] = ()) -> None:
        self.root = os.path.realpath(root)
        self.cwd = str(cwd)
        self.excluded = tuple(os.path.realpath(d) + os.sep for d in excluded)
        self.by_test: dict[int, set[str]] = {}
        self.by_module: dict[str, set[str]] = {}
        self.by_fixture: dict[str, set[str]] = {}  # by fixture unit (path::qualname)
        self.test: int | None = None  # the test whose phases run now
        self.importing = False  # the import window is open
        self.fixture: str | None = None  # the project fixture being set up now, if any
        self.module_of: Callable[[Any], str | None] = lambda frame: None  # set with the window
        self.disabled = False  # FASTCI_EVIDENCE_READS=0: nothing recorded (reads are then unknown, not empty)
        self._relpaths: dict[str, str | None] = {}

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event != "open" or (self.test is None and not self.importing):
            return
        path, mode, flags = args
        if mode is not None and not any(c in mode for c in "r+"):
            return
        if mode is None and flags & _WRITE_FLAGS and not flags & os.O_RDWR:
            return
        relative = self._relative(path)
        if relative is None:
            return
        if self.test is not None:
            self.by_test.setdefault(self.test, set()).add(relative)
            if self.fixture is not None:
                self.by_fixture.setdefault(self.fixture, set()).add(relative)
        else:
            module = self.module_of(sys._getframe(1))
            if module is not None:
                self.by_module.setdefault(module, set()).add(relative)

    def _relative(self, path: Any) -> str | None:
        if isinstance(path, int):
            return None  # a file descriptor: opened already
        text = os.fsdecode(path) if isinstance(path, (bytes, os.PathLike)) else str(path)
        found = self._relpaths.get(text, ...)
        if found is not ...:
            return found  # type: ignore[return-value]
        real = os.path.realpath(os.path.join(self.cwd, text))
        relative = os.path.relpath(real, self.root)
        parts = relative.split(os.sep)
        keep = not (
            relative.startswith("..")
            or os.path.isabs(relative)
            or real.startswith(self.excluded)
            or real.endswith(_SKIPPED_SUFFIXES)
            or any(part in _SKIPPED_DIRS or part.endswith(("site-packages", ".egg-info")) for part in parts[:-1])
            or not os.path.isfile(real)
        )
        result = relative.replace(os.sep, "/") if keep else None
        self._relpaths[text] = result
        return result


_ACTIVE: list[Reads] = []


def install(reads: Reads) -> None:
    """Make ``reads`` the process's recorder (one audit hook per process, added the first time).
    ``FASTCI_EVIDENCE_READS=0`` records nothing (evidence then says reads were not recorded, and a
    changed data file runs everything): for measuring what recording costs."""
    if os.environ.get("FASTCI_EVIDENCE_READS", "1") == "0":
        reads.disabled = True
        return
    if not _ACTIVE:
        sys.addaudithook(_dispatch)
    _ACTIVE[:] = [reads]


def _dispatch(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _ACTIVE:
        _ACTIVE[0].hook(event, args)


def importing_module(is_project: Callable[[str], str | None]) -> Callable[[Any], str | None]:
    """A function giving, for a frame, the project module being imported there (the innermost
    ``<module>`` frame of a project file above it), as ``is_project`` names the file."""

    def module_of(frame: Any) -> str | None:
        while frame is not None:
            code = frame.f_code
            if code.co_name == "<module>":
                relative = is_project(code.co_filename)
                if relative is not None:
                    return relative
            frame = frame.f_back
        return None

    return module_of
