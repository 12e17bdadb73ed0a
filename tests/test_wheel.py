"""fastci as a user installs it. ``python -m build`` makes the sdist and, from the sdist, the wheel; a fresh
venv installs the wheel through the CI examples' own install step; from that venv, outside this checkout,
``fastci --version``, ``fastci demo`` and the examples' steps run on a git repository the test makes.

The venv does not see this environment's packages (no ``--system-site-packages``): they would hide a
dependency the wheel forgot to declare. So its dependencies come from the package index, as in a user's
job; pip's cache makes every run after the first quicker. Each step's time is printed at the end."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path

import pytest
from ci_repo import clean_env, git
from test_ci_examples import exercise, github_steps, run

ROOT = Path(__file__).resolve().parents[1]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
WHEEL = f"fastci-{VERSION}-py3-none-any.whl"
DEFAULT_SPEC = f"wheels/{WHEEL}"  # the examples' FASTCI_PIP_SPEC when the repository sets none

pytestmark = pytest.mark.slow


def tracked_package_files() -> set[str]:
    """What the wheel must hold: every file git tracks in the packages (code, goldens, replays, data)."""
    listed = subprocess.run(
        ["git", "ls-files", "fastci", "streams"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return {path for path in listed if "__pycache__" not in path}


def isolated(env: dict[str, str]) -> dict[str, str]:
    """``env`` without what would let the venv's Python import this checkout or this environment."""
    return {k: v for k, v in env.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def test_the_wheel_installs_into_a_fresh_venv_and_runs_the_examples_outside_the_checkout(tmp_path, report_figure):
    def step(label: str, command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 600):
        started = time.monotonic()
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        report_figure(f"wheel test, {label}: {time.monotonic() - started:.1f} s")
        assert done.returncode == 0, f"{label} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done

    dist = tmp_path / "dist"
    step(
        "python -m build (the sdist, then the wheel from it)",
        [sys.executable, "-m", "build", "--outdir", str(dist)],
        ROOT,
    )
    assert sorted(path.name for path in dist.iterdir()) == [WHEEL, f"fastci-{VERSION}.tar.gz"]
    with zipfile.ZipFile(dist / WHEEL) as wheel:
        missing = tracked_package_files() - set(wheel.namelist())
    assert not missing, f"the wheel lacks: {sorted(missing)}"
    with tarfile.open(dist / f"fastci-{VERSION}.tar.gz") as sdist:
        in_sdist = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"pyproject.toml", "README.md", "examples/README.md"} <= in_sdist

    # Everything from here runs outside the checkout, with the venv's python and fastci first on PATH.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    venv = tmp_path / "venv"
    bin_dir = venv / "bin"
    step("python -m venv", [sys.executable, "-m", "venv", str(venv)], elsewhere)
    env = isolated(clean_env(tmp_path / "data"))
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    # The examples' `id: install` step is the project's own: the plain repository's tests need pytest.
    step(
        "the project's install (pytest)",
        [str(bin_dir / "python"), "-m", "pip", "install", "-q", "pytest"],
        elsewhere,
        env,
    )

    (install,) = [
        script
        for _, script, _ in github_steps("presubmit.yml", {}, skipped=("install",))
        if "$FASTCI_PIP_SPEC" in script
    ]
    started = time.monotonic()
    installed = run(install, elsewhere, {**env, "FASTCI_PIP_SPEC": str(dist / WHEEL)}, bin_dir)  # the one setting
    report_figure(
        f"wheel test, the examples' install step (the wheel and its dependencies): {time.monotonic() - started:.1f} s"
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]

    where = step(
        "import fastci", [str(bin_dir / "python"), "-c", "import fastci; print(fastci.__file__)"], elsewhere, env
    )
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout  # the venv's copy, not this checkout
    assert shutil.which("fastci", path=str(bin_dir)) == str(bin_dir / "fastci")

    version = step("fastci --version", [str(bin_dir / "fastci"), "--version"], elsewhere, env)
    assert VERSION in version.stdout + version.stderr

    demo_env = {k: v for k, v in env.items() if k != "FASTCI_DATA_DIR"}  # the demo's own default, .fastci/demo
    demo = step("fastci demo", [str(bin_dir / "fastci"), "demo"], elsewhere, demo_env)
    assert "Traceback" not in demo.stderr, demo.stderr
    assert (elsewhere / ".fastci" / "demo").is_dir()

    def commit_the_wheel(repo: Path) -> None:
        """The repository keeps the wheel where the examples' default spec looks for it."""
        (repo / "wheels").mkdir()
        shutil.copy(dist / WHEEL, repo / DEFAULT_SPEC)
        git(repo, "add", "wheels")
        git(repo, "commit", "-q", "-m", "fastci's wheel, for CI")

    ci = tmp_path / "ci"
    ci.mkdir()
    started = time.monotonic()
    # No variable set: the default spec (the committed wheel) and the embedded runtime, as a new user has.
    exercise(ci, env, {}, bin_dir=bin_dir, skipped=("install",), prepare=commit_the_wheel)
    report_figure(
        f"wheel test, the examples' nightly, two presubmits and a merge request: {time.monotonic() - started:.1f} s"
    )
    assert (tmp_path / "data" / "log").is_dir()  # the embedded runtime of the venv's fastci kept the history
