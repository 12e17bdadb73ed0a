"""The producer API: run context, spool, retries, and delivery that never drops an event."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import orjson
import pytest
from factories import result

from fastci.core.codec import encode
from fastci.core.config import KafkaSettings
from fastci.inputs import ResultEvent
from fastci.producer.client import Producer, RetryPolicy
from fastci.producer.context import ContextError, bundle_toml, load_context
from fastci.producer.spool import Spool
from fastci.producer.targets import EmbeddedTarget, KafkaTarget, TargetUnavailable
from fastci.runtime.embedded import DataDir

BUNDLE_ENV = {
    "FASTCI_BUNDLE_COMPILER": "1.2.1",
    "FASTCI_BUNDLE_KERNELS": "2.3.1",
    "FASTCI_BUNDLE_RUNTIME": "3.1.0",
    "FASTCI_BUNDLE_DRIVER": "550.54.15",
    "FASTCI_BUNDLE_FIRMWARE": "96.00",
    "FASTCI_HARDWARE_REVISION": "rev-b",
    "FASTCI_NODE_ID": "node-07",
    "FASTCI_REPO": "acme/llm",
    "FASTCI_COMMIT": "abcdef1234567",
}


class FlakyTarget:
    """Refuses the first ``failures`` sends, then records what it acknowledged."""

    description = "a test target"

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.attempts = 0
        self.acknowledged: list[ResultEvent] = []

    def send(self, events):
        self.attempts += 1
        if self.failures > 0:
            self.failures -= 1
            raise TargetUnavailable("down")
        self.acknowledged.extend(events)


def context():
    return load_context(env=BUNDLE_ENV)


def producer(target, tmp_path, **kwargs) -> Producer:
    sleeps: list[float] = []
    made = Producer(target, Spool(tmp_path / "spool"), context(), sleep=sleeps.append, **kwargs)
    made.sleeps = sleeps  # type: ignore[attr-defined]
    return made


# ----- context


def test_context_from_a_bundle_file_with_the_environment_overriding_it(tmp_path):
    path = tmp_path / "bundle.toml"
    path.write_text(bundle_toml(context()))
    loaded = load_context(
        path, env={"FASTCI_BUNDLE_KERNELS": "2.1.0", "FASTCI_REPO": "acme/x", "FASTCI_COMMIT": "1234567"}
    )
    assert loaded.bundle.kernels == "2.1.0" and loaded.bundle.compiler == "1.2.1"
    assert (loaded.node_id, loaded.hardware_revision, loaded.trigger) == ("node-07", "rev-b", "dev")


def test_context_defaults_come_from_real_git(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(
        ["git", "-C", str(tmp_path), "remote", "add", "origin", "git@github.com:acme/llm-framework.git"], check=True
    )
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path),
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@b",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )
    head = subprocess.run(
        ["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    env = {k: v for k, v in BUNDLE_ENV.items() if k not in ("FASTCI_REPO", "FASTCI_COMMIT")}
    loaded = load_context(env=env, cwd=tmp_path)
    assert (loaded.repo, loaded.commit) == ("acme/llm-framework", head)


def test_a_plain_repository_needs_no_stack_and_its_results_name_none(tmp_path):
    context = load_context(env={"FASTCI_COMMIT": "abcdef1", "FASTCI_REPO": "acme/plain"}, cwd=tmp_path)
    assert context.bundle is None and context.hardware_revision is None and context.node_id
    made = Producer(FlakyTarget(), Spool(tmp_path / "spool"), context, sleep=lambda _: None)
    event = made.result("tests/test_x.py::test_x", "run-1", status="passed", duration_s=0.1)
    assert event.bundle is None and event.hardware_revision is None
    payload = orjson.loads(encode(event))
    assert payload.get("bundle") is None and payload.get("hardware_revision") is None
    assert ResultEvent.model_validate(payload) == event
    assert "hardware_revision" not in bundle_toml(context) and "[bundle]" not in bundle_toml(context)


@pytest.mark.parametrize(
    ("content", "env", "message"),
    [
        # a bundle is every layer or none: one layer alone names the missing ones
        (None, {"FASTCI_BUNDLE_KERNELS": "2.1.0"}, "field 'bundle.compiler': not given (set FASTCI_BUNDLE_COMPILER"),
        (
            'node_id = "n"\nhardware_revision = "r"\n[bundle]\ncompiler = "1"\nkernel = "2"\n',
            {},
            "unknown field(s) bundle.kernel (layers: compiler, kernels, runtime, driver, firmware)",
        ),
        ("node_id = ", {}, "not valid TOML"),
        (None, {**BUNDLE_ENV, "FASTCI_TRIGGER": "weekly"}, "field 'trigger': Input should be 'presubmit'"),
        (None, {**BUNDLE_ENV, "FASTCI_COMMIT": "not-a-sha"}, "field 'commit': String should match pattern"),
    ],
)
def test_bad_context_is_refused_naming_the_field(tmp_path, content, env, message):
    path = None
    if content is not None:
        path = tmp_path / "bundle.toml"
        path.write_text(content)
    with pytest.raises(ContextError) as refused:
        load_context(path, env={"FASTCI_COMMIT": "abcdef1", "FASTCI_REPO": "r", **env})
    assert message in str(refused.value)


# ----- spool and producer


def test_every_event_is_delivered_in_batches_and_the_spool_empties(tmp_path):
    target = FlakyTarget()
    p = producer(target, tmp_path, batch_size=3)
    events = [p.result(f"t{n}", "run-1", status="passed", duration_s=0.5) for n in range(7)]
    assert len(target.acknowledged) == 6  # two full batches went as soon as they filled
    report = p.close()
    assert (report.sent, report.pending, report.error) == (1, 0, None)
    assert [e.id for e in target.acknowledged] == [e.id for e in events]
    assert all(e.bundle.kernels == "2.3.1" and e.node_id == "node-07" and e.commit == "abcdef1234567" for e in events)


def test_a_failed_send_is_retried_with_backoff(tmp_path):
    target = FlakyTarget(failures=2)
    p = producer(target, tmp_path, retry=RetryPolicy(attempts=3, first_backoff_s=0.5))
    p.result("t", "run-1", status="failed", duration_s=1.0)
    assert p.close().error is None
    assert target.attempts == 3 and p.sleeps == [0.5, 1.0]  # type: ignore[attr-defined]
    assert len(target.acknowledged) == 1


def test_a_target_that_stays_down_loses_nothing_and_the_next_producer_sends_it(tmp_path):
    down = FlakyTarget(failures=10**6)
    p = producer(down, tmp_path, batch_size=2, retry=RetryPolicy(attempts=2, first_backoff_s=0.1, cooldown_s=3600))
    events = [p.result(f"t{n}", "run-1", status="passed", duration_s=0.1) for n in range(5)]
    report = p.close()
    assert report.error == "down" and report.pending == 5 and report.sent == 0
    assert down.attempts == 4  # the first full batch (2 tries), then cooling down, then close (2 tries)
    up = FlakyTarget()
    later = Producer(up, Spool(tmp_path / "spool"), sleep=lambda s: None)
    assert later.flush().sent == 5
    assert sorted(e.id for e in up.acknowledged) == sorted(e.id for e in events)
    assert Spool(tmp_path / "spool").pending() == 0


def test_a_killed_producer_leaves_its_events_for_the_next_one(tmp_path):
    """kill -9 right after publishing: the open batch is adopted and sent, nothing is lost."""
    spool_dir = tmp_path / "spool"
    code = textwrap.dedent(f"""
        import os, signal
        from fastci.producer import Producer, Spool, load_context
        class Never:
            description = "never"
            def send(self, events): raise AssertionError("must not send")
        p = Producer(Never(), Spool({str(spool_dir)!r}), load_context(env={BUNDLE_ENV!r}), batch_size=1000)
        for n in range(50):
            p.result(f"t{{n}}", "run-9", status="passed", duration_s=0.1)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    killed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    assert [p.suffix for p in spool_dir.iterdir() if not p.name.startswith(".")] == [".open"]
    target = FlakyTarget()
    assert Producer(target, Spool(spool_dir)).flush().sent == 50
    assert len({e.id for e in target.acknowledged}) == 50


