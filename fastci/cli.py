"""The ``fastci`` command line."""

from __future__ import annotations

import argparse
import importlib
import asyncio
import csv
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from fastci import config

console = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)


# Feature modules that add subcommands: each has ``register(commands)``, which adds parsers to the
# subparsers object and sets ``func`` on them; handlers get the parsed args (``data_dir`` resolved)
# and return an exit code. Keep heavy imports inside handlers so ``fastci --help`` stays fast.
COMMAND_MODULES: tuple[str, ...] = (
    "fastci.producer.commands",
    "fastci.qualify.commands",
    "fastci.regression.cli",
    "fastci.selection.commands",
    "fastci.evidence.commands",
    "fastci.release.commands",
    "fastci.reproduce.commands",
    "fastci.scheduling.commands",
    "fastci.simulate.commands",
)


class UsageError(Exception):
    """A mistake the user can fix; printed without a traceback."""


# ----- publish


def cmd_publish(args: argparse.Namespace) -> int:
    from fastci.publishing import check_lines, publish_embedded, publish_kafka, read_lines

    checked = check_lines(read_lines(args.file), args.topic)
    dead = checked.dead_letters()
    if args.kafka:
        publish_kafka(kafka_settings(args), [*checked.accepted, *dead])
        where = f"Kafka at {kafka_settings(args).bootstrap}"
    else:
        publish_embedded(args.data_dir, [*checked.accepted, *dead])
        where = f"the embedded log in {args.data_dir}"
    counts = Counter(e.TOPIC for e in checked.accepted)
    detail = ", ".join(f"{t}: {n}" for t, n in sorted(counts.items())) or "nothing"
    console.print(f"accepted {len(checked.accepted)} event(s) into {where} ({detail})")
    if checked.refused:
        console.print(f"[red]refused {len(checked.refused)} event(s)[/red], parked on dead-letters:")
        for refusal in checked.refused[:20]:
            console.print(f"  {refusal}", markup=False)
        if len(checked.refused) > 20:
            console.print(f"  ... and {len(checked.refused) - 20} more (see the dead_letters view)")
        return 1
    return 0


# ----- run / worker


def cmd_run(args: argparse.Namespace) -> int:
    from fastci.processors import build_processors
    from fastci.runtime.embedded import EmbeddedRuntime

    runtime = EmbeddedRuntime(args.data_dir, build_processors(args.processor), batch_size=args.batch, sync=not args.no_sync)
    try:
        with progress_bar() as progress:
            tasks: dict[str, Any] = {}

            def report(name: str, done: int, pending: int) -> None:
                if name not in tasks:
                    tasks[name] = progress.add_task(name, total=pending or None)
                progress.update(tasks[name], completed=done)

            if args.follow:
                console.print(f"following {args.data_dir} (Ctrl-C to stop)")
            try:
                stats = runtime.run(follow=args.follow, progress=report)
            except KeyboardInterrupt:
                return 130
    finally:
        runtime.close()
    if stats.events == 0 and not args.follow:
        console.print(f"nothing new to process in {args.data_dir} (publish events first: fastci publish)")
        return 0
    table = Table("processor", "events", "outputs", "dead letters", Column("seconds", justify="right"), title="embedded run")
    for name, s in stats.by_processor.items():
        table.add_row(name, f"{s.events:,}", f"{s.outputs:,}", f"{s.dead_letters:,}", f"{s.seconds:.2f}")
    table.add_row("(decoding input records, once for all)", "", "", "", f"{stats.decode_seconds:.2f}")
    console.print(table)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from streams.worker import run_worker

    settings = kafka_settings(args)
    console.print(f"faust worker {settings.app_id} on {settings.bootstrap} (session timeout {settings.session_timeout_s:g} s)")
    run_worker(settings, args.processor, loglevel=args.log_level)
    return 0


def cmd_lag(args: argparse.Namespace) -> int:
    from fastci.processors import build_processors
    from streams.progress import unapplied

    settings = kafka_settings(args)
    behind = asyncio.run(unapplied(settings, build_processors(args.processor)))
    table = Table("route", Column("records not applied", justify="right"), title=f"lag of {settings.app_id}")
    for route, records in behind.items():
        table.add_row(route, f"{records:,}")
    out.print(table)
    return 0 if not any(behind.values()) else 3


# ----- views / sql


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


def cmd_views_refresh(args: argparse.Namespace) -> int:
    from fastci.views.refresh import refresh_embedded, refresh_kafka
    from fastci.views.store import Views

    views = Views(views_path(args))
    try:
        with progress_bar() as progress:
            tasks: dict[str, Any] = {}

            def report(table: str, rows: int) -> None:
                if table not in tasks:
                    tasks[table] = progress.add_task(table, total=None)
                progress.update(tasks[table], completed=rows)

            if args.kafka:
                read = asyncio.run(refresh_kafka(kafka_settings(args), views, report))
            else:
                read = refresh_embedded(args.data_dir, views, report)
    finally:
        views.close()
    loaded = ", ".join(f"{t} +{n:,}" for t, n in read.items() if n) or "nothing new"
    console.print(f"views in {views_path(args)}: {loaded}")
    return 0


