"""The fleet's lines in the nightly report: why nodes are out of service, and the flaky tests with their owners.

Read from the fleet views (``fastci/views/fleet_views.py``); every string from an event is escaped in the
HTML section.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from fastci.views.store import Views


@dataclass(frozen=True)
class FleetSummary:
    flaky_tests: list[tuple[str, str]]  # (test, owners)
    out_of_service: list[tuple[str, str, str]]  # (node, state, rule)


def build_fleet(views: Views) -> FleetSummary:
    _, tests = views.query(
        "SELECT test_id, array_to_string(CAST(owners AS VARCHAR[]), ', ') FROM fleet_flaky_tests ORDER BY test_id"
    )
    _, nodes = views.query("SELECT node_id, state, coalesce(rule, '') FROM fleet_quarantined_nodes ORDER BY node_id")
    return FleetSummary([(t, o or "") for t, o in tests], [tuple(n) for n in nodes])


def summary_lines(fleet: FleetSummary) -> list[str]:
    """What the CI-health lines do not say: why each node is out of service, and who owns each flaky
    test (the flake rate, the nodes out of service and the reruns are CI-health figures)."""
    lines = [f"out of service: {node} {state} ({rule or 'no rule'})" for node, state, rule in fleet.out_of_service]
    lines.append(f"{len(fleet.flaky_tests)} test(s) marked flaky")
    return lines + [f"flaky: {test} (owners: {owners or '-'})" for test, owners in fleet.flaky_tests]


def render_section(fleet: FleetSummary) -> str:
    e = escape
    parts = ["<h2>Fleet</h2>"]
    if fleet.out_of_service:
        parts.append("<table><tr><th>node out of service</th><th>state</th><th>rule</th></tr>")
        parts += [f"<tr><td>{e(n)}</td><td>{e(s)}</td><td>{e(r or '-')}</td></tr>" for n, s, r in fleet.out_of_service]
        parts.append("</table>")
    parts.append(f"<p>{len(fleet.flaky_tests)} test(s) marked flaky</p>")
    if fleet.flaky_tests:
        parts.append("<table><tr><th>flaky test</th><th>owners</th></tr>")
        parts += [f"<tr><td>{e(test)}</td><td>{e(owners or '-')}</td></tr>" for test, owners in fleet.flaky_tests]
        parts.append("</table>")
    return "".join(parts)
