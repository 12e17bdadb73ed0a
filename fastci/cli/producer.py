"""``fastci spool drain|status``: send what producers spooled while their target was down; ``fastci import``:
past CI history (JUnit XML, results as JSON lines) published as results."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from fastci.cli.base import PathArgument, UsageError, console, kafka_settings, progress_bar, uses_data_dir


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
            "--spool",
            type=PathArgument("folder"),
            help="spool directory (default <data dir>/spool/<target>, as the pytest plugin uses)",
        )
        action.set_defaults(func=func)
        uses_data_dir(action, "create" if name == "drain" else "read")  # drain: what the producer would have made
    _register_import(commands)


def _register_import(commands: Any) -> None:
    history = commands.add_parser(
        "import",
        help="publish past CI history (JUnit XML files, results as JSON lines or Parquet) as results; resumable",
        description="Reads each FILE as a stream and publishes its test outcomes as results, in batches. A killed "
        "import resumes where it stopped, and a file imported once is skipped (progress in <data dir>/import/). "
        "JUnit: the run context (repo, commit, trigger, node, bundle) comes from the options, $FASTCI_* and the "
        "git work tree as for pytest --fastci-results; <property name=commit|repo|run_id> in a file overrides "
        "them. An outcome that is not a valid result is refused with its file and line, onto dead-letters.",
    )
    history.add_argument("files", nargs="+", type=PathArgument("file"), metavar="FILE")
    history.add_argument(
        "--format",
        choices=("junit", "jsonl", "parquet"),
        help="default: by suffix (.xml, .jsonl/.json, .parquet); Parquet: one row a result, its columns the fields",
    )
    history.add_argument(
        "--root",
        type=PathArgument("existing folder"),
        help="the repository's work tree, to tell modules from classes in "
        "JUnit class names (default: the current directory)",
    )
    history.add_argument("--run-id", help="JUnit: the run id of every file's results (default: a hash of the file)")
    history.add_argument("--repo", help="JUnit: repository (default $FASTCI_REPO, else the git remote)")
    history.add_argument("--commit", help="JUnit: commit tested (default $FASTCI_COMMIT, else git HEAD)")
    history.add_argument("--trigger", help="JUnit: nightly, presubmit, ... (default $FASTCI_TRIGGER, else dev)")
    history.add_argument("--node-id", help="JUnit: the node that ran them (default $FASTCI_NODE_ID, else this host)")
    history.add_argument(
        "--bundle-file",
        type=PathArgument("file"),
        help="JUnit: bundle TOML (default $FASTCI_BUNDLE_FILE; none: a plain repo)",
    )
    history.add_argument("--batch", type=int, default=5000, help="outcomes per publish and progress record")
    history.add_argument("--kafka", action="store_true", help="publish to Kafka instead of the embedded log")
    history.set_defaults(func=cmd_import)
    uses_data_dir(history, "create")  # the first import starts a history


def cmd_import(args: argparse.Namespace) -> int:
    from fastci.core.system import LATENESS_MS
    from fastci.producer.context import ContextError, load_context
    from fastci.producer.history import UNREADABLE, Lateness, format_of, import_file
    from fastci.producer.targets import EmbeddedTarget, KafkaTarget, TargetUnavailable

    if args.batch < 1:
        raise UsageError(f"--batch: must be at least 1 (got {args.batch})")
    try:
        formats = {path: format_of(path, args.format) for path in args.files}
    except ValueError as error:
        raise UsageError(str(error)) from None
    root = (args.root or Path.cwd()).resolve()
    context = None
    if "junit" in formats.values():
        try:
            context = load_context(
                args.bundle_file,
                cwd=root,
                repo=args.repo,
                commit=args.commit,
                trigger=args.trigger,
                node_id=args.node_id,
            )
        except ContextError as error:
            raise UsageError(f"import: {error}") from None
    # The producers' own targets: acknowledged appends (fsynced; acks=all), a bounded wait.
    target = KafkaTarget(kafka_settings(args), timeout_s=120.0) if args.kafka else EmbeddedTarget(args.data_dir)

    published = refused = 0
    failed = False
    lateness = Lateness()
    modules: dict[str, int] = {}  # JUnit class name -> where its module ends, under root: one lookup per import
    with progress_bar("bytes imported") as bar:
        # every file's bar from the start, so the progress is of the whole import
        tasks = {path: bar.add_task(str(path), total=path.stat().st_size or 1) for path in formats}
        for path, fmt in formats.items():
            task = tasks[path]
            try:
                report = import_file(
                    path,
                    fmt,
                    context,
                    target,
                    Path(args.data_dir) / "import",
                    root=root,
                    run_id=args.run_id,
                    batch=args.batch,
                    progress=lambda _, done, total, task=task: bar.update(task, completed=done),
                    lateness=lateness,
                    modules=modules,
                )
            except UNREADABLE as error:
                console.print(f"[red]error:[/red] {error}; the outcomes before it were published", highlight=False)
                failed = True
                continue
            except TargetUnavailable as error:
                raise UsageError(f"{error}; the same command resumes where this import stopped") from None
            published += report.published
            refused += len(report.refused)
            if report.already:
                console.print(f"{path}: imported before, skipped", highlight=False)
                continue
            resumed = f" (resumed after {report.resumed_at:,})" if report.resumed_at else ""
            console.print(f"{path}: {report.published:,} result(s) published{resumed}", highlight=False)
            if report.late:
                hours = LATENESS_MS // 3_600_000
                console.print(
                    f"[yellow]warning:[/yellow] {path}: {report.late:,} result(s) more than {hours} h "
                    "older than results imported before them: they are applied when they arrive, not in time order "
                    "with the rest (docs/topology.md, 'Ordering rule'); import older files first",
                    highlight=False,
                )
            for line in report.refused[:20]:
                console.print(f"  refused {line}", highlight=False, markup=False)
            if len(report.refused) > 20:
                console.print(f"  ... and {len(report.refused) - 20} more (see the dead_letters view)")
    console.print(f"imported {published:,} result(s) into {target.description}; {refused:,} refused onto dead-letters")
    if published and not args.kafka:  # on Kafka the workers apply them as they come
        console.print(
            f"next: fastci --data-dir {args.data_dir} run, to apply them",
            highlight=False,
        )
    return 1 if failed or refused else 0


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
