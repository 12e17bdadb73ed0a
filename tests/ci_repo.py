"""A plain Python repository in real git, and real pytest sessions in it, for the CI-loop tests:
one package, seven tests, a data file, no accelerator and no fastci environment variables."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

STATS = """
import json
from pathlib import Path


def mean(values):
    return sum(values) / len(values)


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def normalize(values):
    centre = mean(values)
    return [v - centre for v in values]


def spread(values):
    return max(values) - min(values)


def table():
    return json.loads((Path(__file__).parent / "data" / "table.json").read_text())
"""

TEXT = """
def shout(word):
    return word.upper() + "!"


def whisper(word):
    return word.lower() + "..."
"""

TESTS_STATS = """
from pkg import stats


def test_mean():
    assert stats.mean([1, 2, 3]) == 2


def test_median():
    assert stats.median([3, 1, 2]) == 2


def test_normalize():
    assert stats.normalize([1, 2, 3]) == [-1, 0, 1]


def test_spread():
    assert stats.spread([1, 5]) == 4


def test_table():
    assert stats.table()["answer"] == 42
"""

TESTS_TEXT = """
from pkg import text


def test_shout():
    assert text.shout("hi") == "HI!"


def test_whisper():
    assert text.whisper("HI") == "hi..."
"""

FILES = {
    "pkg/__init__.py": "",
    "pkg/stats.py": STATS,
    "pkg/text.py": TEXT,
    "pkg/data/table.json": '{"answer": 42}\n',
    "tests/test_stats.py": TESTS_STATS,
    "tests/test_text.py": TESTS_TEXT,
    "README.md": "# plain\n",
}
ALL_TESTS = 7


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Dev",
        "GIT_AUTHOR_EMAIL": "dev@example.com",
        "GIT_COMMITTER_NAME": "Dev",
        "GIT_COMMITTER_EMAIL": "dev@example.com",
    }
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


def write(repo: Path, files: dict[str, str]) -> None:
    for path, content in files.items():
        target = repo / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(content).lstrip("\n") if path.endswith(".py") else content)


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    write(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def make_repo(root: Path) -> Path:
    repo = root / "plain"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, FILES, "the package")
    return repo


def edit(repo: Path, path: str, old: str, new: str, message: str) -> str:
    text = (repo / path).read_text()
    assert old in text, (path, old)
    return commit(repo, {path: text.replace(old, new)}, message)


def clean_env(data: Path, **extra: str) -> dict[str, str]:
    """The caller's environment without any FASTCI_ setting, plus the data dir and ``extra``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("FASTCI_")}
    return {**base, "FASTCI_DATA_DIR": str(data), **extra}


def pytest_in(repo: Path, data: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300):
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=repo,
        env=env or clean_env(data),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def fastci_in(repo: Path, data: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300):
    return subprocess.run(
        [sys.executable, "-m", "fastci.cli", *args],
        cwd=repo,
        env=env or clean_env(data),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def collect_evidence(repo: Path, data: Path, env: dict[str, str] | None = None) -> None:
    """A nightly's evidence and results at HEAD: the default (exact) collector, every test."""
    run = pytest_in(repo, data, "-q", "--fastci-evidence", "--fastci-results", env=env)
    assert run.returncode == 0, run.stdout + run.stderr
