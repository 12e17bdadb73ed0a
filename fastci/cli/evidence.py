"""``fastci collect --test-id ID -- CMD ...``: the evidence of one command, as one test's."""

from __future__ import annotations

import argparse
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastci.cli.base import PathArgument, UsageError, console, kafka_settings, uses_data_dir


def register(commands: Any) -> None:
    collect = commands.add_parser(
        "collect",
        help="run a command under py-spy and publish what it executed as one test's evidence",
        description="Runs CMD (and its subprocesses) under py-spy, keeps the stacks' frames in project files "
        "(relative to --root), publishes one evidence event for --test-id and exits with CMD's exit code.",
    )
    collect.add_argument("--test-id", required=True, help="the test the command is (e.g. tests/test_x.py::test_y)")
    collect.add_argument(
        "--root", type=PathArgument("existing folder"), help="project root (default: the current directory)"
    )
    collect.add_argument("--rate", type=float, default=200.0, metavar="HZ", help="samples per second (default 200)")
    collect.add_argument(
        "--blocking", action="store_true", help="pause the command for each sample (no torn stacks, more overhead)"
    )
    collect.add_argument("--run-id", help="run id of the evidence (default $FASTCI_RUN_ID, else a new one)")
    collect.add_argument("--kafka", action="store_true", help="publish to Kafka instead of the embedded log")
    collect.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command to run")
    collect.set_defaults(func=cmd_collect)
    uses_data_dir(collect, "write")


def cmd_collect(args: argparse.Namespace) -> int:
    from fastci.evidence.collect import CommandNotFound, collect
    from fastci.evidence.publish import NoCommit, code_under_test, evidence_event, producer_for
    from fastci.evidence.pyspy import PySpyError

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    root = (args.root or Path.cwd()).resolve()
    if not args.rate > 0:
        raise UsageError(f"--rate: must be more than 0 samples per second (got {args.rate:g})")
    try:
        repo, commit = code_under_test(root)
    except NoCommit as error:
        raise UsageError(str(error)) from None
    try:
        collected = collect(command, root, args.rate, blocking=args.blocking)
    except CommandNotFound as error:
        raise UsageError(str(error)) from None
    except PySpyError as error:
        raise UsageError(str(error)) from None
    summary = (
        f"fastci collect: {args.test_id}: {collected.samples} sample(s), "
        f"{collected.samples_in_project} in project code, "
        f"{len(collected.stacks)} stack(s) kept, {collected.wall_s:.2f} s wall"
    )
    if not collected.stacks:
        console.print(f"{summary}; no evidence published (nothing sampled in {root})", markup=False)
        return collected.exit_code
    run_id = (
        args.run_id
        or os.environ.get("FASTCI_RUN_ID")
        or f"collect-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
    )
    producer = producer_for(args.kafka, Path(args.data_dir), kafka_settings(args) if args.kafka else None)
    producer.publish(
        evidence_event(
            args.test_id,
            run_id,
            repo,
            commit,
            "sampling",
            collected.stacks,
            args.rate,
            {"samples": collected.samples_in_project},
        )
    )
    report = producer.close()
    where = producer.target.description
    if report.error:
        console.print(
            f"{summary}; spooled, {where} did not acknowledge ({report.error}): fastci spool drain sends it",
            markup=False,
        )
    else:
        console.print(f"{summary}; published to {where} (run {run_id})", markup=False)
    return collected.exit_code
