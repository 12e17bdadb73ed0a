"""Shared fixtures. The Kafka fixture uses the broker given by FASTCI_KAFKA_BOOTSTRAP, or starts one
with docker/kafka/kafka.sh; tests that need it fail (never skip) when no broker answers."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fastci.core.config import KafkaSettings

ROOT = Path(__file__).resolve().parents[1]
KAFKA_SH = ROOT / "docker" / "kafka" / "kafka.sh"


async def _reachable(bootstrap: str) -> None:
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        await admin.list_topics()
    finally:
        await admin.close()


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    given = os.environ.get("FASTCI_KAFKA_BOOTSTRAP")
    started = False
    if not given:
        # Stop it at the end only if this session started it: a running broker may be someone else's.
        running = subprocess.run([str(KAFKA_SH), "status"], capture_output=True, timeout=60).returncode == 0
        run = subprocess.run([str(KAFKA_SH), "start"], capture_output=True, text=True, timeout=300)
        if run.returncode != 0:
            pytest.fail(f"could not start the Kafka broker with {KAFKA_SH}:\n{run.stderr[-3000:]}")
        given = run.stdout.strip().split("=", 1)[1]
        started = not running
    try:
        asyncio.run(_reachable(given))
    except Exception as error:  # the broker must answer: integration tests fail, never skip
        pytest.fail(f"Kafka broker at {given} does not answer: {error!r}")
    yield given
    if started:
        subprocess.run([str(KAFKA_SH), "stop"], capture_output=True, timeout=120)


@pytest.fixture
def kafka(kafka_bootstrap: str) -> KafkaSettings:
    """Settings for a fresh namespace: every test gets its own topics and consumer group."""
    return KafkaSettings(bootstrap=kafka_bootstrap, namespace=f"t{uuid.uuid4().hex[:10]}-", partitions=4)


# Figures measured by integration tests (recovery times...), printed at the end of the run.
FIGURES: list[str] = []


@pytest.fixture
def report_figure():
    return FIGURES.append


def pytest_terminal_summary(terminalreporter) -> None:
    if FIGURES:
        terminalreporter.section("figures measured by the tests")
        for line in FIGURES:
            terminalreporter.write_line(line)


class PrivateBroker:
    """A second broker on its own port and data dir, for tests that stop and start it."""

    def __init__(self, port: int, data: Path, scram_users: str = "", tls: bool = False, acl: bool = False) -> None:
        self.env = {**os.environ, "FASTCI_KAFKA_PORT": str(port), "FASTCI_KAFKA_DATA": str(data)}
        self.env.pop("FASTCI_KAFKA_SCRAM_USERS", None)
        self.env["FASTCI_KAFKA_TLS"] = "1" if tls else "0"
        self.env["FASTCI_KAFKA_ACL"] = "1" if acl else "0"
        self.data = data
        if scram_users:
            self.env["FASTCI_KAFKA_SCRAM_USERS"] = scram_users
        self.bootstrap = f"127.0.0.1:{port}"
        self.ca_file = data / "tls" / "ca.pem"  # what clients trust when tls is on (kafka.sh makes it)

    def _kafka_sh(self, command: str) -> None:
        done = subprocess.run([str(KAFKA_SH), command], env=self.env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            pytest.fail(f"kafka.sh {command} failed:\n{done.stderr[-3000:]}")

    def start(self) -> None:
        self._kafka_sh("start")

    def stop(self) -> None:
        self._kafka_sh("stop")


@pytest.fixture
def private_broker(tmp_path_factory) -> Iterator[PrivateBroker]:
    broker = PrivateBroker(19392, tmp_path_factory.mktemp("private-broker"))
    broker.start()
    yield broker
    broker.stop()


SCRAM_USERS = {"admin": "admin-secret", "alice": "alice-pw"}


@pytest.fixture
def scram_broker(tmp_path_factory) -> Iterator[PrivateBroker]:
    """A broker whose client listener takes SASL_SSL only: SCRAM-SHA-256 users, over TLS with a
    certificate for 127.0.0.1 signed by a CA of its own (``broker.ca_file``)."""
    users = ",".join(f"{name}:{password}" for name, password in SCRAM_USERS.items())
    broker = PrivateBroker(19492, tmp_path_factory.mktemp("scram-broker"), scram_users=users, tls=True)
    broker.start()
    yield broker
    broker.stop()


# One SCRAM user per role, and the super user (first: the broker's own principal, who applies ACLs).
# The passwords are distinctive so that tests can search for them wherever they must not appear.
ACL_USERS = {
    "admin": "Adm1n-pw-9f3c2e71",
    "producer": "Pr0ducer-pw-4b8d0a55",
    "worker": "W0rker-pw-c61e9f02",
    "analyst": "An4lyst-pw-7d2b3c98",
    "operator": "0perator-pw-e5a1f437",
}


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory) -> Iterator[PrivateBroker]:
    """A broker with the authorizer on (nothing allowed without an ACL) and a SCRAM user per role."""
    users = ",".join(f"{name}:{password}" for name, password in ACL_USERS.items())
    broker = PrivateBroker(19592, tmp_path_factory.mktemp("acl-broker"), scram_users=users, tls=False, acl=True)
    broker.start()
    yield broker
    broker.stop()
