"""nox sessions and tox environments resolved to what they run (``fastci.selection.sessions``): a CI
job that runs only lint or packaging sessions is not a test job; one that runs a test session, or
sessions fastci cannot resolve, is."""

from __future__ import annotations

import subprocess
import textwrap

from fastci.selection.changes import analyze_commit
from fastci.selection.config_changes import judge
from fastci.selection.sessions import Sessions, nox_sessions, tox_envs

NOXFILE = """
import nox

nox.options.sessions = ["tests"]


@nox.session(name="validate-package")
def check(session):
    session.install("build", "twine")
    session.run("uv", "build")
    session.run("twine", "check", "--strict", "dist/*")


@nox.session(name="tests", tags=["tests"])
def run_tests(session):
    session.install("-e", ".[scipy]")
    session.run("pytest", "--cov=pkg", *session.posargs)


@nox.session(name="lint", reuse_venv=True)
def ruff(session):
    session.run("prek", "-a")


@nox.session
def docs(session):
    session.run("sphinx-build", "docs", "out")
"""

TOX = """
[tox]
envlist = py311, py312, lint

[testenv]
commands = pytest {posargs}

[testenv:lint]
commands = ruff check .

[testenv:docs]
commands = sphinx-build docs out
"""

CHECK = """
on: [push]
jobs:
  check:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        session: [lint, validate-package]
    steps:
      - uses: actions/checkout@v4
      - name: Run ${{ matrix.session }}
        env:
          MATRIX_SESSION: ${{ matrix.session }}
        run: |
          uv sync --all-extras --dev
          uvx nox -s ${MATRIX_SESSION}
"""


def files(**texts: str):
    found = {name.replace("_", "."): textwrap.dedent(text).encode() for name, text in texts.items()}
    return found.get


def test_a_noxfile_is_read_for_each_sessions_name_tags_and_whether_it_runs_tests():
    sessions, default = nox_sessions(NOXFILE)
    assert {name: s.runs_tests for name, s in sessions.items()} == {
        "validate-package": False,
        "tests": True,
        "lint": False,
        "docs": False,
    }
    assert sessions["tests"].tags == ("tests",) and default == ("tests",)


def test_a_tox_ini_is_read_for_each_environment_its_own_commands_or_the_base_ones():
    envs, envlist = tox_envs(TOX)
    assert envs["lint"].runs_tests is False and envs["docs"].runs_tests is False and envs[""].runs_tests
    assert envlist == ("py311", "py312", "lint")


def test_a_command_runs_tests_when_a_session_it_names_does_or_cannot_be_resolved():
    nox = Sessions(files(noxfile_py=NOXFILE))
    assert not nox.runs_tests("nox -s lint validate-package", {}, {})
    assert nox.runs_tests("nox -s lint tests", {}, {})
    assert nox.runs_tests("uvx nox", {}, {})  # the default sessions: tests
    assert nox.runs_tests("nox -t tests", {}, {})
    assert not nox.runs_tests("nox --session docs", {}, {})
    assert nox.runs_tests("nox -s nowhere", {}, {})  # not in the noxfile
    assert nox.runs_tests("nox -k 'not slow'", {}, {})  # a keyword expression is not read here
    matrix = {"session": ["lint", "validate-package"]}
    assert not nox.runs_tests("nox -s ${S}", {"S": "${{ matrix.session }}"}, matrix)
    assert nox.runs_tests("nox -s ${S}", {"S": "${{ matrix.session }}"}, {"session": ["lint", "tests"]})
    assert nox.runs_tests("nox -s $UNSET", {}, {})
    assert not nox.runs_tests("nox -s ${{ matrix.session }}", {}, matrix)  # an expression with spaces
    assert Sessions(files()).runs_tests("nox -s lint", {}, {})  # no noxfile: cannot tell
    assert not nox.runs_tests("python -m pip install nox tox", {}, {})  # installed, not run
    assert nox.runs_tests("python -m nox -s tests", {}, {})
    tox = Sessions(files(tox_ini=TOX))
    assert not tox.runs_tests("tox -e lint,docs", {}, {})
    assert tox.runs_tests("tox -e py312", {}, {})  # the base [testenv]
    assert tox.runs_tests("tox", {}, {})  # the envlist: py311, py312, lint


def test_a_change_to_a_job_that_runs_only_lint_and_package_sessions_runs_no_test():
    read = files(noxfile_py=NOXFILE)
    edited = CHECK.replace("uv sync --all-extras --dev", "uv sync --all-extras --dev --frozen")
    old, new = textwrap.dedent(CHECK).encode(), textwrap.dedent(edited).encode()
    effect, said, _ = judge(".github/workflows/check.yml", old, new, read)
    assert effect == "none", said
    # without the noxfile, or when the matrix gains the test session, it is a test job
    assert judge(".github/workflows/check.yml", old, new, files())[0] == "suite"
    with_tests = new.replace(b"session: [lint, validate-package]", b"session: [lint, tests]")
    assert judge(".github/workflows/check.yml", old, with_tests, read)[0] == "suite"
    assert judge(".github/workflows/check.yml", old, new)[0] == "suite"  # no repository to read: nox counts


def test_on_a_real_repository_the_commit_that_changes_the_lint_job_runs_nothing(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".github" / "workflows").mkdir(parents=True)
    (repo / "noxfile.py").write_text(NOXFILE)
    (repo / ".github" / "workflows" / "check.yml").write_text(textwrap.dedent(CHECK))

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    workflow = repo / ".github" / "workflows" / "check.yml"
    workflow.write_text(workflow.read_text().replace("--dev", "--dev --frozen"))
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "lint job: frozen")
    (changed,) = analyze_commit(repo, "HEAD", "example/repo").changed_files
    assert changed.effect == "none", changed.detail
