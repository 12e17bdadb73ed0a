"""Which distributions a change to dependency pins touches: requirements files, ``pyproject.toml``'s
dependency tables and lock files, compared pin by pin.

A changed pin runs the tests whose imports reach that distribution (``EvidenceEvent.distributions``),
not the whole suite. Anything else in such a file that is not a pin (an index URL, an option, a
line that does not parse as a requirement) is not bounded that way: the caller runs the suite.
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")


def normalize(distribution: str) -> str:
    """A distribution's canonical name (PEP 503): lower case, runs of -_. as one -."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


class Unbounded(ValueError):
    """The file changed in a way that is not a set of pins (the message says what)."""


def requirements(text: str) -> dict[str, str]:
    """Name -> the rest of its requirement line (version, markers), from a requirements file."""
    pins: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):  # -r other.txt, -c, --index-url, -e .: not a pin of a distribution
            raise Unbounded(f"option line {line!r}")
        match = _NAME.match(line)
        if match is None:
            raise Unbounded(f"line {line!r}")
        pins[normalize(match[1])] = (match[2] or "") + match[3].strip()
    return pins


def pyproject_pins(document: dict[str, Any]) -> dict[str, str]:
    """Name -> requirement of ``[project] dependencies`` and every optional group (group-qualified)."""
    project = document.get("project", {})
    pins = {}
    for line in project.get("dependencies", []):
        pins.update(_one(line, ""))
    for group, lines in project.get("optional-dependencies", {}).items():
        for line in lines:
            pins.update(_one(line, f"[{group}] "))
    return pins


def lock_pins(name: str, text: str) -> dict[str, str]:
    """Name -> version of a lock file (poetry, uv and pdm: TOML ``[[package]]``; Pipfile.lock: JSON)."""
    if name == "Pipfile.lock":
        document = json.loads(text)
        return {
            normalize(package): str(spec.get("version", spec)) if isinstance(spec, dict) else str(spec)
            for section in ("default", "develop")
            for package, spec in document.get(section, {}).items()
        }
    packages = tomllib.loads(text).get("package", [])
    return {normalize(p["name"]): str(p.get("version", "")) for p in packages if isinstance(p, dict) and "name" in p}


def changed(before: dict[str, str], after: dict[str, str]) -> tuple[str, ...]:
    """The distributions whose pin was added, removed or changed."""
    return tuple(sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n)))


def _one(line: str, group: str) -> dict[str, str]:
    match = _NAME.match(line)
    if match is None:
        raise Unbounded(f"requirement {line!r}")
    return {normalize(match[1]): group + (match[2] or "") + match[3].strip()}
