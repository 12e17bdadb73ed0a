"""A secured cluster: SCRAM users over TLS on the broker; fastci's clients and its faust worker
connect by configuration; wrong credentials, a client without TLS and a client that does not trust
the broker's CA are refused."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import replace

import pytest
from aiokafka.errors import KafkaConnectionError
from conftest import SCRAM_USERS
from factories import result
from kafka_helpers import read_events, stop_worker, wait_until_consumed

from fastci.core.config import KafkaSettings
from fastci.runtime.kafka.broker import ensure_topics, publish
from fastci.topology import TOPICS

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


def scram(broker, username: str, password: str, **overrides) -> KafkaSettings:
    settings = KafkaSettings(
        bootstrap=broker.bootstrap,
        namespace="secure-",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        username=username,
        password=password,
        ssl_cafile=str(broker.ca_file),
    )
    return replace(settings, **overrides)


def refused(settings: KafkaSettings) -> bool:
    try:
        asyncio.run(ensure_topics(settings, TOPICS))
    except KafkaConnectionError:
        return True
    return False


def test_wrong_credentials_are_refused_and_right_ones_work(scram_broker, tmp_path):
    alice_pw = SCRAM_USERS["alice"]
    assert refused(scram(scram_broker, "alice", "wrong"))
    assert refused(scram(scram_broker, "mallory", alice_pw))  # an unknown user
    assert refused(KafkaSettings(bootstrap=scram_broker.bootstrap))  # no TLS, no authentication
    assert refused(scram(scram_broker, "alice", alice_pw, security_protocol="SASL_PLAINTEXT"))  # no TLS
    # The right password, sent only to a broker the client can verify: trusting the system's CAs
    # instead of the cluster's, it does not connect.
    assert refused(scram(scram_broker, "alice", alice_pw, ssl_cafile=None))

    settings = scram(scram_broker, "alice", alice_pw)
    events = [result(run_id="r1", status="passed"), result(run_id="r2", status="failed")]
    asyncio.run(ensure_topics(settings, TOPICS))
    asyncio.run(publish(settings, events))

    env = {
        **os.environ,
        "FASTCI_KAFKA_BOOTSTRAP": settings.bootstrap,
        "FASTCI_KAFKA_NAMESPACE": settings.namespace,
        "FASTCI_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "FASTCI_KAFKA_SSL_CAFILE": settings.ssl_cafile,
        "FASTCI_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
        "FASTCI_KAFKA_USERNAME": "alice",
        "FASTCI_KAFKA_PASSWORD": alice_pw,
    }
    log = tmp_path / "worker.log"
    worker = subprocess.Popen(
        [sys.executable, "-m", "fastci.cli", "worker"], env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT
    )
    try:
        wait_until_consumed(settings, worker, log)
    finally:
        stop_worker(worker)
    [flip] = read_events(settings, "test-status-changed")
    assert (flip.run_id, flip.current) == ("r2", "failing")
    assert alice_pw not in log.read_text()  # the password is never logged
