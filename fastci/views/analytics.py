"""Analyst SQL views over the materialised tables: results by bundle and tier, the compatibility matrix,
reruns and whether they reproduced, release history, and CI health.

They come after the fleet's views (``fastci/views/fleet_views.py``), whose node states and hardware flake
rate the CI-health figures use.

``fastci views refresh`` (re)creates them; they are plain DuckDB views, so ``fastci sql`` queries them
and they always reflect the tables as loaded.

Tiers. A result's tier says how much of the stack it proves, from its trigger:

- ``presubmit``: the per-change smoke (a small model per hardware-path change, a few checks);
- ``nightly``: full qualification (every model x precision x check of the set);
- ``release``: the long runs before a release.

``bisect`` and ``dev`` results are diagnostics and belong to no tier. A ``rerun`` result takes the tier
of the result it reruns (through the ``run-requested`` event whose ``cause_id`` is that result), so a
nightly test rerun on a healthy node counts for the nightly tier; a rerun whose origin is unknown has no
tier.
"""

from __future__ import annotations

from typing import Any

TIERS: dict[str, str] = {"presubmit": "presubmit", "nightly": "nightly", "release": "release"}
FULL_QUALIFICATION_TIERS = ("nightly", "release")
BUNDLE_LAYERS = ("compiler", "kernels", "runtime", "driver", "firmware")


def _tier_of(trigger: str) -> str:
    cases = " ".join(f"WHEN '{t}' THEN '{tier}'" for t, tier in TIERS.items())
    return f"CASE {trigger} {cases} END"


def _week(expression: str) -> str:
    """The Monday starting the week of a timestamp or date (a DATE; timestamps in the session's zone)."""
    return f"CAST(date_trunc('week', CAST({expression} AS DATE)) AS DATE)"


def bundle_key(expression: str) -> str:
    """A readable text key of a bundle STRUCT: its versions joined by '/', in stack order."""
    return "concat_ws('/', " + ", ".join(f"{expression}.{layer}" for layer in BUNDLE_LAYERS) + ")"


_FAILING_CHECKS = (
    'array_to_string(list_transform(list_filter(from_json(checks, \'[{"name": "VARCHAR", "passed": "BOOLEAN"}]\'), '
    "lambda c: NOT c.passed), lambda c: c.name), ', ')"
)

