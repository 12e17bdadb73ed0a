"""Which repository a work tree is, and one-line questions to git: what a producer needs to name the
code under test, kept apart from change analysis so that the pytest plugins need not import it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit


def git_line(cwd: Path | None, *args: str) -> str | None:
    """One line of ``git`` output in ``cwd``, or None when git fails or says nothing."""
    try:
        run = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return run.stdout.strip() if run.returncode == 0 and run.stdout.strip() else None


def repo_name_of(cwd: Path | None) -> str:
    """The repository's name as commits, results and evidence carry it: the ``origin`` remote's whole path
    (``group/sub/lib``: a GitLab subgroup's project never collides with another group's ``lib``), else, for
    a clone of a local path or no remote at all, the work tree's directory name. Callers let
    ``$FASTCI_REPO`` (or a ``--repo-name``) override it."""
    url = git_line(cwd, "remote", "get-url", "origin")
    name = remote_path(url) if url else None
    if name:
        return name
    top = git_line(cwd, "rev-parse", "--show-toplevel")
    return Path(top).name if top else Path(cwd or Path.cwd()).resolve().name


def remote_path(url: str) -> str | None:
    """The path a hosted remote names, without ``.git`` (``https://gitlab.com/group/sub/lib.git`` and
    ``git@gitlab.com:group/sub/lib.git`` both give ``group/sub/lib``); None for a local path or a
    ``file://`` URL, whose folders say where a copy lives, not what the repository is."""
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", url):
        parts = urlsplit(url)
        path = "" if parts.scheme == "file" else parts.path
    else:
        scp = re.fullmatch(r"(?:[^@/]+@)?[^/:]+:(.+)", url)  # git's scp-like syntax: a colon before any slash
        path = scp.group(1) if scp else ""
    path = path.strip("/").removesuffix(".git").strip("/")
    return path or None
