"""``pytest --fastci-select`` against the real broker and the faust worker: the job publishes its
commit, waits for the worker's plan and runs just that; with the broker gone it runs everything and
says why."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from ci_repo import ALL_TESTS, clean_env, collect_evidence, edit, make_repo, pytest_in
from kafka_helpers import start_worker, stop_worker, wait_until_consumed

pytestmark = pytest.mark.kafka


def kafka_env(kafka, data, **extra):
    return clean_env(
        data,
        FASTCI_TARGET="kafka",
        FASTCI_KAFKA_BOOTSTRAP=kafka.bootstrap,
        FASTCI_KAFKA_NAMESPACE=kafka.namespace,
        FASTCI_KAFKA_PARTITIONS=str(kafka.partitions),
        **extra,
    )


def test_the_job_gets_the_workers_plan_and_runs_just_that(kafka, tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    env = kafka_env(kafka, data)
    worker = start_worker(kafka, tmp_path / "worker.log")
    try:
        collect_evidence(repo, data, env=env)  # evidence and results go to Kafka (FASTCI_TARGET)
        wait_until_consumed(kafka, worker, tmp_path / "worker.log")
        edit(repo, "pkg/stats.py", "return sum(values) / len(values)", "return sum(values) / float(len(values))", "m")
        run = pytest_in(repo, data, "-q", "-rA", "--fastci-select", env=env)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "2 passed, 5 deselected" in run.stdout
        assert f"running 2 of {ALL_TESTS} known tests" in run.stdout
        assert "asking the fastci worker for 1 plan(s)" in run.stderr
        again = pytest_in(repo, data, "-q", "--fastci-select", env=env)  # the plan is there: no asking
        assert "2 passed, 5 deselected" in again.stdout and "asking" not in again.stderr
    finally:
        stop_worker(worker)
    assert not (data / "log").exists()  # nothing went to the embedded log


def test_an_unreachable_broker_makes_the_job_run_everything_and_say_why(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    env = clean_env(data, FASTCI_TARGET="kafka", FASTCI_KAFKA_BOOTSTRAP="127.0.0.1:1")
    edit(repo, "pkg/text.py", 'return word.upper() + "!"', 'return word.upper() + "!!"[:1]', "shout")
    run = pytest_in(repo, data, "-q", "--fastci-select", "--fastci-select-timeout", "20", env=env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{ALL_TESTS} passed" in run.stdout
    assert f"running all {ALL_TESTS} collected tests: Kafka at 127.0.0.1:1 did not answer" in run.stdout


def test_the_broker_stopped_mid_job_makes_the_job_run_everything_and_say_why(private_broker, tmp_path):
    from fastci.core.config import KafkaSettings

    settings = KafkaSettings(bootstrap=private_broker.bootstrap, namespace=f"stop{int(time.time())}-")
    repo, data = make_repo(tmp_path), tmp_path / "data"
    env = kafka_env(settings, data)
    edit(repo, "pkg/text.py", 'return word.upper() + "!"', 'return word.upper() + "!!"[:1]', "shout")
    job = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--fastci-select"]
        + ["--fastci-select-timeout", "25"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    asking = threading.Event()

    def read() -> None:
        for line in job.stderr:
            lines.append(line)
            if "asking the fastci worker" in line:
                asking.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert asking.wait(60), "".join(lines)  # the job published its commit and waits for a plan (no worker)
    private_broker.stop()  # the broker goes away under it
    try:
        out = job.stdout.read()
        job.wait(120)
    finally:
        private_broker.start()  # the fixture stops it at the end
    reader.join(5)
    errors = lines
    assert job.returncode == 0, out + "".join(errors)
    assert f"{ALL_TESTS} passed" in out
    assert f"running all {ALL_TESTS} collected tests: " in out
    assert "no plan within 25 s from Kafka" in out or "did not answer" in out, out
