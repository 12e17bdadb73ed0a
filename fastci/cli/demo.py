"""``fastci demo``: a synthetic CI history through the whole path, embedded, in a few seconds."""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from fastci.cli.base import UsageError, out, print_rows, uses_data_dir
from fastci.topology import SYSTEM


def register(commands: Any) -> None:
    demo = commands.add_parser("demo", help="generate a small CI history, process it and show what fastci found")
    demo.add_argument("--commits", type=int, default=300, help="commits in the generated history (default 300)")
    demo.set_defaults(func=cmd_demo)
    uses_data_dir(demo, "create")


def cmd_demo(args: argparse.Namespace) -> int:
    if args.commits < 1:
        raise UsageError(f"--commits: must be at least 1 (got {args.commits})")
    run_demo(args.data_dir if args.data_dir_given else Path(".fastci/demo"), commits=args.commits, out=out)
    return 0


_MARKER = ".fastci-demo"

SUMMARY_QUERIES = [
    (
        "Tests failing now (test_history)",
        "SELECT test_id, runs, failed + errors AS failures, last_status, last_commit[:10] AS last_commit "
        "FROM test_history WHERE health = 'failing' ORDER BY test_id",
    ),
    (
        "Flips between passing and failing (test_status_changed)",
        "SELECT test_id, count(*) AS flips, count(*) FILTER (WHERE current = 'failing') AS broke "
        "FROM test_status_changed GROUP BY test_id ORDER BY flips DESC, test_id LIMIT 8",
    ),
    (
        "Failure rate by node (results): one node fails far more than its share",
        "SELECT node_id, count(*) AS runs, round(avg((status IN ('failed', 'error'))::INT) * 100, 1) AS fail_pct "
        "FROM results GROUP BY node_id ORDER BY fail_pct DESC, node_id LIMIT 5",
    ),
    (
        "XID errors by node (node_health)",
        "SELECT node_id, count(*) AS xid_errors FROM node_health WHERE kind = 'xid' GROUP BY node_id ORDER BY 2 DESC",
    ),
    ("Refused events (dead_letters)", "SELECT topic, source, error FROM dead_letters ORDER BY topic, error"),
]


def run_demo(data_dir: Path, commits: int, out: Console) -> None:
    from fastci.demo.history import Workload, malformed_lines
    from fastci.producer.lines import check_lines
    from fastci.runtime.embedded import EmbeddedRuntime
    from fastci.runtime.publish import publish_embedded
    from fastci.views.refresh import refresh_embedded
    from fastci.views.store import Views

    _fresh(data_dir)
    started = time.perf_counter()
    workload = Workload(commits=commits)
    lines_checked = check_lines(malformed_lines(), topic=None)
    events = workload.events()
    by_topic: dict[str, int] = {}
    for event in events:
        by_topic[event.TOPIC] = by_topic.get(event.TOPIC, 0) + 1
    out.print(
        f"1. generated a synthetic CI history: {len(events):,} events "
        f"({', '.join(f'{n:,} {t}' for t, n in by_topic.items())}) and {len(lines_checked.refused)} malformed ones"
    )

    publish_embedded(data_dir, [*events, *lines_checked.dead_letters()])
    out.print(f"2. published them to the embedded log in {data_dir}/log (bad ones to dead-letters, with the reason)")
    for refusal in lines_checked.refused:
        out.print(f"     refused {refusal.error}", markup=False)

    runtime = EmbeddedRuntime(data_dir, SYSTEM)
    try:
        stats = runtime.run()
    finally:
        runtime.close()
    for name, s in stats.by_processor.items():  # each processor's own seconds, not the whole run's
        out.print(
            f"3. processor {name}: {s.events:,} events in {s.seconds:.2f} s "
            f"({s.events / max(s.seconds, 1e-9):,.0f}/s), "
            f"{s.outputs:,} output events"
        )

    views = Views(data_dir / "views.duckdb")
    try:
        loaded = refresh_embedded(data_dir, views)
        out.print(f"4. materialised DuckDB views: {', '.join(f'{t} ({n:,})' for t, n in loaded.items() if n)}")
        for title, sql in SUMMARY_QUERIES:
            out.print(f"\n[bold]{title}[/bold]")
            print_rows(*views.query(sql), to=out)
    finally:
        views.close()
    out.print(f"\ndone in {time.perf_counter() - started:.1f} s. Ask your own questions, e.g.:")
    out.print(
        f'  fastci --data-dir {data_dir} sql "SELECT trigger, status, count(*) FROM results GROUP BY ALL ORDER BY ALL"',
        markup=False,
    )


def _fresh(data_dir: Path) -> None:
    """Start from an empty folder; only ever delete one that an earlier demo made."""
    if data_dir.exists() and any(data_dir.iterdir()):
        if not (data_dir / _MARKER).exists():
            raise UsageError(f"{data_dir} is not empty and was not made by 'fastci demo'; pick another --data-dir")
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / _MARKER).touch()
