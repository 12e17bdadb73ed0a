"""The selection's lines in the nightly report: the time it saved and its audited safety.

Read from the ``selection``, ``selection_audit`` and ``results`` views; every string from an event is
escaped in the HTML section.

The time saved is measured from the presubmit results: per commit whose selection ran a subset, what its
presubmit ran against every test the presubmits had run by then, each counted at its median presubmit
duration (a test no presubmit ever ran is not counted, so the figure errs low); a commit that ran all it
knew saved nothing. The selection's own estimate (each kept and skipped test at the mean of its recorded
runs, whatever their trigger) is shown only where no presubmit result measures it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from fastci.views.store import Views

RECENT_MISSES = 10


@dataclass(frozen=True)
class PresubmitCost:
    """What the presubmits ran, against running every test on each of their commits."""

    commits: int  # commits with presubmit results
    runs: int  # presubmit results
    suite_runs: int  # every test on every one of those commits
    ran_s: float
    suite_s: float  # every test on every commit, each at its median presubmit duration
    ran_chip_s: float
    suite_chip_s: float

    @property
    def saved_s(self) -> float:
        return self.suite_s - self.ran_s

    @property
    def saved_chip_s(self) -> float:
        return self.suite_chip_s - self.ran_chip_s


@dataclass(frozen=True)
class SelectionSafety:
    selections: int  # commits selected
    subsets: int  # of which ran less than everything
    saved_s: float  # suite time the subsets saved, by the selection's own estimates
    audited: int  # commits whose selection a fuller run checked
    missed_commits: int  # audited commits with at least one miss
    misses: list[tuple[str, str, str]] = field(default_factory=list)  # (sha, test, evidence), the latest first
    none_needed: int = 0  # commits whose change no test runs (documentation...)
    presubmit: PresubmitCost | None = None  # None: no presubmit result to measure it by

    @property
    def miss_rate(self) -> float | None:
        return self.missed_commits / self.audited if self.audited else None


# Per commit whose selection ran a subset, the tests the presubmits had run by the end of its job, each at
# its median presubmit duration; a commit that ran everything it knew saved nothing.
_PRESUBMIT_COST = """
WITH presubmit AS (
    SELECT repo, "commit", test_id, duration_s, chips, time FROM results WHERE trigger = 'presubmit'
), cost AS (
    SELECT repo, test_id, median(duration_s) AS s, median(duration_s * chips) AS chip_s, min(time) AS first_run
    FROM presubmit GROUP BY ALL
), jobs AS (
    SELECT repo, "commit", count(*) AS runs, sum(duration_s) AS s, sum(duration_s * chips) AS chip_s, max(time) AS done
    FROM presubmit GROUP BY ALL
), subsets AS (
    SELECT DISTINCT repo, sha AS "commit" FROM selection
    WHERE NOT run_all AND CAST(metrics->>'kept' AS BIGINT) < CAST(metrics->>'tests_known' AS BIGINT)
), suite AS (
    SELECT j.repo, j."commit", count(*) AS tests, sum(c.s) AS s, sum(c.chip_s) AS chip_s
    FROM jobs j JOIN subsets USING (repo, "commit")
    JOIN cost c ON c.repo = j.repo AND (c.first_run IS NULL OR j.done IS NULL OR c.first_run <= j.done)
    GROUP BY ALL
)
SELECT count(*), coalesce(sum(j.runs), 0), coalesce(sum(greatest(x.tests, j.runs)), 0), coalesce(sum(j.s), 0),
       coalesce(sum(greatest(x.s, j.s)), 0), coalesce(sum(j.chip_s), 0), coalesce(sum(greatest(x.chip_s, j.chip_s)), 0)
FROM jobs j LEFT JOIN suite x USING (repo, "commit")
"""


def build_selection(views: Views) -> SelectionSafety:
    (selections, subsets, saved, none_needed), *_ = views.query(
        # metrics is a JSON column (it holds a list: the unevidenced units)
        "SELECT count(*), count(*) FILTER (WHERE NOT run_all AND CAST(metrics->>'kept' AS BIGINT) < "
        "CAST(metrics->>'tests_known' AS BIGINT)), "
        "coalesce(sum(CAST(metrics->>'saved_s' AS DOUBLE)) FILTER (WHERE NOT run_all), 0), "
        "count(*) FILTER (WHERE NOT run_all AND CAST(metrics->>'kept' AS BIGINT) = 0) FROM selection"
    )[1]
    ((commits, runs, suite_runs, ran_s, suite_s, ran_chip_s, suite_chip_s),) = views.query(_PRESUBMIT_COST)[1]
    presubmit = (
        PresubmitCost(
            int(commits),
            int(runs),
            int(suite_runs),
            float(ran_s),
            float(suite_s),
            float(ran_chip_s),
            float(suite_chip_s),
        )
        if commits
        else None
    )
    (audited, missed), *_ = views.query(
        "SELECT count(DISTINCT sha) FILTER (WHERE kind = 'audited'), count(DISTINCT sha) FILTER (WHERE kind = 'miss') "
        "FROM selection_audit"
    )[1]
    _, misses = views.query(
        "SELECT sha, test_id, evidence FROM selection_audit WHERE kind = 'miss' "
        f"ORDER BY _partition, _offset DESC LIMIT {RECENT_MISSES}"
    )
    return SelectionSafety(
        int(selections), int(subsets), float(saved), int(audited), int(missed), misses, int(none_needed), presubmit
    )


def savings_text(safety: SelectionSafety) -> str:
    """What the selection saved, in one sentence: measured from the presubmit results where there are
    some, else the selection's own estimate."""
    subsets = f"{safety.subsets} of {safety.selections} commits ran a subset"
    if safety.none_needed:
        subsets += f" ({safety.none_needed} of them needed no test)"
    cost = safety.presubmit
    if cost is None:
        return f"{subsets}, saving ~{safety.saved_s / 3600:.1f} h by the selection's estimates"
    share = cost.runs / cost.suite_runs if cost.suite_runs else 1.0
    chips = f" ({cost.saved_chip_s / 3600:,.0f} chip-hours)" if cost.saved_chip_s >= 3600 else ""
    return (
        f"{subsets}; their presubmits ran {cost.runs:,} of {cost.suite_runs:,} test runs ({share:.0%}): "
        f"{cost.ran_s / 3600:,.1f} h of test time instead of {cost.suite_s / 3600:,.1f} h, "
        f"{cost.saved_s / 3600:,.1f} h saved{chips}"
    )


def summary_lines(safety: SelectionSafety) -> list[str]:
    if not safety.selections:
        return []
    saved = f"selection: {savings_text(safety)}"
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
    parts.append(f"<p>{e(savings_text(safety))}.</p>")
    if safety.presubmit is not None:
        parts.append(
            "<p><small>Measured from the presubmit results: what each subset's presubmit ran, against every "
            "test the presubmits had run by then, each at its median presubmit duration.</small></p>"
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
