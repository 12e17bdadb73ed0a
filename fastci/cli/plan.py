"""``fastci plan``: the plan for a change, for any test runner (``pytest --fastci-select`` is the same
answer, acted on inside pytest)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fastci.cli.base import PathArgument, UsageError, console, kafka_settings, uses_data_dir

RUN_EVERYTHING = 3  # exit code: run the whole suite (no plan in time, or the plan says so); the reason on stderr


def register(commands: Any) -> None:
    plan = commands.add_parser(
        "plan",
        help="the tests a change needs, in run order (json, or one pytest node id a line); "
        f"exit 0: run these (none is none), exit {RUN_EVERYTHING}: run everything, 2: a usage error",
        description="The tests a change needs, in run order: the answer pytest --fastci-select acts on, for any "
        "runner. It publishes the change's commits into the data dir (or to Kafka with --kafka), processes what is "
        "pending there and waits up to --wait for their plan; the reason for running everything goes to stderr. "
        f"Exit 0: run these (none is none); {RUN_EVERYTHING}: run everything; 2: a usage error.",
    )
    plan.add_argument(
        "--repo",
        type=PathArgument("existing folder"),
        default=Path("."),
        help="the git work tree (default: the current directory)",
    )
    plan.add_argument("--rev", default="HEAD", help="the commit under test (default HEAD)")
    plan.add_argument(
        "--base",
        metavar="REV",
        help="a pull request's target: the change is every commit from the merge base to --rev "
        "(default: --rev against its first parent)",
    )
    plan.add_argument("--wait", type=float, default=60.0, metavar="S", help="seconds to wait for the plan (default 60)")
    plan.add_argument("--format", choices=("json", "lines"), default="json", help="json (default) or lines")
    plan.add_argument(
        "--repo-name", help="repository name, as results and evidence carry it (default: as 'fastci changes')"
    )
    plan.add_argument("--kafka", action="store_true", help="ask the Kafka worker instead of the embedded runtime")
    plan.set_defaults(func=cmd_plan)
    # A CI job's first ask on a cold cache has no history: it runs everything (exit 3) and says why, as
    # pytest --fastci-select does, rather than stop the job with a usage error.
    uses_data_dir(plan, "create")


def cmd_plan(args: argparse.Namespace) -> int:
    import orjson

    from fastci.ci.change import ChangeError, change_of
    from fastci.ci.plan import ask

    if not args.wait > 0:
        raise UsageError(f"--wait: must be more than 0 seconds (got {args.wait:g})")
    try:
        change = change_of(args.repo, args.rev, args.base, option="--base")
    except ChangeError as error:
        raise UsageError(str(error)) from None

    def say(message: str) -> None:
        console.print(message, markup=False)

    plan = ask(
        change,
        "kafka" if args.kafka else "embedded",
        args.data_dir,
        kafka_settings(args) if args.kafka else None,
        args.wait,
        args.repo_name,
        say,
    )
    if plan.run_all:
        console.print(f"run everything: {plan.reason}", markup=False)
    else:
        share = f", ~{plan.share:.0%} of the suite's time" if plan.share is not None else ""
        console.print(f"run {len(plan.tests)} of {plan.tests_known} known tests{share}", markup=False)
    if args.format == "json":
        sys.stdout.buffer.write(orjson.dumps(plan.to_json(), option=orjson.OPT_INDENT_2) + b"\n")
    elif not plan.run_all:
        sys.stdout.write("".join(f"{test.test_id}\n" for test in plan.tests))
    sys.stdout.flush()
    return RUN_EVERYTHING if plan.run_all else 0
