"""The fleet's lines in the nightly report: hardware flake rate, flaky tests, nodes out of service, reruns.

Read from the fleet views (``fastci/views/fleet.py``); every string from an event is escaped in the
HTML section.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from fastci.views.fleet import FLAKE_RATE_TARGET
from fastci.views.store import Views

FLAKE_DAYS = 7


@dataclass(frozen=True)
class FleetSummary:
    hardware_runs: int  # over the last FLAKE_DAYS days with results
    flaky_runs: int
    flaky_tests: list[tuple[str, str]]  # (test, owners)
    out_of_service: list[tuple[str, str, str]]  # (node, state, rule)
    reruns: int
    reruns_passed: int
    reruns_failed: int

    @property
    def flake_rate(self) -> float:
        return self.flaky_runs / self.hardware_runs if self.hardware_runs else 0.0

    @property
    def within_target(self) -> bool:
        return self.flake_rate < FLAKE_RATE_TARGET


def build_fleet(views: Views) -> FleetSummary:
    (runs, flaky), = views.query(
        f"SELECT coalesce(sum(runs), 0), coalesce(sum(flaky_runs), 0) FROM fleet_hardware_flake_rate "
        f"WHERE day > (SELECT max(day) FROM fleet_hardware_flake_rate) - {FLAKE_DAYS}")[1]
    _, tests = views.query("SELECT test_id, array_to_string(CAST(owners AS VARCHAR[]), ', ') FROM fleet_flaky_tests ORDER BY test_id")
    _, nodes = views.query("SELECT node_id, state, coalesce(rule, '') FROM fleet_quarantined_nodes ORDER BY node_id")
    (asked, passed, failed), = views.query(
        "SELECT count(*), count(*) FILTER (WHERE rerun_status IN ('passed', 'flaky')), "
        "count(*) FILTER (WHERE rerun_status IN ('failed', 'error')) FROM fleet_reruns")[1]
    return FleetSummary(int(runs), int(flaky), [(t, o or "") for t, o in tests], [tuple(n) for n in nodes],
                        int(asked), int(passed), int(failed))


def summary_lines(fleet: FleetSummary) -> list[str]:
    lines = [
        f"hardware flake rate: {fleet.flake_rate:.2%} of {fleet.hardware_runs} runs over the last {FLAKE_DAYS} days "
        f"(target < {FLAKE_RATE_TARGET:.0%}: {'met' if fleet.within_target else 'MISSED'}); "
        f"{len(fleet.flaky_tests)} test(s) marked flaky",
        f"fleet: {len(fleet.out_of_service)} node(s) out of service"
        + (": " + ", ".join(f"{n} {s} ({r})" for n, s, r in fleet.out_of_service) if fleet.out_of_service else "")
        + f"; reruns {fleet.reruns} asked, {fleet.reruns_passed} passed, {fleet.reruns_failed} failed, "
        f"{fleet.reruns - fleet.reruns_passed - fleet.reruns_failed} waiting",
    ]
    return lines + [f"flaky: {test} (owners: {owners or '-'})" for test, owners in fleet.flaky_tests]


def render_section(fleet: FleetSummary) -> str:
    e = escape
    parts = ["<h2>Fleet</h2><ul>"] + [f"<li>{e(line)}</li>" for line in summary_lines(fleet)[:2]] + ["</ul>"]
    if fleet.flaky_tests:
        parts.append("<table><tr><th>flaky test</th><th>owners</th></tr>")
        parts += [f"<tr><td>{e(test)}</td><td>{e(owners or '-')}</td></tr>" for test, owners in fleet.flaky_tests]
        parts.append("</table>")
    return "".join(parts)
