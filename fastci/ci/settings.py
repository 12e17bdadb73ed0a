"""A repository's own fastci settings: the ``[tool.fastci]`` table of its ``pyproject.toml``.

```toml
[tool.fastci]
always = ["tests/test_smoke.py::*", "tests/e2e/*"]   # node-id patterns never deselected
```

A key fastci does not know, or a value of the wrong type, is refused naming the key: a typo must
not quietly turn a safety net off.
"""

from __future__ import annotations

import fnmatch
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KNOWN_KEYS = ("always",)


class SettingsError(ValueError):
    """The ``[tool.fastci]`` table is malformed; the message names the file, the key and the reason."""


@dataclass(frozen=True)
class RepoSettings:
    always: tuple[str, ...] = ()  # fnmatch patterns of pytest node ids

    def always_runs(self, node_id: str) -> bool:
        return any(fnmatch.fnmatchcase(node_id, pattern) for pattern in self.always)


def load(root: Path) -> RepoSettings:
    """The settings in ``root/pyproject.toml`` (defaults when there is no file or no table)."""
    path = Path(root) / "pyproject.toml"
    try:
        document = tomllib.loads(path.read_text())
    except FileNotFoundError:
        return RepoSettings()
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise SettingsError(f"{path}: not valid TOML ({error})") from None
    table = document.get("tool", {}).get("fastci", {})
    return parse(table, str(path))


def parse(table: Any, where: str = "pyproject.toml") -> RepoSettings:
    if not isinstance(table, dict):
        raise SettingsError(f"{where}: [tool.fastci] must be a table")
    unknown = sorted(set(table) - set(KNOWN_KEYS))
    if unknown:
        raise SettingsError(
            f"{where}: [tool.fastci] key(s) {', '.join(unknown)}: unknown (known: {', '.join(KNOWN_KEYS)})"
        )
    always = table.get("always", [])
    if not isinstance(always, list) or not all(isinstance(p, str) and p for p in always):
        raise SettingsError(
            f"{where}: [tool.fastci] always: must be a list of pytest node-id patterns (got {always!r})"
        )
    return RepoSettings(always=tuple(always))
