"""What evidence reads of the project's source files: each file's units (to name the unit a frame
runs) and its import statements (to follow a test file's imports), from one parse.

Both are kept on disk by the file's content, as pytest keeps the rewritten form of each test module:
they change only when the file's bytes do, and parsing every file again was the largest part of what
evidence added to a short suite. An entry is named by a hash of the bytes and of ``FORMAT``; a file
whose bytes changed is parsed again, and nothing else needs telling that it changed.
"""

from __future__ import annotations

import ast
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import orjson

from fastci.selection.units import Unit, Units, statements

FORMAT = b"units-and-imports 1"  # change it when what is kept, or how a unit is named, changes
KEEP = 50_000  # entries kept on disk; past that the least recently written go


class ImportStatement(NamedTuple):
    """``import a.b`` (module None, names ('a.b',)) or ``from .a import b, c`` (module 'a', level 1)."""

    module: str | None
    names: tuple[str, ...]
    level: int
    is_from: bool


@dataclass(frozen=True)
class Source:
    units: Units | None  # None: the file cannot be read or parsed
    imports: tuple[ImportStatement, ...]


UNREADABLE = Source(None, ())


class SourceCache:
    """Sources read through ``directory`` (``fastci.core.config.cache_dir()/sources``); None keeps nothing."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.written = 0

    def read(self, path: str) -> Source:
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError:
            return UNREADABLE
        entry = self._entry(data)
        if entry is not None:
            try:
                return _loaded(orjson.loads(entry.read_bytes()))
            except (OSError, ValueError, TypeError, KeyError):
                pass
        source = parse(data, path)
        if entry is not None:
            self._keep(entry, source)
        return source

    def prune(self) -> None:
        """Keep the ``KEEP`` entries written last, when this cache wrote any."""
        if not self.written or self.directory is None:
            return
        try:
            entries = [entry for part in os.scandir(self.directory) if part.is_dir() for entry in os.scandir(part)]
            if len(entries) <= KEEP:
                return
            entries.sort(key=lambda entry: entry.stat().st_mtime_ns)
            for entry in entries[: len(entries) - KEEP]:
                os.unlink(entry.path)
        except OSError:
            pass

    def _entry(self, data: bytes) -> Path | None:
        if self.directory is None:
            return None
        key = hashlib.blake2b(FORMAT + b"\0" + data, digest_size=16).hexdigest()
        return self.directory / key[:2] / f"{key}.json"

    def _keep(self, entry: Path, source: Source) -> None:
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            partial = entry.with_suffix(f".{os.getpid()}.tmp")
            partial.write_bytes(orjson.dumps(_document(source)))
            partial.replace(entry)  # whole or absent: another session may read it meanwhile
            self.written += 1
        except OSError:
            pass  # a read-only cache: parsed again next time


def parse(data: bytes, path: str) -> Source:
    try:
        source = data.decode("utf-8", "replace")
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return UNREADABLE
    imports = tuple(
        ImportStatement(None, tuple(alias.name for alias in node.names), 0, False)
        if isinstance(node, ast.Import)
        else ImportStatement(node.module, tuple(alias.name for alias in node.names), node.level, True)
        for node in statements(tree.body)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    )
    return Source(Units.of_tree(tree, source, path, fingerprints=False), imports)


def _document(source: Source) -> dict:
    units = source.units
    return {
        "units": None if units is None else [[u.qualname, u.first_line, u.last_line] for u in units.spans()],
        "imports": [list(statement) for statement in source.imports],
    }


def _loaded(document: dict) -> Source:
    spans = document["units"]
    units = None if spans is None else Units([Unit(q, first, last, "") for q, first, last in spans])
    imports = tuple(
        ImportStatement(m, tuple(names), level, is_from) for m, names, level, is_from in document["imports"]
    )
    return Source(units, imports)
