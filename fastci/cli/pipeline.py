"""``fastci publish``, ``run``, ``compact``, ``worker``, ``lag`` and ``schemas``: moving events through the runtimes."""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

from rich.table import Column, Table

from fastci.cli.base import (
    NameArgument,
    PathArgument,
    UsageError,
    console,
    kafka_settings,
    out,
    progress_bar,
    uses_data_dir,
)
from fastci.core.config import COMMIT_EVERY, DEFAULT_BATCH
from fastci.topology import SYSTEM

PROCESSOR = NameArgument("processor", lambda: SYSTEM.order)


def register(commands: Any) -> None:
    publish = commands.add_parser(
        "publish",
        help="validate events (JSON lines) and append them to a topic",
        epilog="topics producers publish to (docs/events.md shows an example event of each):\n  "
        + "\n  ".join(SYSTEM.input_topics)
        + "\n\nexit codes:\n"
        "  0  every event accepted\n"
        "  1  some refused: each named with its line and parked on the dead-letters topic; the rest appended\n"
        "  2  a usage error (a missing file, an unknown topic), nothing published",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    publish.add_argument(
        "file",
        nargs="?",
        default="-",
        type=PathArgument("file", stdin=True),
        help="JSON-lines file, '-' for stdin (default)",
    )
    publish.add_argument(
        "--topic",
        type=NameArgument("topic", lambda: SYSTEM.input_topics),
        help='topic of every line; without it each line is {"topic": ..., "event": {...}}',
    )
    publish.add_argument("--kafka", action="store_true", help="publish to Kafka instead of the embedded log")
    publish.set_defaults(func=cmd_publish)

    run = commands.add_parser("run", help="process the embedded log with every processor")
    run.add_argument("--follow", action="store_true", help="keep running and process new events as they arrive")
    run.add_argument("--processor", action="append", type=PROCESSOR, help="run only this processor (repeatable)")
    run.add_argument(
        "--batch",
        type=int,
        default=DEFAULT_BATCH,
        help=f"events a processor applies at a time (default {DEFAULT_BATCH})",
    )
    run.add_argument(
        "--commit-every",
        type=int,
        default=COMMIT_EVERY,
        metavar="N",
        help="commit a processor's state every N events while it has more to apply, and whenever it has "
        f"caught up (default {COMMIT_EVERY:,}): a key many events write is stored once per commit; a crash "
        "redoes up to N",
    )
    run.add_argument(
        "--no-sync", action="store_true", help="skip fsync per batch (faster; a power cut may lose the last batches)"
    )
    run.set_defaults(func=cmd_run)

    compact = commands.add_parser(
        "compact",
        help="drop the events a later one replaces (a test's older evidence) from the embedded log and views",
        description="Of the events a later one replaces for every processor (a test's evidence, a module's import "
        "evidence), keeps only the latest in the embedded log and the views, below what every processor and the "
        "views have already read. Offsets stay; the bytes are freed where the filesystem punches holes.",
    )
    compact.set_defaults(func=cmd_compact)

    worker = commands.add_parser("worker", help="run the processors as a faust worker on Kafka")
    worker.add_argument("--processor", action="append", type=PROCESSOR, help="run only this processor (repeatable)")
    worker.add_argument(
        "--log-level", default="warn", choices=("crit", "error", "warn", "info", "debug"), help="faust's log level"
    )
    worker.set_defaults(func=cmd_worker)

    lag = commands.add_parser(
        "lag", help="records each processor route has not applied yet on Kafka (exit 3 while any is behind)"
    )
    lag.add_argument("--processor", action="append", type=PROCESSOR, help="only this processor (repeatable)")
    lag.set_defaults(func=cmd_lag)

    schemas = commands.add_parser("schemas", help="write the JSON Schema of every event to a folder")
    schemas.add_argument(
        "--out", type=PathArgument("folder"), default=Path("schemas"), help="the folder (default ./schemas)"
    )
    schemas.add_argument("--check", action="store_true", help="only check that the files match the models")
    schemas.set_defaults(func=cmd_schemas)

    for parser, use in ((publish, "write"), (run, "write"), (compact, "write"), (worker, "kafka"), (lag, "kafka")):
        uses_data_dir(parser, use)
    uses_data_dir(schemas, "none")


def cmd_publish(args: argparse.Namespace) -> int:
    from fastci.producer.lines import check_lines, read_lines
    from fastci.runtime.publish import publish_embedded, publish_kafka

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


def cmd_run(args: argparse.Namespace) -> int:
    from fastci.runtime.embedded import EmbeddedRuntime, RuntimeBusy
    from fastci.topology import build_processors

    if args.batch < 1 or args.commit_every < 1:
        raise UsageError(f"--batch {args.batch} and --commit-every {args.commit_every}: each must be at least 1")
    runtime = EmbeddedRuntime(
        args.data_dir,
        SYSTEM,
        build_processors(args.processor),
        batch_size=args.batch,
        sync=not args.no_sync,
        commit_every=args.commit_every,
    )
    try:
        with progress_bar("records applied, over all processors") as progress:
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
            except RuntimeBusy as busy:
                raise UsageError(str(busy)) from None
    finally:
        runtime.close()
    if stats.events == 0 and not args.follow:
        console.print(f"nothing new to process in {args.data_dir} (publish events first: fastci publish)")
        return 0
    table = Table(
        "processor", "events", "outputs", "dead letters", Column("seconds", justify="right"), title="embedded run"
    )
    for name, s in stats.by_processor.items():
        table.add_row(name, f"{s.events:,}", f"{s.outputs:,}", f"{s.dead_letters:,}", f"{s.seconds:.2f}")
    table.add_row("(decoding input records, once for all)", "", "", "", f"{stats.decode_seconds:.2f}")
    console.print(table)
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    import duckdb

    from fastci.runtime.compaction import compact_topic, compactable_topics, processor_readers
    from fastci.runtime.embedded import DataDir, RuntimeBusy
    from fastci.views.refresh import EMBEDDED
    from fastci.views.store import Views

    data = DataDir(args.data_dir)
    views_path = data.root / "views.duckdb"
    table = Table(
        "topic",
        Column("records", justify="right"),
        Column("removed", justify="right"),
        Column("below offset", justify="right"),
        Column("on disk", justify="right"),
        Column("view rows removed", justify="right"),
        title=f"compaction of {args.data_dir}",
    )
    try:
        with data.processing():
            try:
                views = Views(views_path) if views_path.exists() else None
            except duckdb.IOException as error:
                raise UsageError(f"{views_path} is open in another process (a views refresh?): {error}") from None
            try:
                for topic, model in compactable_topics(SYSTEM).items():
                    readers = processor_readers(data, SYSTEM, topic)
                    if views is not None:
                        readers["views"] = views.position(EMBEDDED, topic).next_offset
                    done = compact_topic(data.log.topic(topic), model, readers)
                    dropped = views.drop_replaced(topic, model.REPLACED_BY_SAME) if views is not None else 0
                    table.add_row(
                        topic,
                        f"{done.records:,}",
                        f"{done.removed:,}",
                        f"{done.upto:,}",
                        f"{done.bytes_before / 1e6:.2f} -> {done.bytes_after / 1e6:.2f} MB",
                        f"{dropped:,}" if views is not None else "(no views)",
                    )
            finally:
                if views is not None:
                    views.close()
    except RuntimeBusy as busy:
        raise UsageError(str(busy)) from None
    console.print(table)
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    from fastci.runtime.kafka.broker import TopicMismatch
    from streams.worker import run_worker

    settings = kafka_settings(args)
    console.print(
        f"faust worker {settings.app_id} on {settings.bootstrap} (session timeout {settings.session_timeout_s:g} s)"
    )
    try:
        run_worker(settings, args.processor, loglevel=args.log_level)
    except TopicMismatch as mismatch:
        raise UsageError(f"{mismatch} ('fastci kafka topics' lists every topic)") from None
    return 0


def cmd_lag(args: argparse.Namespace) -> int:
    from fastci.runtime.kafka.progress import unapplied
    from fastci.topology import build_processors

    settings = kafka_settings(args)
    behind = asyncio.run(unapplied(settings, build_processors(args.processor)))
    table = Table("route", Column("records not applied", justify="right"), title=f"lag of {settings.app_id}")
    for route, records in behind.items():
        table.add_row(route, f"{records:,}")
    out.print(table)
    return 0 if not any(behind.values()) else 3


def cmd_schemas(args: argparse.Namespace) -> int:
    from fastci.schemas import write_schemas

    changed = write_schemas(args.out, check=args.check)
    if args.check:
        if changed:
            console.print(f"[red]schemas out of date:[/red] {', '.join(changed)} (run 'fastci schemas')")
            return 1
        console.print(f"schemas in {args.out} match the event models")
        return 0
    console.print(
        f"wrote {len(changed)} changed schema file(s) to {args.out}" if changed else "schemas already up to date"
    )
    return 0
