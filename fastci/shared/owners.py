"""Who owns a change: a CODEOWNERS-like file of path rules and stack layers.

File format, one rule per line (``#`` starts a comment)::

    *                      @framework-team        # default owner
    /fastlm/compiler/      @compiler-team         # a directory, anchored at the repo root
    *.cu                   @kernels-team          # a name anywhere
    /fastlm/**/attention*  @attention-team @kernels-team
    layer:driver           @driver-team           # who owns a stack layer (bundle component bumps)

Path rules follow CODEOWNERS: the last matching rule wins; a pattern without a '/' (other than a
trailing one) matches a name at any depth; a leading '/' anchors at the root; a trailing '/' means
everything under the directory; '*' does not cross '/', '**' does.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache

from fastci.contracts.owner_maps import OwnerMap, OwnerRule
from fastci.inputs import LAYERS


class OwnerFileError(ValueError):
    pass


def parse_owner_file(text: str, repo: str, source: str = "") -> OwnerMap:
    """Parse the file into an ``OwnerMap`` event (its version is a digest of the rules)."""
    rules: list[OwnerRule] = []
    layers: dict[str, tuple[str, ...]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        pattern, *teams = line.split()
        if not teams:
            raise OwnerFileError(f"line {number}: '{pattern}' names no owner (e.g. '{pattern} @team')")
        names = tuple(team.lstrip("@") for team in teams)
        if any(not name for name in names):
            raise OwnerFileError(f"line {number}: an owner is empty")
        if pattern.startswith("layer:"):
            layer = pattern.removeprefix("layer:")
            if layer not in LAYERS:
                raise OwnerFileError(f"line {number}: unknown layer '{layer}' (known: {', '.join(LAYERS)})")
            layers[layer] = names
        else:
            rules.append(OwnerRule(pattern=pattern, teams=names))
    canonical = "\n".join(f"{r.pattern} {' '.join(r.teams)}" for r in rules) + "\n" + repr(sorted(layers.items()))
    version = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    return OwnerMap(repo=repo, version=version, rules=tuple(rules), layers=layers, source=source)


@lru_cache(maxsize=4096)
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    anchored = pattern.startswith("/") or "/" in pattern.rstrip("/")
    body = pattern.strip("/")
    directory = pattern.endswith("/")
    out = []
    i = 0
    while i < len(body):
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif body[i] == "*":
            out.append("[^/]*")
            i += 1
        elif body[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(body[i]))
            i += 1
    core = "".join(out)
    prefix = "" if anchored else "(?:.*/)?"
    suffix = "/.*" if directory else "(?:/.*)?"  # a name matches the directory's contents too
    return re.compile(f"^{prefix}{core}{suffix}$")


def owners_of_path(path: str, owner_map: OwnerMap) -> tuple[str, ...]:
    """Teams of the last rule matching ``path`` (no match: no owners)."""
    path = path.lstrip("/")
    for rule in reversed(owner_map.rules):
        if rule.pattern == "*" or _pattern_regex(rule.pattern).match(path):
            return rule.teams
    return ()


def owners_of_layer(layer: str, owner_map: OwnerMap | None) -> tuple[str, ...]:
    if owner_map is None:
        return ()
    return owner_map.layers.get(layer, ())  # type: ignore[call-overload]


def owners_of_change(paths: Sequence[str], layers: Iterable[str], owner_map: OwnerMap | None) -> tuple[str, ...]:
    """The team owning most of the changed files first, then the others; layers when no path matches."""
    if owner_map is None:
        return ()
    votes: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    for path in paths:
        for team in owners_of_path(path, owner_map):
            votes[team] += 1
            first_seen.setdefault(team, len(first_seen))
    if votes:
        return tuple(sorted(votes, key=lambda t: (-votes[t], first_seen[t])))[:16]
    for layer in layers:
        if teams := owners_of_layer(layer, owner_map):
            return teams
    return ()
