"""fastci qualify as a user drives it: verdicts, exit codes, published results, bad input."""

from __future__ import annotations

import os

import orjson

from fastci.cli.main import main
from fastci.producer.context import bundle_toml, load_context
from fastci.qualify.stack import HEALTHY
from fastci.runtime.embedded import DataDir

NODE_ENV = {"FASTCI_NODE_ID": "node-03", "FASTCI_REPO": "acme/accel-stack", "FASTCI_COMMIT": "0123abc"}


def qualify(tmp_path, monkeypatch, *args: str) -> int:
    for key in [k for k in os.environ if k.startswith("FASTCI_")]:
        monkeypatch.delenv(key)
    for key, value in NODE_ENV.items():
        monkeypatch.setenv(key, value)
    return main(["--data-dir", str(tmp_path), "qualify", "--model", "dlrm-small", "--precision", "bf16", *args])


def results(tmp_path) -> list[dict]:
    return [orjson.loads(r.payload) for r in DataDir(tmp_path).log.topic("results").read()]


def test_a_healthy_bundle_qualifies_and_publishes_three_results(tmp_path, monkeypatch, capsys):
    assert qualify(tmp_path, monkeypatch, "--trigger", "nightly", "--run-id", "nightly-7") == 0
    err = capsys.readouterr().err
    assert "1 model run(s)" in err and "0 with a failed or flaky check" in err
    published = {r["test_id"]: r for r in results(tmp_path)}
    assert sorted(published) == [f"qualify/dlrm-small/bf16/{c}" for c in ("inference", "throughput", "training")]
    for r in published.values():
        assert r["status"] == "passed" and r["run_id"] == "nightly-7" and r["trigger"] == "nightly"
        assert r["bundle"] == HEALTHY.model_dump() and r["node_id"] == "node-03" and r["chips"] == 1
        assert r["config"]["precision"] == "bf16" and r["config"]["family"] == "recommendation"
    training = published["qualify/dlrm-small/bf16/training"]
    assert len(training["loss_curve"]) == 600 and 0.8 < training["eval_score"] < 0.9
    assert len(published["qualify/dlrm-small/bf16/throughput"]["metrics"]["throughput_samples_per_s"]) >= 100
    assert published["qualify/dlrm-small/bf16/inference"]["metrics"]["relative_error"][0] > 0


def test_a_bundle_file_picks_the_versions_and_a_defect_fails_the_run(tmp_path, monkeypatch, capsys):
    bundle = tmp_path / "bundle.toml"
    context = load_context(env={**NODE_ENV, "FASTCI_HARDWARE_REVISION": "rev-b"}, defaults={"bundle": HEALTHY})
    bundle.write_text(
        bundle_toml(context.model_copy(update={"bundle": HEALTHY.model_copy(update={"kernels": "2.1.0"})}))
    )
    assert qualify(tmp_path, monkeypatch, "--bundle", str(bundle)) == 1
    captured = capsys.readouterr()
    assert "kernels 2.1.0" in captured.err and "defects: kernel-rounding-bug" in captured.err
    assert "FAILED" in captured.out
    statuses = {r["test_id"].rsplit("/", 1)[1]: r["status"] for r in results(tmp_path)}
    assert statuses["inference"] == "failed"
    assert all(r["bundle"]["kernels"] == "2.1.0" and r["hardware_revision"] == "rev-b" for r in results(tmp_path))


def test_bad_input_is_refused_naming_what_is_wrong(tmp_path, monkeypatch, capsys):
    assert qualify(tmp_path, monkeypatch, "--model", "gpt-5") == 2
    assert "--model: 'gpt-5' is not in the qualification set" in capsys.readouterr().err
    bundle = tmp_path / "bundle.toml"
    bundle.write_text('hardware_revision = "r"\n[bundle]\nkernels = "two"\n')
    assert qualify(tmp_path, monkeypatch, "--bundle", str(bundle)) == 2
    assert "bundle field 'kernels': 'two' is not a version like 1.2.0" in capsys.readouterr().err
    assert qualify(tmp_path, monkeypatch, "--inject", "cosmic-rays") == 2
    assert "unknown defect 'cosmic-rays'" in capsys.readouterr().err
    baseline = tmp_path / "baseline.toml"
    baseline.write_text('[bundle]\ncompiler = "1.2.1"\nkernels = "2.3.1"\n')
    assert qualify(tmp_path, monkeypatch, "--baseline", str(baseline)) == 2
    assert "field 'bundle.runtime': not given; field 'bundle.driver': not given" in capsys.readouterr().err
    assert not DataDir(tmp_path).log.topic("results").end().offset


def test_list_defects_names_each_with_the_version_that_brings_it(tmp_path, monkeypatch, capsys):
    assert qualify(tmp_path, monkeypatch, "--list-defects") == 0
    out = capsys.readouterr().out
    for line in (
        "kernel-rounding-bug",
        "kernels 2.1.0",
        "compiler-bf16-accumulation",
        "compiler 1.2.0",
        "kernel-extra-work",
        "kernels 2.2.0",
        "kernel-nondeterministic-reduction",
        "kernels 2.3.0",
    ):
        assert line in out
