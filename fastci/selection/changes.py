"""Change analysis: one git commit -> a ``commits`` event naming the code units it changed.

Real git does the diffing (against the first parent, or the empty tree for a root commit, with
rename detection); ``Units`` does the comparing: a unit only in the new blob is added, only in
the old one deleted, in both with another fingerprint modified. A renamed file is compared
against its old path, so a pure rename changes no function. A Python blob that does not parse
makes its file a single ``<module>`` modified: conservative, since we cannot tell what changed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import ValidationError

from fastci.inputs import LAYERS, MAX_DISTRIBUTIONS, Change, ChangedFile, ChangedFunction, CommitEvent, Layer
from fastci.selection import statements
from fastci.selection.config_changes import judge
from fastci.selection.repos import git_line, remote_path, repo_name_of  # noqa: F401  (their home before)
from fastci.selection.sessions import Read
from fastci.selection.settings import RepoSettings, SettingsError, from_text
from fastci.selection.units import BODY, MODULE, Units, is_test_file

PYTHON_SUFFIX = ".py"
# A (directory name, layer) rule: files under a directory of that name belong to the layer.
LayerRule = tuple[str, Layer]
# Nearest the hardware first: the first rule naming one of a path's directories wins.
DEFAULT_LAYER_RULES: tuple[LayerRule, ...] = (
    ("firmware", "firmware"),
    ("driver", "driver"),
    ("kernels", "kernels"),
    ("compiler", "compiler"),
    ("runtime", "runtime"),
    ("models", "model"),
)
HARDWARE_LAYERS = frozenset({"kernels", "compiler", "driver", "firmware"})

_REGULAR_FILE_MODES = ("100644", "100755")  # not symlinks (120000) nor submodules (160000)
_STATUSES = {"A": "added", "C": "added", "D": "deleted", "M": "modified", "T": "modified", "R": "renamed"}
_MAX_TEXT = 4096  # the events' Text bound
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Git variables that would point ``git -C repo`` at another repository (set inside git hooks).
_REDIRECTING_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")


class ChangeAnalysisError(Exception):
    """The commit cannot be analysed (no such repository or revision); the message says why."""


def analyze_commit(
    repo: Path, rev: str, repo_name: str | None = None, *, layer_rules: Sequence[LayerRule] = DEFAULT_LAYER_RULES
) -> CommitEvent:
    """The ``commits`` event of ``rev`` in the git repository at ``repo``.

    ``repo_name`` defaults to the repo as results and evidence name it: ``$FASTCI_REPO``, else
    the ``origin`` remote's whole path, else the work tree's directory name. Layers come from
    ``layers_of(paths, layer_rules)``, a path heuristic (see there).
    """
    repo = Path(repo)
    _check_repository(repo)
    sha = _resolve(repo, rev)
    fields = _git(repo, "show", "-s", "--no-show-signature", "--format=%H%x00%P%x00%an <%ae>%x00%aI%x00%B", sha)
    _, parents, author, time, message = fields.decode("utf-8", "replace").split("\0", 4)
    parent_list = parents.split()
    base = parent_list[0] if parent_list else _empty_tree(repo)
    diffs = _diff(repo, base, sha)
    judged = [d for d in diffs if not d.path.endswith(PYTHON_SUFFIX)]
    settings_blob = _tree_blob(repo, sha, "pyproject.toml")
    blobs = _read_blobs(
        repo,
        [blob for d in diffs for blob in d.python_blobs()]
        + [b for d in judged for b in (d.old_blob, d.new_blob) if not _absent(b)]
        + ([settings_blob] if settings_blob else []),
    )
    try:
        settings = from_text(blobs[settings_blob].decode(), "pyproject.toml") if settings_blob else RepoSettings()
    except (SettingsError, UnicodeDecodeError, KeyError):
        settings = RepoSettings()  # a malformed table is the job's error to report; analysis stays safe
    try:  # a path or a title the event contract refuses (too long...) is a clear error, not a traceback
        files = [_judged(d, blobs, settings, _reader(repo, sha)) for d in diffs]
        functions = [
            ChangedFunction(path=path, qualname=qualname, change=change)
            for path, qualname, change in _narrowed(repo, sha, diffs, blobs)
        ]
        layers = layers_of([p for f in files for p in (f.path, f.old_path) if p], layer_rules)
        native = any(f.effect == "extensions" for f in files)  # compiled code: what runs on the accelerator
        return CommitEvent(
            repo=repo_name or _default_repo_name(repo),
            sha=sha,
            parents=tuple(parent_list),
            author=author[:_MAX_TEXT],
            time=datetime.fromisoformat(time),
            title=message.split("\n", 1)[0][:_MAX_TEXT],
            changed_files=tuple(files),
            changed_functions=tuple(functions),
            layers=layers,
            hardware_path=native or any(layer in HARDWARE_LAYERS for layer in layers),
        )
    except ValidationError as error:
        raise ChangeAnalysisError(f"commit {sha} in {repo} does not make a valid commits event: {error}") from None


def layers_of(paths: Iterable[str], rules: Sequence[LayerRule] = DEFAULT_LAYER_RULES) -> tuple[Layer, ...]:
    """The stack layers that ``paths`` touch, in stack order. A heuristic on directory names: a
    path under a directory named in ``rules`` has that rule's layer (the first matching rule
    wins), any other ``.py`` file is framework code, and anything else has no layer."""
    found: set[str] = set()
    for path in paths:
        directories = path.split("/")[:-1]
        layer = next((layer for name, layer in rules if name in directories), None)
        if layer is None and path.endswith(PYTHON_SUFFIX):
            layer = "framework"
        if layer is not None:
            found.add(layer)
    return tuple(layer for layer in LAYERS if layer in found)  # type: ignore[misc]


def compare_units(old: Units | None, new: Units | None) -> list[tuple[str, Change]]:
    """(qualname, change) of every unit that differs between two versions of a file (None: no
    such version), sorted by qualname."""
    before = old.by_name if old else {}
    after = new.by_name if new else {}
    changes: list[tuple[str, Change]] = []
    for name in sorted(before.keys() | after.keys()):
        if name not in before:
            changes.append((name, "added"))
        elif name not in after:
            changes.append((name, "deleted"))
        elif before[name].fingerprint != after[name].fingerprint or (
            name == MODULE and old is not None and new is not None and old.exports - new.exports
        ):
            changes.append((name, "modified"))  # a name leaving __all__ can break `import *`
    return changes


# ----- one file of the diff


@dataclass(frozen=True)
class _FileDiff:
    status: str  # git's letter: A, C, D, M, R, T
    path: str  # the new path (the only one unless renamed)
    old_path: str
    old_mode: str
    new_mode: str
    old_blob: str
    new_blob: str

    def changed_file(self) -> ChangedFile:
        change = _STATUSES.get(self.status, "modified")
        return ChangedFile(path=self.path, change=change, old_path=self.old_path if change == "renamed" else None)

    def old_is_python(self) -> bool:
        return self.old_path.endswith(PYTHON_SUFFIX) and self.old_mode in _REGULAR_FILE_MODES

    def new_is_python(self) -> bool:
        return self.path.endswith(PYTHON_SUFFIX) and self.new_mode in _REGULAR_FILE_MODES

    def python_blobs(self) -> list[str]:
        return [
            blob
            for blob, wanted in ((self.old_blob, self.old_is_python()), (self.new_blob, self.new_is_python()))
            if wanted
        ]


def _reader(repo: Path, sha: str) -> Read:
    """A file of ``sha``'s tree (None: it has none), for a CI job's nox sessions or tox envs."""

    def read(path: str) -> bytes | None:
        run = _run(repo, "show", f"{sha}:{path}")
        return run.stdout if run.returncode == 0 else None

    return read


def _judged(diff: _FileDiff, blobs: dict[str, bytes], settings: RepoSettings, read: Read) -> ChangedFile:
    """The changed file, with what it can do to the tests when analysis can tell from its contents
    (a config or CI file, by part) or from the repository's ``[tool.fastci] inert`` paths."""
    changed = diff.changed_file()
    if diff.path.endswith(PYTHON_SUFFIX):
        return changed
    if settings.is_inert(diff.path) and (diff.old_path == diff.path or settings.is_inert(diff.old_path)):
        return changed.model_copy(update={"effect": "none", "detail": f"{diff.path}: inert by [tool.fastci] inert"})
    extensions = tuple(dict.fromkeys(settings.extensions_of(diff.path) + settings.extensions_of(diff.old_path)))
    if extensions:
        detail = f"{diff.path}: native source of {', '.join(extensions)} ([tool.fastci] build)"
        return changed.model_copy(update={"effect": "extensions", "detail": detail, "extensions": extensions})
    old = None if _absent(diff.old_blob) else blobs.get(diff.old_blob)
    new = None if _absent(diff.new_blob) else blobs.get(diff.new_blob)
    verdict = judge(diff.path, old, new, read)
    if verdict is None:
        return changed
    effect, detail, distributions = verdict
    return changed.model_copy(
        update={"effect": effect, "detail": detail[:_MAX_TEXT], "distributions": distributions[:MAX_DISTRIBUTIONS]}
    )


