"""--fastci-results on real pytest runs of small generated suites."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from fastci.producer.pytest_results import _Outcome
from fastci.runtime.embedded import DataDir

SUITE = """
import pytest

def test_passes(): pass
def test_fails(): assert 1 == 2
@pytest.mark.skip(reason="not here")
def test_skipped(): pass
@pytest.fixture
def broken(): raise RuntimeError("setup broke")
def test_errors(broken): pass
@pytest.mark.xfail(reason="known")
def test_expected_failure(): assert False
@pytest.mark.parametrize(("width", "dtype"), [(16, "bf16"), (32, "fp8")])
def test_parametrized(width, dtype, fastci_result):
    fastci_result.metric("tokens_per_s", 100.0, 101.5)
    fastci_result.loss_curve = [2.0, 1.5, 1.2]
    fastci_result.eval_score = 0.93
    fastci_result.seed = 1234
    fastci_result.config["steps"] = 3
"""

ENV = {
    "FASTCI_BUNDLE_COMPILER": "1.2.1",
    "FASTCI_BUNDLE_KERNELS": "2.3.1",
    "FASTCI_BUNDLE_RUNTIME": "3.1.0",
    "FASTCI_BUNDLE_DRIVER": "550.54.15",
    "FASTCI_BUNDLE_FIRMWARE": "96.00",
    "FASTCI_HARDWARE_REVISION": "rev-b",
    "FASTCI_NODE_ID": "node-07",
    "FASTCI_REPO": "acme/llm",
    "FASTCI_COMMIT": "abcdef1234567",
    "FASTCI_TRIGGER": "nightly",
    "FASTCI_RUN_ID": "nightly-42",
}


def run_suite(tmp_path: Path, *args: str, suite: str = SUITE, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "suite").mkdir(exist_ok=True)
    (tmp_path / "suite" / "test_suite.py").write_text(textwrap.dedent(suite))
    base = {k: v for k, v in os.environ.items() if not k.startswith("FASTCI_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=tmp_path / "suite",
        env={**base, "FASTCI_DATA_DIR": str(tmp_path / "data"), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def published(data_dir: Path) -> dict[str, dict]:
    log = DataDir(data_dir).log.topic("results")
    return {doc["test_id"].split("::")[1]: doc for doc in (orjson.loads(r.payload) for r in log.read())}


def test_one_result_per_test_with_status_context_and_what_the_test_recorded(tmp_path):
    run = run_suite(tmp_path, "--fastci-results", **ENV)
    assert run.returncode == 1, run.stdout + run.stderr  # the suite's own verdict, untouched
    assert "fastci: 7 result(s) of run nightly-42 published to the embedded log" in run.stdout
    results = published(tmp_path / "data")
    assert {name: r["status"] for name, r in results.items()} == {
        "test_passes": "passed",
        "test_fails": "failed",
        "test_skipped": "skipped",
        "test_errors": "error",
        "test_expected_failure": "skipped",
        "test_parametrized[16-bf16]": "passed",
        "test_parametrized[32-fp8]": "passed",
    }
    wide = results["test_parametrized[32-fp8]"]
    assert wide["config"] == {"width": 32, "dtype": "fp8", "steps": 3}
    assert wide["metrics"] == {"tokens_per_s": [100.0, 101.5]}
    assert (wide["loss_curve"], wide["eval_score"], wide["seed"]) == ([2.0, 1.5, 1.2], 0.93, 1234)
    for r in results.values():
        assert (r["run_id"], r["trigger"], r["node_id"], r["hardware_revision"]) == (
            "nightly-42",
            "nightly",
            "node-07",
            "rev-b",
        )
        assert r["bundle"]["kernels"] == "2.3.1" and r["repo"] == "acme/llm" and r["duration_s"] >= 0


def test_without_the_flag_nothing_is_published_and_the_fixture_still_works(tmp_path):
    run = run_suite(tmp_path, **ENV)
    assert run.returncode == 1 and "1 failed, 3 passed, 1 skipped, 1 xfailed, 1 error" in run.stdout
    assert "fastci:" not in run.stdout
    assert not (tmp_path / "data").exists()


def test_an_incomplete_bundle_stops_the_session_naming_the_field(tmp_path):
    env = {k: v for k, v in ENV.items() if k != "FASTCI_BUNDLE_KERNELS"}
    run = run_suite(tmp_path, "--fastci-results", **env)
    assert run.returncode == 4  # pytest's usage error: nothing ran
    assert "field 'bundle.kernels': not given (set FASTCI_BUNDLE_KERNELS" in run.stderr


def test_a_plain_repository_needs_no_accelerator_context(tmp_path):
    plain = {k: v for k, v in ENV.items() if not k.startswith(("FASTCI_BUNDLE_", "FASTCI_HARDWARE"))}
    run = run_suite(tmp_path, "--fastci-results", **plain)
    assert run.returncode == 1, run.stdout + run.stderr  # the suite's own failure, nothing of fastci's
    assert "fastci: 7 result(s) of run nightly-42 published" in run.stdout
    for doc in published(tmp_path / "data").values():
        assert doc["bundle"] is None and doc["hardware_revision"] is None  # absent, never invented
        assert doc["node_id"] == "node-07" and doc["repo"] == "acme/llm"


def test_a_down_target_spools_and_a_later_drain_publishes_everything(tmp_path):
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "log").write_text("a file where the data dir's log should be")
    spool = tmp_path / "spool"
    run = run_suite(
        tmp_path, "--fastci-results", "--fastci-results-spool", str(spool), **{**ENV, "FASTCI_DATA_DIR": str(blocked)}
    )
    assert run.returncode == 1, run.stdout + run.stderr  # the suite finished as usual
    assert "fastci: 7 result(s) of run nightly-42 spooled" in run.stdout
    assert "7 event(s) wait in" in run.stdout
    drain = subprocess.run(
        [
            sys.executable,
            "-m",
            "fastci.cli",
            "--data-dir",
            str(tmp_path / "data"),
            "spool",
            "drain",
            "--spool",
            str(spool),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert drain.returncode == 0, drain.stderr
    assert "sent 7 event(s)" in drain.stderr
    assert len(published(tmp_path / "data")) == 7


def report(when: str, outcome: str, duration: float = 0.1) -> SimpleNamespace:
    return SimpleNamespace(
        when=when,
        outcome=outcome,
        failed=outcome == "failed",
        skipped=outcome == "skipped",
        passed=outcome == "passed",
        duration=duration,
    )


@pytest.mark.parametrize(
    ("phases", "status"),
    [
        ([("setup", "passed"), ("call", "passed"), ("teardown", "passed")], "passed"),
        (
            [("setup", "passed"), ("call", "rerun"), ("setup", "passed"), ("call", "passed"), ("teardown", "passed")],
            "flaky",
        ),
        (
            [("setup", "passed"), ("call", "rerun"), ("setup", "passed"), ("call", "failed"), ("teardown", "passed")],
            "failed",
        ),
        ([("setup", "passed"), ("call", "passed"), ("teardown", "failed")], "error"),
        ([("setup", "skipped"), ("teardown", "passed")], "skipped"),
    ],
)
def test_status_from_the_reports_of_a_test(phases, status):
    outcome = _Outcome([report(when, how) for when, how in phases])
    assert outcome.status() == status
    assert outcome.duration() == pytest.approx(0.1 * len(phases))


ODD_PARAMETERS = """
import math

