"""Evidence from real py-spy and real tracing: pytest sessions of a small generated project with
``--fastci-evidence``, and ``fastci collect`` on a script."""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import orjson
import pytest

from fastci.cli.base import UsageError
from fastci.cli.evidence import register
from fastci.evidence.stacks import units_of
from fastci.inputs import Environment
from fastci.runtime.embedded import DataDir

# Sampled code runs 0.2 s (about 40 samples at 200 Hz): never missed, and only there.
MODULE = """
import os
import time

SCALE = float(os.environ.get("SPIN_SCALE", "1"))  # tracing needs no long runs


def spin(seconds):
    end = time.monotonic() + seconds * SCALE
    while time.monotonic() < end:
        pass


def slow_add(a, b):
    spin(0.2)
    return a + b


def other():
    time.sleep(0.2 * SCALE)  # waiting is running too: sampled like the rest
    return "other"


class Model:
    def forward(self, x):
        return helper(x)


def helper(x):
    spin(0.2)
    return x * 2


def prepare():
    spin(0.2)
    return {"ready": True}


def cleanup():
    spin(0.2)
"""

CONFTEST = """
import pytest

from pkg import mod


@pytest.fixture
def resource():
    state = mod.prepare()
    yield state
    mod.cleanup()
"""

TESTS = """
from pkg import mod


def test_a():
    assert mod.slow_add(1, 2) == 3


def test_b():
    assert mod.other() == "other"


def test_model():
    assert mod.Model().forward(2) == 4


def test_with_fixture(resource):
    assert resource["ready"]


def test_quick():
    assert mod.Model is not None
"""

SCRIPT = """
import subprocess
import sys

from pkg import mod

print("script says", mod.slow_add(1, 2), flush=True)
subprocess.run([sys.executable, "-c", "from pkg import mod; mod.spin(0.4); mod.other()"], check=True)
sys.exit(3)
"""


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """A git work tree: pkg/mod.py, tests/ (a conftest fixture and five tests), script.py."""
    files = {"pkg/mod.py": MODULE, "tests/conftest.py": CONFTEST, "tests/test_mod.py": TESTS, "script.py": SCRIPT}
    return committed_project(tmp_path / "proj", files)


def committed_project(root: Path, files: dict[str, str]) -> Path:
    """A git work tree at ``root`` holding ``pkg/__init__.py`` and ``files`` (dedented), committed once."""
    for path, text in {"pkg/__init__.py": "", **files}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(textwrap.dedent(text))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "-c", "user.email=dev@example.com", "-c", "user.name=dev", "commit", "-q", "-m", "sample")
    return root


def clean_env(**env: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("FASTCI_")}, **env}