MAX_READER_FILES = 50  # files reading a re-bound name beyond which the module's code counts as changed


def _narrowed(repo: Path, sha: str, diffs: list[_FileDiff], blobs: dict[str, bytes]) -> list[tuple[str, str, Change]]:
    """(path, qualname, change) of every changed unit. A module whose changed top-level statements
    only bind names (``fastci.selection.statements``) names, instead of its ``<module>`` code, the
    units that read those names: its own, and those of the project files that refer to them."""
    found: list[tuple[str, str, Change]] = []
    rebound: dict[str, set[str]] = {}  # module path -> the names its changed assignments bind
    for diff in diffs:
        changes = _function_changes(diff, blobs)
        if diff.old_is_python() and diff.new_is_python():
            changes = _classes_narrowed(diff, blobs, changes, rebound)
        if (MODULE, "modified") in changes and diff.old_is_python() and diff.new_is_python():
            bindings = _rebound_names(blobs[diff.old_blob], blobs[diff.new_blob])
            if bindings is not None:
                names, assigned = bindings
                if assigned:
                    rebound.setdefault(diff.path, set()).update(assigned)
                readers_here = statements.readers(_source(blobs[diff.new_blob]), names)
                if MODULE not in readers_here:  # no other top-level code computes with the names
                    changes = [c for c in changes if c != (MODULE, "modified")]
                changes += [(q, "modified") for q in sorted(readers_here) if (q, "modified") not in changes]
        found += [(diff.path, qualname, change) for qualname, change in changes]
    if rebound:
        found += _readers_elsewhere(repo, sha, rebound, {path for path, _, _ in found})
    # A unit the commit adds is new, not also modified because it reads a re-bound name: no
    # evidence can know it, and a "modified" unit no evidence knows is a blind spot that runs every
    # importer (five of more-itertools' commits ran the whole suite for a function they added).
    added = {(path, qualname) for path, qualname, change in found if change == "added"}
    return [f for f in dict.fromkeys(found) if not (f[2] == "modified" and f[:2] in added)]


