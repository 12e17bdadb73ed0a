"""``fastci runner --kafka``: run requests reach their runner through the broker, not only the embedded log."""

from __future__ import annotations

import asyncio

import pytest
from kafka_helpers import read_events
from test_rerun import MODEL, environment

from fastci.cli.main import main
from fastci.contracts.runs import RunRequested
from fastci.reproduce.request import rerun_request
from fastci.runtime.kafka.broker import ensure_topics, publish

pytestmark = pytest.mark.kafka


def kafka_args(kafka) -> list[str]:
    return ["--bootstrap", kafka.bootstrap, "--namespace", kafka.namespace]


def test_the_runner_consumes_run_requests_from_kafka_once_each(kafka, tmp_path, monkeypatch, capsys):
    environment(monkeypatch)
    monkeypatch.setenv("FASTCI_KAFKA_PARTITIONS", str(kafka.partitions))
    asyncio.run(ensure_topics(kafka, ["results", "run-requested"]))
    qualify = ["qualify", "--model", MODEL, "--precision", "bf16", "--trigger", "nightly", "--run-id", "n-1"]
    assert main([*kafka_args(kafka), "--data-dir", str(tmp_path), *qualify, "--kafka"]) == 0
    (inference,) = [r for r in read_events(kafka, "results") if r.test_id.endswith("/inference")]
    request = rerun_request(inference, elsewhere=True)
    someone_elses = RunRequested(
        cause_id="c" * 32,
        purpose="bisect",
        test_id="tests/test_x.py::test_y",
        repo="r",
        commit="abcdef1",
        bundle=inference.bundle,
        hardware_revision="rev-a",
        work_class="bisect",
        repeats=1,
        requested_by="bisect",
    )
    asyncio.run(publish(kafka, [request, someone_elses]))
    runner = [*kafka_args(kafka), "runner", "--kafka", "--once", "--node-id", "node-07"]
    assert main(runner) == 0
    err = capsys.readouterr().err
    assert "2 request(s) read, 1 run and published" in err and "not a qualification test" in err
    rerun = [r for r in read_events(kafka, "results") if r.trigger == "rerun"]
    assert [(r.run_id, r.node_id, r.output_digest) for r in rerun] == [
        (f"rerun-{request.id}", "node-07", inference.output_digest)  # the same bits, on another node
    ]
    assert main(runner) == 0  # its group committed both: nothing runs twice
    assert "0 request(s) read, 0 run and published" in capsys.readouterr().err
    assert len([r for r in read_events(kafka, "results") if r.trigger == "rerun"]) == 1
