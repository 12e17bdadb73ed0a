"""Analyst views of the fleet: node states, quarantined nodes, reruns, flaky tests, the flake rate.

Plain SQL views over the event tables, (re)created by every ``fastci views refresh`` (``Views``
opens the file writable and creates them after the tables), so they always read the loaded rows.
"""

from __future__ import annotations

FLAKE_RATE_TARGET = 0.01  # flaky runs of hardware tests, as a share of their runs

VIEWS: dict[str, str] = {
    # The state each node is in now: its newest node-state-changed event.
    "fleet_node_states": """
        SELECT node_id, state, previous, time AS since, rule, reason, hardware_revision, reruns_requested
        FROM (SELECT *, row_number() OVER (PARTITION BY node_id ORDER BY time DESC, _offset DESC) AS newest
              FROM node_state_changed)
        WHERE newest = 1
    """,
    # Nodes out of service: no work may be placed on them until diagnostics pass.
    "fleet_quarantined_nodes": """
        SELECT * FROM fleet_node_states WHERE state IN ('quarantined', 'diagnosing')
    """,
    # Every rerun the fleet asked for, the failure it repeats, and its outcome once a result came back
    # (a 'rerun' result of the same test, code, stack, revision and seed, on a node it was not told to avoid).
    "fleet_reruns": """
        WITH requests AS (
            SELECT * FROM run_requested WHERE work_class = 'rerun'
        ), answers AS (
            SELECT q.id AS request_id, x.id AS result_id, x.node_id, x.status, x.time,
                   row_number() OVER (PARTITION BY q.id ORDER BY x.time, x._offset) AS nth
            FROM requests q JOIN results x
              ON x.trigger = 'rerun' AND x.test_id = q.test_id AND x.commit = q.commit AND x.bundle = q.bundle
             AND x.hardware_revision = q.hardware_revision AND x.seed IS NOT DISTINCT FROM q.seed
             AND NOT list_contains(q.avoid_nodes, x.node_id)
        )
        SELECT q.id AS request_id, q.test_id, q.hardware_revision, q.commit, q.avoid_nodes,
               q.cause_id AS failed_result_id, f.node_id AS failed_on, f.status AS failed_status, f.time AS failed_at,
               a.result_id AS rerun_result_id, a.node_id AS rerun_on, a.status AS rerun_status, a.time AS rerun_at,
               q.reason
        FROM requests q
        LEFT JOIN results f ON f.id = q.cause_id
        LEFT JOIN answers a ON a.request_id = q.id AND a.nth = 1
    """,
    # Tests flaky now, with their owners (newest flaky-tests event per test).
    "fleet_flaky_tests": """
        SELECT test_id, repo, owners, rule, reason, time AS since, chips, owner_map_version
        FROM (SELECT *, row_number() OVER (PARTITION BY test_id ORDER BY time DESC NULLS FIRST, _offset DESC) AS newest
              FROM flaky_tests)
        WHERE newest = 1 AND flaky
    """,
    # Per day, the share of hardware tests' runs (chips > 0) that were flakes: passed only on retry, or
    # failed where a run of the same code, stack, config and seed passed. Runs on nodes that were not
    # healthy (baseline_exclusions) are a node's fault, not a flake, and are left out of both counts.
    "fleet_hardware_flake_rate": f"""
        WITH runs AS (
            SELECT r.id, r.test_id, r.commit, r.bundle, CAST(r.config AS VARCHAR) AS config, r.seed, r.status,
                   CAST(r.time AS DATE) AS day
            FROM results r
            WHERE r.chips > 0 AND r.status <> 'skipped' AND r.time IS NOT NULL
              AND r.id NOT IN (SELECT result_id FROM baseline_exclusions)
        ), groups AS (
            SELECT test_id, commit, bundle, config, seed, bool_or(status IN ('passed', 'flaky')) AS passed_once
            FROM runs GROUP BY ALL
        )
        SELECT day, count(*) AS runs,
               count(*) FILTER (WHERE status = 'flaky'
                                   OR (status IN ('failed', 'error') AND g.passed_once)) AS flaky_runs,
               round(flaky_runs / count(*), 5) AS flake_rate,
               flaky_runs / count(*) < {FLAKE_RATE_TARGET} AS within_target
        FROM runs JOIN groups g USING (test_id, commit, bundle, config)
        WHERE runs.seed IS NOT DISTINCT FROM g.seed
        GROUP BY day ORDER BY day
    """,
    # What comparing tests across nodes said about each node in its last 72 hours of attributions.
    "fleet_node_attributions": """
        WITH newest AS (SELECT node_id, max(time) AS until FROM node_attribution GROUP BY node_id)
        SELECT a.node_id,
               count(*) FILTER (WHERE kind = 'failure') AS failures_attributed,
               count(*) FILTER (WHERE kind = 'cleared') AS withdrawn,
               count(*) FILTER (WHERE kind = 'throughput') AS throughput_runs,
               round(median(ratio) FILTER (WHERE kind = 'throughput'), 4) AS median_throughput_ratio
        FROM node_attribution a JOIN newest n USING (node_id)
        WHERE a.time IS NULL OR a.time > n.until - INTERVAL 72 HOUR
        GROUP BY a.node_id ORDER BY a.node_id
    """,
}


def create(con) -> None:
    """Create (or replace) every fleet view on a DuckDB connection whose tables exist."""
    for name, sql in VIEWS.items():
        con.execute(f'CREATE OR REPLACE VIEW "{name}" AS {sql}')
