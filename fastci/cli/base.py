"""What every command module shares: the consoles, usage errors, Kafka settings, the views, tables and
progress bars. Command modules import from here, never from ``fastci.cli.main``."""

from __future__ import annotations

import argparse
import asyncio
import csv
import difflib
import os
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console, ConsoleDimensions
from rich.table import Column, Table
from rich.text import Text

from fastci.core import config

# Wide enough for any row of a table: a log or a pipe keeps whole test ids, which nothing reflows there.
UNBOUNDED_WIDTH = 100_000


class LogConsole(Console):
    """A console that fits a terminal, and elsewhere (a CI log, a pipe, a file) never wraps or cuts: tables
    take their natural width, so a test id stays one greppable string."""

    @property
    def size(self) -> ConsoleDimensions:
        size = Console.size.fget(self)  # type: ignore[attr-defined]
        return size if self.is_terminal else ConsoleDimensions(UNBOUNDED_WIDTH, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


console = LogConsole(stderr=True, highlight=False, soft_wrap=True)  # messages, progress
out = LogConsole(highlight=False, soft_wrap=True)  # results a user may pipe on


class UsageError(Exception):
    """A mistake the user can fix; printed without a traceback."""


# How a command uses the data dir, declared with ``uses_data_dir``; ``fastci.cli.main`` checks the data dir
# by it before the command starts. A command that declares nothing is taken to write.
DATA_DIR_USES = {
    "none": "does not touch it",
    "kafka": "does not touch it; talks to Kafka",
    "read": "reads it: it must exist",
    "write": "writes into it: it must exist, unless it is the default or --create is given",
    "create": "makes it when it does not exist (the first demo, the first import)",
}


def uses_data_dir(parser: argparse.ArgumentParser, use: str) -> None:
    if use not in DATA_DIR_USES:
        raise ValueError(f"data dir use {use!r} is not one of {', '.join(DATA_DIR_USES)}")
    parser.set_defaults(data_dir_use=use)


class PathArgument:
    """An argparse ``type`` for a path, checked as the command line is parsed, so a wrong one is a one-line
    usage error naming it before any work starts. ``kind``: ``file`` (an existing, readable file; with
    ``stdin``, ``-`` too), ``output`` (a file to write: not a folder, nor under a file), ``folder`` (a folder,
    or nothing yet: not a file, nor under one), ``existing folder``."""

    KINDS = ("file", "output", "folder", "existing folder")

    def __init__(self, kind: str, stdin: bool = False) -> None:
        if kind not in self.KINDS:
            raise ValueError(f"path kind {kind!r} is not one of {', '.join(self.KINDS)}")
        self.kind, self.stdin = kind, stdin
        self.__name__ = kind  # argparse names the type in some of its messages

    def __call__(self, text: str) -> Path | str:
        if self.stdin and text == "-":
            return text
        if not text:
            raise argparse.ArgumentTypeError("an empty path")
        path = Path(text)
        for folder in Path(os.path.abspath(path)).parents:
            if folder.exists() and not folder.is_dir():
                raise argparse.ArgumentTypeError(f"{text}: {config.display_path(folder)} is a file, not a folder")
        if self.kind == "file":
            if not path.exists():
                raise argparse.ArgumentTypeError(f"{text}: no such file")
            if path.is_dir():
                raise argparse.ArgumentTypeError(f"{text}: a folder, not a file")
            if not os.access(path, os.R_OK):
                raise argparse.ArgumentTypeError(f"{text}: not readable (permission denied)")
        elif self.kind == "output" and path.is_dir():
            raise argparse.ArgumentTypeError(f"{text}: a folder, not a file")
        elif self.kind in ("folder", "existing folder") and path.exists() and not path.is_dir():
            raise argparse.ArgumentTypeError(f"{text}: a file, not a folder")
        elif self.kind == "existing folder" and not path.exists():
            raise argparse.ArgumentTypeError(f"{text}: no such folder")
        return path


class NameArgument:
    """An argparse ``type`` for the name of something fastci knows (a topic, a processor): an unknown one is
    a one-line usage error with the closest known name and the list. ``known`` is called when a name is
    checked, so the parser imports nothing to build it."""

    def __init__(self, what: str, known: Callable[[], Iterable[str]]) -> None:
        self.what, self.known = what, known
        self.__name__ = what

    def __call__(self, text: str) -> str:
        known = list(self.known())
        if text in known:
            return text
        close = difflib.get_close_matches(text, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise argparse.ArgumentTypeError(f"unknown {self.what} {text!r} ({hint}known: {', '.join(known)})")


def kafka_settings(args: argparse.Namespace) -> config.KafkaSettings:
    """The Kafka settings of ``$FASTCI_KAFKA_*`` and the global options; ``ConfigError`` for one that cannot work."""
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
