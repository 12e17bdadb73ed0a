"""Which project modules a test depends on through imports: the static import closure of its file.

Code that runs while a module is imported (a registration decorator's body, a dispatch table being
filled) runs once per process, under whichever test file imported the module first; every test
whose file imports the module, directly or through other modules, depends on it all the same. So
the closure is read from the source, not from what one session happened to execute: every
``import`` and ``from ... import`` anywhere in the file (a function-level import counts too: it may
run), resolved to files of the project (the repository root and ``src/``, and a test file's own
directory, where pytest's default import mode finds sibling helpers), followed through those files,
plus the ``conftest.py`` files pytest loads for it (its directory and every parent up to the root).

A module the source names through ``importlib`` or a string is not seen; the selection's other
rules (and the import-time stacks of the modules that are seen) still hold for it.

The same walk gives the third-party distributions a test file depends on: the installed
distributions of the top-level modules its closure imports (``importlib.metadata``), and theirs in
turn (their declared requirements), so a pin of numpy reaches a test that imports only scipy.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.metadata
import os
import re
import sys
from pathlib import Path

import orjson

from fastci.core import config
from fastci.evidence.stacks import UnitsCache
from fastci.selection.dependencies import normalize

SOURCE_ROOTS = (".", "src")


class ImportGraph:
    """Project-relative paths of the modules each file imports, transitively, with a cache."""

    def __init__(self, root: Path, units_cache: UnitsCache | None = None) -> None:
        self.root = Path(root).resolve()
        self.statements = (units_cache or UnitsCache()).import_statements  # one parse per file and session
        self._closures: dict[Path, frozenset[str]] = {}
        self._imported: dict[Path, tuple[Path, ...]] = {}
        self._external: dict[Path, frozenset[str]] = {}
        self._distributions: dict[str, list[str]] | None = None
        self._requires: dict[str, frozenset[str]] = {}

    def distributions_of(self, modules: frozenset[str]) -> frozenset[str]:
        """The distributions (normalized names) the project ``modules`` import, with their requirements."""
        if self._distributions is None:
            self._distributions = installed_packages()
        found: set[str] = set()
        for module in modules:
            for name in self._external_names(self.root / module):
                found.update(normalize(d) for d in self._distributions.get(name, ()))
        pending = list(found)
        while pending:
            for required in self._requirements(pending.pop()):
                if required not in found:
                    found.add(required)
                    pending.append(required)
        return frozenset(found)

    def _requirements(self, distribution: str) -> frozenset[str]:
        if distribution not in self._requires:
            try:
                declared = importlib.metadata.requires(distribution) or []
            except importlib.metadata.PackageNotFoundError:
                declared = []
            self._requires[distribution] = frozenset(
                normalize(_REQUIREMENT_NAME.match(r)[0])
                for r in declared
                if "extra ==" not in r and _REQUIREMENT_NAME.match(r)
            )
        return self._requires[distribution]

    def closure_of_test_file(self, path: Path) -> frozenset[str]:
        """The modules a test file depends on: its own closure and its conftests' (the file itself too)."""
        path = Path(path).resolve()
        found = set(self._closure(path))
        directory = path.parent
        while True:
            conftest = directory / "conftest.py"
            if conftest.is_file():
                found |= self._closure(conftest.resolve())
            if directory == self.root or self.root not in directory.parents:
                break
            directory = directory.parent
        return frozenset(found)

    def _closure(self, start: Path) -> frozenset[str]:
        done = self._closures.get(start)
        if done is not None:
            return done
        seen: set[Path] = set()
        pending = [start]
        while pending:
            path = pending.pop()
            if path in seen:
                continue
            seen.add(path)
            pending.extend(p for p in self._imported_files(path) if p not in seen)
        closure = frozenset(str(p.relative_to(self.root)) for p in seen if self.root in p.parents)
        self._closures[start] = closure
        return closure

    def _imported_files(self, path: Path) -> tuple[Path, ...]:
        """The project files ``path`` imports directly (each package ``__init__`` on the way included)."""
        if path in self._imported:
            return self._imported[path]
        root, package = self.root, _package_of(path, self.root)
        found: list[Path] = []
        for node in self.statements(path):
            if not node.is_from:
                for name in node.names:
                    found += _resolve(name.split("."), path, root)
                continue
            if node.level:  # relative: from the file's package, up level - 1
                if package is None:
                    continue
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if package else []
                parts = base + (node.module.split(".") if node.module else [])
            else:
                parts = node.module.split(".") if node.module else []
            found += _resolve(parts, path, root)
            for name in node.names:  # ``from pkg import sub``: sub may be a module
                if name != "*":
                    found += _resolve([*parts, name], path, root, only_last=True)
        imported = self._imported[path] = tuple(dict.fromkeys(found))
        return imported

    def _external_names(self, path: Path) -> frozenset[str]:
        """Top-level names of the modules ``path`` imports that are neither the project's nor the
        standard library's: third-party packages."""
        if path in self._external:
            return self._external[path]
        names: set[str] = set()
        for node in self.statements(path):
            if not node.is_from:
                names.update(name.split(".")[0] for name in node.names)
            elif node.module and not node.level:
                names.add(node.module.split(".")[0])
        external = frozenset(
            name for name in names if name not in sys.stdlib_module_names and not _resolve([name], path, self.root)
        )
        self._external[path] = external
        return external


