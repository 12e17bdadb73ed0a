"""py-spy raw output -> folded stacks of the project's own code units (pure functions).

The format (the contract with the evidence-graph processor): one string per distinct stack,
root first, frames joined by ``;``, each frame ``QUALNAME (RELPATH:LINE)``:

    test_a (tests/test_mod.py:7);Model.forward (pkg/model.py:12);slow_add (pkg/mod.py:4)

RELPATH is relative to the project root with ``/`` separators; QUALNAME is the code unit
``fastci.selection.units.Units`` puts at LINE in that file (not py-spy's function name, so a
lambda or a comprehension counts as the function that contains it, as change analysis sees it).
Only frames of project files (``.py`` under the root) are kept, in order: the stdlib, installed
packages (also a virtualenv inside the root), frozen modules and ``<string>`` code go. fastci's
own frames go with them unless fastci is the project; its instrumentation never shows (the
pytest plugin keeps what is under a test's marker, ``fastci collect`` wraps with ``-c`` code).

What py-spy 0.4 prints with ``record --format raw --full-filenames``, one line per stack:

    <module> (/p/busy.py:18);Model.forward (/p/busy.py:10);slow_add (/p/busy.py:5) 41
     2                                                   (an empty stack: no Python frame)
    process 11:"python -c a; b";process 12:"python x.py";<module> (/p/x.py:3) 7   (--subprocesses)
    thread (8079): MainThread;<module> (/p/x.py:3) 15                              (--threads)
    <module> (x.py);slow_add (busy.py) 21                                          (--nolineno)

``process`` and ``thread`` prefixes are not code and are skipped (a command line may hold
``;``); frames without a line number cannot be placed in a unit and are dropped later.
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from fastci.evidence.sources import ImportStatement, Source, SourceCache
from fastci.selection.units import LAMBDA, Units

# A frame as tracers record it: (code's filename, line), and whether its code is a lambda's (a def and
# a lambda can share a line; see ``Units.unit_at``).
RawFrame = tuple[str, int | None] | tuple[str, int | None, bool]


class Frame(NamedTuple):
    name: str  # py-spy's function name, kept for messages; the unit comes from the source
    path: str  # the code's filename as the interpreter knows it (absolute with --full-filenames)
    line: int | None


_FRAME = re.compile(r"^(?P<name>.*) \((?P<path>.*?)(?::(?P<line>\d+))?\)$")
_PROCESS = re.compile(r'process \d+:".*?"(?:;|$)')
_THREAD = re.compile(r"thread \([^)]*\): [^;]*(?:;|$)")
# Interpreter code that can live inside a project root: a virtualenv's packages, a conda or
# pyenv install's stdlib.
_NOT_PROJECT = re.compile(r"(?:^|/)(?:site-packages|dist-packages|lib/python\d+(?:\.\d+)?)(?:/|$)")


def parse_raw(text: str) -> list[tuple[list[Frame], int]]:
    """Each line of py-spy's raw output as (frames root first, sample count); lines that are not
    a stack and a count are skipped."""
    parsed = []
    for line in text.splitlines():
        body, _, count = line.rpartition(" ")
        if not count.isdigit() or int(count) < 1:
            continue
        body = _strip_pseudo_frames(body)
        frames = [frame for part in body.split(";") if part and (frame := parse_frame(part)) is not None]
        parsed.append((frames, int(count)))
    return parsed


def _strip_pseudo_frames(body: str) -> str:
    while True:
        match = _PROCESS.match(body) or _THREAD.match(body)
        if match is None:
            return body
        body = body[match.end() :]


def parse_frame(text: str) -> Frame | None:
    """``name (path:line)`` (or ``name (path)`` without line numbers) as a Frame."""
    match = _FRAME.match(text)
    if match is None:
        return None
    line = match["line"]
    return Frame(match["name"], match["path"], int(line) if line else None)


class UnitsCache:
    """What each file path means for a project: its relative path (None when it is not project
    code) and its parsed units. Files are read once; keep one cache per collection."""

    def __init__(self, exclude_dirs: Iterable[str] | None = None, sources: SourceCache | None = None) -> None:
        self.sources = sources or SourceCache(None)  # where each file's parse may be kept
        prefixes = exclude_dirs if exclude_dirs is not None else _virtualenvs()
        self.exclude_dirs = tuple(os.path.realpath(d) + os.sep for d in prefixes)
        self._relpaths: dict[tuple[str, str, str], str | None] = {}
        self._sources: dict[str, Source] = {}
        self._roots: dict[str, str] = {}
        self._folded: dict[tuple[str, str], dict[tuple[str, int], str | None]] = {}

    def relpath(self, path: str, root: str | Path, cwd: str | Path | None = None) -> str | None:
        """``path`` relative to ``root`` (posix), or None when it is not the project's own code.
        A relative path is taken from ``cwd`` (the profiled process's directory; default root)."""
        key = (path, str(root), str(cwd))
        if key not in self._relpaths:
            self._relpaths[key] = self._project_relpath(path, self._real_root(root), cwd if cwd is not None else root)
        return self._relpaths[key]

    def folded_frames(self, root: str | Path, cwd: str | Path | None = None) -> dict[tuple[str, int], str | None]:
        """(path, line) -> the frame as folded stacks write it, ``QUALNAME (RELPATH:LINE)``, or None
        when it is not the project's own code; filled by ``folded_stack``. A session's stacks share
        most of their frames, so each is resolved once."""
        return self._folded.setdefault((str(root), str(cwd)), {})

    def _real_root(self, root: str | Path) -> str:
        if str(root) not in self._roots:
            self._roots[str(root)] = os.path.realpath(root)
        return self._roots[str(root)]

    def _project_relpath(self, path: str, root: str, cwd: str | Path) -> str | None:
        if not path or "\0" in path or path.startswith("<") or not path.endswith((".py", ".pyw")):
            return None  # frozen modules, <string>, native libraries, a path py-spy read torn from memory
        real = os.path.realpath(os.path.join(cwd, path))
        if real.startswith(self.exclude_dirs):
            return None
        relative = os.path.relpath(real, root)
        if relative.startswith(".." + os.sep) or relative == ".." or os.path.isabs(relative):
            return None
        relative = relative.replace(os.sep, "/")
        return None if _NOT_PROJECT.search(relative) else relative

    def units(self, root: str | Path, relpath: str) -> Units | None:
        """The units of a project file; None when it cannot be read or parsed (then no change
        analysis can name its units either, so its frames are dropped)."""
        return self._read(os.path.join(self._real_root(root), relpath)).units

    def import_statements(self, path: str | Path) -> tuple[ImportStatement, ...]:
        """Every import statement of a file, at any depth; none when it cannot be parsed. Read
        from the same parse as its units: parsing is most of what either costs."""
        return self._read(str(path)).imports

    def _read(self, path: str) -> Source:
        source = self._sources.get(path)
        if source is None:
            source = self._sources[path] = self.sources.read(path)
        return source


def _virtualenvs() -> set[str]:
    """This interpreter's virtualenv (its scripts may sit inside the project root)."""
    return {p for p in (sys.prefix, sys.exec_prefix) if p != sys.base_prefix}


def to_project_stack(
    frames: Iterable[Frame], root: str | Path, units_cache: UnitsCache, cwd: str | Path | None = None
) -> str | None:
    """The folded stack of the project's frames in ``frames`` (root first), or None if none is."""
    return folded_stack(((frame.path, frame.line, frame.name == LAMBDA) for frame in frames), root, units_cache, cwd)


def folded_stack(
    frames: Iterable[RawFrame], root: str | Path, units_cache: UnitsCache, cwd: str | Path | None = None
) -> str | None:
    """``to_project_stack`` of (path, line) pairs, or (path, line, runs a lambda), as tracers record them."""
    fold = frame_folder(root, units_cache, cwd)
    return ";".join(part for frame in frames if (part := fold(frame)) is not None) or None


def frame_folder(
    root: str | Path, units_cache: UnitsCache, cwd: str | Path | None = None
) -> Callable[[RawFrame], str | None]:
    """A raw frame -> the frame as folded stacks write it, or None when it is not the project's."""
    known = units_cache.folded_frames(root, cwd)

    def fold(frame: RawFrame) -> str | None:
        part = known.get(frame, _UNSEEN)
        if part is _UNSEEN:
            part = known[frame] = _fold(*frame, root=root, units_cache=units_cache, cwd=cwd)
        return part  # type: ignore[return-value]

    return fold


_UNSEEN = object()


def _fold(
    path: str,
    line: int | None,
    in_lambda: bool = False,
    *,
    root: str | Path,
    units_cache: UnitsCache,
    cwd: str | Path | None,
) -> str | None:
    relpath = None if line is None else units_cache.relpath(path, root, cwd)
    units = None if relpath is None else units_cache.units(root, relpath)
    return None if units is None else f"{units.unit_at(line, in_lambda)} ({relpath}:{line})"  # type: ignore[arg-type]


def merge(stacks: Iterable[tuple[str | None, int]]) -> list[tuple[str, int]]:
    """Identical stacks summed, empty ones dropped; most samples first, then by stack, so the
    same samples always give the same list."""
    counts: Counter[str] = Counter()
    for stack, count in stacks:
        if stack:
            counts[stack] += count
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def project_stacks(
    raw: str, root: str | Path, units_cache: UnitsCache | None = None, cwd: str | Path | None = None
) -> list[tuple[str, int]]:
    """py-spy raw output straight to merged project stacks."""
    cache = units_cache or UnitsCache()
    return merge((to_project_stack(frames, root, cache, cwd), count) for frames, count in parse_raw(raw))


def units_of(stack: str) -> list[tuple[str, str]]:
    """The (relpath, qualname) of each frame of a folded stack, root first."""
    units = []
    for part in stack.split(";"):
        frame = parse_frame(part)
        if frame is not None:
            units.append((frame.path, frame.name))
    return units
