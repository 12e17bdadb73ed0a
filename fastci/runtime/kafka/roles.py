"""Who may do what on the cluster: fastci's roles as Kafka ACLs, the least each role needs.

- ``producer``: write the input topics (``INPUT_TOPICS``) and ``dead-letters`` (a producer sends
  the lines it refused there, so a bad line is seen, not lost); read nothing.
- ``worker``: read the input topics; read and write the decision topics; write ``dead-letters``;
  read, write and create its own topics, which all start with ``<app id>-`` (the internal topics
  ``<app id>-<topic>-by-<field>``, the Table changelogs ``<app id>-<processor>-changelog`` and
  faust's ``<app id>-__assignor-__leader``); join its consumer group ``<app id>``.
- ``analyst``: read every topic the views load (inputs, decisions, ``dead-letters``) and the Table
  changelogs (processor state, positions); describe the worker's topics (``fastci lag`` reads their
  end offsets); write nothing.
- ``operator``: topic admin in the namespace: create, delete, alter and describe topics and their
  configs (``fastci kafka topics --apply``). Not ACLs: whoever may change ACLs may grant itself
  anything, so ACLs are applied by a super user (``fastci kafka acls --apply``).

Everything is named in the namespace of the settings, literally where the name is known, by prefix
only for the worker's own topics (their names follow from the app id, and faust makes some).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fastci.core.config import KafkaSettings
from fastci.core.processor import Processor
from fastci.runtime.kafka.routes import FORWARDERS
from fastci.topology import DEAD_LETTERS, INPUT_TOPICS, SYSTEM, TOPICS

ROLES = ("producer", "worker", "analyst", "operator")

TOPIC_ADMIN = ("CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS")


@dataclass(frozen=True, order=True)
class Acl:
    """One ALLOW rule: ``principal`` may ``operation`` on the resource (from any host)."""

    principal: str  # User:<name>
    resource: str  # TOPIC, GROUP or CLUSTER
    pattern: str  # LITERAL or PREFIXED
    name: str
    operation: str

    def describe(self) -> str:
        what = f"{self.resource} {self.name}" + ("*" if self.pattern == "PREFIXED" else "")
        return f"ALLOW {self.principal} {self.operation} on {what}"


def principal(user: str) -> str:
    return f"User:{user}"


def decision_topics() -> list[str]:
    return [model.TOPIC for model in SYSTEM.decisions]


def changelog_tables(processors: Iterable[type[Processor] | Processor]) -> list[str]:
    return sorted({p.name for p in processors} | {FORWARDERS})


def role_acls(
    role: str, users: Sequence[str], settings: KafkaSettings, processors: Iterable[type[Processor] | Processor]
) -> list[Acl]:
    """The ACLs of ``role`` for each of ``users`` (SCRAM user names) in ``settings``' namespace."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r} (roles: {', '.join(ROLES)})")
    processors = list(processors)
    own = f"{settings.app_id}-"  # every topic the worker makes: internal, changelogs, faust's leader topic
    rules: list[tuple[str, str, str, str]] = []  # (resource, pattern, name, operation)

    def topics(names: Iterable[str], *operations: str) -> None:
        rules.extend(("TOPIC", "LITERAL", settings.topic(n), op) for n in names for op in operations)

    if role == "producer":
        topics([*INPUT_TOPICS, DEAD_LETTERS], "WRITE")
    elif role == "worker":
        topics(INPUT_TOPICS, "READ")
        topics(decision_topics(), "READ", "WRITE")
        topics([DEAD_LETTERS], "WRITE")
        rules += [("TOPIC", "PREFIXED", own, op) for op in ("READ", "WRITE", "CREATE")]
        rules.append(("GROUP", "LITERAL", settings.app_id, "READ"))
    elif role == "analyst":
        topics([*TOPICS, DEAD_LETTERS], "READ")
        rules += [("TOPIC", "LITERAL", settings.changelog_topic(t), "READ") for t in changelog_tables(processors)]
        rules.append(("TOPIC", "PREFIXED", own, "DESCRIBE"))
    else:  # operator
        # Kafka has no empty prefix: without a namespace, topic admin is on every topic ('*').
        pattern, name = ("PREFIXED", settings.namespace) if settings.namespace else ("LITERAL", "*")
        rules += [("TOPIC", pattern, name, op) for op in TOPIC_ADMIN]
    return sorted({Acl(principal(user), *rule) for user in users for rule in rules})


def all_acls(
    users: Mapping[str, Sequence[str]], settings: KafkaSettings, processors: Iterable[type[Processor] | Processor]
) -> dict[str, list[Acl]]:
    """Role -> its ACLs, for the users given per role (a role with no users gets none)."""
    processors = list(processors)
    return {role: role_acls(role, users.get(role, ()), settings, processors) for role in ROLES}
