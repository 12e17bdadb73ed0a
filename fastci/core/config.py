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
SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")
# Calling contexts the evidence collector keeps per unit per test (--fastci-evidence-contexts): what
# pruning reads, and what more of them buys, in docs/selection.md.
EVIDENCE_CONTEXTS = 1


class ConfigError(ValueError):
    """A setting that cannot work (an environment value, a data dir); the message names it and why."""


def data_dir() -> Path:
    """``$FASTCI_DATA_DIR``, else ``.fastci``; set but empty is a mistake (it would mean the current folder)."""
    given = os.environ.get("FASTCI_DATA_DIR")
    if given is None:
        return DEFAULT_DATA_DIR
    if not given.strip():
        raise ConfigError(f"FASTCI_DATA_DIR is set but empty: unset it (default {DEFAULT_DATA_DIR}) or name a folder")
    return Path(given)


def cache_dir() -> Path:
    """Where fastci keeps what it can compute again (what evidence read of source files and of the
    installed distributions): ``$FASTCI_CACHE_DIR``, else ``$XDG_CACHE_HOME/fastci``, else
    ``~/.cache/fastci``. Deleting it loses nothing."""
    given = os.environ.get("FASTCI_CACHE_DIR") or ""
    if given.strip():
        return Path(given)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fastci"


def check_data_dir(path: Path, named: str, must_exist: bool) -> None:
    """Refuse, in one line starting with ``named`` (how the user gave it), a data dir fastci cannot use: a
    file, a path under a file, a folder inside another data dir's log (its records would be mistaken for
    topics), or, when ``must_exist``, a folder that does not exist (a typo would start an empty history)."""
    absolute = Path(os.path.abspath(path))
    for folder in (absolute, *absolute.parents):
        if folder.exists() and not folder.is_dir():
            what = "a file" if folder == absolute else f"under {display_path(folder)}, which is a file"
            raise ConfigError(f"{named}: {what}, not a folder")
        if folder.name == "log" and _is_log(folder):
            owner = display_path(folder.parent)
            raise ConfigError(f"{named}: inside the log of the data dir {owner}; give {owner} itself")
    if must_exist and not absolute.is_dir():
        raise ConfigError(
            f"{named}: no such folder (the first fastci demo, fastci import or pytest --fastci-results makes a "
            "data dir; --create makes an empty one here)"
        )


def _is_log(folder: Path) -> bool:
    """Whether ``folder`` is an embedded log: topic folders holding segment files, named by their first
    offset in 20 digits (so ``/var/log``, with its ``apt/history.log``, is not one)."""
    try:
        return any(topic.is_dir() and next(topic.glob(_SEGMENT), None) is not None for topic in folder.iterdir())
    except OSError:
        return False


_SEGMENT = "[0-9]" * 20 + ".log"  # fastci.runtime.log's segment file names


def display_path(path: Path) -> str:
    """``path`` relative to the current folder when it is under it, else absolute."""
    relative = os.path.relpath(path)
    return path.as_posix() if relative.startswith("..") else relative


def _env_text(env: Any, name: str, default: str) -> str:
    value = env.get(name)
    if value is None:
        return default
    if not value.strip():
        raise ConfigError(f"{name} is set but empty: unset it (default {default}) or give a value")
    return value


def _env_number(env: Any, name: str, default: str, kind: type, least: float, above: bool = False) -> Any:
    text = _env_text(env, name, default)
    try:
        value = kind(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r}: not a {'whole ' if kind is int else ''}number") from None
    if not (value > least if above else value >= least):  # NaN too
        raise ConfigError(f"{name}={text!r}: must be {'more than' if above else 'at least'} {least:g}")
    return value


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
        """The settings from ``$FASTCI_KAFKA_*``, then ``overrides``; a value that cannot work (empty, not a
        number, an unknown protocol) raises ``ConfigError`` naming the variable."""
        env = os.environ
        protocol = _env_text(env, "FASTCI_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"FASTCI_KAFKA_SECURITY_PROTOCOL={protocol!r}: not one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        settings = cls(
            bootstrap=_env_text(env, "FASTCI_KAFKA_BOOTSTRAP", DEFAULT_BOOTSTRAP),
            namespace=env.get("FASTCI_KAFKA_NAMESPACE", ""),
            app=_env_text(env, "FASTCI_KAFKA_APP", "fastci"),
            partitions=_env_number(env, "FASTCI_KAFKA_PARTITIONS", "4", int, 1),
            replication=_env_number(env, "FASTCI_KAFKA_REPLICATION", "1", int, 1),
            security_protocol=protocol,
            sasl_mechanism=env.get("FASTCI_KAFKA_SASL_MECHANISM"),
            username=env.get("FASTCI_KAFKA_USERNAME"),
            password=env.get("FASTCI_KAFKA_PASSWORD"),
            ssl_cafile=env.get("FASTCI_KAFKA_SSL_CAFILE"),
            session_timeout_s=_env_number(env, "FASTCI_KAFKA_SESSION_TIMEOUT_S", "10", float, 0, above=True),
        )
        settings = replace(settings, **{k: v for k, v in overrides.items() if v is not None})
        if not settings.bootstrap.strip():
            raise ConfigError("--bootstrap is empty: give host:port of a Kafka broker")
        return settings

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