def test_resending_a_batch_is_harmless_because_ids_are_content_derived(tmp_path):
    """A batch delivered but not deleted (crash between ack and unlink) goes again: same ids."""
    data = tmp_path / "data"
    events = [result(run_id="r1", test_id=f"tests/t.py::t{n}") for n in range(4)]
    spool = Spool(tmp_path / "spool")
    for event in events:
        spool.append(event)
    sealed = spool.seal()
    copy = sealed.with_name("0" + sealed.name)
    copy.write_bytes(sealed.read_bytes())  # the same batch twice, as after a crash
    report = Producer(EmbeddedTarget(data), spool).flush()
    assert report.sent == 8
    payloads = [r.payload for r in DataDir(data).log.topic("results").read()]
    assert len(payloads) == 8 and len({orjson.loads(p)["id"] for p in payloads}) == 4
    from fastci.views.refresh import refresh_embedded
    from fastci.views.store import Views

    views = Views(tmp_path / "views.duckdb")
    refresh_embedded(data, views)
    assert views.query("SELECT count(*) FROM results")[1] == [(4,)]
    views.close()


def test_damaged_spool_lines_are_dead_lettered_and_set_aside(tmp_path):
    spool = Spool(tmp_path / "spool")
    spool.append(result(run_id="r1"))
    sealed = spool.seal()
    with open(sealed, "ab") as file:
        file.write(b'{"topic": "results", "event": {"test_id": "x"}}\n{"topic": "results", "ev')  # cut short
    target = FlakyTarget()
    report = Producer(target, spool).flush()
    assert (report.sent, report.refused) == (1, 1)
    dead = [e for e in target.acknowledged if e.TOPIC == "dead-letters"]
    assert len(dead) == 1 and "field 'run_id'" in dead[0].error and dead[0].source == "spool"
    assert len((tmp_path / "spool" / "rejected" / sealed.name).read_text().splitlines()) == 1


