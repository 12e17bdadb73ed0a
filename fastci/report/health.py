"""The CI-health section of the nightly report, from the ``ci_*`` and ``rerun_outcomes`` views.

Figures are for the newest week in the data (weeks start on Monday, by result and commit times),
with the week before for comparison:

- time to trustworthy signal: per commit, from when it entered CI to its last presubmit result (or a
  later rerun of one of its presubmit tests); p50 and p90 over the commits of the week (the
  ``ci_presubmit_signal`` view says when a commit entered);
- nightly completion: per nightly run, from its first test's start to its last test's finish;
- flake rate of hardware tests (target below 1%): the fleet's ``fleet_hardware_flake_rate`` (a run that
  passed only on retry, or failed where a run of the same code, stack, config and seed passed);
- queue waits per work class: the pool scheduler's first placements (``schedule`` topic);
- nodes out of service now (quarantined or diagnosing), from the fleet's ``fleet_node_states``;
- reruns, by who asked: the fleet's reruns of a sick node's failures (answered, passed elsewhere) and
  ``fastci rerun``'s reproductions (answered, reproduced bit for bit).

The flake rate of hardware tests, the queue waits and the node states are an accelerator fleet's: they
are shown only when results name a stack (a ``bundle``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime
from html import escape

from fastci.views.store import Views

FLAKE_TARGET = 0.01


@dataclass
class Week:
    week: date
    commits: int
    presubmit_p50_minutes: float | None
    presubmit_p90_minutes: float | None
    nightly_runs: int
    nightly_median_hours: float | None
    nightly_max_hours: float | None
    hardware_runs: int
    flaky_runs: int
    flake_rate: float | None
    quarantines: int
    rerun_results: int


@dataclass
class QueueWait:
    work_class: str
    placed: int
    p50_s: float
    p90_s: float
    max_s: float


@dataclass
class Reruns:
    requested_by: str
    requested: int
    answered: int
    passed: int  # the rerun passed
    reproduced: int  # same status, loss curve, eval score and output digest as the run it repeats


@dataclass
class CIHealth:
    latest: Week | None
    previous: Week | None
    node_states: Counter
    out_of_service: list[tuple[str, str, datetime | None, str]]  # node, state, since, reason
    reruns: list[Reruns]
    queue_waits: list[QueueWait] | None  # None: no schedule topic in these views
    not_covered: list[str] = field(default_factory=list)
    stack: bool = True  # results name a stack: the fleet's figures apply


def build_health(views: Views, stack: bool = True) -> CIHealth:
    """The section's figures; ``stack`` False (no result names a bundle) leaves out the accelerator
    fleet's (hardware flake rate, queue waits, node states)."""
    columns, rows = views.query("SELECT * FROM ci_health ORDER BY week")
    weeks = [Week(**dict(zip(columns, row))) for row in rows]
    _, states = views.query("SELECT node_id, state, since, reason FROM fleet_node_states ORDER BY node_id")
    _, reruns = views.query(
        "SELECT requested_by, count(*), count(*) FILTER (WHERE answered), "
        "count(*) FILTER (WHERE rerun_status = 'passed'), "
        "count(*) FILTER (WHERE reproduced) FROM rerun_outcomes GROUP BY requested_by ORDER BY requested_by"
    )
    _, has_queue = views.query("SELECT count(*) FROM information_schema.tables WHERE table_name = 'ci_queue_waits'")
    queue = None
    if has_queue[0][0]:
        _, waits = views.query(
            "SELECT work_class, sum(placed), max(wait_p50_s), max(wait_p90_s), max(wait_max_s) FROM ci_queue_waits "
            "WHERE week = (SELECT max(week) FROM ci_queue_waits) GROUP BY work_class ORDER BY work_class"
        )
        queue = [QueueWait(str(c), int(n), float(a), float(b), float(m)) for c, n, a, b, m in waits]
    not_covered = []
    if stack and not queue:
        not_covered.append("queue waits: no job placed by the pool scheduler in these views (its `schedule` topic)")
    if stack and not states:
        not_covered.append(
            "node states: no `node-state-changed` event yet (the fleet's node-state processor writes them)"
        )
    return CIHealth(
        latest=weeks[-1] if weeks else None,
        previous=weeks[-2] if len(weeks) > 1 else None,
        node_states=Counter(state for _, state, _, _ in states),
        out_of_service=[
            (node, state, since, reason)
            for node, state, since, reason in states
            if state in ("quarantined", "diagnosing")
        ],
        reruns=[Reruns(str(by), int(n), int(a), int(p), int(r)) for by, n, a, p, r in reruns],
        queue_waits=queue if stack else None,
        not_covered=not_covered,
        stack=stack,
    )


def _reruns_text(r: Reruns) -> str:
    return (
        f"{r.requested} by {r.requested_by}, {r.answered} answered, {r.passed} passed, "
        f"{r.reproduced} reproduced the run they repeat"
    )


