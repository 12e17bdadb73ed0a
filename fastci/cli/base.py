"""What every command module shares: the consoles, usage errors, Kafka settings, the views, tables and
progress bars. Command modules import from here, never from ``fastci.cli.main``."""

from __future__ import annotations

import argparse
import asyncio
import csv
import sys
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from fastci.core import config

console = Console(stderr=True, highlight=False, soft_wrap=True)  # messages, progress
out = Console(highlight=False, soft_wrap=True)  # results a user may pipe on


class UsageError(Exception):
    """A mistake the user can fix; printed without a traceback."""


def kafka_settings(args: argparse.Namespace) -> config.KafkaSettings:
    return config.KafkaSettings.from_env(bootstrap=args.bootstrap, namespace=args.namespace)


def views_path(args: argparse.Namespace) -> Path:
    return Path(args.views) if getattr(args, "views", None) else Path(args.data_dir) / "views.duckdb"


def refresh_views(args: argparse.Namespace) -> None:
    """Bring the views of ``args`` up to date, from Kafka with ``--kafka``, else from the data dir
    (for commands that read the views, unless they were given ``--no-refresh``)."""
    from fastci.views.refresh import refresh_embedded, refresh_kafka
    from fastci.views.store import Views

    views = Views(views_path(args))
    try:
        if args.kafka:
            asyncio.run(refresh_kafka(kafka_settings(args), views))
        else:
            refresh_embedded(args.data_dir, views)
    finally:
        views.close()


def print_rows(columns: list[str], rows: list[tuple], fmt: str = "table", to: Console | None = None) -> None:
    """Print a result set; event text is shown as data (never as rich markup)."""
    if fmt == "json":
        for row in rows:
            sys.stdout.buffer.write(orjson.dumps(dict(zip(columns, row, strict=True)), default=str) + b"\n")
    elif fmt == "csv":
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        table = Table(*(Column(Text(c), overflow="fold") for c in columns))
        for row in rows:
            table.add_row(*(Text("" if v is None else str(v)) for v in row))
        (to or out).print(table)
        (to or console).print(f"{len(rows)} row(s)")


def progress_bar() -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
