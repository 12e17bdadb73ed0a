"""Code that runs while a module is imported is evidence: a registration decorator's body, changed,
selects every test whose imports reach the module, on a real git repository and real pytest runs. A
lambda registered at import is a unit of its own: a change inside it selects the tests that called it,
unless it also ran at import."""

from __future__ import annotations

import orjson
from ci_repo import collect_evidence, commit, edit, git, pytest_in

from fastci.runtime.embedded import DataDir

FILES = {
    "pkg/__init__.py": "",
    "pkg/registry.py": """
        REGISTRY = {}


        def register(name):
            def inner(fn):
                REGISTRY[name] = fn
                return fn

            return inner
        """,
    "pkg/ops.py": """
        from pkg.registry import register


        @register("double")
        def double(x):
            return 2 * x


        register("triple")(lambda x: 3 * x)
        """,
    "pkg/text.py": """
        def shout(word):
            return word.upper()
        """,
    "tests/test_ops.py": """
        from pkg import ops  # noqa: F401  (registers the ops)
        from pkg.registry import REGISTRY


        def test_double_is_registered():
            assert REGISTRY["double"](2) == 4


        def test_registry_is_not_empty():
            assert REGISTRY
        """,
    "tests/test_names.py": """
        from pkg import ops  # noqa: F401
        from pkg.registry import REGISTRY


        def test_names():  # runs no function of pkg/ops.py: only its import-time code matters here
            assert sorted(REGISTRY) == ["double", "triple"]
        """,
    "tests/test_text.py": """
        from pkg.text import shout


        def test_shout():
            assert shout("a") == "A"
        """,
}


def make(tmp_path):
    repo = tmp_path / "registry"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, FILES, "a registry filled at import")
    return repo


def select(repo, data):
    return pytest_in(repo, data, "-q", "-rA", "--fastci-select")


def test_a_change_to_code_run_only_at_import_selects_its_importers_and_fails_when_they_fail(tmp_path):
    repo, data = make(tmp_path), tmp_path / "data"
    collect_evidence(repo, data)
    imports = [
        orjson.loads(r.payload)
        for r in DataDir(data).log.topic("evidence").read()
        if orjson.loads(r.payload)["kind"] == "import"
    ]
    by_module = {e["test_id"]: e for e in imports}
    assert by_module["pkg/registry.py"]["importers"] == ["tests/test_names.py", "tests/test_ops.py"]  # not text
    assert "pkg/registry.py::register.<locals>.inner" in by_module["pkg/ops.py"]["units"]

    edit(repo, "pkg/registry.py", "REGISTRY[name] = fn", "REGISTRY[name.upper()] = fn", "keys in capitals")
    run = select(repo, data)
    assert run.returncode == 1, run.stdout + run.stderr  # the job fails, as the full suite does
    assert "2 failed, 1 passed, 1 deselected" in run.stdout
    assert "FAILED tests/test_ops.py::test_double_is_registered" in run.stdout
    assert "FAILED tests/test_names.py::test_names" in run.stdout
    assert "PASSED tests/test_ops.py::test_registry_is_not_empty" in run.stdout  # importers run, unpruned


def test_a_module_level_registration_selects_the_importers_too(tmp_path):
    """A test that calls no function of the module still depends on what its module code registers."""
    repo, data = make(tmp_path), tmp_path / "data"
    collect_evidence(repo, data)
    edit(repo, "pkg/ops.py", 'register("triple")', 'register("thrice")', "renamed op")
    run = select(repo, data)
    assert run.returncode == 1 and "1 failed, 2 passed, 1 deselected" in run.stdout, run.stdout + run.stderr
    assert "FAILED tests/test_names.py::test_names" in run.stdout


def test_a_docstring_edit_runs_nothing(tmp_path):
    repo, data = make(tmp_path), tmp_path / "data"
    collect_evidence(repo, data)
    edit(repo, "pkg/registry.py", "def register(name):\n", 'def register(name):\n    """Add fn under name."""\n', "doc")
    run = select(repo, data)
    assert run.returncode == 0 and "4 deselected" in run.stdout and "nothing to run" in run.stdout, run.stdout


TRIPLE_TEST = """
    from pkg import ops  # noqa: F401
    from pkg.registry import REGISTRY


    def test_triple():
        assert REGISTRY["triple"](2) == 6
    """


def test_a_change_inside_a_lambda_registered_at_import_selects_the_tests_that_called_it(tmp_path):
    repo, data = make(tmp_path), tmp_path / "data"
    commit(repo, {"tests/test_triple.py": TRIPLE_TEST}, "a test of triple")
    collect_evidence(repo, data)
    edit(repo, "pkg/ops.py", "lambda x: 3 * x", "lambda x: 4 * x", "triple quadruples")
    run = select(repo, data)
    # Not every importer of pkg/ops.py: the module's own code did not change, only the lambda's.
    assert run.returncode == 1 and "1 failed, 4 deselected" in run.stdout, run.stdout + run.stderr
    assert "FAILED tests/test_triple.py::test_triple" in run.stdout


def test_a_lambda_that_ran_at_import_still_selects_the_importers(tmp_path):
    repo, data = make(tmp_path), tmp_path / "data"
    commit(
        repo,
        {
            "pkg/table.py": "SQUARES = [(lambda k: k * k)(n) for n in range(3)]\n",
            "tests/test_table.py": "from pkg.table import SQUARES\n\n\ndef test_squares():\n"
            "    assert SQUARES[2] == 4\n",
        },
        "a table computed at import",
    )
    collect_evidence(repo, data)
    edit(repo, "pkg/table.py", "k * k", "k * k * k", "cubes")
    run = select(repo, data)
    assert run.returncode == 1 and "1 failed, 4 deselected" in run.stdout, run.stdout + run.stderr
    assert "FAILED tests/test_table.py::test_squares" in run.stdout


def test_installed_distributions_are_read_once_per_environment(tmp_path, monkeypatch):
    """Which distribution provides which module is kept on disk until the environment changes."""
    import os
    import sys

    from fastci.evidence import imports

    site = tmp_path / "site-packages"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(site)])
    reads = []
    monkeypatch.setattr(
        imports.importlib.metadata, "packages_distributions", lambda: reads.append(1) or {"yaml": ["PyYAML"]}
    )
    assert imports.installed_packages(tmp_path / "cache") == {"yaml": ["PyYAML"]}
    assert imports.installed_packages(tmp_path / "cache") == {"yaml": ["PyYAML"]}
    assert len(reads) == 1
    (site / "numpy-2.4.0.dist-info").mkdir()  # an install changes the directory
    os.utime(site, ns=(1, 1))
    assert imports.installed_packages(tmp_path / "cache") == {"yaml": ["PyYAML"]}
    assert len(reads) == 2
