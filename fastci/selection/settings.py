"""A repository's own fastci settings: the ``[tool.fastci]`` table of its ``pyproject.toml``.

```toml
[tool.fastci]
always = ["tests/test_smoke.py::*", "tests/e2e/*"]   # node-id patterns never deselected
inert = ["benchmarks/**", "*.ipynb"]                 # paths whose changes change no test
build = {"csrc/*" = "pkg/_C*", "kernels/*.cu" = "pkg/kernels/_ops*"}  # native source -> extensions
```

``always`` is read by the CI job (``pytest --fastci-select``), ``inert`` and ``build`` by change
analysis, from the commit being analysed: a change to a source the build map names selects the tests
whose imports reach the extension modules built from it (and is a hardware-path change).

A key fastci does not know, or a value of the wrong type, is refused naming the key: a typo must
not quietly turn a safety net off.
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KNOWN_KEYS = ("always", "inert", "build")


class SettingsError(ValueError):
    """The ``[tool.fastci]`` table is malformed; the message names the file, the key and the reason."""


@dataclass(frozen=True)
class RepoSettings:
    always: tuple[str, ...] = ()  # fnmatch patterns of pytest node ids
    inert: tuple[str, ...] = ()  # fnmatch patterns of repository paths
    build: tuple[tuple[str, str], ...] = ()  # (native source pattern, extension module path pattern)

    def extensions_of(self, path: str) -> tuple[str, ...]:
        """The extension-module patterns the build map says ``path`` is compiled into."""
        return tuple(extension for source, extension in self.build if fnmatch.fnmatchcase(path, source))

    def always_runs(self, node_id: str) -> bool:
        return any(fnmatch.fnmatchcase(node_id, pattern) for pattern in self.always)

    def is_inert(self, path: str) -> bool:
        return any(fnmatch.fnmatchcase(path, pattern) for pattern in self.inert)


def load(root: Path) -> RepoSettings:
    """The settings in ``root/pyproject.toml`` (defaults when there is no file or no table)."""
    path = Path(root) / "pyproject.toml"
    try:
        return from_text(path.read_text(), str(path))
    except FileNotFoundError:
        return RepoSettings()


def from_text(text: str, where: str = "pyproject.toml") -> RepoSettings:
    """The settings in the text of a ``pyproject.toml``."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"{where}: not valid TOML ({error})") from None
    return parse(document.get("tool", {}).get("fastci", {}), where)


def parse(table: Any, where: str = "pyproject.toml") -> RepoSettings:
    if not isinstance(table, dict):
        raise SettingsError(f"{where}: [tool.fastci] must be a table")
    unknown = sorted(set(table) - set(KNOWN_KEYS))
    if unknown:
        raise SettingsError(
            f"{where}: [tool.fastci] key(s) {', '.join(unknown)}: unknown (known: {', '.join(KNOWN_KEYS)})"
        )
    lists = {}
    for key, what in (("always", "pytest node-id patterns"), ("inert", "path patterns")):
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
            raise SettingsError(f"{where}: [tool.fastci] {key}: must be a list of {what} (got {value!r})")
        lists[key] = tuple(value)
    build = table.get("build", {})
    if not isinstance(build, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and k and v for k, v in build.items()
    ):
        raise SettingsError(
            f"{where}: [tool.fastci] build: must be a table of source patterns to extension-module patterns "
            f'(e.g. "csrc/*" = "pkg/_C*"; got {build!r})'
        )
    return RepoSettings(**lists, build=tuple(sorted(build.items())))
