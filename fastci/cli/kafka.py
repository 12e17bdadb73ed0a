"""``fastci kafka topics``: the topics fastci reads and writes on the cluster, checked, and created
before any producer writes (the broker fastci starts creates no topic on first use).
``fastci kafka acls``: what each role (producer, worker, analyst, operator) may do, as Kafka ACLs,
checked against the cluster's and, with ``--apply``, created (by a super user)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from rich.table import Column, Table

from fastci.cli.base import UsageError, console, kafka_settings, out, uses_data_dir


def register(commands: Any) -> None:
    kafka = commands.add_parser("kafka", help="the Kafka cluster fastci uses: its topics and ACLs")
    sub = kafka.add_subparsers(dest="kafka_command", required=True, metavar="COMMAND")
    topics = sub.add_parser(
        "topics",
        help="list fastci's topics with their partition counts and what is wrong; --apply creates the missing ones",
    )
    topics.add_argument("--apply", action="store_true", help="create the topics that do not exist yet")
    topics.set_defaults(func=cmd_topics)
    uses_data_dir(topics, "kafka")
    acls = sub.add_parser(
        "acls",
        help="each role's ACLs (producer, worker, analyst, operator), checked against the cluster; --apply creates "
        "the missing ones (run it as a super user)",
    )
    acls.add_argument("--apply", action="store_true", help="create the ACLs the cluster does not have yet")
    acls.add_argument(
        "--user",
        action="append",
        default=[],
        metavar="ROLE=NAME",
        help="the SCRAM user of a role (repeatable, several users per role allowed; default: a user named "
        "after each role)",
    )
    acls.set_defaults(func=cmd_acls)
    uses_data_dir(acls, "kafka")


def cmd_topics(args: argparse.Namespace) -> int:
    from fastci.runtime.kafka.broker import ensure_topics, topic_partitions
    from fastci.runtime.kafka.routes import internal_topics
    from fastci.topology import ALL_PROCESSORS, TOPICS

    settings = kafka_settings(args)
    names = sorted({*TOPICS, *internal_topics(settings, ALL_PROCESSORS)})

    async def counts() -> dict[str, int]:
        found: dict[str, int] = {}
        for tp in await topic_partitions(settings, [settings.topic(n) for n in names]):
            found[tp.topic] = found.get(tp.topic, 0) + 1
        return found

    found = asyncio.run(counts())
    missing = [n for n in names if settings.topic(n) not in found]
    if args.apply and missing:
        created = asyncio.run(ensure_topics(settings, missing))
        console.print(f"created {len(created)} topic(s) with {settings.partitions} partitions", markup=False)
        found = asyncio.run(counts())
    table = Table(
        "topic", Column("partitions", justify="right"), "status", title=f"fastci topics on {settings.bootstrap}"
    )
    wrong = 0
    for name in names:
        full = settings.topic(name)
        count = found.get(full)
        if count is None:
            status = "missing"
        elif count != settings.partitions:
            wrong += 1
            status = f"{count} partitions, not {settings.partitions}"
        else:
            status = "ok"
        table.add_row(full, "-" if count is None else str(count), status)
    out.print(table)
    if missing and not args.apply:
        console.print(f"{len(missing)} topic(s) missing: 'fastci kafka topics --apply' (or 'fastci worker') makes them")
    if wrong:
        console.print(
            f"{wrong} topic(s) with another partition count than FASTCI_KAFKA_PARTITIONS ({settings.partitions}): "
            "state is placed by key hash modulo that count, so every fastci topic needs it; recreate them, or set "
            "FASTCI_KAFKA_PARTITIONS for the whole deployment"
        )
    return 1 if wrong or (missing and not args.apply) else 0


def role_users(given: list[str]) -> dict[str, list[str]]:
    """ROLE=NAME options -> role -> users; a role not given is held by a user of its own name."""
    from fastci.runtime.kafka.roles import ROLES

    users: dict[str, list[str]] = {}
    for item in given:
        role, sep, name = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--user {item!r}: expected ROLE=NAME, e.g. producer=ci-runner")
        if role not in ROLES:
            raise UsageError(f"--user {item!r}: unknown role {role!r} (roles: {', '.join(ROLES)})")
        users.setdefault(role, []).append(name)
    return {role: users.get(role, [role]) for role in ROLES}


def cmd_acls(args: argparse.Namespace) -> int:
    from fastci.runtime.kafka.acls import AclError, create_acls, describe_acls
    from fastci.runtime.kafka.roles import all_acls
    from fastci.topology import ALL_PROCESSORS

    settings = kafka_settings(args)
    wanted = all_acls(role_users(args.user), settings, ALL_PROCESSORS)
    every = [acl for acls in wanted.values() for acl in acls]
    try:
        present = asyncio.run(describe_acls(settings))
        missing = [acl for acl in every if acl not in present]
        if args.apply and missing:
            created = asyncio.run(create_acls(settings, missing))
            console.print(f"created {created} ACL(s)", markup=False)
            present = asyncio.run(describe_acls(settings))
    except AclError as error:
        if error.no_authorizer:
            raise UsageError(str(error)) from None
        who = f"User:{settings.username}" if settings.username else "an unauthenticated client"
        raise UsageError(f"{error} (as {who}; ACLs are read and applied by a super user)") from None
    # One row per role, principal and resource, its operations together.
    rows: dict[tuple[str, str, str], list] = {}
    for role, acls in wanted.items():
        for acl in acls:
            resource = f"{acl.resource.lower()} {acl.name}" + ("*" if acl.pattern == "PREFIXED" else "")
            rows.setdefault((role, acl.principal, resource), []).append(acl)
    table = Table("role", "principal", "resource", "operations", "status", title=f"fastci ACLs on {settings.bootstrap}")
    for (role, who, resource), acls in rows.items():
        absent = [a.operation for a in acls if a not in present]
        status = "ok" if not absent else f"missing {', '.join(absent)}"
        table.add_row(role, who, resource, ", ".join(a.operation for a in acls), status)
    out.print(table)
    still = [acl for acl in every if acl not in present]
    if still and not args.apply:
        console.print(f"{len(still)} ACL(s) missing: 'fastci kafka acls --apply' (as a super user) creates them")
    return 1 if still else 0
