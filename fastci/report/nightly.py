"""``fastci report nightly``: regressions, culprits, gates and loss curves, from the DuckDB views.

Reads the views (run ``fastci views refresh`` first), rebuilds the events as their models, and
renders one self-contained HTML page (inline SVG plots: trend with change points, loss curve
against its reference band, bisect trail) plus a terminal summary. Every string that came from an
event is escaped (``html.escape``) before it is placed in the page; the page loads nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import TypeVar

import numpy as np
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from fastci.contracts.regression_alerts import RegressionAlert
from fastci.core.events import Event
from fastci.inputs import ResultEvent
from fastci.regression.changepoint import change_points
from fastci.regression.correctness import build_loss_band, check_loss_curve
from fastci.regression.detector import CPD_MAX_P, GATE
from fastci.regression.events import BisectStep, GateResult
from fastci.regression.references import GoldenReference
from fastci.report import fleet_section as fleet_report
from fastci.report import selection_section as selection_report
from fastci.report.health import CIHealth, build_health, render_section, summary_lines
from fastci.report.svg import Band, Chart, Line, Point
from fastci.shared.perfstats import metric_direction
from fastci.views.schema import model_columns, quote, table_name
from fastci.views.store import Views

E = TypeVar("E", bound=Event)
MAX_LOSS_PLOTS = 8
MAX_TRENDS = 12
TREND_NIGHTS = 60
GOOD, BAD, NEUTRAL, REF = "#2a9d4b", "#d1495b", "#555555", "#3a6ea5"


@dataclass
class Regression:
    detected: RegressionAlert
    latest: RegressionAlert
    steps: list[BisectStep] = field(default_factory=list)
    candidates: int = 0  # changes and bundle bumps the bisect started from

    @property
    def stage(self) -> str:
        return self.latest.stage


@dataclass
class LossPlot:
    test_id: str
    run_id: str
    commit: str
    curve: list[float]
    golden_version: int
    center: list[float]
    lower: list[float]
    upper: list[float]
    diverged_at: int | None
    detail: str


@dataclass
class Trend:
    test_id: str
    metric: str
    hardware_revision: str
    commits: list[str]
    medians: list[float]
    change_points: list[int]


@dataclass
class NightlyReport:
    generated: datetime
    views: Path
    regressions: list[Regression]
    gates_passed: int
    gates_failed: list[GateResult]
    loss_plots: list[LossPlot]
    trends: list[Trend]
    nightly_results: int
    pending_requests: int
    health: CIHealth | None = None
    fleet: fleet_report.FleetSummary | None = None
    failing_tests: list[str] = field(default_factory=list)  # latest status failing (test_history)
    selection: selection_report.SelectionSafety | None = None
    stack: bool = True  # some result names a stack (a bundle): the accelerator sections apply

    @property
    def open(self) -> list[Regression]:
        return [r for r in self.regressions if r.stage != "recovered"]

    def culprits(self) -> list[tuple[RegressionAlert, list[Regression]]]:
        """Each culprit the open regressions were bisected to, with those regressions (one change often
        breaks several tests), in the order their first regression is listed."""
        found: dict[tuple, tuple[RegressionAlert, list[Regression]]] = {}
        for reg in self.open:
            culprit = reg.latest.culprit
            if reg.stage != "culprit" or culprit is None:
                continue
            key = (culprit.kind, culprit.commit, culprit.component, culprit.from_version, culprit.to_version)
            found.setdefault(key, (reg.latest, []))[1].append(reg)
        return list(found.values())


def load(views: Views, model: type[E], where: str = "", order: str = "_offset") -> list[E]:
    """Events of ``model``'s topic from the views, as validated models (JSON columns parsed)."""
    columns = model_columns(model)
    names = ", ".join(quote(c) for c in columns)
    sql = f"SELECT {names} FROM {quote(table_name(model.TOPIC))} {where} ORDER BY {order}"
    _, rows = views.query(sql)
    events = []
    for row in rows:
        document = {}
        for (column, sql_type), value in zip(columns.items(), row):
            if sql_type == "JSON" and isinstance(value, str):
                value = json.loads(value)
            if value is not None:
                document[column] = value
        events.append(model.model_validate(document))
    return events