def _classes_narrowed(
    diff: _FileDiff, blobs: dict[str, bytes], changes: list[tuple[str, Change]], rebound: dict[str, set[str]]
) -> list[tuple[str, Change]]:
    """A class body whose change only adds or removes methods stands for the class's existing
    methods and for the units that name the class (here and in other files), not for module code
    that every importer runs (adding a method to more-itertools' ``seekable`` ran all 577 tests).
    A deleted class likewise: its deleted methods and the units that named it (deleting a test
    class ran every test of its file)."""
    bodies = {
        q: change
        for q, change in changes
        if change in ("modified", "deleted") and q.endswith(f".{BODY}") and "<locals>" not in q
    }
    if not bodies:
        return changes
    try:
        old, new = _source(blobs[diff.old_blob]), _source(blobs[diff.new_blob])
        narrowed = {
            q: statements.methods_only(old, new, q.removesuffix(f".{BODY}"))
            if change == "modified"
            else statements.removed_class(old, q.removesuffix(f".{BODY}"))
            for q, change in bodies.items()
        }
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, KeyError):
        return changes
    narrowed = {q: methods for q, methods in narrowed.items() if methods is not None}
    if not narrowed:
        return changes
    # A deleted test class stays listed: selection reads which tests went with it (inherited ones too).
    kept = [c for c in changes if c[0] not in narrowed or (c[1] == "deleted" and is_test_file(diff.path))]
    present = {q for q, _ in kept}
    names: set[str] = set()
    for body, methods in narrowed.items():
        if bodies[body] == "modified":  # a deleted class's methods are deleted units already
            kept += [(m, "modified") for m in sorted(methods) if m not in present]
        names.add(body.removesuffix(f".{BODY}").rsplit(".", 1)[-1])
    kept += [(q, "modified") for q in sorted(statements.readers(new, names)) if q not in present | set(narrowed)]
    rebound.setdefault(diff.path, set()).update(names)
    return list(dict.fromkeys(kept))


