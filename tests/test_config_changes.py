"""Config and CI files read by part: a lint or docs change runs no test, a change to what a test run
reads runs the suite and names the part; a part fastci does not know, or a file that does not parse,
runs the suite."""

from __future__ import annotations

import textwrap

import pytest
from ci_repo import clean_env, collect_evidence, commit, make_repo, pytest_in

from fastci.selection.changes import analyze_commit
from fastci.selection.config_changes import judge

SETUP_CFG = """
[metadata]
name = plain
version = 1.0

[flake8]
max-line-length = 100

[tool:pytest]
addopts = -q
"""

PYPROJECT = """
[project]
name = "plain"
version = "1.0"
dependencies = ["numpy>=2"]

[tool.ruff]
line-length = 100

[tool.pytest.ini_options]
addopts = "-q"
"""

MAKEFILE = """
PYTHON ?= python3

lint:
\truff check .

docs:
\tsphinx-build docs build

prepare:
\tpip install -e .

test: prepare
\t$(PYTHON) -m pytest
"""

WORKFLOW = """
name: ci
on: [push]
jobs:
  lint:
    runs-on: ubuntu-latest
    steps:
      - run: ruff check .
  tests:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - run: python -m pytest
"""

GITLAB = """
stages: [check, test]
lint:
  stage: check
  script: [ruff check .]
tests:
  stage: test
  script: [python -m pytest]
"""


def changed(path: str, old: str, new: str):
    return judge(path, textwrap.dedent(old).encode(), textwrap.dedent(new).encode())


@pytest.mark.parametrize(
    ("path", "old", "edit", "effect", "said"),
    [
        ("setup.cfg", SETUP_CFG, ("max-line-length = 100", "max-line-length = 120"), "none", "only [flake8]"),
        ("setup.cfg", SETUP_CFG, ("version = 1.0", "version = 1.1"), "none", "only [metadata]"),
        ("setup.cfg", SETUP_CFG, ("addopts = -q", "addopts = -x"), "suite", "section(s) [tool:pytest] changed"),
        ("setup.cfg", SETUP_CFG, ("[flake8]", "[custom]\nkey = 1\n\n[flake8]"), "suite", "[custom]"),
        ("pyproject.toml", PYPROJECT, ('version = "1.0"', 'version = "1.1"'), "none", "only project.version"),
        ("pyproject.toml", PYPROJECT, ("line-length = 100", "line-length = 99"), "none", "only tool.ruff"),
        ("pyproject.toml", PYPROJECT, ("numpy>=2", "numpy>=2.1"), "suite", "project.dependencies changed"),
        ("pyproject.toml", PYPROJECT, ('addopts = "-q"', 'addopts = "-x"'), "suite", "table(s) tool.pytest changed"),
        ("Makefile", MAKEFILE, ("ruff check .", "ruff check --fix ."), "none", "only target lint"),
        ("Makefile", MAKEFILE, ("pip install -e .", "pip install ."), "suite", "target prepare"),
        ("Makefile", MAKEFILE, ("PYTHON ?= python3", "PYTHON ?= python3.12"), "suite", "variable PYTHON"),
        (".github/workflows/ci.yml", WORKFLOW, ("ruff check .", "ruff check src"), "none", "only job lint"),
        (".github/workflows/ci.yml", WORKFLOW, ('"3.11"', '"3.12"'), "suite", "the test job tests changed"),
        (".github/workflows/ci.yml", WORKFLOW, ("on: [push]", "on: [push, pull_request]"), "none", "only on"),
        (".gitlab-ci.yml", GITLAB, ("[ruff check .]", "[ruff check src]"), "none", "only lint"),
        (".gitlab-ci.yml", GITLAB, ("[python -m pytest]", "[python -m pytest -x]"), "suite", "the test job tests"),
        ("setup.cfg", SETUP_CFG, ("[flake8]", "[flake8"), "suite", "could not be read by section"),
    ],
)
def test_a_change_is_judged_by_the_part_it_touches(path, old, edit, effect, said):
    verdict = changed(path, old, old.replace(*edit))
    assert verdict is not None and verdict[0] == effect, verdict
    assert said in verdict[1]


def test_files_that_are_not_read_by_part_are_left_to_the_path_rules():
    assert judge("pkg/data/table.json", b"{}", b"[]") is None
    assert judge("setup.cfg", None, b"[flake8]\n") == ("suite", "setup.cfg added")


def test_on_a_real_repository_a_lint_change_runs_no_test_and_a_pytest_setting_runs_them_all(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    commit(repo, {"setup.cfg": textwrap.dedent(SETUP_CFG), "notes/plan.ipynb": "{}"}, "config")
    commit(repo, {"pyproject.toml": '[tool.fastci]\ninert = ["notes/*"]\n'}, "notes are inert")
    collect_evidence(repo, data)
    lint = commit(repo, {"setup.cfg": textwrap.dedent(SETUP_CFG).replace("100", "120")}, "lint")
    (changed_file,) = analyze_commit(repo, lint, "plain").changed_files
    assert (changed_file.effect, changed_file.detail) == (
        "none",
        "setup.cfg: only [flake8] changed (nothing a test run reads)",
    )
    assert "nothing to run" in pytest_in(repo, data, "-q", "--fastci-select").stdout
    commit(repo, {"notes/plan.ipynb": '{"cells": []}'}, "notes")
    assert "nothing to run" in pytest_in(repo, data, "-q", "--fastci-select").stdout
    commit(repo, {"setup.cfg": textwrap.dedent(SETUP_CFG).replace("-q", "-x")}, "pytest settings")
    run = pytest_in(repo, data, "-q", "--fastci-select", env=clean_env(data))
    assert "running all 7 collected tests: setup.cfg: section(s) [tool:pytest] changed" in run.stdout, run.stdout
