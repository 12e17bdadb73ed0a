"""The roles' ACLs, read as rules (no broker): each role has what its work needs and nothing that
would let it forge another role's output. The broker enforcing them is tests/test_kafka_acls.py."""

from __future__ import annotations

import pytest

from fastci.cli.kafka import role_users
from fastci.cli.main import main
from fastci.core.config import KafkaSettings
from fastci.runtime.kafka.roles import all_acls, decision_topics, role_acls
from fastci.topology import ALL_PROCESSORS, INPUT_TOPICS

SETTINGS = KafkaSettings(namespace="t-")


def rules(role: str, settings: KafkaSettings = SETTINGS) -> set[tuple[str, str, str, str]]:
    return {(a.resource, a.pattern, a.name, a.operation) for a in role_acls(role, [role], settings, ALL_PROCESSORS)}


def topics(role: str, operation: str) -> set[str]:
    return {name for resource, pattern, name, op in rules(role) if resource == "TOPIC" and op == operation}


def test_the_producer_writes_inputs_and_dead_letters_and_nothing_else():
    assert topics("producer", "WRITE") == {f"t-{t}" for t in (*INPUT_TOPICS, "dead-letters")}
    assert {op for _, _, _, op in rules("producer")} == {"WRITE"}  # no READ, CREATE, DESCRIBE, group


def test_the_worker_reads_inputs_writes_decisions_and_only_its_own_topics_by_prefix():
    decisions = {f"t-{t}" for t in decision_topics()}
    assert topics("worker", "READ") >= {f"t-{t}" for t in INPUT_TOPICS} | decisions
    assert topics("worker", "WRITE") - {"t-fastci-"} == decisions | {"t-dead-letters"}  # no input topic
    prefixed = {(name, op) for _, pattern, name, op in rules("worker") if pattern == "PREFIXED"}
    assert prefixed == {("t-fastci-", "READ"), ("t-fastci-", "WRITE"), ("t-fastci-", "CREATE")}
    assert ("GROUP", "LITERAL", "t-fastci", "READ") in rules("worker")


def test_the_analyst_reads_and_the_operator_administers_topics_and_neither_writes_events():
    assert {op for _, _, _, op in rules("analyst")} == {"READ", "DESCRIBE"}
    assert "t-fastci-test-history-changelog" in topics("analyst", "READ")
    assert "t-fastci-results-by-repo" not in topics("analyst", "READ")  # an internal copy: DESCRIBE only
    operator = rules("operator")
    assert {op for _, _, _, op in operator} == {
        "CREATE",
        "DELETE",
        "ALTER",
        "DESCRIBE",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
    }
    assert {(r, p, n) for r, p, n, _ in operator} == {("TOPIC", "PREFIXED", "t-")}  # not the cluster: no ACLs
    assert {(r, p, n) for r, p, n, _ in rules("operator", KafkaSettings())} == {("TOPIC", "LITERAL", "*")}


def test_several_users_may_hold_a_role_and_bad_options_are_named():
    users = role_users(["producer=ci", "producer=qualifier"])
    assert users == {
        "producer": ["ci", "qualifier"],
        "worker": ["worker"],
        "analyst": ["analyst"],
        "operator": ["operator"],
    }
    principals = {a.principal for a in all_acls(users, SETTINGS, ALL_PROCESSORS)["producer"]}
    assert principals == {"User:ci", "User:qualifier"}
    with pytest.raises(ValueError, match="unknown role 'admin'"):
        role_acls("admin", ["x"], SETTINGS, ALL_PROCESSORS)


@pytest.mark.parametrize(
    "option, message", [("producer", "expected ROLE=NAME"), ("root=alice", "unknown role 'root' (roles: producer")]
)
def test_the_acls_command_refuses_a_bad_user_option(option, message, capsys):
    assert main(["kafka", "acls", "--user", option]) == 2
    assert message in capsys.readouterr().err