def _rebound_names(old: bytes, new: bytes) -> tuple[set[str], set[str]] | None:
    try:
        return statements.changed_names(_source(old), _source(new))
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError):
        return None


def _readers_elsewhere(
    repo: Path, sha: str, rebound: dict[str, set[str]], changed_paths: set[str]
) -> list[tuple[str, str, Change]]:
    """Units of other project files that read a re-bound name (``from m import NAME``, ``m.NAME``);
    a file that reads one in its own module code counts as a module-code change. Too many readers,
    and every module whose names moved counts as changed instead: the safe side."""
    names = set().union(*rebound.values())
    pattern = "|".join(re.escape(n) for n in sorted(names))
    run = _run(repo, "grep", "-l", "-w", "-E", pattern, sha, "--", "*.py")
    paths = [line.split(":", 1)[1] for line in run.stdout.decode("utf-8", "replace").splitlines() if ":" in line]
    paths = [p for p in paths if p not in rebound]
    if len(paths) > MAX_READER_FILES:
        return [(path, MODULE, "modified") for path in sorted(rebound)]
    blobs = {path: _git(repo, "show", f"{sha}:{path}") for path in paths}
    found: list[tuple[str, str, Change]] = []
    for path, raw in sorted(blobs.items()):
        try:
            readers = statements.readers(_source(raw), names)
        except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError):
            readers = {MODULE}
        # <module> among them: its own module code computes with a name, so that code's effect moved too.
        found += [(path, qualname, "modified") for qualname in sorted(readers)]
    return found


def _source(raw: bytes) -> str:
    return importlib.util.decode_source(raw)


def _function_changes(diff: _FileDiff, blobs: dict[str, bytes]) -> list[tuple[str, Change]]:
    if not (diff.old_is_python() or diff.new_is_python()):
        return []  # a side that is not Python (absent, a symlink, another suffix) has no units
    try:
        old = _parse(blobs[diff.old_blob], diff.old_path) if diff.old_is_python() else None
        new = _parse(blobs[diff.new_blob], diff.path) if diff.new_is_python() else None
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError, KeyError):
        # ValueError: NUL bytes (3.11); RecursionError: absurdly nested code; KeyError: a blob
        # git could not give (partial clone). Either way we cannot tell which units changed, so
        # say the module did: whatever imports it gets tested.
        return [(MODULE, "modified")]
    return compare_units(old, new)


def _parse(source: bytes, path: str) -> Units:
    # decode_source honours PEP 263 coding cookies and BOMs, as the interpreter would.
    return Units.parse(importlib.util.decode_source(source), path)


# ----- git


def _check_repository(repo: Path) -> None:
    if not repo.is_dir():
        raise ChangeAnalysisError(f"{repo}: no such directory (expected a git repository)")
    run = _run(repo, "rev-parse", "--git-dir")
    if run.returncode != 0:
        raise ChangeAnalysisError(f"{repo} is not a git repository: {_stderr(run)}")


