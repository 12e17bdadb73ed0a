"""``fastci kafka topics``: the topics fastci reads and writes on the cluster, checked, and created
before any producer writes (the broker fastci starts creates no topic on first use)."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from rich.table import Column, Table

from fastci.cli.base import console, kafka_settings, out


def register(commands: Any) -> None:
    kafka = commands.add_parser("kafka", help="the Kafka cluster fastci uses: its topics")
    sub = kafka.add_subparsers(dest="kafka_command", required=True, metavar="COMMAND")
    topics = sub.add_parser(
        "topics",
        help="list fastci's topics with their partition counts and what is wrong; --apply creates the missing ones",
    )
    topics.add_argument("--apply", action="store_true", help="create the topics that do not exist yet")
    topics.set_defaults(func=cmd_topics)


def cmd_topics(args: argparse.Namespace) -> int:
    from fastci.runtime.kafka_io import ensure_topics, topic_partitions
    from fastci.topology import ALL_PROCESSORS, TOPICS
    from streams.app import internal_topics

    settings = kafka_settings(args)
    names = sorted({*TOPICS, *(t for p in ALL_PROCESSORS for t in internal_topics(settings, p))})

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
