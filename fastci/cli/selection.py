"""``fastci changes``: analyse a git commit and publish it as a ``commits`` event."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from fastci.cli.base import PathArgument, UsageError, console, kafka_settings, uses_data_dir


def register(commands: Any) -> None:
    changes = commands.add_parser(
        "changes", help="analyse a git commit (changed files and functions) and publish it on the commits topic"
    )
    changes.add_argument(
        "--repo",
        type=PathArgument("existing folder"),
        default=Path("."),
        help="the git repository (default: the current directory)",
    )
    changes.add_argument("--rev", default="HEAD", help="the commit, as git names it (default HEAD)")
    changes.add_argument(
        "--repo-name",
        help="repository name on the event (default: $FASTCI_REPO, else the origin remote's whole path, e.g. "
        "group/sub/lib, else the work tree's directory name: the name results and evidence carry)",
    )
    changes.add_argument("--kafka", action="store_true", help="publish to Kafka instead of the embedded log")
    changes.add_argument("--dry-run", action="store_true", help="print the event as JSON on stdout; publish nothing")
    changes.set_defaults(func=cmd_changes)
    uses_data_dir(changes, "write")  # not with --dry-run, which publishes nothing

    policy = commands.add_parser(
        "policy", help="publish a repository's selection policy (how long a miss widens its selections)"
    )
    policy.add_argument("repo_name", metavar="REPO", help="the repository, as commits, results and evidence name it")
    policy.add_argument(
        "--widen-commits",
        type=int,
        required=True,
        metavar="N",
        help="after an audited miss, stay widened (no pruning, every test of the files the missed change "
        "touched) for N clean audited commits; 0 turns widening off (default when never published: 5)",
    )
    policy.add_argument("--kafka", action="store_true", help="publish to Kafka instead of the embedded log")
    policy.set_defaults(func=cmd_policy)
    uses_data_dir(policy, "write")


def cmd_policy(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from pydantic import ValidationError

    from fastci.runtime.publish import publish_embedded, publish_kafka
    from fastci.selection.events import SelectionPolicy

    try:
        event = SelectionPolicy(repo=args.repo_name, time=datetime.now(UTC), widen_commits=args.widen_commits)
    except ValidationError as error:
        first = error.errors()[0]
        field = "REPO" if first["loc"] == ("repo",) else f"--{'-'.join(map(str, first['loc'])).replace('_', '-')}"
        raise UsageError(f"{field}: {first['msg']}") from None
    if args.kafka:
        publish_kafka(kafka_settings(args), [event])
    else:
        publish_embedded(args.data_dir, [event])
    console.print(f"published the selection policy of {event.repo}: widen for {event.widen_commits} commit(s)")
    return 0


def cmd_changes(args: argparse.Namespace) -> int:
    from fastci.core.codec import MAX_EVENT_BYTES, encode
    from fastci.runtime.publish import publish_embedded, publish_kafka
    from fastci.selection.changes import ChangeAnalysisError, analyze_commit

    try:
        event = analyze_commit(args.repo, args.rev, args.repo_name)
    except ChangeAnalysisError as error:
        raise UsageError(str(error)) from None
    for line in summary(event):
        console.print(line, markup=False)
    payload = encode(event)
    if len(payload) > MAX_EVENT_BYTES:  # consumers would refuse it: better not to publish it at all
        raise UsageError(
            f"the commits event of {event.sha} is {len(payload):,} bytes, over the "
            f"{MAX_EVENT_BYTES:,}-byte event limit ({len(event.changed_functions):,} changed functions)"
        )
    if args.dry_run:
        sys.stdout.flush()
        sys.stdout.buffer.write(payload + b"\n")  # one line `fastci publish --topic commits` accepts
        sys.stdout.buffer.flush()
        return 0
    if args.kafka:
        publish_kafka(kafka_settings(args), [event])
        where = f"Kafka at {kafka_settings(args).bootstrap}"
    else:
        publish_embedded(args.data_dir, [event])
        where = f"the embedded log in {args.data_dir}"
    console.print(f"published commit {event.sha[:12]} of {event.repo} to {where}", markup=False)
    return 0


def summary(event: Any) -> list[str]:
    """A few lines saying what the commit changed, counted by kind."""

    def counts(items: Any) -> str:
        by_kind = Counter(item.change for item in items)
        return ", ".join(f"{n} {kind}" for kind, n in sorted(by_kind.items())) or "none"

    layers = ", ".join(event.layers) or "none"
    return [
        f"commit {event.sha[:12]} of {event.repo}: {event.title}",
        f"  files: {counts(event.changed_files)}",
        f"  functions: {counts(event.changed_functions)}",
        f"  layers: {layers}{' (hardware path)' if event.hardware_path else ''}",
    ]