# (name, query), in dependency order.
VIEWS: tuple[tuple[str, str], ...] = (
    # Each rerun result, with the result it reran: the rerun request's cause, matched as the runner
    # contract says (trigger = work class, same test, commit, bundle and hardware revision).
    (
        "rerun_origins",
        f"""
        SELECT r.id AS result_id, any_value(o.id ORDER BY q._offset DESC) AS original_id,
               any_value({_tier_of("o.trigger")} ORDER BY q._offset DESC) AS original_tier
        FROM results r
        JOIN run_requested q ON q.work_class = 'rerun' AND q.test_id = r.test_id AND q."commit" = r."commit"
             AND q.bundle = r.bundle AND q.hardware_revision = r.hardware_revision
        JOIN results o ON o.id = q.cause_id
        WHERE r.trigger = 'rerun'
        GROUP BY r.id""",
    ),
    # Every result with its tier, model, bundle versions, node, gate verdict and whether its node
    # was untrusted when it ran (baseline-exclusions).
    (
        "result_facts",
        f"""
        SELECT r.id AS result_id, r.test_id, r.run_id, r.repo, r."commit", r.trigger,
               coalesce({_tier_of("r.trigger")}, ro.original_tier) AS tier,
               coalesce(json_extract_string(r.config, '$.model'), r.test_id) AS model,
               json_extract_string(r.config, '$.precision') AS precision,
               CASE WHEN starts_with(r.test_id, 'qualify/') THEN split_part(r.test_id, '/', 4) END AS "check",
               r.bundle, {bundle_key("r.bundle")} AS bundle_key,
               r.bundle.compiler AS compiler, r.bundle.kernels AS kernels, r.bundle.runtime AS runtime,
               r.bundle.driver AS driver, r.bundle.firmware AS firmware,
               r.node_id, r.hardware_revision, r.status, r.duration_s, r.chips, r.seed, r.config,
               r.eval_score, r.output_digest, r.time,
               g.passed AS gate_passed, g.failing_checks AS gate_failing,
               x.result_id IS NOT NULL AS excluded, ro.original_id AS rerun_of, r._offset
        FROM results r
        LEFT JOIN rerun_origins ro ON ro.result_id = r.id
        LEFT JOIN (SELECT result_id, bool_and(passed) AS passed, string_agg({_FAILING_CHECKS}, ', ') AS failing_checks
                   FROM gate_results GROUP BY result_id) g ON g.result_id = r.id
        LEFT JOIN (SELECT DISTINCT result_id FROM baseline_exclusions) x ON x.result_id = r.id""",
    ),
    # The compatibility matrix: per model x bundle x hardware revision x tier, the latest trusted result
    # of each test, counted, with the gate results and the tests that fail.
    (
        "compatibility_matrix",
        """
        WITH latest AS (
            SELECT * FROM result_facts WHERE tier IS NOT NULL AND NOT excluded AND status <> 'skipped'
            QUALIFY row_number() OVER (PARTITION BY test_id, bundle_key, hardware_revision, tier
                                       ORDER BY time DESC NULLS LAST, _offset DESC) = 1
        )
        SELECT model, bundle_key, any_value(bundle) AS bundle, hardware_revision, tier,
               CASE WHEN count(*) FILTER (WHERE status <> 'passed' OR gate_passed = false) = 0 THEN 'passed'
                    ELSE 'failed' END AS verdict,
               count(*) AS tests,
               count(*) FILTER (WHERE status = 'passed') AS passed,
               count(*) FILTER (WHERE status IN ('failed', 'error')) AS failed,
               count(*) FILTER (WHERE status = 'flaky') AS flaky,
               count(*) FILTER (WHERE gate_passed) AS gates_passed,
               count(*) FILTER (WHERE gate_passed = false) AS gates_failed,
               string_agg(CASE WHEN status <> 'passed' OR gate_passed = false
                               THEN test_id || ' (' || status
                                    || coalesce('; gate: ' || nullif(gate_failing, ''), '') || ')'
                          END, '; ' ORDER BY test_id) AS failing,
               count(DISTINCT node_id) AS nodes, max(time) AS last_run
        FROM latest
        GROUP BY model, bundle_key, hardware_revision, tier""",
    ),
    # Every rerun request, the result it reran and the rerun's result, with what matched.
    (
        "rerun_outcomes",
        """
        WITH answers AS (
            SELECT q.id AS request_id, r.*
            FROM run_requested q
            JOIN results r ON r.trigger = 'rerun' AND r.test_id = q.test_id AND r."commit" = q."commit"
                 AND r.bundle = q.bundle AND r.hardware_revision = q.hardware_revision
            WHERE q.work_class = 'rerun'
            QUALIFY row_number() OVER (PARTITION BY q.id ORDER BY (r.run_id = 'rerun-' || q.id) DESC,
                                       r.time DESC NULLS LAST, r._offset DESC) = 1
        )
        SELECT q.id AS request_id, q.test_id, q.requested_by, q.reason, q.cause_id AS original_id,
               o.run_id AS original_run, o.node_id AS original_node, o.status AS original_status,
               a.id AS rerun_id, a.run_id AS rerun_run, a.node_id AS rerun_node, a.status AS rerun_status,
               a.id IS NOT NULL AS answered,
               a.seed IS NOT DISTINCT FROM q.seed AS same_seed,
               a.config::VARCHAR IS NOT DISTINCT FROM q.config::VARCHAR AS same_config,
               CASE WHEN a.id IS NULL OR o.id IS NULL THEN NULL
                    ELSE a.status = o.status AND a.loss_curve IS NOT DISTINCT FROM o.loss_curve
                         AND a.eval_score IS NOT DISTINCT FROM o.eval_score
                         AND a.output_digest IS NOT DISTINCT FROM o.output_digest END AS reproduced,
               q._offset
        FROM run_requested q
        LEFT JOIN results o ON o.id = q.cause_id
        LEFT JOIN answers a ON a.request_id = q.id
        WHERE q.work_class = 'rerun'""",
    ),
    # Release history (git is the audit log; this is its stream copy) and each environment's bundle now.
    (
        "release_history",
        f"""
        SELECT time, environment, action, bundle_id, bundle_name, {bundle_key("bundle")} AS bundle_key, git_commit,
               reverts, branch, gates, actor, _offset
        FROM release ORDER BY time, _offset""",
    ),
    (
        "release_environments",
        f"""
        SELECT environment, bundle_id, bundle_name, bundle, {bundle_key("bundle")} AS bundle_key,
               git_commit AS promoted_by, time AS promoted_at
        FROM release
        WHERE action = 'promote'
          AND git_commit NOT IN (SELECT reverts FROM release WHERE action = 'rollback' AND reverts IS NOT NULL)
        QUALIFY row_number() OVER (PARTITION BY environment ORDER BY time DESC, _offset DESC) = 1""",
    ),
    # CI health. Time to trustworthy signal of a commit: from when it entered CI to its last presubmit
    # result, or to the last rerun of one of its presubmit tests when a rerun came later (a result
    # from a sick node is replaced by its rerun; the signal is trustworthy once that arrives).
    # A commit enters CI at its commit time, unless its first presubmit test started more than a day
    # after that (an old commit tested now: an import, a replay, a job on a checkout of the past) or
    # before it (clocks apart): then at that start, so the figure is never negative nor years long.
    (
        "ci_presubmit_signal",
        """
        WITH presubmit AS (
            SELECT repo, "commit", test_id, id, time, duration_s FROM results WHERE trigger = 'presubmit'
        ), signal AS (
            SELECT p.repo, p."commit", p.time, p.time - to_seconds(p.duration_s) AS started, false AS rerun
            FROM presubmit p
            UNION ALL
            SELECT r.repo, r."commit", r.time, NULL, true FROM result_facts r
            JOIN presubmit p ON p.id = r.rerun_of
        ), timed AS (
            SELECT s.repo, s."commit", c.time AS committed, min(s.started) AS first_started, max(s.time) AS signal_at,
                   count(*) FILTER (WHERE NOT rerun) AS results, count(*) FILTER (WHERE rerun) AS reruns
            FROM signal s JOIN commits c ON c.repo = s.repo AND c.sha = s."commit"
            WHERE s.time IS NOT NULL
            GROUP BY s.repo, s."commit", c.time
        ), entered AS (
            SELECT *, CASE WHEN first_started IS NULL
                                OR committed BETWEEN first_started - INTERVAL 24 HOUR AND first_started
                           THEN committed ELSE first_started END AS entered
            FROM timed
        )
        SELECT repo, "commit", committed, entered, signal_at, results, reruns,
               greatest(epoch(signal_at - entered), 0) / 60.0 AS minutes_to_signal
        FROM entered""",
    ),
    # A nightly run: from its first test's start (finish - duration) to its last test's finish.
    (
        "ci_nightly_runs",
        """
        SELECT run_id, min("commit") AS "commit", count(*) AS results,
               count(*) FILTER (WHERE status IN ('failed', 'error')) AS failed,
               count(*) FILTER (WHERE status = 'flaky') AS flaky,
               count(DISTINCT node_id) AS nodes,
               min(time - to_seconds(duration_s)) AS started, max(time) AS finished,
               epoch(max(time) - min(time - to_seconds(duration_s))) / 3600.0 AS hours_to_complete
        FROM results WHERE trigger = 'nightly' AND time IS NOT NULL
        GROUP BY run_id""",
    ),
    # One row per week: the figures of the CI-health report section.
    (
        "ci_health",
        f"""
        WITH signal AS (
            SELECT {_week("entered")} AS week, count(*) AS commits,
                   quantile_cont(minutes_to_signal, 0.5) AS presubmit_p50_minutes,
                   quantile_cont(minutes_to_signal, 0.9) AS presubmit_p90_minutes
            FROM ci_presubmit_signal GROUP BY 1
        ), nightly AS (
            SELECT {_week("started")} AS week, count(*) AS nightly_runs,
                   median(hours_to_complete) AS nightly_median_hours, max(hours_to_complete) AS nightly_max_hours
            FROM ci_nightly_runs GROUP BY 1
        ), flakes AS (
            SELECT {_week("day")} AS week, sum(runs) AS hardware_runs, sum(flaky_runs) AS flaky_runs,
                   sum(flaky_runs) / sum(runs) AS flake_rate
            FROM fleet_hardware_flake_rate GROUP BY 1
        ), reruns AS (
            SELECT {_week("r.time")} AS week, count(*) AS rerun_results
            FROM results r WHERE r.trigger = 'rerun' AND r.time IS NOT NULL GROUP BY 1
        ), quarantines AS (
            SELECT {_week("time")} AS week, count(*) AS quarantines
            FROM node_state_changed WHERE state = 'quarantined' GROUP BY 1
        )
        SELECT week, coalesce(commits, 0) AS commits, presubmit_p50_minutes, presubmit_p90_minutes,
               coalesce(nightly_runs, 0) AS nightly_runs, nightly_median_hours, nightly_max_hours,
               coalesce(hardware_runs, 0) AS hardware_runs, coalesce(flaky_runs, 0) AS flaky_runs, flake_rate,
               coalesce(quarantines, 0) AS quarantines, coalesce(rerun_results, 0) AS rerun_results
        FROM signal FULL JOIN nightly USING (week) FULL JOIN flakes USING (week)
             FULL JOIN reruns USING (week) FULL JOIN quarantines USING (week)
        WHERE week IS NOT NULL
        ORDER BY week""",
    ),
)


# Queue waits come from the pool scheduler's `schedule` topic (issue7-pool's contract): the wait of
# each job's first placement, per work class. Created only when that table exists.
QUEUE_WAITS = (
    "ci_queue_waits",
    f"""
        SELECT {_week("time")} AS week, work_class, count(*) AS placed,
               quantile_cont(wait_s, 0.5) AS wait_p50_s, quantile_cont(wait_s, 0.9) AS wait_p90_s,
               max(wait_s) AS wait_max_s
        FROM schedule WHERE action = 'placed' AND attempt = 1 AND wait_s IS NOT NULL
        GROUP BY ALL""",
)
QUEUE_COLUMNS = frozenset({"action", "work_class", "wait_s", "attempt", "time"})


def create_views(con: Any) -> None:
    """(Re)create every analyst view on a DuckDB connection whose tables exist."""
    for name, query in VIEWS:
        con.execute(f'CREATE OR REPLACE VIEW "{name}" AS {query}')
    columns = {
        row[0]
        for row in con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'schedule'"
        ).fetchall()
    }
    if QUEUE_COLUMNS <= columns:
        con.execute(f'CREATE OR REPLACE VIEW "{QUEUE_WAITS[0]}" AS {QUEUE_WAITS[1]}')
