"""What every command module shares: the consoles, usage errors, Kafka settings, the views, tables and
progress bars. Command modules import from here, never from ``fastci.cli.main``."""

from __future__ import annotations

import argparse
import asyncio
import csv
import sys
import time
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


def progress_bar(label: str = "done", to: Console | None = None) -> Any:
    """Live bars on a terminal; elsewhere (a CI job's log, ``nohup``) a plain line every
    ``PlainProgress.EVERY_S`` seconds, ``label`` naming what is counted."""
    target = to or console
    if not target.is_terminal:
        return PlainProgress(label, target)
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),  # a year of imported history takes hours: say how many are left
        console=target,
        transient=True,
    )


class PlainProgress:
    """The progress bars' interface (``add_task``, ``update``) for a log that is not a terminal, where
    live bars print nothing at all: an import of a year's history would be silent for hours. Every
    ``EVERY_S`` seconds one line sums the tasks: how much of the whole is done, the rate so far and
    the time left at that rate."""

    EVERY_S = 30.0

    def __init__(self, label: str, to: Console, clock: Any = time.monotonic) -> None:
        self.label = label
        self.to = to
        self.clock = clock
        self.started = self.last = clock()
        self.totals: list[int | None] = []
        self.done: list[int] = []

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: float | None = None) -> int:
        self.totals.append(None if total is None else int(total))
        self.done.append(0)
        return len(self.done) - 1

    def update(self, task: int, completed: float) -> None:
        self.done[task] = int(completed)
        now = self.clock()
        if now - self.last >= self.EVERY_S:
            self.last = now
            self.to.print(self.line(now - self.started), highlight=False)

    def line(self, elapsed_s: float) -> str:
        done = sum(self.done)
        totals = [t for t in self.totals if t]
        if len(totals) < len(self.totals) or not totals:  # a task of unknown size: no share, no end
            return f"{self.label}: {done:,} in {_duration(elapsed_s)}"
        total = sum(totals)
        text = f"{self.label}: {done:,} of {total:,} ({done / total:.0%}) in {_duration(elapsed_s)}"
        if 0 < done < total:
            text += f", about {_duration((total - done) * elapsed_s / done)} left at this rate"
        return text


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s"
