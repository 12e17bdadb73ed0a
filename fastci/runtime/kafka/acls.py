"""Kafka's ACL admin API (CreateAcls, DescribeAcls) spoken from Python.

aiokafka 0.14's ``AIOKafkaAdminClient`` has no ``create_acls``, but its protocol module has the
CreateAcls and DescribeAcls requests (version 1, which Kafka 4 still serves). They are sent here
through the admin client's own connection, so ``fastci kafka acls`` needs no JVM and no Kafka
tooling (the jars kafka.sh runs carry no AclCommand: that is in kafka-tools).
"""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import for_code
from aiokafka.protocol.admin import CreateAclsRequest_v1, DescribeAclsRequest_v1
from aiokafka.protocol.api import Request

from fastci.core.config import KafkaSettings
from fastci.runtime.kafka.roles import Acl

# Kafka's wire codes (org.apache.kafka.common.acl / resource).
RESOURCE = {"TOPIC": 2, "GROUP": 3, "CLUSTER": 4}
PATTERN = {"LITERAL": 3, "PREFIXED": 4}
OPERATION = {
    "ALL": 2,
    "READ": 3,
    "WRITE": 4,
    "CREATE": 5,
    "DELETE": 6,
    "ALTER": 7,
    "DESCRIBE": 8,
    "CLUSTER_ACTION": 9,
    "DESCRIBE_CONFIGS": 10,
    "ALTER_CONFIGS": 11,
    "IDEMPOTENT_WRITE": 12,
}
ALLOW, ANY = 3, 1
SECURITY_DISABLED = 54  # the cluster has no authorizer


class AclError(RuntimeError):
    """The cluster refused an ACL request; the message says which rule and why."""

    def __init__(self, message: str, no_authorizer: bool = False) -> None:
        super().__init__(message)
        self.no_authorizer = no_authorizer


class _CreateAcls(Request[CreateAclsRequest_v1]):
    API_KEY = 30

    def __init__(self, creations: list[tuple]) -> None:
        self.creations = creations

    def build(self, request_struct_class: type[CreateAclsRequest_v1]) -> CreateAclsRequest_v1:
        return request_struct_class(self.creations)


class _DescribeAllAcls(Request[DescribeAclsRequest_v1]):
    API_KEY = 29

    def build(self, request_struct_class: type[DescribeAclsRequest_v1]) -> DescribeAclsRequest_v1:
        # ANY resource type, any name (null), ANY pattern, any principal and host, ANY operation/permission.
        return request_struct_class(1, None, ANY, None, None, ANY, ANY)


def _names(codes: dict[str, int]) -> dict[int, str]:
    return {code: name for name, code in codes.items()}


async def create_acls(settings: KafkaSettings, acls: Iterable[Acl]) -> int:
    """Create every ACL (creating one that exists changes nothing); return how many were sent."""
    acls = sorted(set(acls))
    if not acls:
        return 0
    creations = [
        (RESOURCE[a.resource], a.name, PATTERN[a.pattern], a.principal, "*", OPERATION[a.operation], ALLOW)
        for a in acls
    ]
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        response = await admin._send_request(_CreateAcls(creations))  # no public create_acls in aiokafka
    finally:
        await admin.close()
    problems = [
        f"{acl.describe()}: {_error(code, message)}"
        for acl, (code, message) in zip(acls, response.creation_responses, strict=True)
        if code != 0
    ]
    if problems:
        raise AclError(
            f"{len(problems)} of {len(acls)} ACL(s) not created: " + "; ".join(problems[:5]),
            no_authorizer=any(code == SECURITY_DISABLED for code, _ in response.creation_responses),
        )
    return len(acls)


async def describe_acls(settings: KafkaSettings) -> set[Acl]:
    """Every ALLOW ACL on the cluster (as the configured user may see them)."""
    admin = AIOKafkaAdminClient(**settings.client_options())
    await admin.start()
    try:
        response = await admin._send_request(_DescribeAllAcls())
    finally:
        await admin.close()
    if response.error_code != 0:
        raise AclError(
            f"DescribeAcls refused: {_error(response.error_code, response.error_message)}",
            no_authorizer=response.error_code == SECURITY_DISABLED,
        )
    resources, patterns, operations = _names(RESOURCE), _names(PATTERN), _names(OPERATION)
    found = set()
    for resource_type, name, pattern, entries in response.resources:
        for principal, _host, operation, permission in entries:
            if permission == ALLOW and resource_type in resources and operation in operations:
                found.add(
                    Acl(
                        principal,
                        resources[resource_type],
                        patterns.get(pattern, str(pattern)),
                        name,
                        operations[operation],
                    )
                )
    return found


def _error(code: int, message: str | None) -> str:
    if code == SECURITY_DISABLED:
        return (
            "the cluster has no authorizer (authorizer.class.name is not set), so ACLs would not be enforced; "
            "start it with one (docker/kafka/kafka.sh start --scram --acl)"
        )
    name = for_code(code).__name__
    return f"{name}: {message}" if message else name
