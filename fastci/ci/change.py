"""The change a CI job tests, as git commits: HEAD against its first parent, or, for a pull request,
every commit from the merge base with the target branch up to HEAD (their plans are united)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

MAX_COMMITS = 200  # a longer range runs everything rather than ask for hundreds of plans


class ChangeError(ValueError):
    """The change cannot be named (no git work tree, an unknown revision, a base with no shared
    history); the message names the option and the reason."""


@dataclass(frozen=True)
class Change:
    work_tree: Path
    head: str  # full sha
    base: str | None  # the merge base with the given base revision, or None (HEAD's own diff)
    commits: tuple[str, ...]  # oldest first; each one's plan is of its diff from its first parent
    incomplete: str = ""  # why the history here cannot give every commit's diff (then run everything)


def change_of(work_tree: Path, rev: str = "HEAD", base: str | None = None, option: str = "--base") -> Change:
    """The commits of the change at ``rev`` (against ``base`` when given). ``option`` is how the
    caller's user names the base, for error messages."""
    top = _git(work_tree, "rev-parse", "--show-toplevel")
    if top is None:
        raise ChangeError(f"{work_tree} is not in a git work tree: fastci selects by the commit under test")
    root = Path(top)
    head = _git(root, "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}")
    if head is None:
        raise ChangeError(f"revision {rev!r} is not a commit of {root}")
    if base is None:
        return Change(root, head, None, (head,), _missing_parent(root, head))
    target = _git(root, "rev-parse", "--verify", "--end-of-options", f"{base}^{{commit}}")
    if target is None:
        raise ChangeError(f"{option}: {base!r} is not a commit of {root} (fetch it first, e.g. git fetch origin main)")
    merge_base = _git(root, "merge-base", target, head)
    if merge_base is None:
        shallow = _git(root, "rev-parse", "--is-shallow-repository") == "true"
        raise ChangeError(
            f"{option}: {base!r} shares no history with {rev} "
            + ("(a shallow clone: fetch the history back to the base)" if shallow else "(not an ancestor of it)")
        )
    listed = _git(root, "rev-list", "--reverse", f"{merge_base}..{head}") or ""
    commits = tuple(listed.split())
    incomplete = ""
    if not commits:
        incomplete = f"no commit between {base} and {rev}: nothing to compare"
    elif len(commits) > MAX_COMMITS:
        incomplete = f"{len(commits)} commits since {base} (more than {MAX_COMMITS})"
    else:
        incomplete = next((why for sha in commits if (why := _missing_parent(root, sha))), "")
    return Change(root, head, merge_base, commits, incomplete)


def _missing_parent(root: Path, sha: str) -> str:
    """Why ``sha``'s diff cannot be taken here: its first parent is not in this (shallow) clone."""
    # The raw object, not rev-list: a shallow clone grafts its boundary commits as parentless.
    raw = _git(root, "cat-file", "commit", sha) or ""
    parents = [line.split()[1] for line in raw.split("\n\n", 1)[0].splitlines() if line.startswith("parent ")]
    if parents and _git(root, "cat-file", "-e", f"{parents[0]}^{{commit}}") is None:
        return (
            f"commit {sha[:12]}'s parent is not in this clone (a shallow checkout: fetch depth 2 or more, "
            "e.g. actions/checkout with fetch-depth: 2)"
        )
    return ""


def _git(cwd: Path, *args: str) -> str | None:
    try:
        run = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return run.stdout.strip() if run.returncode == 0 else None
