"""``fastci spool drain|status``: send what producers spooled while their target was down."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from fastci.cli.base import console, kafka_settings


def register(commands: Any) -> None:
    spool = commands.add_parser("spool", help="results and events spooled by producers whose target was down")
    actions = spool.add_subparsers(dest="spool_command", required=True, metavar="ACTION")
    for name, func, text in (
        ("drain", cmd_drain, "send every spooled batch (oldest first); delete each once acknowledged"),
        ("status", cmd_status, "how many events wait in the spool, and since when"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument(
            "--kafka", action="store_true", help="the spool of the Kafka target (default: the embedded log's)"
        )
        action.add_argument(
            "--spool", type=Path, help="spool directory (default <data dir>/spool/<target>, as the pytest plugin uses)"
        )
        action.set_defaults(func=func)


def _target_and_spool(args: argparse.Namespace) -> tuple[Any, Path]:
    from fastci.producer.targets import EmbeddedTarget, KafkaTarget

    if args.kafka:
        settings = kafka_settings(args)
        default = Path(args.data_dir) / "spool" / "kafka" / (settings.namespace.rstrip("-") or "default")
        return KafkaTarget(settings), args.spool or default
    return EmbeddedTarget(args.data_dir), args.spool or Path(args.data_dir) / "spool" / "embedded"


def cmd_drain(args: argparse.Namespace) -> int:
    from fastci.producer.client import Producer
    from fastci.producer.spool import Spool

    target, directory = _target_and_spool(args)
    producer = Producer(target, Spool(directory))
    report = producer.flush()
    refused = f", {report.refused} damaged line(s) set aside in {directory / 'rejected'}" if report.refused else ""
    if report.error:
        console.print(
            f"[red]sent {report.sent} event(s); {target.description} did not acknowledge:[/red] {report.error}",
            highlight=False,
        )
        console.print(f"{report.pending} event(s) still wait in {directory}{refused}", highlight=False)
        return 1
    console.print(
        f"sent {report.sent} event(s) from {directory} to {target.description}; {report.pending} pending{refused}",
        highlight=False,
    )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from fastci.producer.spool import Spool

    _, directory = _target_and_spool(args)
    spool = Spool(directory)
    batches = sorted(p for p in directory.glob("*") if p.suffix in (".open", ".jsonl")) if directory.exists() else []
    if not batches:
        console.print(f"spool {directory} is empty", highlight=False)
        return 0
    oldest = min(p.stat().st_mtime for p in batches)
    console.print(
        f"spool {directory}: {spool.pending()} event(s) in {len(batches)} batch(es), oldest written "
        f"{(time.time() - oldest) / 60:.1f} min ago (send them: fastci spool drain{' --kafka' if args.kafka else ''})",
        highlight=False,
    )
    return 0
