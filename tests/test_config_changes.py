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
    strategy:
      matrix:
        python: ["3.11", "3.12"]
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - run: pip install -e .
      - run: python -m pytest
      - run: flake8 .
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
        ("pyproject.toml", PYPROJECT, ("numpy>=2", "numpy>=2.1"), "dependencies", "pins of numpy changed"),
        ("pyproject.toml", PYPROJECT, ('["numpy>=2"]', '["numpy>=2"]\nrequires-python = ">=3.12"'), "suite", "project"),
        ("pyproject.toml", PYPROJECT, ('addopts = "-q"', 'addopts = "-x"'), "suite", "table(s) tool.pytest changed"),
        ("Makefile", MAKEFILE, ("ruff check .", "ruff check --fix ."), "none", "only target lint"),
        ("Makefile", MAKEFILE, ("pip install -e .", "pip install ."), "suite", "target prepare"),
        ("Makefile", MAKEFILE, ("PYTHON ?= python3", "PYTHON ?= python3.12"), "suite", "variable PYTHON"),
        (".github/workflows/ci.yml", WORKFLOW, ("ruff check .", "ruff check src"), "none", "only job lint"),
        (".github/workflows/ci.yml", WORKFLOW, ('"3.11"', '"3.12"'), "suite", "job tests (strategy)"),
        (".github/workflows/ci.yml", WORKFLOW, ("on: [push]", "on: [push, pull_request]"), "none", "only on"),
        (".github/workflows/ci.yml", WORKFLOW, ("checkout@v4", "checkout@v5"), "none", "only job tests"),
        (".github/workflows/ci.yml", WORKFLOW, ("setup-python@v5", "setup-python@v6"), "none", "only job tests"),
        (".github/workflows/ci.yml", WORKFLOW, ("flake8 .", "flake8 src"), "none", "only job tests"),
        (".github/workflows/ci.yml", WORKFLOW, ('"3.12"]', '"3.13"]'), "suite", "job tests (strategy)"),
        (".github/workflows/ci.yml", WORKFLOW, ("pip install -e .", "pip install -e .[all]"), "suite", "(step 'pip"),
        (
            ".github/workflows/ci.yml",
            WORKFLOW,
            ("- run: pip install -e .", "- run: |\n          pip install -e .\n"),
            "none",
            "only job tests",
        ),
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
    assert judge("setup.cfg", None, b"[flake8]\n") == ("suite", "setup.cfg added", ())


PUBLISH = """
on: {release: {types: [published]}}
jobs:
  publish:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: python -m build
      - uses: pypa/gh-action-pypi-publish@release/v1
"""


@pytest.mark.parametrize("change", ["added", "deleted"])
def test_a_ci_definition_added_or_deleted_is_judged_by_its_jobs_as_a_change_is(change):
    def judged(path: str, text: str):
        definition = textwrap.dedent(text).encode()
        return judge(path, None, definition) if change == "added" else judge(path, definition, None)

    effect, said, _ = judged(".github/workflows/publish.yml", PUBLISH)
    assert effect == "none" and said.startswith(f".github/workflows/publish.yml {change}: only on, job publish"), said
    effect, said, _ = judged(".github/workflows/ci.yml", WORKFLOW)
    assert effect == "suite" and "the test job tests" in said, said
    effect, said, _ = judged(".gitlab-ci.yml", GITLAB)
    assert effect == "suite" and "the test job tests" in said, said
    assert judged(".gitlab-ci.yml", GITLAB.replace("python -m pytest", "sphinx-build docs out"))[0] == "none"
    assert judged(".github/workflows/broken.yml", "jobs: [")[0] == "suite"  # does not parse: safe
    assert changed(".github/workflows/ci.yml", WORKFLOW, WORKFLOW + "  broken: [")[0] == "suite"


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


def test_a_dependency_bump_runs_the_tests_whose_imports_reach_it_and_nothing_else(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    commit(
        repo,
        {
            "requirements.txt": "PyYAML==6.0.1\npluggy>=1.0\n",
            "pkg/conf.py": "import yaml\n\n\ndef load(text):\n    return yaml.safe_load(text)\n",
            "tests/test_conf.py": "from pkg.conf import load\n\n\ndef test_load():\n    assert load('a: 1')\n",
        },
        "a YAML config loader",
    )
    collect_evidence(repo, data)
    bump = commit(repo, {"requirements.txt": "PyYAML==6.0.2\npluggy>=1.0\n"}, "bump PyYAML")
    (changed_file,) = analyze_commit(repo, bump, "plain").changed_files
    assert (changed_file.effect, changed_file.distributions) == ("dependencies", ("pyyaml",))
    run = pytest_in(repo, data, "-q", "-rA", "--fastci-select")
    assert run.returncode == 0 and "1 passed, 7 deselected" in run.stdout, run.stdout + run.stderr
    assert "PASSED tests/test_conf.py::test_load" in run.stdout
    unpinned = commit(repo, {"requirements.txt": "--index-url https://example.org\nPyYAML==6.0.2\npluggy>=1.0\n"}, "x")
    (changed_file,) = analyze_commit(repo, unpinned, "plain").changed_files
    assert changed_file.effect == "suite" and "not only pins changed" in changed_file.detail


@pytest.mark.parametrize(
    ("name", "old", "new", "distributions"),
    [
        ("requirements-dev.txt", "numpy==2.0\nscipy>=1.14  # math\n", "numpy==2.1\nscipy>=1.14\n", ("numpy",)),
        (
            "poetry.lock",
            '[[package]]\nname = "NumPy"\nversion = "2.0"\n',
            '[[package]]\nname = "NumPy"\nversion = "2.1"\n',
            ("numpy",),
        ),
        (
            "pyproject.toml",
            '[project]\nname = "x"\ndependencies = ["numpy>=2"]\n',
            '[project]\nname = "x"\ndependencies = ["numpy>=2", "Scipy_Stack>=1"]\n',
            ("scipy-stack",),
        ),
    ],
)
def test_pins_are_compared_pin_by_pin(name, old, new, distributions):
    effect, _, changed_names = judge(name, old.encode(), new.encode())
    assert (effect, changed_names) == ("dependencies", distributions)