def _num(value: float | None, unit: str, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f} {unit}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.2%}"


def figures(health: CIHealth) -> list[tuple[str, str, str]]:
    """(figure, this week, the week before) rows."""
    now, before = health.latest, health.previous

    def both(pick) -> tuple[str, str]:
        return (pick(now) if now else "-", pick(before) if before else "-")

    rows = [
        ("time to trustworthy signal, presubmit p90", *both(lambda w: _num(w.presubmit_p90_minutes, "min"))),
        ("time to trustworthy signal, presubmit p50", *both(lambda w: _num(w.presubmit_p50_minutes, "min"))),
        ("commits with presubmit results", *both(lambda w: str(w.commits))),
        ("nightly completion, median", *both(lambda w: _num(w.nightly_median_hours, "h", 2))),
        ("nightly completion, slowest", *both(lambda w: _num(w.nightly_max_hours, "h", 2))),
        ("nightly runs", *both(lambda w: str(w.nightly_runs))),
    ]
    if health.stack:
        rows += [
            (
                f"flake rate of hardware tests (target < {FLAKE_TARGET:.0%})",
                *both(lambda w: f"{_rate(w.flake_rate)} ({w.flaky_runs} of {w.hardware_runs})"),
            ),
            ("nodes quarantined (during the week)", *both(lambda w: str(w.quarantines))),
        ]
    rows.append(("rerun results", *both(lambda w: str(w.rerun_results))))
    return rows


def inline_code(text: str) -> str:
    """``text`` escaped for HTML, with its `backticked` names set as code (never raw backticks)."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(text))


def render_section(health: CIHealth) -> str:
    e = escape
    week = health.latest.week.strftime("%Y-%m-%d") if health.latest else "-"
    parts = [
        f"<h2>CI health</h2><p>Week of {e(week)} (the newest in the data), against the week before.</p>",
        "<table><tr><th>figure</th><th>this week</th><th>week before</th></tr>",
    ]
    for name, now, before in figures(health):
        parts.append(f"<tr><td>{e(name)}</td><td>{e(now)}</td><td>{e(before)}</td></tr>")
    parts.append("</table>")
    if health.queue_waits:
        parts.append(
            "<h3>Queue waits (first placement)</h3><table><tr><th>work class</th><th>placed</th><th>p50</th>"
            "<th>p90</th><th>max</th></tr>"
        )
        for q in health.queue_waits:
            parts.append(
                f"<tr><td>{e(q.work_class)}</td><td>{q.placed}</td><td>{q.p50_s:.0f} s</td><td>{q.p90_s:.0f} s</td>"
                f"<td>{q.max_s:.0f} s</td></tr>"
            )
        parts.append("</table>")
    if health.stack:
        states = ", ".join(f"{n} {e(s)}" for s, n in sorted(health.node_states.items())) or "no node state reported"
        parts.append(f"<p>Nodes now: {states}.</p>")
    if health.out_of_service:
        parts.append(
            "<ul>"
            + "".join(
                f"<li>{e(node)} {e(state)} since {e(str(since))}: {e(reason)}</li>"
                for node, state, since, reason in health.out_of_service
            )
            + "</ul>"
        )
    parts.append("<p>Reruns: " + ("; ".join(e(_reruns_text(r)) for r in health.reruns) or "none requested") + ".</p>")
    if health.not_covered:
        parts.append("<p>Not covered yet: " + "; ".join(inline_code(n) for n in health.not_covered) + ".</p>")
    return "".join(parts)


def summary_lines(health: CIHealth) -> list[str]:
    if health.latest is None:
        return ["CI health: no results with times yet"]
    w = health.latest
    first = (
        f"CI health, week of {w.week:%Y-%m-%d}: presubmit signal p90 {_num(w.presubmit_p90_minutes, 'min')} "
        f"({w.commits} commits); "
        f"nightly completion median {_num(w.nightly_median_hours, 'h', 2)} ({w.nightly_runs} runs)"
    )
    if health.stack:
        first += f"; flake rate {_rate(w.flake_rate)} of {w.hardware_runs} hardware runs" + (
            " (above the 1% target)" if w.flake_rate is not None and w.flake_rate >= FLAKE_TARGET else ""
        )
    reruns = "reruns: " + ("; ".join(_reruns_text(r) for r in health.reruns) or "none requested")
    if health.stack:
        out = ", ".join(f"{n} {s}" for n, s, _, _ in health.out_of_service)
        reruns = (
            f"nodes out of service now: {len(health.out_of_service)}" + (f" ({out})" if out else "") + "; " + reruns
        )
    lines = [first, reruns]
    if health.queue_waits:
        lines.append("queue waits p90: " + ", ".join(f"{q.work_class} {q.p90_s:.0f} s" for q in health.queue_waits))
    lines += [f"not covered: {n}" for n in health.not_covered]
    return lines
