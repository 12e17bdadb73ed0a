"""fastci rerun end to end on the emulated backend: a qualification result, its rerun request, the
runner executing it, and the same bundle, config, seed and outputs (bit for bit) in the views."""

from __future__ import annotations

import os

import orjson
import pytest

from fastci.cli.main import main
from fastci.contracts.runs import RunRequested
from fastci.qualify.stack import HEALTHY, with_defect
from fastci.reproduce.request import rerun_request
from fastci.reproduce.runner import Runner
from fastci.runtime.embedded import DataDir
from fastci.runtime.publish import publish_embedded
from fastci.views.store import Views

NODE_ENV = {
    "FASTCI_NODE_ID": "node-03",
    "FASTCI_REPO": "acme/accel-stack",
    "FASTCI_COMMIT": "0123abc",
    "FASTCI_HARDWARE_REVISION": "rev-a",
}
MODEL = "dlrm-small"
# Its repeats disagree on over 10% of outputs under arrival-order split-K (convnet-small's few outputs
# agree bit for bit in about one try of twenty, which made the determinism check itself flaky here).
NONDETERMINISTIC_MODEL = "lm-tiny"


def environment(monkeypatch) -> None:
    for key in [k for k in os.environ if k.startswith("FASTCI_")]:
        monkeypatch.delenv(key)
    for key, value in NODE_ENV.items():
        monkeypatch.setenv(key, value)


def fastci(data_dir, *args: str) -> int:
    return main(["--data-dir", str(data_dir), *args])


def rows(data_dir, sql: str, parameters=None) -> list[dict]:
    views = Views(data_dir / "views.duckdb", read_only=True)
    try:
        columns, found = views.query(sql, parameters)
    finally:
        views.close()
    return [dict(zip(columns, row)) for row in found]


def result_row(data_dir, test_id: str, trigger: str) -> dict:
    (row,) = rows(
        data_dir,
        "SELECT * EXCLUDE (_partition, _offset) FROM results WHERE test_id = ? AND trigger = ?",
        [test_id, trigger],
    )
    return row


@pytest.fixture(scope="module")
def qualified(tmp_path_factory):
    """One nightly qualification of dlrm-small (bf16) on the healthy bundle, each result rerun once."""
    data = tmp_path_factory.mktemp("rerun")
    monkeypatch = pytest.MonkeyPatch()
    try:
        environment(monkeypatch)
        assert (
            fastci(data, "qualify", "--model", MODEL, "--precision", "bf16", "--trigger", "nightly", "--run-id", "n-1")
            == 0
        )
        assert fastci(data, "views", "refresh") == 0
        originals = {r["test_id"]: r for r in rows(data, "SELECT * FROM results")}
        for _, original in sorted(originals.items()):
            assert fastci(data, "rerun", original["id"][:10], "--elsewhere") == 0
        assert fastci(data, "runner", "--once", "--node-id", "node-07") == 0
        assert fastci(data, "views", "refresh") == 0
    finally:
        monkeypatch.undo()
    return data, originals


def test_every_result_row_carries_its_bundle_versions_and_node(qualified):
    data, _ = qualified
    facts = rows(data, "SELECT * FROM result_facts")
    assert len(facts) == 6
    for row in facts:
        assert row["bundle"] == HEALTHY.model_dump() and row["node_id"] in ("node-03", "node-07")
        assert (row["compiler"], row["kernels"], row["runtime"], row["driver"], row["firmware"]) == tuple(
            HEALTHY.model_dump().values()
        )
        assert row["hardware_revision"] == "rev-a" and row["tier"] == "nightly"  # a rerun takes its original's tier
    assert {r["rerun_of"] is not None for r in facts if r["trigger"] == "rerun"} == {True}


@pytest.mark.parametrize("check", ["inference", "training", "throughput"])
def test_the_rerun_reproduces_config_seed_and_outputs(qualified, check):
    data, originals = qualified
    test_id = f"qualify/{MODEL}/bf16/{check}"
    original, rerun = result_row(data, test_id, "nightly"), result_row(data, test_id, "rerun")
    for field in ("test_id", "repo", "commit", "bundle", "hardware_revision", "seed", "config", "status"):
        assert rerun[field] == original[field], field
    assert rerun["node_id"] == "node-07" and original["node_id"] == "node-03"  # --elsewhere: another node
    assert rerun["seed"] == 20261201 and orjson.loads(rerun["config"])["precision"] == "bf16"
    (outcome,) = rows(data, "SELECT * FROM rerun_outcomes WHERE test_id = ?", [test_id])
    assert outcome["answered"] and outcome["same_seed"] and outcome["same_config"]
    assert outcome["rerun_run"] == f"rerun-{outcome['request_id']}" and outcome["original_id"] == original["id"]
    if check == "throughput":  # timings are measurements, not outputs: the samples differ
        assert outcome["reproduced"]  # (status, loss curve, eval and digest: none recorded for throughput)
        return
    assert rerun["output_digest"] == original["output_digest"] and len(original["output_digest"]) == 64
    metrics = orjson.loads(original["metrics"])
    if check == "inference":
        assert orjson.loads(rerun["metrics"])["relative_error"] == metrics["relative_error"]
    else:
        assert rerun["loss_curve"] == original["loss_curve"] and len(rerun["loss_curve"]) == 600
        assert (
            rerun["eval_score"] == original["eval_score"]
            and orjson.loads(rerun["metrics"])["eval_ratio"] == metrics["eval_ratio"]
        )
    assert outcome["reproduced"] is True


