"""Commands of regression detection: owner maps in, tickets out, the nightly report."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from fastci.cli.base import PathArgument, UsageError, console, kafka_settings, out, uses_data_dir, views_path

WEBHOOK_ENV = "FASTCI_TICKET_WEBHOOK"


def register(commands: Any) -> None:
    owners = commands.add_parser("owners", help="publish the owner map (a CODEOWNERS-like file) of a repository")
    owners_commands = owners.add_subparsers(dest="owners_command", required=True, metavar="ACTION")
    publish = owners_commands.add_parser("publish", help="parse FILE and publish it as the repo's owner map")
    publish.add_argument("file", type=PathArgument("file"))
    publish.add_argument("--repo", required=True, help="repository the map is for, as results and commits name it")
    publish.add_argument("--kafka", action="store_true", help="publish to Kafka instead of the embedded log")
    publish.set_defaults(func=cmd_owners_publish)
    uses_data_dir(publish, "write")

    tickets = commands.add_parser("tickets", help="open one ticket per regression whose bisect ended")
    tickets.add_argument(
        "--out", type=PathArgument("folder"), help="folder for ticket JSON files (default <data dir>/tickets)"
    )
    tickets.add_argument(
        "--webhook",
        help=f"also POST each new ticket to this URL (default ${WEBHOOK_ENV}), signed with $FASTCI_WEBHOOK_SECRET",
    )
    tickets.add_argument("--kafka", action="store_true", help="read alerts from Kafka instead of the embedded log")
    tickets.set_defaults(func=cmd_tickets)
    uses_data_dir(tickets, "write")

    regressions = commands.add_parser("regressions", help="regression detection end to end")
    regressions_commands = regressions.add_subparsers(dest="regressions_command", required=True, metavar="ACTION")
    demo = regressions_commands.add_parser(
        "demo", help="a nightly with three regressions: detect, bisect, ticket, report"
    )
    demo.set_defaults(func=cmd_regressions_demo)
    uses_data_dir(demo, "create")

    report = commands.add_parser("report", help="reports over the views")
    report_commands = report.add_subparsers(dest="report_command", required=True, metavar="REPORT")
    nightly = report_commands.add_parser(
        "nightly", help="the nightly regression report: HTML page and terminal summary"
    )
    nightly.add_argument(
        "--out", type=PathArgument("output"), help="HTML file to write (default <data dir>/nightly.html)"
    )
    nightly.add_argument("--views", type=PathArgument("file"), help="DuckDB file (default <data dir>/views.duckdb)")
    nightly.set_defaults(func=cmd_report_nightly)
    uses_data_dir(nightly, "read")


def cmd_owners_publish(args: argparse.Namespace) -> int:
    from fastci.runtime.publish import publish_embedded, publish_kafka
    from fastci.shared.owners import OwnerFileError, parse_owner_file

    try:
        owner_map = parse_owner_file(args.file.read_text(encoding="utf-8"), repo=args.repo, source=str(args.file))
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {args.file}: {error}") from None
    except OwnerFileError as error:
        raise UsageError(f"{args.file}: {error}") from None
    if args.kafka:
        publish_kafka(kafka_settings(args), [owner_map])
    else:
        publish_embedded(args.data_dir, [owner_map])
    console.print(
        f"published owner map {owner_map.version} of {args.repo}: {len(owner_map.rules)} path rule(s), "
        f"{len(owner_map.layers)} layer(s)"
    )
    return 0


def cmd_tickets(args: argparse.Namespace) -> int:
    from fastci.notify.tickets import open_tickets, read_alerts_embedded, read_alerts_kafka
    from fastci.regression.webhook import SECRET_ENV, WebhookSecretError, secret_from_env

    webhook = args.webhook or os.environ.get(WEBHOOK_ENV) or None
    try:
        secret = secret_from_env()
    except WebhookSecretError as error:
        raise UsageError(str(error)) from None
    if webhook and secret is None:
        raise UsageError(
            f"{SECRET_ENV} is not set: webhook posts are signed with a secret shared with the receiver "
            "(see docs/regression.md, signed webhooks)"
        )
    alerts = read_alerts_kafka(kafka_settings(args)) if args.kafka else read_alerts_embedded(args.data_dir)
    out = args.out or Path(args.data_dir) / "tickets"
    run = open_tickets(alerts, out, webhook, secret=secret)
    console.print(f"tickets in {out}: {len(run.written)} new, {len(run.posted)} posted, {run.already} already open")
    for path in run.written:
        console.print(f"  {path.name}", markup=False)
    for failure in run.failed:
        console.print(f"  [red]not posted[/red] {failure}", markup=False)
    return 1 if run.failed else 0


def cmd_regressions_demo(args: argparse.Namespace) -> int:
    from fastci.demo.regressions import run_demo

    run_demo(args.data_dir if args.data_dir_given else Path(".fastci/regressions-demo"), out)
    return 0


def cmd_report_nightly(args: argparse.Namespace) -> int:
    from fastci.ci.pending import catch_up
    from fastci.report.nightly import build_report, print_summary, render_html

    if not args.views:  # a report of all that was published, not of the last `fastci run`
        catch_up(args.data_dir, views_path(args), lambda line: console.print(line, markup=False))
    try:
        report = build_report(views_path(args))
    except FileNotFoundError as error:
        raise UsageError(str(error)) from None
    target = args.out or Path(args.data_dir) / "nightly.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_html(report), encoding="utf-8")
    print_summary(report, out)
    console.print(f"wrote {target}")
    return 0
