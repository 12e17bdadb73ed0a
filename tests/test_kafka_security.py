"""A secured cluster: SCRAM users on the broker; fastci's clients and its faust worker connect by
configuration; wrong credentials are refused."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest
from aiokafka.errors import KafkaConnectionError

from fastci.config import KafkaSettings
from fastci.events import TOPICS
from fastci.runtime.kafka_io import ensure_topics, publish

from conftest import SCRAM_USERS
from factories import result
from kafka_helpers import read_events, stop_worker, wait_until_consumed

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def scram(bootstrap: str, username: str, password: str) -> KafkaSettings:
    return KafkaSettings(
        bootstrap=bootstrap,
        namespace="secure-",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        username=username,
        password=password,
    )


def test_wrong_credentials_are_refused_and_right_ones_work(scram_broker, tmp_path):
    for username, password in (("alice", "wrong"), ("mallory", "alice-pw")):
        with pytest.raises(KafkaConnectionError):
            asyncio.run(ensure_topics(scram(scram_broker.bootstrap, username, password), TOPICS))
    with pytest.raises(KafkaConnectionError):  # a client that does not authenticate at all
        asyncio.run(ensure_topics(KafkaSettings(bootstrap=scram_broker.bootstrap), TOPICS))

    settings = scram(scram_broker.bootstrap, "alice", SCRAM_USERS["alice"])
    events = [result(run_id="r1", status="passed"), result(run_id="r2", status="failed")]
    asyncio.run(ensure_topics(settings, TOPICS))
    asyncio.run(publish(settings, events))

    env = {
        **os.environ,
        "FASTCI_KAFKA_BOOTSTRAP": settings.bootstrap,
        "FASTCI_KAFKA_NAMESPACE": settings.namespace,
        "FASTCI_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "FASTCI_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
        "FASTCI_KAFKA_USERNAME": "alice",
        "FASTCI_KAFKA_PASSWORD": SCRAM_USERS["alice"],
    }
    log = tmp_path / "worker.log"
    worker = subprocess.Popen([sys.executable, "-m", "fastci.cli", "worker"], env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    try:
        wait_until_consumed(settings, worker, log)
    finally:
        stop_worker(worker)
    [flip] = read_events(settings, "test-status-changed")
    assert (flip.run_id, flip.current) == ("r2", "failing")
    assert "alice-pw" not in log.read_text()  # the password is never logged
