"""Settings from the environment (and CLI flags, which override them)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

DEFAULT_DATA_DIR = Path(".fastci")
DEFAULT_BOOTSTRAP = "127.0.0.1:19092"  # docker/kafka/kafka.sh starts the local broker here
# The embedded runtime's defaults, here so the CLI names them without importing the runtime.
DEFAULT_BATCH = 2000  # records a processor applies at a time
COMMIT_EVERY = 50_000  # records a processor applies between commits while it has more to apply


def data_dir() -> Path:
    return Path(os.environ.get("FASTCI_DATA_DIR", DEFAULT_DATA_DIR))


@dataclass(frozen=True)
class KafkaSettings:
    """How to reach the cluster, and the namespace fastci's topics and consumer groups live in."""

    bootstrap: str = DEFAULT_BOOTSTRAP
    namespace: str = ""  # prefixed to every topic and the app id; lets tenants or tests share a cluster
    app: str = "fastci"  # the worker's consumer group and Table prefix; a second app reads the same topics
    partitions: int = 4
    replication: int = 1  # a single local broker; use 3 on a real cluster
    security_protocol: str = "PLAINTEXT"  # PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL
    sasl_mechanism: str | None = None  # e.g. SCRAM-SHA-256
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    session_timeout_s: float = 10.0  # how soon a dead worker's partitions move (faust's default is 60 s)

    @classmethod
    def from_env(cls, **overrides: Any) -> KafkaSettings:
        env = os.environ
        settings = cls(
            bootstrap=env.get("FASTCI_KAFKA_BOOTSTRAP", DEFAULT_BOOTSTRAP),
            namespace=env.get("FASTCI_KAFKA_NAMESPACE", ""),
            app=env.get("FASTCI_KAFKA_APP", "fastci"),
            partitions=int(env.get("FASTCI_KAFKA_PARTITIONS", "4")),
            replication=int(env.get("FASTCI_KAFKA_REPLICATION", "1")),
            security_protocol=env.get("FASTCI_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT"),
            sasl_mechanism=env.get("FASTCI_KAFKA_SASL_MECHANISM"),
            username=env.get("FASTCI_KAFKA_USERNAME"),
            password=env.get("FASTCI_KAFKA_PASSWORD"),
            ssl_cafile=env.get("FASTCI_KAFKA_SSL_CAFILE"),
            session_timeout_s=float(env.get("FASTCI_KAFKA_SESSION_TIMEOUT_S", "10")),
        )
        return replace(settings, **{k: v for k, v in overrides.items() if v is not None})

    @property
    def app_id(self) -> str:
        return f"{self.namespace}{self.app}"

    def topic(self, name: str) -> str:
        return f"{self.namespace}{name}"

    def changelog_topic(self, processor: str) -> str:
        """Where faust keeps a processor's Table (``<app id>-<table>-changelog``)."""
        return f"{self.app_id}-{processor}-changelog"

    def client_options(self) -> dict[str, Any]:
        """Connection keyword arguments shared by aiokafka producers, consumers and admin clients."""
        options: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            options |= {
                "sasl_mechanism": self.sasl_mechanism,
                "sasl_plain_username": self.username,
                "sasl_plain_password": self.password,
            }
        if self.security_protocol.endswith("SSL"):
            from aiokafka.helpers import create_ssl_context

            options["ssl_context"] = create_ssl_context(cafile=self.ssl_cafile)
        return options
