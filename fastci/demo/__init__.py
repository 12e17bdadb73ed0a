"""The demos: a synthetic CI history played through every processor (``fastci demo``) and the
regression scenario end to end (``fastci regressions demo``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def refresh_and_report(data_dir: Path) -> tuple[Any, Any, Path]:
    """What both demos end with: their log loaded into the views, a ticket opened per regression whose
    bisect ended, and the nightly report written; the tickets, the report and its page."""
    from fastci.notify.tickets import open_tickets, read_alerts_embedded
    from fastci.report.nightly import build_report, render_html
    from fastci.views.refresh import refresh_embedded
    from fastci.views.store import Views

    views = Views(data_dir / "views.duckdb")
    try:
        refresh_embedded(data_dir, views)
    finally:
        views.close()
    tickets = open_tickets(read_alerts_embedded(data_dir), data_dir / "tickets")
    report = build_report(data_dir / "views.duckdb")
    page = data_dir / "nightly.html"
    page.write_text(render_html(report), encoding="utf-8")
    return tickets, report, page