def cmd_sql(args: argparse.Namespace) -> int:
    import duckdb

    from fastci.views.store import Views

    try:
        views = Views(views_path(args), read_only=True)
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    try:
        columns, rows = views.query(args.query)
    except duckdb.Error as error:
        raise UsageError(f"query failed: {error}") from None
    finally:
        views.close()
    print_rows(columns, rows, args.format)
    return 0


def print_rows(columns: list[str], rows: list[tuple], fmt: str = "table", to: Console | None = None) -> None:
    """Print a result set; event text is shown as data (never as rich markup)."""
    if fmt == "json":
        for row in rows:
            sys.stdout.buffer.write(orjson.dumps(dict(zip(columns, row)), default=str) + b"\n")
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


# ----- schemas / demo


def cmd_schemas(args: argparse.Namespace) -> int:
    from fastci.schemas import write_schemas

    changed = write_schemas(args.out, check=args.check)
    if args.check:
        if changed:
            console.print(f"[red]schemas out of date:[/red] {', '.join(changed)} (run 'fastci schemas')")
            return 1
        console.print(f"schemas in {args.out} match the event models")
        return 0
    console.print(f"wrote {len(changed)} changed schema file(s) to {args.out}" if changed else "schemas already up to date")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from fastci.demo import run_demo

    run_demo(args.data_dir if args.data_dir_given else Path(".fastci/demo"), commits=args.commits, out=out)
    return 0


# ----- plumbing


def progress_bar() -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True,
    )


def kafka_settings(args: argparse.Namespace) -> config.KafkaSettings:
    return config.KafkaSettings.from_env(bootstrap=args.bootstrap, namespace=args.namespace)


def views_path(args: argparse.Namespace) -> Path:
    return Path(args.views) if args.views else Path(args.data_dir) / "views.duckdb"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fastci",
        description="The CI brain for GPU-heavy test suites: an event-sourced stream processor.",
    )
    parser.add_argument(
        "--data-dir", type=Path, default=None,
        help=f"embedded runtime data (log, state, views); default $FASTCI_DATA_DIR or {config.DEFAULT_DATA_DIR}",
    )
    parser.add_argument("--bootstrap", help=f"Kafka bootstrap servers; default $FASTCI_KAFKA_BOOTSTRAP or {config.DEFAULT_BOOTSTRAP}")
    parser.add_argument("--namespace", help="prefix of every Kafka topic and group; default $FASTCI_KAFKA_NAMESPACE")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    publish = commands.add_parser("publish", help="validate events (JSON lines) and append them to a topic")
    publish.add_argument("file", nargs="?", default="-", help="JSON-lines file, '-' for stdin (default)")
    publish.add_argument("--topic", help='topic of every line; without it each line is {"topic": ..., "event": {...}}')
    publish.add_argument("--kafka", action="store_true", help="publish to Kafka instead of the embedded log")
    publish.set_defaults(func=cmd_publish)

    run = commands.add_parser("run", help="process the embedded log with every processor")
    run.add_argument("--follow", action="store_true", help="keep running and process new events as they arrive")
    run.add_argument("--processor", action="append", help="run only this processor (repeatable)")
    run.add_argument("--batch", type=int, default=2000, help="events per checkpoint (default 2000)")
    run.add_argument("--no-sync", action="store_true", help="skip fsync per batch (faster; a power cut may lose the last batches)")
    run.set_defaults(func=cmd_run)

    worker = commands.add_parser("worker", help="run the processors as a faust worker on Kafka")
    worker.add_argument("--processor", action="append", help="run only this processor (repeatable)")
    worker.add_argument("--log-level", default="warn", choices=("crit", "error", "warn", "info", "debug"))
    worker.set_defaults(func=cmd_worker)

    lag = commands.add_parser(
        "lag", help="records each processor route has not applied yet on Kafka (exit 3 while any is behind)"
    )
    lag.add_argument("--processor", action="append", help="only this processor (repeatable)")
    lag.set_defaults(func=cmd_lag)

    views = commands.add_parser("views", help="DuckDB views of every topic and processor state")
    views_commands = views.add_subparsers(dest="views_command", required=True, metavar="ACTION")
    refresh = views_commands.add_parser("refresh", help="load what is new since the last refresh")
    refresh.add_argument("--kafka", action="store_true", help="load from Kafka instead of the embedded log")
    refresh.add_argument("--views", help="DuckDB file (default <data dir>/views.duckdb)")
    refresh.set_defaults(func=cmd_views_refresh)

    sql = commands.add_parser("sql", help="run a SQL query on the views and print the result")
    sql.add_argument("query")
    sql.add_argument("--views", help="DuckDB file (default <data dir>/views.duckdb)")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    sql.set_defaults(func=cmd_sql)

    schemas = commands.add_parser("schemas", help="write the JSON Schema of every event to a folder")
    schemas.add_argument("--out", type=Path, default=Path("schemas"))
    schemas.add_argument("--check", action="store_true", help="only check that the files match the models")
    schemas.set_defaults(func=cmd_schemas)

    demo = commands.add_parser("demo", help="generate a small CI history, process it and show what fastci found")
    demo.add_argument("--commits", type=int, default=300)
    demo.set_defaults(func=cmd_demo)

    for module in COMMAND_MODULES:
        importlib.import_module(module).register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.data_dir_given = args.data_dir is not None
    args.data_dir = args.data_dir or config.data_dir()
    try:
        return args.func(args) or 0
    except UsageError as error:
        console.print(f"[red]error:[/red] {error}", markup=True)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