def test_rerun_of_a_defective_bundle_reproduces_the_defect_and_a_nondeterministic_one_is_caught(tmp_path, monkeypatch):
    environment(monkeypatch)
    assert (
        fastci(
            tmp_path,
            "qualify",
            "--model",
            MODEL,
            "--precision",
            "bf16",
            "--inject",
            "kernel-rounding-bug",
            "--trigger",
            "nightly",
        )
        == 1
    )
    assert (
        fastci(
            tmp_path,
            "qualify",
            "--model",
            NONDETERMINISTIC_MODEL,
            "--precision",
            "bf16",
            "--inject",
            "kernel-nondeterministic-reduction",
            "--trigger",
            "nightly",
        )
        == 1
    )
    assert fastci(tmp_path, "views", "refresh") == 0
    wrong = result_row(tmp_path, f"qualify/{MODEL}/bf16/inference", "nightly")
    flaky = result_row(tmp_path, f"qualify/{NONDETERMINISTIC_MODEL}/bf16/inference", "nightly")
    assert (wrong["status"], flaky["status"]) == ("failed", "flaky")
    assert fastci(tmp_path, "rerun", wrong["id"]) == 0 and fastci(tmp_path, "rerun", flaky["id"]) == 0
    assert fastci(tmp_path, "runner", "--once") == 0
    assert fastci(tmp_path, "views", "refresh") == 0
    again = result_row(tmp_path, f"qualify/{MODEL}/bf16/inference", "rerun")
    assert again["bundle"] == with_defect("kernel-rounding-bug").model_dump()  # the bundle pins the defect
    assert again["status"] == "failed" and again["output_digest"] == wrong["output_digest"]
    outcomes = {r["test_id"]: r for r in rows(tmp_path, "SELECT * FROM rerun_outcomes")}
    assert outcomes[f"qualify/{MODEL}/bf16/inference"]["reproduced"] is True
    # split-K partials summed in arrival order: the same request gives other bits, and the view says so
    assert outcomes[f"qualify/{NONDETERMINISTIC_MODEL}/bf16/inference"]["reproduced"] is False
    assert outcomes[f"qualify/{NONDETERMINISTIC_MODEL}/bf16/inference"]["same_config"] is True


def test_rerun_errors_and_the_request_id_is_stable(qualified, tmp_path, capsys):
    data, originals = qualified
    assert fastci(data, "rerun", "0123456789abcdef") == 2
    assert "no result with id '0123456789abcdef'" in capsys.readouterr().err
    assert fastci(data, "rerun", "not-an-id") == 2
    assert "is not a result id" in capsys.readouterr().err
    assert fastci(data, "rerun", next(iter(originals.values()))["id"], "--attempt", "0") == 2
    assert "--attempt: must be at least 1" in capsys.readouterr().err
    assert fastci(tmp_path, "rerun", "abcdef12", "--no-refresh") == 2
    assert f"run 'fastci --data-dir {tmp_path} views refresh' first" in capsys.readouterr().err
    before = len(list(DataDir(data).log.topic("run-requested").read()))
    original = next(iter(originals.values()))
    assert fastci(data, "rerun", original["id"], "--elsewhere") == 0  # asked again: the same request
    requests = [orjson.loads(r.payload) for r in DataDir(data).log.topic("run-requested").read()]
    assert len(requests) == before + 1 and requests[-1]["id"] in {r["id"] for r in requests[:-1]}
    assert fastci(data, "views", "refresh") == 0
    assert rows(data, "SELECT count(*) AS n FROM run_requested")[0]["n"] == before


def test_the_runner_runs_only_what_it_can_reproduce_and_remembers_where_it_was(qualified, tmp_path):
    data, originals = qualified
    from fastci.inputs import ResultEvent
    from fastci.report.nightly import load

    views = Views(data / "views.duckdb", read_only=True)
    try:
        (training,) = load(
            views, ResultEvent, where=f"WHERE test_id = 'qualify/{MODEL}/bf16/training' AND trigger = 'nightly'"
        )
    finally:
        views.close()
    changed = training.model_copy(update={"config": {**training.config, "batch": 999}})
    other = RunRequested(
        cause_id="c" * 32,
        purpose="bisect",
        test_id="tests/test_x.py::test_y",
        repo="r",
        commit="abcdef1",
        bundle=training.bundle,
        hardware_revision="rev-a",
        work_class="bisect",
        repeats=3,
        requested_by="bisect",
    )
    publish_embedded(
        tmp_path,
        [
            other,
            rerun_request(changed),
            rerun_request(training, attempt=2, elsewhere=True),
            rerun_request(training, attempt=3),
        ],
    )
    runner = Runner(tmp_path, "node-03", hardware_revision="rev-a")
    notes = [h.note for h in runner.run_once()]
    assert notes[0] == "skipped: not a qualification test (another runner's)"
    assert notes[1] == (
        f"not reproducible: qualify/{MODEL}/bf16/training: the config differs from the model code: "
        "batch 999 (the code has 64)"
    )
    assert notes[2] == "skipped: asked to avoid node-03"
    assert notes[3].startswith("passed (run rerun-")
    assert runner.run_once() == []  # its position was kept
    published = [orjson.loads(r.payload) for r in DataDir(tmp_path).log.topic("results").read()]
    assert len(published) == 1 and published[0]["output_digest"] == training.output_digest
