"""``fastci views refresh`` and ``fastci sql``: the DuckDB views analysts query."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from fastci.cli.base import (
    PathArgument,
    UsageError,
    console,
    kafka_settings,
    print_rows,
    progress_bar,
    uses_data_dir,
    views_path,
)


def register(commands: Any) -> None:
    views = commands.add_parser("views", help="DuckDB views of every topic and processor state")
    views_commands = views.add_subparsers(dest="views_command", required=True, metavar="ACTION")
    refresh = views_commands.add_parser("refresh", help="load what is new since the last refresh")
    refresh.add_argument("--kafka", action="store_true", help="load from Kafka instead of the embedded log")
    refresh.add_argument("--views", type=PathArgument("output"), help="DuckDB file (default <data dir>/views.duckdb)")
    refresh.set_defaults(func=cmd_views_refresh)
    uses_data_dir(refresh, "write")

    sql = commands.add_parser("sql", help="run a SQL query on the views and print the result")
    sql.add_argument("query", help="the SQL (DuckDB's dialect); 'SHOW TABLES' lists the views")
    sql.add_argument("--views", type=PathArgument("file"), help="DuckDB file (default <data dir>/views.duckdb)")
    sql.add_argument(
        "--format",
        choices=("table", "csv", "json"),
        default="table",
        help="output format (default table; whole values, never wrapped, when stdout is not a terminal)",
    )
    sql.set_defaults(func=cmd_sql)
    uses_data_dir(sql, "read")


def cmd_views_refresh(args: argparse.Namespace) -> int:
    from fastci.views.refresh import refresh_embedded, refresh_kafka
    from fastci.views.store import Views

    views = Views(views_path(args))
    try:
        with progress_bar("records read into the views") as progress:
            tasks: dict[str, Any] = {}

            def report(table: str, rows: int) -> None:
                if table not in tasks:
                    tasks[table] = progress.add_task(table, total=None)
                progress.update(tasks[table], completed=rows)

            before = _row_counts(views)
            if args.kafka:
                read = asyncio.run(refresh_kafka(kafka_settings(args), views, report))
            else:
                read = refresh_embedded(args.data_dir, views, report)
            after = _row_counts(views)
    finally:
        views.close()
    # Rows added, not records read: a record already loaded (a redelivery, a duplicate) adds none.
    added = {table: after.get(table, 0) - before.get(table, 0) for table in read if read[table]}
    loaded = ", ".join(f"{t} +{added[t]:,} rows ({read[t]:,} records read)" for t in added) or "nothing new"
    console.print(f"views in {views_path(args)}: {loaded}")
    return 0


def _row_counts(views: Any) -> dict[str, int]:
    """Rows per table of the views (state tables count their keys)."""
    _, rows = views.query("SELECT table_name FROM duckdb_tables() WHERE NOT internal")
    return {name: views.query(f'SELECT count(*) FROM "{name}"')[1][0][0] for (name,) in rows}


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