def test_only_input_topics_can_be_published(tmp_path):
    from fastci.fleet.events import TestStatusChanged

    p = producer(FlakyTarget(), tmp_path)
    status = TestStatusChanged(
        test_id="t",
        result_id="0" * 32,
        run_id="r",
        commit="abcdef1",
        node_id="n",
        previous="passing",
        current="failing",
        status="failed",
        runs=2,
    )
    with pytest.raises(ValueError, match="'test-status-changed' is written by its processor"):
        p.publish(status)


def test_kafka_target_fails_fast_when_nothing_listens():
    target = KafkaTarget(KafkaSettings(bootstrap="127.0.0.1:9"), timeout_s=5)
    started = time.monotonic()
    with pytest.raises(TargetUnavailable, match="Kafka at 127.0.0.1:9"):
        target.send([result(run_id="r1")])
    assert time.monotonic() - started < 5


@pytest.mark.kafka
def test_kafka_target_delivers_and_acknowledges(tmp_path, kafka):
    from kafka_helpers import read_events

    events = [result(run_id=f"r{n}") for n in range(5)]
    p = Producer(KafkaTarget(kafka), Spool(tmp_path / "spool"), batch_size=2)
    for event in events:
        p.publish(event)
    assert p.close().pending == 0
    assert sorted(e.id for e in read_events(kafka, "results")) == sorted(e.id for e in events)


def test_an_open_batch_of_a_live_process_is_left_alone(tmp_path):
    """Another live producer's open batch is still being written: a drain must not take it."""
    writer = Spool(tmp_path / "spool")
    writer.append(result(run_id="r1"))
    other = Spool(tmp_path / "spool")  # same process id, so it counts as alive
    assert other.sealed_batches() == [] and other.pending() == 1
    assert [name for name in os.listdir(tmp_path / "spool") if not name.startswith(".")][0].endswith(".open")