def build_report(views_path: Path) -> NightlyReport:
    views = Views(Path(views_path), read_only=True)
    try:
        alerts = load(views, RegressionAlert)
        steps = load(views, BisectStep, order="step")
        gates = load(views, GateResult, where="WHERE trigger = 'nightly'")
        goldens = {g.test_id: g for g in load(views, GoldenReference, order="version")}
        ((nightly, stacked, results),) = views.query(
            "SELECT count(*) FILTER (WHERE trigger = 'nightly'), count(*) FILTER (WHERE bundle IS NOT NULL), "
            "count(*) FROM results"
        )[1]
        # a plain repository's results name no stack: the accelerator sections do not apply (with no result
        # at all, nothing says which it is, and every section shows what it has)
        stack = bool(stacked) or not results
        answered = (
            "SELECT count(*) FROM run_requested q WHERE NOT EXISTS (SELECT 1 FROM results r WHERE r.trigger = "
            "q.work_class AND r.commit = q.commit AND r.test_id = q.test_id AND r.bundle = q.bundle)"
        )
        ((pending,),) = views.query(answered)[1]
        _, sizes = views.query(
            "SELECT alert_id, json_array_length(changes) + json_array_length(bumps) FROM bisect_plan"
        )
        latest_gates = _latest_per_test(gates)
        loss_plots = _loss_plots(views, latest_gates, goldens)
        trends = _trends(views)
        health = build_health(views, stack=stack)
        fleet = fleet_report.build_fleet(views)
        selection = selection_report.build_selection(views)
        failing = [test for (test,) in views.query(_FAILING_NOW)[1]]
    finally:
        views.close()
    regressions = _regressions(alerts, steps)
    planned = dict(sizes)
    for reg in regressions:
        reg.candidates = int(planned.get(reg.detected.id, 0))
    return NightlyReport(
        generated=datetime.now(UTC),
        views=Path(views_path),
        regressions=regressions,
        gates_passed=sum(g.passed for g in latest_gates),
        gates_failed=[g for g in latest_gates if not g.passed],
        loss_plots=loss_plots,
        trends=trends,
        nightly_results=int(nightly),
        pending_requests=int(pending),
        health=health,
        fleet=fleet,
        failing_tests=failing,
        selection=selection,
        stack=stack,
    )


# Tests failing now, whether or not a detector judges them: a plain test that breaks raises no alert.
_FAILING_NOW = "SELECT test_id FROM test_history WHERE health = 'failing' ORDER BY test_id"


def _regressions(alerts: Sequence[RegressionAlert], steps: Sequence[BisectStep]) -> list[Regression]:
    by_id: dict[str, Regression] = {}
    for alert in alerts:
        if alert.stage == "detected":
            by_id.setdefault(alert.regression_id, Regression(detected=alert, latest=alert))
        elif alert.regression_id in by_id:
            by_id[alert.regression_id].latest = alert
    for step in steps:
        if step.regression_id in by_id:
            by_id[step.regression_id].steps.append(step)
    order = {"detected": 0, "culprit": 1, "unresolved": 2, "recovered": 3}
    return sorted(by_id.values(), key=lambda r: (order[r.stage], r.detected.test_id, r.detected.subject))


def _latest_per_test(gates: Sequence[GateResult]) -> list[GateResult]:
    latest: dict[tuple[str, str], GateResult] = {}
    for gate in gates:  # in log order: the last one wins
        latest[(gate.test_id, gate.hardware_revision)] = gate
    return list(latest.values())