import numpy as np
import pytest


class Opaque:  # the default repr carries a memory address, new in every process
    pass


class Point:
    def __init__(self, x):
        self.x = x

    def __repr__(self):
        return f"Point({self.x})"


VALUES = [
    float("nan"),
    math.nan,
    float("inf"),
    -math.inf,
    np.float64("nan"),
    np.int64(7),
    np.array([1.0, np.nan]),
    b"\\x00\\xffbytes",
    Opaque(),
    object(),
    Point(3),
    [1.0, float("nan")],
    (1, (2, float("inf"))),
    {"a": float("nan"), "b": [b"x"], "c": Opaque()},
    {"left", "right", "up", "down"},
    frozenset({"x", "y", "z"}),
    2**80,
    complex(1, 2),
    lambda x: x,
    None,
    "plain",
    1.5,
    [1, 2],
]


@pytest.mark.parametrize("value", VALUES)
def test_value(value):
    pass


@pytest.mark.parametrize(("x", "y"), [(float("nan"), Opaque()), (math.inf, {3, 1, 2})])
def test_pair(x, y, fastci_result):
    fastci_result.config["recorded"] = float("nan")
"""


def test_every_parametrised_result_is_published_with_the_same_config_in_every_process(tmp_path):
    """NaN, infinities, objects, bytes and nested containers as parameters: each result reaches
    the history, each parameter recorded by a text that two processes (string hashing and memory
    addresses differing) write alike."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for args in (
        ("init", "-q", "-b", "main"),
        ("config", "user.email", "dev@example.com"),
        ("config", "user.name", "Dev"),
    ):
        subprocess.run(["git", *args], cwd=suite, check=True)
    (suite / "test_odd.py").write_text(textwrap.dedent(ODD_PARAMETERS))
    subprocess.run(["git", "add", "-A"], cwd=suite, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "odd parameters"], cwd=suite, check=True)

    configs = []
    for seed in ("1", "2"):
        data = tmp_path / f"data-{seed}"
        base = {k: v for k, v in os.environ.items() if not k.startswith("FASTCI_")}
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--fastci-results"],
            cwd=suite,
            env={**base, "FASTCI_DATA_DIR": str(data), "FASTCI_RUN_ID": f"run-{seed}", "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        assert "25 passed" in run.stdout and "not published" not in run.stdout, run.stdout
        assert "fastci: 25 result(s) of run" in run.stdout, run.stdout
        log = DataDir(data).log.topic("results")
        configs.append([orjson.loads(r.payload)["config"] for r in log.read()])  # in run order
    first, second = configs
    assert first == second  # the same text in both processes, test by test
    assert [config["value"] for config in first[:23]] == [
        "nan",
        "nan",
        "inf",
        "-inf",
        "nan",
        7,
        "array([ 1., nan])",
        "b'\\x00\\xffbytes'",
        "<test_odd.Opaque object>",
        "<object object>",
        "Point(3)",
        [1.0, "nan"],
        "(1, (2, inf))",
        "{'a': nan, 'b': [b'x'], 'c': <test_odd.Opaque object>}",
        "{'down', 'left', 'right', 'up'}",
        "frozenset({'x', 'y', 'z'})",
        str(2**80),
        "(1+2j)",
        "<function <lambda>>",
        None,
        "plain",
        1.5,
        [1, 2],
    ]
    assert first[23:] == [
        {"x": "nan", "y": "<test_odd.Opaque object>", "recorded": "nan"},
        {"x": "inf", "y": "{1, 2, 3}", "recorded": "nan"},
    ]
