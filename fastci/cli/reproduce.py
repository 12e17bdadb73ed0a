"""``fastci rerun RESULT_ID`` and ``fastci runner``."""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path
from typing import Any

from fastci.cli.base import PathArgument, UsageError, console, kafka_settings, refresh_views, uses_data_dir, views_path


def register(commands: Any) -> None:
    rerun = commands.add_parser(
        "rerun",
        help="ask for a past result's exact run again (same bundle, config, seed): a run request",
        description="Reads the result from the views (refreshed first), and publishes a run-requested event with work "
        "class 'rerun' and the result's commit, bundle, hardware revision, config and seed. A runner answers it "
        "(fastci runner, for the qualification set); the rerun_outcomes view compares the two.",
    )
    rerun.add_argument("result_id", metavar="RESULT_ID", help="the result's id (or its first 6+ hex digits)")
    rerun.add_argument("--attempt", type=int, default=1, help="a further reproduction of the same result (2, 3...)")
    rerun.add_argument("--elsewhere", action="store_true", help="not on the node the result ran on")
    rerun.add_argument("--kafka", action="store_true", help="read the views from, and publish the request to, Kafka")
    rerun.add_argument("--no-refresh", action="store_true", help="use the views as they are")
    rerun.add_argument("--views", type=PathArgument("output"), help="DuckDB file (default <data dir>/views.duckdb)")
    rerun.set_defaults(func=cmd_rerun)
    uses_data_dir(rerun, "write")

    runner = commands.add_parser(
        "runner",
        help="execute run requests for the qualification set on the emulated accelerator",
        description="Consumes run-requested from the embedded log (or Kafka, with --kafka) and publishes one result "
        "per qualify/... request it can run, with trigger = the work class and run id <work class>-<request id>. "
        "Other tests are left to other runners.",
    )
    runner.add_argument(
        "--kafka", action="store_true", help="consume from and publish to Kafka (consumer group <app>-runner-<name>)"
    )
    runner.add_argument("--once", action="store_true", help="handle what is there, then exit (default: keep following)")
    runner.add_argument(
        "--node-id", help="the node results are attributed to (default $FASTCI_NODE_ID or the host name)"
    )
    runner.add_argument("--hardware-revision", help="only requests for this hardware revision (default: any)")
    runner.add_argument("--name", help="name of the runner's position in the log (default: the node id)")
    runner.set_defaults(func=cmd_runner)
    uses_data_dir(runner, "write")


def cmd_rerun(args: argparse.Namespace) -> int:
    from fastci.reproduce.request import RerunError, find_result, rerun_request
    from fastci.runtime.publish import publish_embedded, publish_kafka
    from fastci.views.store import Views

    path = views_path(args)
    if not args.no_refresh:
        refresh_views(args)
    try:
        views = Views(path, read_only=True)
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    try:
        result = find_result(views, args.result_id)
        request = rerun_request(result, args.attempt, args.elsewhere)
    except RerunError as error:
        raise UsageError(str(error)) from None
    finally:
        views.close()
    if args.kafka:
        publish_kafka(kafka_settings(args), [request])
    else:
        publish_embedded(args.data_dir, [request])
    b = request.bundle
    console.print(
        f"run request {request.id} (work class rerun) for {result.test_id}: commit {result.commit[:10]}, "
        f"bundle {b.compiler}/{b.kernels}/{b.runtime}/{b.driver}/{b.firmware}, {result.hardware_revision}, "
        f"seed {result.seed}, {len(result.config)} config key(s)"
        + (f", not on {result.node_id}" if args.elsewhere else ""),
        highlight=False,
    )
    return 0


def cmd_runner(args: argparse.Namespace) -> int:
    from fastci.reproduce.runner import KafkaRunner, Runner

    node = args.node_id or os.environ.get("FASTCI_NODE_ID") or socket.gethostname()
    if args.kafka:
        runner: Any = KafkaRunner(kafka_settings(args), node, args.hardware_revision, args.name)
        source = f"Kafka at {runner.settings.bootstrap}"
    else:
        runner = Runner(Path(args.data_dir), node, args.hardware_revision, args.name)
        source = str(args.data_dir)

    def report(handled) -> None:
        console.print(
            f"{handled.request.id[:12]} {handled.request.work_class:9s} {handled.request.test_id}: {handled.note}",
            highlight=False,
            markup=False,
        )

    if args.once:
        handled = runner.run_once(report)
        ran = sum(1 for h in handled if h.result is not None)
        console.print(f"runner {node}: {len(handled)} request(s) read, {ran} run and published", highlight=False)
        return 0
    console.print(f"runner {node} following {source} (Ctrl-C to stop)", highlight=False)
    try:
        runner.follow(report)
    except KeyboardInterrupt:
        return 130
    return 0
