"""The selection's lines in the nightly report: its audited safety and the time it saved.

Read from the ``selection`` and ``selection_audit`` views; every string from an event is escaped in
the HTML section.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from fastci.views.store import Views

RECENT_MISSES = 10


@dataclass(frozen=True)
class SelectionSafety:
    selections: int  # commits selected
    subsets: int  # of which ran less than everything
    saved_s: float  # suite time the subsets saved, by the selection's own estimates
    audited: int  # commits whose selection a fuller run checked
    missed_commits: int  # audited commits with at least one miss
    misses: list[tuple[str, str, str]] = field(default_factory=list)  # (sha, test, evidence), the latest first

    @property
    def miss_rate(self) -> float | None:
        return self.missed_commits / self.audited if self.audited else None


def build_selection(views: Views) -> SelectionSafety:
    (selections, subsets, saved), *_ = views.query(
        # metrics is a JSON column (it holds a list: the unevidenced units)
        "SELECT count(*), count(*) FILTER (WHERE NOT run_all AND CAST(metrics->>'kept' AS BIGINT) < "
        "CAST(metrics->>'tests_known' AS BIGINT)), "
        "coalesce(sum(CAST(metrics->>'saved_s' AS DOUBLE)) FILTER (WHERE NOT run_all), 0) FROM selection"
    )[1]
    (audited, missed), *_ = views.query(
        "SELECT count(DISTINCT sha) FILTER (WHERE kind = 'audited'), count(DISTINCT sha) FILTER (WHERE kind = 'miss') "
        "FROM selection_audit"
    )[1]
    _, misses = views.query(
        "SELECT sha, test_id, evidence FROM selection_audit WHERE kind = 'miss' "
        f"ORDER BY _partition, _offset DESC LIMIT {RECENT_MISSES}"
    )
    return SelectionSafety(int(selections), int(subsets), float(saved), int(audited), int(missed), misses)


def summary_lines(safety: SelectionSafety) -> list[str]:
    if not safety.selections:
        return []
    hours = safety.saved_s / 3600
    saved = f"selection: {safety.subsets} of {safety.selections} commits ran a subset, saving ~{hours:.1f} h"
    if not safety.audited:
        return [f"{saved}; no commit audited yet (run a nightly or a shadow-mode job to measure misses)"]
    rate = safety.miss_rate or 0.0
    lines = [f"{saved}; {safety.audited} audited, {safety.missed_commits} with a miss ({rate:.1%})"]
    return lines + [f"miss: {sha[:12]} {test}: {why}" for sha, test, why in safety.misses]


def render_section(safety: SelectionSafety) -> str:
    e = escape
    parts = ["<h2>Selection</h2>"]
    if not safety.selections:
        return parts[0] + "<p>No selection yet.</p>"
    parts.append(
        f"<p>{safety.subsets} of {safety.selections} commits ran a subset of their suite, saving about "
        f"{safety.saved_s / 3600:.1f} hours by the selection's estimates.</p>"
    )
    if not safety.audited:
        parts.append("<p>No commit audited yet: a nightly or a shadow-mode job measures the misses.</p>")
        return "".join(parts)
    parts.append(
        f"<p>Audited by fuller runs: {safety.audited} commits, {safety.missed_commits} with a miss "
        f"(miss rate {safety.miss_rate:.1%}).</p>"
    )
    if safety.misses:
        parts.append("<table><tr><th>commit</th><th>missed test</th><th>what the selection knew</th></tr>")
        parts += [f"<tr><td>{e(sha[:12])}</td><td>{e(t)}</td><td>{e(why)}</td></tr>" for sha, t, why in safety.misses]
        parts.append("</table>")
    return "".join(parts)
