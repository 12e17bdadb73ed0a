"""``fastci pool``: what a CI driver tells the pool scheduler (its time, its shape)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from fastci.cli.base import PathArgument, UsageError, console, kafka_settings, out, uses_data_dir


def register(commands: Any) -> None:
    pool = commands.add_parser("pool", help="the shared accelerator pool: its clock and its configuration")
    actions = pool.add_subparsers(dest="pool_command", required=True, metavar="ACTION")
    tick = actions.add_parser(
        "tick", help="publish the pool's time (run from cron every few seconds: the scheduler has no clock)"
    )
    tick.add_argument("--pool", default="default")
    tick.add_argument("--at", help="ISO 8601 time with a zone (default: now)")
    tick.add_argument("--kafka", action="store_true", help="publish to Kafka instead of the embedded log")
    tick.set_defaults(func=cmd_tick)
    uses_data_dir(tick, "write")
    configure = actions.add_parser("configure", help="publish a pool's nodes and class policies from a JSON file")
    configure.add_argument(
        "file", nargs="?", type=PathArgument("file"), help="a pool-config event as JSON (see --show-default)"
    )
    configure.add_argument("--show-default", action="store_true", help="print the default configuration and exit")
    configure.add_argument("--kafka", action="store_true", help="publish to Kafka instead of the embedded log")
    configure.set_defaults(func=cmd_configure)
    uses_data_dir(configure, "write")  # not with --show-default, which publishes nothing


def _publish(args: argparse.Namespace, events: list) -> None:
    from fastci.runtime.publish import publish_embedded, publish_kafka

    if args.kafka:
        publish_kafka(kafka_settings(args), events)
    else:
        publish_embedded(args.data_dir, events)


def cmd_tick(args: argparse.Namespace) -> int:
    import orjson

    from fastci.core.codec import InvalidEvent
    from fastci.topology import decode

    time = args.at or datetime.now(UTC).isoformat()
    try:
        tick = decode("clock", orjson.dumps({"pool": args.pool, "time": time}))
    except InvalidEvent as error:
        raise UsageError(str(error)) from None
    _publish(args, [tick])
    console.print(f"pool {tick.pool}: time {tick.time.isoformat()}")
    return 0


def cmd_configure(args: argparse.Namespace) -> int:
    import orjson

    from fastci.core.codec import InvalidEvent
    from fastci.scheduling.processor import default_config
    from fastci.topology import decode

    if args.show_default:
        out.print(
            orjson.dumps(default_config().model_dump(mode="json", exclude={"id"}), option=orjson.OPT_INDENT_2).decode(),
            markup=False,
        )
        return 0
    if args.file is None:
        raise UsageError("give a pool-config JSON file (fastci pool configure --show-default prints one to edit)")
    try:
        config = decode("pool-config", args.file.read_bytes())
    except OSError as error:
        raise UsageError(f"cannot read {args.file}: {error}") from None
    except InvalidEvent as error:
        raise UsageError(f"{args.file}: {error}") from None
    _publish(args, [config])
    chips = sum(node.chips for node in config.nodes)
    console.print(
        f"pool {config.pool} version {config.version}: {len(config.nodes)} nodes, {chips} chips, "
        f"{config.cpu_slots} CPU slots"
    )
    return 0