def _loss_plots(views: Views, gates: Sequence[GateResult], goldens: dict[str, GoldenReference]) -> list[LossPlot]:
    with_curves = [g for g in gates if any(c.kind == "loss_curve" for c in g.checks) and g.test_id in goldens]
    with_curves.sort(key=lambda g: (all(c.passed for c in g.checks if c.kind == "loss_curve"), g.test_id))
    plots = []
    for gate in with_curves[:MAX_LOSS_PLOTS]:
        (result,) = load(views, ResultEvent, where=f"WHERE id = '{_hex(gate.result_id)}'") or (None,)
        if result is None:
            continue
        golden = goldens[gate.test_id]
        band = build_loss_band(golden.loss_curves, golden.loss_band)
        check = check_loss_curve(result.loss_curve, band)
        plots.append(
            LossPlot(
                test_id=gate.test_id,
                run_id=gate.run_id,
                commit=gate.commit,
                curve=list(result.loss_curve),
                golden_version=golden.version,
                center=band.center.tolist(),
                lower=band.lower.tolist(),
                upper=band.upper.tolist(),
                diverged_at=check.diverged_at_step,
                detail=check.detail,
            )
        )
    return plots


def _trends(views: Views) -> list[Trend]:
    """Nightly medians of every performance metric per (test, metric, hardware revision), the last
    ``TREND_NIGHTS`` of each, with change points (as the detector finds them); shifted series first."""
    _, rows = views.query(
        'SELECT test_id, hardware_revision, "commit", metrics FROM results '
        "WHERE trigger = 'nightly' AND status = 'passed' ORDER BY _offset"
    )
    series: dict[tuple[str, str, str], list[tuple[str, float]]] = {}
    for test_id, hardware, commit, metrics in rows:
        for metric, samples in (json.loads(metrics) if isinstance(metrics, str) else metrics or {}).items():
            direction = metric_direction(metric)
            if direction and samples and all(x > 0 for x in samples):
                series.setdefault((test_id, metric, hardware), []).append((commit, float(np.median(samples))))
    trends = []
    for (test_id, metric, hardware), points in series.items():
        points = points[-TREND_NIGHTS:]
        medians = [m for _, m in points]
        as_performance = medians if metric_direction(metric) == "higher" else [1 / m for m in medians]
        found = [p.index for p in change_points(as_performance, min_size=2, max_p=CPD_MAX_P, min_effect=GATE.effect)]
        trends.append(Trend(test_id, metric, hardware, [c for c, _ in points], medians, found))
    trends.sort(key=lambda t: (not t.change_points, t.test_id, t.metric))
    return trends[:MAX_TRENDS]


def _hex(value: str) -> str:
    if not all(ch in "0123456789abcdef" for ch in value):
        raise ValueError(f"not an event id: {value!r}")
    return value