def _resolve(repo: Path, rev: str) -> str:
    if not rev or rev.startswith("-"):  # would be taken for an option
        raise ChangeAnalysisError(f"{rev!r} is not a revision")
    run = _run(repo, "rev-parse", "--verify", f"{rev}^{{commit}}")
    if run.returncode != 0:
        raise ChangeAnalysisError(f"unknown revision {rev!r} in {repo}: {_stderr(run)}")
    return run.stdout.decode().strip()


def _absent(blob: str) -> bool:
    """git's all-zero name for the side of a diff that does not exist (an added or deleted file)."""
    return not blob.strip("0")


def _tree_blob(repo: Path, sha: str, path: str) -> str | None:
    """The blob of ``path`` in ``sha``'s tree, or None when it has none."""
    run = _run(repo, "rev-parse", "--verify", "--quiet", f"{sha}:{path}")
    return run.stdout.decode().strip() or None if run.returncode == 0 else None


def _empty_tree(repo: Path) -> str:
    # Hashed rather than hard-coded: a SHA-256 repository has another empty tree id.
    return _git(repo, "hash-object", "-t", "tree", "--stdin", stdin=b"").decode().strip()


def _diff(repo: Path, base: str, sha: str) -> list[_FileDiff]:
    """The files changed from ``base`` to ``sha``, parsed from ``--raw -z`` output: records
    ``:old_mode new_mode old_blob new_blob STATUS`` NUL path NUL (NUL new path NUL for renames),
    unquoted, so any byte a path may hold survives."""
    raw = _git(repo, "diff-tree", "-r", "-z", "--raw", "--no-abbrev", "--no-commit-id", "--find-renames", base, sha)
    tokens = raw.split(b"\0")
    diffs, index = [], 0
    while index < len(tokens) and tokens[index].startswith(b":"):
        old_mode, new_mode, old_blob, new_blob, status = tokens[index][1:].decode().split(" ")
        letter = status[0]
        paths = 2 if letter in "RC" else 1
        old_path, new_path = tokens[index + 1], tokens[index + paths]
        index += 1 + paths
        diffs.append(
            _FileDiff(letter, _event_path(new_path), _event_path(old_path), old_mode, new_mode, old_blob, new_blob)
        )
    return diffs


def _read_blobs(repo: Path, blobs: list[str]) -> dict[str, bytes]:
    """Contents of ``blobs``, read by one ``git cat-file --batch`` (one process per commit, not per file)."""
    if not blobs:
        return {}
    output = _git(repo, "cat-file", "--batch", stdin="".join(f"{b}\n" for b in dict.fromkeys(blobs)).encode())
    contents, offset = {}, 0
    while offset < len(output):
        header_end = output.index(b"\n", offset)
        header = output[offset:header_end].decode().split(" ")
        if len(header) != 3:  # "<name> missing"
            offset = header_end + 1
            continue
        name, _, size = header
        start = header_end + 1
        contents[name] = output[start : start + int(size)]
        offset = start + int(size) + 1  # the content is followed by a newline
    return contents


def _default_repo_name(repo: Path) -> str:
    """The repo as results and evidence name it (``$FASTCI_REPO``, else the ``origin`` remote's
    whole path, else the work tree's name): selection joins the three on it."""
    return os.environ.get("FASTCI_REPO") or repo_name_of(repo)


def _event_path(raw: bytes) -> str:
    """A path as event text: undecodable bytes and control characters escaped (``\\xNN``),
    as events refuse them; ordinary paths are unchanged."""
    text = raw.decode("utf-8", "backslashreplace")
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def _git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    run = _run(repo, *args, stdin=stdin)
    if run.returncode != 0:
        raise ChangeAnalysisError(f"git {args[0]} failed in {repo}: {_stderr(run)}")
    return run.stdout


def _run(repo: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in _REDIRECTING_ENV}
    try:
        return subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, env=env)
    except OSError as error:
        raise ChangeAnalysisError(f"cannot run git: {error}") from None


def _stderr(run: subprocess.CompletedProcess[bytes]) -> str:
    return run.stderr.decode("utf-8", "replace").strip() or f"exit status {run.returncode}"
