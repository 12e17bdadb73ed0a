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

import ast
import importlib.machinery
import importlib.metadata
import re
import sys
from functools import lru_cache
from pathlib import Path

from fastci.selection.dependencies import normalize

SOURCE_ROOTS = (".", "src")


class ImportGraph:
    """Project-relative paths of the modules each file imports, transitively, with a cache."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self._closures: dict[Path, frozenset[str]] = {}
        self._distributions: dict[str, list[str]] | None = None
        self._requires: dict[str, frozenset[str]] = {}

    def distributions_of(self, modules: frozenset[str]) -> frozenset[str]:
        """The distributions (normalized names) the project ``modules`` import, with their requirements."""
        if self._distributions is None:
            self._distributions = importlib.metadata.packages_distributions()
        found: set[str] = set()
        for module in modules:
            for name in _external_names(self.root / module, self.root):
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
            pending.extend(p for p in _imported_files(path, self.root) if p not in seen)
        closure = frozenset(str(p.relative_to(self.root)) for p in seen if self.root in p.parents)
        self._closures[start] = closure
        return closure


@lru_cache(maxsize=4096)
def _import_statements(path: Path) -> tuple[ast.Import | ast.ImportFrom, ...]:
    """Every import statement of a file, at any depth (one parse per file and session)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return ()
    return tuple(node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))


@lru_cache(maxsize=4096)
def _imported_files(path: Path, root: Path) -> tuple[Path, ...]:
    """The project files ``path`` imports directly (each package ``__init__`` on the way included)."""
    package = _package_of(path, root)
    found: list[Path] = []
    for node in _import_statements(path):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found += _resolve(alias.name.split("."), path, root)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the file's package, up level - 1
                if package is None:
                    continue
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)] if package else []
                parts = base + (node.module.split(".") if node.module else [])
            else:
                parts = node.module.split(".") if node.module else []
            found += _resolve(parts, path, root)
            for alias in node.names:  # ``from pkg import sub``: sub may be a module
                if alias.name != "*":
                    found += _resolve([*parts, alias.name], path, root, only_last=True)
    return tuple(dict.fromkeys(found))


@lru_cache(maxsize=4096)
def _external_names(path: Path, root: Path) -> frozenset[str]:
    """Top-level names of the modules ``path`` imports that are neither the project's nor the
    standard library's: third-party packages."""
    names: set[str] = set()
    for node in _import_statements(path):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return frozenset(name for name in names if name not in sys.stdlib_module_names and not _resolve([name], path, root))


_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


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