# ----- HTML

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1000px;color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #ddd}h3{font-size:15px}
table{border-collapse:collapse;width:100%;margin:8px 0}td,th{border:1px solid #ddd;padding:4px 6px;text-align:left;
vertical-align:top}th{background:#f5f5f5}.stage-detected{color:#b8860b}.stage-culprit{color:#d1495b}
.stage-unresolved{color:#7a4f9a}.stage-recovered{color:#2a9d4b}.chart{width:100%;height:auto}
.chart-title{font-weight:600;font-size:13px}.tick,.legend,.axis{font-size:11px;fill:#444}code{font-size:12px}
.summary{background:#fafafa;border-left:3px solid #ccc;padding:6px 10px}
.glance{background:#f4f8fc;border:1px solid #d5e2ef;padding:4px 12px}.glance li{margin:4px 0}
"""


def render_html(report: NightlyReport) -> str:
    e = escape
    open_regressions = report.open
    gates = (
        f"{report.gates_passed} tests passing their gates, {len(report.gates_failed)} failing, " if report.stack else ""
    )
    head = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">",
        f"<title>fastci nightly report {e(report.generated.strftime('%Y-%m-%d'))}</title>"
        f"<style>{STYLE}</style></head><body>",
        f"<h1>Nightly regression report</h1><p>Generated {e(report.generated.isoformat(timespec='seconds'))} from "
        f"<code>{e(str(report.views))}</code>: {report.nightly_results} nightly results, {gates}"
        f"{len(open_regressions)} open regression(s), {report.pending_requests} run request(s) not answered yet.</p>",
    ]
    glance = headlines(report)
    if glance:
        head.append("<ul class='glance'>" + "".join(f"<li>{e(line)}</li>" for line in glance) + "</ul>")
    body = ["<h2>Regressions</h2>"]
    if not report.regressions:
        body.append(
            "<p>No regression alert (the detector judges gated, throughput and loss-curve tests).</p>"
            if report.stack
            else "<p>No regression alert: the detector judges results that name a stack (a <code>bundle</code>), "
            "and none here does.</p>"
        )
    if report.failing_tests:
        shown = ", ".join(f"<code>{e(t)}</code>" for t in report.failing_tests[:20])
        more = f" and {len(report.failing_tests) - 20} more" if len(report.failing_tests) > 20 else ""
        body.append(f"<p>{len(report.failing_tests)} test(s) failing now: {shown}{more} (see test_history).</p>")
    if report.regressions:
        body.append(
            "<table><tr><th>stage</th><th>test</th><th>what</th><th>culprit</th><th>owners</th><th>bisect</th></tr>"
        )
        for reg in report.regressions:
            latest = reg.latest
            body.append(
                f"<tr><td class='stage-{e(reg.stage)}'>{e(reg.stage)}</td><td>{e(latest.test_id)}</td>"
                f"<td>{e(latest.subject)} ({e(latest.kind)})</td><td>{_culprit_html(latest)}</td>"
                f"<td>{e(', '.join(latest.owners) or '-')}</td>"
                f"<td>{len(reg.steps)} step(s), {latest.runs_used} run(s)</td></tr>"
            )
        body.append("</table>")
        for index, reg in enumerate(report.regressions):
            body.append(_regression_section(index, reg))
    # what a team acts on first (the selection's savings, the fleet), then the figures, then the detail
    if report.selection is not None:
        body.append(selection_report.render_section(report.selection))
    if report.fleet is not None:
        body.append(fleet_report.render_section(report.fleet))
    if report.health is not None:
        body.append(render_section(report.health))
    if report.stack:
        body.append(_gates_section(report))
    if report.trends:
        body.append(
            "<h2>Nightly performance trends</h2><p>Median of each nightly run; vertical lines are change "
            "points (e-divisive with a t-test, as the detector finds them).</p>"
        )
        for trend in report.trends:
            body.append(_trend_series_chart(trend))
    if report.loss_plots:
        body.append("<h2>Loss curves against their reference band</h2>")
        for plot in report.loss_plots:
            body.append(_loss_chart(plot))
    return "".join(head + body + ["</body></html>"])


def _gates_section(report: NightlyReport) -> str:
    e = escape
    parts = ["<h2>Correctness gates (latest nightly per test)</h2>"]
    if report.gates_failed:
        parts.append(
            "<table><tr><th>test</th><th>hardware</th><th>commit</th><th>golden</th><th>failing checks</th></tr>"
        )
        for gate in report.gates_failed:
            failing = "<br>".join(e(c.detail) for c in gate.checks if not c.passed)
            parts.append(
                f"<tr><td>{e(gate.test_id)}</td><td>{e(gate.hardware_revision or '-')}</td><td><code>"
                f"{e(gate.commit[:10])}</code></td><td>v{gate.golden_version}</td><td>{failing}</td></tr>"
            )
        parts.append("</table>")
    elif report.gates_passed:
        parts.append("<p>Every gated test passes.</p>")
    else:
        parts.append("<p>No test has a correctness gate yet: publish golden references to gate results.</p>")
    return "".join(parts)


def headlines(report: NightlyReport) -> list[str]:
    """What the report found, a sentence each, for the top of the page and the terminal: what the
    selection saved, each culprit and its owners, the nodes taken out of service, the flaky tests' owners."""
    lines = []
    if report.selection is not None and report.selection.selections:
        lines.append(f"Selection: {selection_report.savings_text(report.selection)}.")
    for alert, regressions in report.culprits():
        lines.append(
            f"{len(regressions)} regression(s) ({', '.join(_what(r) for r in regressions)}) {_culprit_text(alert)}"
        )
    unresolved = [r for r in report.open if r.stage != "culprit"]
    if unresolved:
        lines.append(f"{len(unresolved)} regression(s) not bisected to a culprit (yet): see Regressions.")
    if report.fleet is not None:
        for node, state, rule in report.fleet.out_of_service:
            lines.append(f"{node} {state} ({rule or 'no rule'}): no work is placed on it until diagnostics pass.")
    if report.health is not None:
        for reruns in report.health.reruns:
            if reruns.requested_by == "node-state":
                lines.append(
                    f"{reruns.requested} failure(s) of sick nodes rerun elsewhere: {reruns.answered} answered, "
                    f"{reruns.passed} passed."
                )
    if report.fleet is not None and report.fleet.flaky_tests:
        owners: dict[str, int] = {}
        for _, teams in report.fleet.flaky_tests:
            for team in (teams or "no owner").split(", "):
                owners[team] = owners.get(team, 0) + 1
        lines.append(
            f"{len(report.fleet.flaky_tests)} flaky test(s), each with its owners: "
            + ", ".join(f"{team} ({n})" for team, n in sorted(owners.items()))
            + "."
        )
    return lines


def _what(reg: Regression) -> str:
    """A regression in a few words: the test's file stem and what broke."""
    alert = reg.latest
    test = alert.test_id.split("::")[-1]
    stem = alert.test_id.split("::")[0].rsplit("/", 1)[-1].removesuffix(".py").removeprefix("test_")
    if alert.perf is not None or reg.detected.perf is not None:
        perf = alert.perf or reg.detected.perf
        return f"{stem} {test} {perf.ratio - 1:+.1%}"  # type: ignore[union-attr]
    return f"{stem} {test} {alert.kind.replace('_', ' ')}"


def _culprit_text(alert: RegressionAlert) -> str:
    culprit = alert.culprit
    assert culprit is not None
    owners = ", ".join(alert.owners) or "no owner found"
    if culprit.kind == "commit":
        return f'bisected to {(culprit.commit or "")[:10]} "{culprit.title}" by {culprit.author}; owners: {owners}.'
    return f"bisected to {culprit.component} {culprit.from_version} -> {culprit.to_version}; owners: {owners}."


def _culprit_html(alert: RegressionAlert) -> str:
    culprit = alert.culprit
    if culprit is None:
        return escape(alert.problem) if alert.stage == "unresolved" else "-"
    if culprit.kind == "commit":
        return (
            f"<code>{escape((culprit.commit or '')[:10])}</code> {escape(culprit.title)} "
            f"<br><small>{escape(culprit.author)}</small>"
        )
    return (
        f"{escape(culprit.component or '')} {escape(culprit.from_version or '')} "
        f"&rarr; {escape(culprit.to_version or '')}"
    )


def _regression_section(index: int, reg: Regression) -> str:
    e = escape
    alert = reg.latest
    parts = [
        f"<h3 id='r{index}'>{e(alert.test_id)} &middot; {e(alert.subject)}</h3>",
        f"<p class='summary'>{e(alert.summary)}</p>",
        f"<p>Last good <code>{e(alert.good.commit[:10])}</code> ({e(alert.good.run_id)} on {e(alert.good.node_id)}), "
        f"first bad <code>{e(alert.bad.commit[:10])}</code> ({e(alert.bad.run_id)} on {e(alert.bad.node_id)}).</p>",
    ]
    perf = reg.detected.perf
    if perf is not None:
        parts.append(
            f"<p>{e(perf.metric)}: ratio {perf.ratio:.4f} (95% CI {perf.ci_low:.4f}&ndash;{perf.ci_high:.4f}), "
            f"one-sided Mann-Whitney p={perf.p_value:.2g}, baseline noise {perf.noise:.2%}, "
            f"{len(perf.baseline_samples)} baseline and {len(perf.candidate_samples)} candidate samples, "
            f"found by {e(perf.method)}.</p>"
        )
        parts.append(_trend_chart(reg))
    elif reg.detected.checks:
        parts.append("<ul>" + "".join(f"<li>{e(c.detail)}</li>" for c in reg.detected.checks) + "</ul>")
    if reg.steps:
        parts.append(_trail_chart(reg))
        parts.append(
            "<table><tr><th>step</th><th>phase</th><th>tested</th><th>samples</th><th>median</th>"
            "<th>verdict</th><th>left</th></tr>"
        )
        for step in reg.steps:
            median = "-" if step.median is None else f"{step.median:.5g}"
            parts.append(
                f"<tr><td>{step.step}</td><td>{e(step.phase)}</td><td>{e(step.tested)}</td><td>{step.samples}</td>"
                f"<td>{median}</td><td>{e(step.verdict)}</td><td>{step.candidates_left}</td></tr>"
            )
        parts.append("</table>")
    return "".join(parts)


def _trend_chart(reg: Regression) -> str:
    perf = reg.detected.perf
    assert perf is not None
    colors = {
        "accepted": NEUTRAL,
        "suspect": "#b8860b",
        "dismissed": "#999999",
        "regressed": BAD,
        "excluded": "#bbbbbb",
        "flaky": "#bbbbbb",
    }
    xs = list(range(len(perf.series)))
    chart = Chart(
        title=f"{perf.metric}: nightly medians",
        x_label="night",
        y_label=perf.metric,
        lines=[Line(xs, [p.median for p in perf.series], NEUTRAL, "nightly median")],
    )
    for x, point in zip(xs, perf.series):
        chart.points.append(
            Point(
                x,
                point.median,
                colors[point.status],
                f"{point.commit[:10]}: {point.median:.5g} ({point.samples} samples, {point.status})",
            )
        )
    for cp in perf.change_points:
        chart.vlines.append((cp, f"change point at night {cp}", "#b8860b"))
    if perf.baseline_samples:
        baseline = sorted(perf.baseline_samples)[len(perf.baseline_samples) // 2]
        chart.hlines.append((baseline, f"baseline median {baseline:.5g}", REF))
    return chart.render()


def _trail_chart(reg: Regression) -> str:
    """Performance: each step's median against the good and bad levels. Correctness: candidates left."""
    steps = reg.steps
    perf = reg.detected.perf
    verdict_color = {"bad": BAD, "good": GOOD}
    measured = [s for s in steps if s.median is not None]
    if perf is not None and measured:
        chart = Chart(
            title="bisect trail: median of each step's runs (performance scale)",
            x_label="step",
            y_label=f"{perf.metric} (as performance)",
        )
        for step in measured:
            chart.points.append(
                Point(
                    step.step,
                    step.median,
                    verdict_color[step.verdict],  # type: ignore[arg-type]
                    f"step {step.step}: {step.tested} -> {step.verdict}",
                    radius=5,
                )
            )
        boundary = next((s.boundary for s in measured if s.boundary is not None), None)
        if boundary is not None:
            chart.hlines.append((boundary, f"midpoint between good and bad: {boundary:.5g}", NEUTRAL))
        chart.lines.append(Line([s.step for s in measured], [s.median for s in measured], NEUTRAL, "step median"))  # type: ignore[misc]
        return chart.render()
    start = reg.candidates or (steps[0].candidates_left * 2 if steps else 0)
    chart = Chart(
        title="bisect trail: candidates left after each step",
        x_label="step",
        y_label="candidates left",
        lines=[
            Line(
                [0, *(s.step for s in steps)], [start, *(s.candidates_left for s in steps)], NEUTRAL, "candidates left"
            )
        ],
        y_floor=0,
    )
    for step in steps:
        chart.points.append(
            Point(
                step.step,
                step.candidates_left,
                verdict_color[step.verdict],
                f"step {step.step}: {step.tested} -> {step.verdict}",
                radius=5,
            )
        )
    return chart.render()


def _trend_series_chart(trend: Trend) -> str:
    xs = list(range(len(trend.medians)))
    chart = Chart(
        title=f"{trend.test_id} {trend.metric} on {trend.hardware_revision}",
        x_label="night",
        y_label=trend.metric,
        lines=[Line(xs, trend.medians, NEUTRAL, "nightly median")],
    )
    for x, (commit, median) in enumerate(zip(trend.commits, trend.medians)):
        chart.points.append(Point(x, median, NEUTRAL, f"{commit[:10]}: {median:.5g}", radius=2.5))
    for index in trend.change_points:
        chart.vlines.append((index, f"change point before {trend.commits[index][:10]}", "#b8860b"))
    return chart.render()


def _loss_chart(plot: LossPlot) -> str:
    steps = list(range(len(plot.center)))
    chart = Chart(
        title=f"{plot.test_id} vs golden v{plot.golden_version}",
        x_label="step",
        y_label="loss",
        bands=[Band(steps, plot.lower, plot.upper, REF, "reference band")],
        lines=[
            Line(steps, plot.center, REF, "reference center", dash="4 3"),
            Line(list(range(len(plot.curve))), plot.curve, BAD if plot.diverged_at is not None else GOOD, "this run"),
        ],
    )
    if plot.diverged_at is not None:
        chart.vlines.append((plot.diverged_at, f"diverges at step {plot.diverged_at}", BAD))
    return (
        chart.render()
        + f"<p>{escape(plot.run_id)} at <code>{escape(plot.commit[:10])}</code>: {escape(plot.detail)}</p>"
    )


# ----- terminal


def print_summary(report: NightlyReport, out: Console) -> None:
    gates = f"gates {report.gates_passed} passing, {len(report.gates_failed)} failing; " if report.stack else ""
    out.print(
        f"nightly: {report.nightly_results} results; {gates}{len(report.open)} open regression(s); "
        f"{report.pending_requests} run request(s) unanswered"
    )
    if report.regressions:
        # A test id folds onto more lines rather than lose its end: the end names the test.
        test = Column("test", overflow="fold")
        table = Table("stage", test, "what", "culprit", "owners", "steps", title="regressions")
        for reg in report.regressions:
            latest = reg.latest
            culprit = latest.culprit
            if culprit is None:
                who = latest.problem or "-"
            elif culprit.kind == "commit":
                who = f"{(culprit.commit or '')[:10]} {culprit.title}"
            else:
                who = f"{culprit.component} {culprit.from_version} -> {culprit.to_version}"
            table.add_row(
                *(
                    Text(v)
                    for v in (
                        reg.stage,
                        latest.test_id,
                        latest.subject,
                        who,
                        ", ".join(latest.owners) or "-",
                        str(len(reg.steps)),
                    )
                )
            )
        out.print(table)
    for alert, regressions in report.culprits():
        out.print(
            Text(f"culprit of {len(regressions)} regression(s): {_culprit_text(alert).removeprefix('bisected to ')}")
        )
    if report.failing_tests:
        shown = ", ".join(report.failing_tests[:5]) + (" ..." if len(report.failing_tests) > 5 else "")
        out.print(Text(f"{len(report.failing_tests)} test(s) failing now: {shown} (see test_history)"))
    for gate in report.gates_failed:
        failing = "; ".join(c.detail for c in gate.checks if not c.passed)
        out.print(Text(f"gate failing: {gate.test_id} on {gate.hardware_revision}: {failing}"))
    for trend in report.trends:
        for index in trend.change_points:
            before = float(np.mean(trend.medians[:index])) if index else trend.medians[0]
            after = float(np.mean(trend.medians[index:]))
            out.print(
                Text(
                    f"change point: {trend.test_id} {trend.metric} on {trend.hardware_revision} at "
                    f"{trend.commits[index][:10]}: {after / before - 1:+.2%}"
                )
            )
    if report.health is not None:
        for line in summary_lines(report.health):
            out.print(Text(line))
    if report.fleet is not None:
        for line in fleet_report.summary_lines(report.fleet):
            out.print(Text(line))
    if report.selection is not None:
        for line in selection_report.summary_lines(report.selection):
            out.print(Text(line))