_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def installed_packages(cache_dir: Path | None = None) -> dict[str, list[str]]:
    """``importlib.metadata.packages_distributions()`` (top-level module -> its distributions),
    kept on disk per environment: it reads every installed distribution's list of files, a good part
    of what evidence adds to a short suite, and an environment rarely changes between two runs. The
    key is ``sys.path`` and the modification time of each of its directories: installing, upgrading
    or removing a distribution adds or removes its metadata directory there."""
    directory = cache_dir or config.cache_dir()
    stamps = [(entry, os.stat(entry).st_mtime_ns) for entry in sys.path if entry and os.path.isdir(entry)]
    key = hashlib.blake2b(repr(stamps).encode(), digest_size=10).hexdigest()
    cached = directory / f"distributions-{key}.json"
    try:
        return orjson.loads(cached.read_bytes())
    except (OSError, ValueError):
        pass
    found = {name: list(dists) for name, dists in importlib.metadata.packages_distributions().items()}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(orjson.dumps(found))
        partial.replace(cached)  # whole or absent: another session may read it meanwhile
    except OSError:
        pass  # a read-only home: computed again next time
    return found


def _resolve(parts: list[str], importer: Path, root: Path, only_last: bool = False) -> list[Path]:
    """The files ``import a.b.c`` executes: a/__init__.py, a/b/__init__.py, a/b/c.py (or its __init__)."""
    if not parts:
        return []
    for base in (*(root / r for r in SOURCE_ROOTS), importer.parent):
        files: list[Path] = []
        directory = base
        for index, part in enumerate(parts):
            module, package = directory / f"{part}.py", directory / part / "__init__.py"
            last = index == len(parts) - 1
            if package.is_file():
                if last or not only_last:
                    files.append(package.resolve())
                directory = directory / part
            elif module.is_file() and last:
                files.append(module.resolve())
            elif last and (extension := _extension(directory, part)) is not None:
                files.append(extension)  # a compiled module (built from native source)
            elif (directory / part).is_dir() and not last:  # a namespace package
                directory = directory / part
            else:
                files = []
                break
        if files:
            return [f for f in files if root in f.parents]
    return []


def _extension(directory: Path, name: str) -> Path | None:
    """The extension module ``name`` in ``directory`` (``name.cpython-311-x86_64-linux-gnu.so``,
    ``name.abi3.so``, ``name.pyd``), if one is built there."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = directory / f"{name}{suffix}"
        if candidate.is_file():
            return candidate.resolve()
    return None


def _package_of(path: Path, root: Path) -> str | None:
    """The dotted package a file belongs to (by ``__init__.py`` files up from it), or None."""
    parts: list[str] = []
    directory = path.parent
    while (directory / "__init__.py").is_file() and directory != root:
        parts.append(directory.name)
        directory = directory.parent
    return ".".join(reversed(parts)) if parts else ("" if path.parent == root else None)
