"""The release repository through real git (subprocess): the little fastci needs, and nothing else.

Every environment change is a commit on the main branch whose message ends with trailers
(``Fastci-Action``, ``Fastci-Env``, ``Fastci-Bundle``, ``Fastci-Reverts``...): history is the audit
log, and the trailers let fastci read it back (which bundle each environment promoted, which
promotions were rolled back) without any state of its own.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

TRAILER = re.compile(r"^(Fastci-[A-Za-z-]+): (.+)$")
FALLBACK_NAME, FALLBACK_EMAIL = "fastci release", "fastci-release@localhost"


class GitError(RuntimeError):
    """git refused or failed; the message carries its stderr."""


@dataclass(frozen=True)
class LoggedCommit:
    sha: str
    parents: tuple[str, ...]
    subject: str
    trailers: dict[str, str] = field(default_factory=dict)

    @property
    def action(self) -> str | None:
        return self.trailers.get("Fastci-Action")


def _last_paragraph(lines: list[str]) -> list[str]:
    body = [line.rstrip() for line in lines]
    while body and not body[-1]:
        body.pop()
    start = max((i for i, line in enumerate(body) if not line), default=-1) + 1
    return body[start:] if start > 0 else []


class Repo:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def git(self, *args: str, check: bool = True, input: str | None = None) -> str:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", **self._identity()}
        run = subprocess.run(
            ["git", "-C", str(self.path), *args], capture_output=True, text=True, env=env, input=input, timeout=120
        )
        if check and run.returncode != 0:
            raise GitError(f"git {' '.join(args)}: {run.stderr.strip() or run.stdout.strip()}")
        return run.stdout

    def ok(self, *args: str) -> bool:
        return subprocess.run(["git", "-C", str(self.path), *args], capture_output=True, timeout=120).returncode == 0

    def _identity(self) -> dict[str, str]:
        """A committer for repos (and machines) that configure none; a configured identity wins."""
        if not hasattr(self, "_cached_identity"):
            configured = subprocess.run(
                ["git", "-C", str(self.path), "config", "user.email"], capture_output=True, text=True, timeout=30
            ).stdout.strip()
            self._cached_identity = (
                {}
                if configured
                else {
                    "GIT_AUTHOR_NAME": FALLBACK_NAME,
                    "GIT_AUTHOR_EMAIL": FALLBACK_EMAIL,
                    "GIT_COMMITTER_NAME": FALLBACK_NAME,
                    "GIT_COMMITTER_EMAIL": FALLBACK_EMAIL,
                }
            )
        return self._cached_identity

    # ----- facts

    def is_work_tree(self) -> bool:
        return self.path.is_dir() and self.git("rev-parse", "--is-inside-work-tree", check=False).strip() == "true"

    def is_top_level(self) -> bool:
        top = self.git("rev-parse", "--show-toplevel", check=False).strip()
        return bool(top) and Path(top).resolve() == self.path.resolve()

    def current_branch(self) -> str | None:
        name = self.git("symbolic-ref", "--quiet", "--short", "HEAD", check=False).strip()
        return name or None

    def dirty(self) -> list[str]:
        return [line for line in self.git("status", "--porcelain", "--untracked-files=normal").splitlines() if line]

    def has_commits(self) -> bool:
        return self.ok("rev-parse", "--verify", "--quiet", "HEAD")

    def rev(self, name: str) -> str | None:
        out = self.git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", check=False).strip()
        return out or None

    def branch_exists(self, name: str) -> bool:
        return self.ok("show-ref", "--verify", "--quiet", f"refs/heads/{name}")

    def branches(self, prefix: str) -> list[str]:
        out = self.git("for-each-ref", "--format=%(refname:short)", f"refs/heads/{prefix}")
        return sorted(line for line in out.splitlines() if line)

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.ok("merge-base", "--is-ancestor", older, newer)

    def tree_of(self, commit: str, path: str) -> str | None:
        """The object id of ``path`` at ``commit`` (None when absent): equal ids, equal contents."""
        out = self.git("rev-parse", "--verify", "--quiet", f"{commit}:{path}", check=False).strip()
        return out or None

    def files(self, commit: str, path: str) -> dict[str, bytes]:
        """Every file under ``path`` at ``commit``, path -> bytes."""
        names = self.git("ls-tree", "-r", "-z", "--name-only", commit, "--", path).split("\0")
        return {name: self.blob(commit, name) for name in names if name}

    def blob(self, commit: str, path: str) -> bytes:
        run = subprocess.run(
            ["git", "-C", str(self.path), "show", f"{commit}:{path}"], capture_output=True, timeout=120
        )
        if run.returncode != 0:
            raise GitError(f"git show {commit}:{path}: {run.stderr.decode(errors='replace').strip()}")
        return run.stdout

    def first_parent_log(self, ref: str) -> list[LoggedCommit]:
        """Commits of ``ref``'s first-parent chain, newest first, with their fastci trailers."""
        out = self.git("log", "--first-parent", "-z", "--format=%H%n%P%n%B", ref)
        commits = []
        for record in out.split("\0"):
            if not record.strip():
                continue
            sha, parents, *message = record.split("\n")
            trailers = {}
            for line in _last_paragraph(message):  # trailers end a message; a line elsewhere is text
                match = TRAILER.match(line)
                if match:
                    trailers[match.group(1)] = match.group(2).strip()
            commits.append(LoggedCommit(sha, tuple(parents.split()), message[0] if message else "", trailers))
        return commits

    def author(self) -> str:
        name = self.git("config", "user.name", check=False).strip() or FALLBACK_NAME
        email = self.git("config", "user.email", check=False).strip() or FALLBACK_EMAIL
        return f"{name} <{email}>"
