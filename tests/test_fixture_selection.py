"""A fixture is evidence for every test whose closure uses it: a session-scoped fixture runs for the
first of its tests only, yet a change to it must run them all (and a test not using it none)."""

from __future__ import annotations

from ci_repo import collect_evidence, commit, edit, git, pytest_in

FILES = {
    "pkg/__init__.py": "",
    "pkg/db.py": """
        def connect():
            return {"rows": [1, 2, 3]}
        """,
    "tests/conftest.py": """
        import pytest

        from pkg import db


        @pytest.fixture(scope="session")
        def rows():
            return db.connect()["rows"]


        @pytest.fixture
        def empty():
            return []
        """,
    "tests/test_rows.py": """
        def test_count(rows):
            assert len(rows) == 3


        def test_sum(rows):
            assert sum(rows) == 6


        def test_first(rows):
            assert rows[0] == 1


        def test_empty(empty):
            assert not empty
        """,
}


def test_a_changed_session_fixture_runs_every_test_that_uses_it_and_only_those(tmp_path):
    repo, data = tmp_path / "fixtures", tmp_path / "data"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, FILES, "a session fixture")
    collect_evidence(repo, data)
    edit(repo, "tests/conftest.py", 'return db.connect()["rows"]', 'return db.connect()["rows"][:2]', "fewer rows")
    run = pytest_in(repo, data, "-q", "-rA", "--fastci-select")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "2 failed, 1 passed, 1 deselected" in run.stdout  # count, sum and first run; test_empty does not