def run_pytest(root: Path, data: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    # The plugin loaded explicitly, as a project without fastci installed would (autoload off, or
    # pytest's entry point would load it a second time).
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "fastci.pytest_plugin",
            "--fastci-evidence",
            *args,
            "tests",
        ],
        cwd=root,
        env=clean_env(FASTCI_DATA_DIR=str(data), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def evidence(data: Path, kind: str = "test") -> dict[str, dict]:
    """The evidence events of ``kind``: each test's ("test"), or each imported module's ("import")."""
    events = (orjson.loads(r.payload) for r in DataDir(data).log.topic("evidence").read())
    return {doc["test_id"]: doc for doc in events if doc["kind"] == kind}


def units(event: dict) -> set[tuple[str, str]]:
    return {unit for stack in event["stacks"] for unit in units_of(stack["stack"])}


def calls(event: dict) -> set[tuple[str, ...]]:
    """Exact evidence's calls by unit name: the callers root first, the unit called last."""
    return {tuple(event["units"][i] for i in call) for call in event["calls"]}


def test_sampling_attributes_each_tests_code_and_its_fixtures_code_to_it(sample, tmp_path):
    run = run_pytest(
        sample,
        tmp_path / "data",
        "--fastci-evidence-method",
        "sampling",
        "--fastci-evidence-rate",
        "200",
        FASTCI_RUN_ID="run-7",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "fastci: evidence of 4 test(s) (sampling at 200 Hz" in run.stdout
    assert "1 test(s) with no sample in project code got none (they always run; " in run.stdout
    found = evidence(tmp_path / "data")
    test = "tests/test_mod.py::"
    assert set(found) == {f"{test}test_a", f"{test}test_b", f"{test}test_model", f"{test}test_with_fixture"}
    head = git(sample, "rev-parse", "HEAD")
    for event in found.values():
        assert (event["method"], event["sampling_rate_hz"], event["run_id"], event["commit"], event["repo"]) == (
            "sampling",
            200.0,
            "run-7",
            head,
            "proj",
        )
        assert event["config"]["samples"] >= 1
        for stack in event["stacks"]:  # only the project's own frames, under the project root
            assert all(
                path in ("pkg/mod.py", "tests/test_mod.py", "tests/conftest.py") for path, _ in units_of(stack["stack"])
            )
    a, b, model, fixture = (
        units(found[f"{test}{name}"]) for name in ("test_a", "test_b", "test_model", "test_with_fixture")
    )
    assert {("tests/test_mod.py", "test_a"), ("pkg/mod.py", "slow_add"), ("pkg/mod.py", "spin")} <= a
    assert ("pkg/mod.py", "other") not in a and ("pkg/mod.py", "slow_add") not in b
    assert ("pkg/mod.py", "other") in b
    assert {("pkg/mod.py", "Model.forward"), ("pkg/mod.py", "helper")} <= model
    # The fixture's setup and teardown ran outside the test function, and count for the test.
    assert {("tests/conftest.py", "resource"), ("pkg/mod.py", "prepare"), ("pkg/mod.py", "cleanup")} <= fixture
    assert ("pkg/mod.py", "slow_add") not in fixture
    stack = next(s["stack"] for s in found[f"{test}test_a"]["stacks"] if "spin" in s["stack"])
    assert stack.startswith("test_a (tests/test_mod.py:6);slow_add (pkg/mod.py:15);spin (pkg/mod.py:")


def test_tracing_by_default_records_every_unit_at_its_first_call_and_shares_the_results_run_id(sample, tmp_path):
    bundle = {f"FASTCI_BUNDLE_{layer}": "1.0" for layer in ("COMPILER", "KERNELS", "RUNTIME", "DRIVER", "FIRMWARE")}
    run = run_pytest(
        sample,
        tmp_path / "data",
        "--fastci-results",
        FASTCI_HARDWARE_REVISION="rev-a",
        FASTCI_REPO="acme/proj",
        SPIN_SCALE="0.01",
        **bundle,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "(tracing, sys." in run.stdout and ", 1 context(s) per unit)" in run.stdout
    found = evidence(tmp_path / "data")
    assert len(found) == 5  # tracing is exact: the quick test has (empty of callees) evidence too
    by_test = {test_id.split("::")[1]: event for test_id, event in found.items()}
    test, mod, conftest = "tests/test_mod.py::", "pkg/mod.py::", "tests/conftest.py::"
    assert by_test["test_a"]["units"] == [f"{mod}slow_add", f"{mod}spin", f"{test}test_a"]
    assert calls(by_test["test_a"]) == {
        (f"{test}test_a",),
        (f"{test}test_a", f"{mod}slow_add"),
        (f"{test}test_a", f"{mod}slow_add", f"{mod}spin"),
    }
    assert calls(by_test["test_quick"]) == {(f"{test}test_quick",)}
    # The fixture's setup and teardown count for the test; spin ran under prepare first, and one
    # context per unit is the default, so its second (under cleanup) is not kept.
    assert calls(by_test["test_with_fixture"]) == {
        (f"{conftest}resource",),
        (f"{conftest}resource", f"{mod}prepare"),
        (f"{conftest}resource", f"{mod}prepare", f"{mod}spin"),
        (f"{conftest}resource", f"{mod}cleanup"),
        (f"{test}test_with_fixture",),
    }
    for event in found.values():
        assert event["method"] == "tracing" and event["sampling_rate_hz"] is None and event["repo"] == "acme/proj"
        assert event["stacks"] == [] and event["config"] == {"contexts_per_unit": 1}
    results = [orjson.loads(r.payload) for r in DataDir(tmp_path / "data").log.topic("results").read()]
    assert {r["run_id"] for r in results} == {e["run_id"] for e in found.values()}  # one run, joinable
    assert {r["traced"] for r in results} == {True}  # their durations include what recording cost
    # What ran while modules were imported (the conftest imports pkg.mod before any test file):
    # per module, with the test files whose imports reach it.
    imports = evidence(tmp_path / "data", kind="import")
    assert set(imports) == {"pkg/__init__.py", "pkg/mod.py", "tests/conftest.py", "tests/test_mod.py"}
    assert {m: e["importers"] for m, e in imports.items()} == dict.fromkeys(imports, ["tests/test_mod.py"])
    # A class statement runs its body at import.
    assert imports["pkg/mod.py"]["units"] == ["pkg/mod.py::<module>", "pkg/mod.py::Model.<body>"]
    assert imports["pkg/mod.py"]["calls"] == []


def test_when_py_spy_cannot_sample_the_tests_still_run_and_the_summary_says_why(sample, tmp_path):
    run = run_pytest(
        sample, tmp_path / "data", "--fastci-evidence-method", "sampling", "-k", "quick", FASTCI_PY_SPY="false"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "fastci: no evidence (sampling at 200 Hz): py-spy could not sample process" in run.stdout
    assert "(exited with code 1)" in run.stdout
    assert evidence(tmp_path / "data") == {}


def test_without_a_commit_the_session_stops_naming_the_field(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("def test_x(): pass\n")
    run = run_pytest(tmp_path, tmp_path / "data", GIT_CEILING_DIRECTORIES=str(tmp_path))
    assert run.returncode == 4, run.stdout + run.stderr
    assert "--fastci-evidence: field 'commit': not given (set FASTCI_COMMIT" in run.stderr


def collect_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fastci")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--bootstrap")
    parser.add_argument("--namespace")
    register(parser.add_subparsers(dest="command_name", required=True))
    return parser


def test_collect_runs_the_command_under_py_spy_and_publishes_one_event(sample, tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(sample)
    monkeypatch.setenv("PYTHONPATH", str(sample))
    monkeypatch.setenv("FASTCI_RUN_ID", "collect-1")
    # py-spy finds the command by polling for the wrapper's subprocess: on a loaded CI machine
    # (Python 3.12) it missed all of a 0.2 s spin, so the script runs long enough to be found.
    monkeypatch.setenv("SPIN_SCALE", "4")
    args = collect_parser().parse_args(
        ["--data-dir", str(tmp_path / "data"), "collect", "--test-id", "e2e::script", "--", sys.executable, "script.py"]
    )
    assert args.func(args) == 3  # the command's exit code
    out, err = capfd.readouterr()
    assert out == "script says 3\n"  # the command's stdout, without py-spy's messages
    assert "fastci collect: e2e::script: " in err and " stack(s) kept, " in err and " s wall; published to " in err
    [event] = evidence(tmp_path / "data").values()
    assert (event["test_id"], event["run_id"], event["method"], event["commit"]) == (
        "e2e::script",
        "collect-1",
        "sampling",
        git(sample, "rev-parse", "HEAD"),
    )
    found = units(event)
    assert {("script.py", "<module>"), ("pkg/mod.py", "slow_add"), ("pkg/mod.py", "spin")} <= found
    assert ("pkg/mod.py", "other") in found  # sampled in the subprocess the script started
    assert all(path in ("script.py", "pkg/mod.py") for path, _ in found)


def test_collect_refuses_a_command_it_cannot_find(sample, tmp_path, monkeypatch):
    monkeypatch.chdir(sample)
    args = collect_parser().parse_args(
        ["--data-dir", str(tmp_path / "data"), "collect", "--test-id", "t", "--", "no-such-command-x"]
    )
    with pytest.raises(UsageError, match="command not found: no-such-command-x"):
        args.func(args)


TRAINING = """
from fastci.evidence.dimensions import at


def step_math():
    return 1


def late_phase():
    return 2


def train(steps):
    for step in range(steps):
        with at("steps", step):
            step_math()
            if step >= 4:
                late_phase()
"""

WORKLOAD_TESTS = """
import pytest

from pkg import training


@pytest.mark.fastci_workload(scope={"precision": "bf16"},
                             dimensions={"steps": {"full": 10, "minimum": 2, "cost_exponent": 1.0}})
def test_train():
    training.train(10)


def test_plain():
    training.train(10)
"""


def test_a_declared_workload_records_from_which_step_each_unit_runs(sample, tmp_path):
    (sample / "pkg" / "training.py").write_text(textwrap.dedent(TRAINING))
    (sample / "tests" / "test_mod.py").write_text(textwrap.dedent(WORKLOAD_TESTS))
    run = run_pytest(sample, tmp_path / "data", "--fastci-evidence-method", "tracing")
    assert run.returncode == 0, run.stdout + run.stderr
    found = evidence(tmp_path / "data")
    declared = found["tests/test_mod.py::test_train"]["workload"]
    assert declared == {
        "scope": {"precision": "bf16"},
        "dimensions": [{"name": "steps", "full": 10, "minimum": 2, "cost_exponent": 1.0}],
        "fixed_share": 0.0,  # not declared: the whole cost scales with the dimensions
        "first_executions": [{"unit": "pkg/training.py::late_phase", "at": [{"steps": 4}]}],  # step_math: from step 0
    }
    assert found["tests/test_mod.py::test_plain"]["workload"] is None  # no declaration, no block


def test_a_workload_marker_that_does_not_validate_stops_the_session_naming_the_field(sample, tmp_path):
    (sample / "pkg" / "training.py").write_text(textwrap.dedent(TRAINING))
    (sample / "tests" / "test_mod.py").write_text(
        textwrap.dedent(WORKLOAD_TESTS).replace('"minimum": 2', '"minimum": 20')
    )
    run = run_pytest(sample, tmp_path / "data", "--fastci-evidence-method", "tracing")
    assert run.returncode == 4  # usage error: no test ran
    assert "tests/test_mod.py::test_train: @pytest.mark.fastci_workload" in run.stderr
    assert "minimum 20 of dimension 'steps' is above its full value 10" in run.stderr
    sampled = run_pytest(sample, tmp_path / "data2", "--fastci-evidence-method", "sampling")
    assert sampled.returncode == 4 and "needs --fastci-evidence-method tracing" in sampled.stderr


def test_results_and_evidence_name_the_matrix_cell_they_ran_in(sample, tmp_path):
    run = run_pytest(
        sample,
        tmp_path / "data",
        "--fastci-results",
        "--fastci-env",
        "cuda12",
        FASTCI_REPO="acme/proj",
        SPIN_SCALE="0.01",
    )
    assert run.returncode == 0, run.stdout + run.stderr
    expected = {
        "python": platform.python_version(),
        "implementation": sys.implementation.name,
        "platform": sysconfig.get_platform(),
        "name": "cuda12",
    }
    results = [orjson.loads(r.payload) for r in DataDir(tmp_path / "data").log.topic("results").read()]
    assert len(results) == 5 and all(r["environment"] == expected for r in results)
    assert all(e["environment"] == expected for e in evidence(tmp_path / "data").values())
    feature = f"{sys.implementation.name}{sys.version_info[0]}.{sys.version_info[1]}"
    assert Environment(**expected).cell == f"{feature}/{sysconfig.get_platform()}/cuda12"  # a patch release: same cell
    # $FASTCI_ENV names the cell when the flag does not; without either, the cell has no name
    again = run_pytest(sample, tmp_path / "data2", "--fastci-results", FASTCI_ENV="nightly-deps", SPIN_SCALE="0.01")
    assert again.returncode == 0, again.stdout + again.stderr
    named = {
        orjson.loads(r.payload)["environment"]["name"] for r in DataDir(tmp_path / "data2").log.topic("results").read()
    }
    assert named == {"nightly-deps"}
