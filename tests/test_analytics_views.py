"""The analyst views: the compatibility matrix on published results, CI health, queue waits, and a
views file from before a field existed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import numpy as np
from factories import BUNDLE, result
from regression_factories import golden

from fastci.cli.main import main
from fastci.contracts.baseline_exclusions import BaselineExclusion
from fastci.contracts.node_states import NodeStateChanged
from fastci.inputs import CommitEvent
from fastci.reproduce.request import rerun_request
from fastci.runtime.publish import publish_embedded
from fastci.scheduling.events import ScheduleEvent
from fastci.views.store import Views

T0 = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)  # a Monday
NEW = {**BUNDLE, "kernels": "kn-2.0"}
MATMUL = "tests/ops/test_matmul.py::test_bf16"


def refreshed(data_dir) -> Views:
    assert main(["--data-dir", str(data_dir), "run"]) == 0
    assert main(["--data-dir", str(data_dir), "views", "refresh"]) == 0
    return Views(data_dir / "views.duckdb", read_only=True)


def query(views: Views, sql: str) -> list[dict]:
    columns, rows = views.query(sql)
    return [dict(zip(columns, row)) for row in rows]


def q(check, revision, bundle=BUNDLE, trigger="nightly", status="passed", hours=0, node=None, **fields):
    return result(
        f"qualify/lm-tiny/bf16/{check}",
        run_id=f"{trigger}-{revision}-{hours}",
        bundle=dict(bundle),
        trigger=trigger,
        status=status,
        hardware_revision=revision,
        node_id=node or f"node-{revision}",
        config={"model": "lm-tiny", "precision": "bf16"},
        time=T0 + timedelta(hours=hours),
        chips=1,
        **fields,
    )


def test_the_compatibility_matrix_says_which_bundle_passed_which_tier_where(tmp_path):
    sick = q("training", "rev-b", status="failed", hours=1, node="node-13")
    rerun = rerun_request(sick, elsewhere=True)
    events = [
        golden(MATMUL, outputs={"logits": (1.0, 2.0)}),
        *[q(check, rev) for check in ("inference", "training", "throughput") for rev in ("rev-a", "rev-b")],
        sick,  # newer than the rev-b pass above, on a node the fleet distrusts...
        BaselineExclusion(
            result_id=sick.id, test_id=sick.test_id, node_id="node-13", node_state="quarantined", cause_id="f" * 32
        ),
        rerun,  # ...rerun elsewhere: the rerun takes the nightly tier
        result(
            sick.test_id,
            run_id=f"rerun-{rerun.id}",
            bundle=dict(BUNDLE),
            trigger="rerun",
            hardware_revision="rev-b",
            node_id="node-14",
            config=dict(sick.config),
            time=T0 + timedelta(hours=2),
            chips=1,
        ),
        # presubmit smoke on the new kernels: a golden gate failing on rev-a
        result(
            MATMUL,
            run_id="pre-1",
            bundle=NEW,
            trigger="presubmit",
            metrics={"logits": (1.5, 2.0)},
            config={"model": "lm-tiny", "dtype": "bf16"},
            time=T0,
            chips=1,
        ),
        q("inference", "rev-a", bundle=NEW, trigger="presubmit", hours=1),
        q("inference", "rev-a", bundle=NEW, trigger="bisect", status="failed", hours=2),  # a diagnostic: no tier
    ]
    publish_embedded(tmp_path, events)
    views = refreshed(tmp_path)
    try:
        matrix = {
            (r["bundle_key"].split("/")[1], r["hardware_revision"], r["tier"]): r
            for r in query(views, "SELECT * FROM compatibility_matrix WHERE model = 'lm-tiny'")
        }
        facts = query(views, "SELECT * FROM result_facts")
    finally:
        views.close()
    assert sorted(matrix) == [
        ("kn-1.0", "rev-a", "nightly"),
        ("kn-1.0", "rev-b", "nightly"),
        ("kn-2.0", "rev-a", "presubmit"),
    ]
    old_a, old_b, new_a = (
        matrix[("kn-1.0", "rev-a", "nightly")],
        matrix[("kn-1.0", "rev-b", "nightly")],
        matrix[("kn-2.0", "rev-a", "presubmit")],
    )
    assert (old_a["verdict"], old_a["tests"], old_a["passed"]) == ("passed", 3, 3)
    assert (old_b["verdict"], old_b["tests"], old_b["passed"], old_b["nodes"]) == (
        "passed",
        3,
        3,
        2,
    )  # node-rev-b, node-14
    assert (new_a["verdict"], new_a["tests"], new_a["passed"], new_a["gates_failed"]) == ("failed", 2, 2, 1)
    assert new_a["failing"] == f"{MATMUL} (passed; gate: logits)"
    assert new_a["bundle"] == NEW
    assert all(f["bundle"] and f["node_id"] and f["hardware_revision"] for f in facts)  # every row: bundle and node
    by_run = {f["run_id"]: f for f in facts}
    assert by_run[f"rerun-{rerun.id}"]["tier"] == "nightly" and by_run[f"rerun-{rerun.id}"]["rerun_of"] == sick.id
    assert by_run["nightly-rev-b-1"]["excluded"] is True and by_run["bisect-rev-a-2"]["tier"] is None


def test_ci_health_figures(tmp_path):
    rng = np.random.default_rng(3)
    commits, events, minutes = [], [], []
    for n in range(40):
        sha = f"{n:07x}".rjust(40, "a")
        at = T0 + timedelta(minutes=30 * n)
        commits.append(CommitEvent(repo="acme/llm-framework", sha=sha, author="a", time=at, title=f"change {n}"))
        delays = sorted(float(x) for x in rng.uniform(5, 60, size=3))
        minutes.append(delays[-1])
        events += [
            result(
                f"tests/test_{i}.py::test_x",
                run_id=f"pre-{n}",
                commit=sha,
                trigger="presubmit",
                chips=1,
                time=at + timedelta(minutes=d),
                status="flaky" if (n, i) == (3, 0) else "passed",
            )
            for i, d in enumerate(delays)
        ]
    # commit 39: a result from a sick node rerun 200 minutes after the commit; the signal waits for it
    late = events[-1]
    rerun = rerun_request(late)
    events += [
        rerun,
        result(
            late.test_id,
            run_id=f"rerun-{rerun.id}",
            commit=late.commit,
            trigger="rerun",
            chips=1,
            time=commits[-1].time + timedelta(minutes=200),
        ),
    ]
    minutes[-1] = 200.0
    for night, hours in enumerate((2.0, 3.5)):  # two nightly runs of two tests each
        start = T0 + timedelta(days=night, hours=22)
        events += [
            result(
                "tests/test_0.py::test_x",
                run_id=f"nightly-{night}",
                trigger="nightly",
                time=start + timedelta(hours=1),
                duration_s=3600.0,
                chips=8,
            ),
            result(
                "tests/test_1.py::test_x",
                run_id=f"nightly-{night}",
                trigger="nightly",
                time=start + timedelta(hours=hours),
                duration_s=600.0,
                chips=8,
            ),
        ]
    events += [
        NodeStateChanged(node_id="node-05", state="quarantined", reason="XID 79 x3", time=T0),
        NodeStateChanged(node_id="node-06", state="quarantined", reason="XID 48", time=T0),
        NodeStateChanged(node_id="node-06", state="healthy", reason="diagnostics passed", time=T0 + timedelta(hours=3)),
    ]
    publish_embedded(tmp_path, [*commits, *events])
    views = refreshed(tmp_path)
    try:
        (week,) = query(views, "SELECT * FROM ci_health")
        signal = {r["commit"]: r for r in query(views, "SELECT * FROM ci_presubmit_signal")}
        runs = {r["run_id"]: r for r in query(views, "SELECT * FROM ci_nightly_runs")}
    finally:
        views.close()
    assert signal[commits[-1].sha]["reruns"] == 1 and signal[commits[-1].sha]["minutes_to_signal"] == 200.0
    assert week["commits"] == 40
    assert abs(week["presubmit_p90_minutes"] - float(np.quantile(minutes, 0.9))) < 1e-6  # times are whole microseconds
    assert abs(week["presubmit_p50_minutes"] - float(np.quantile(minutes, 0.5))) < 1e-6
    assert runs["nightly-0"]["hours_to_complete"] == 2.0 and runs["nightly-1"]["hours_to_complete"] == 3.5
    assert week["nightly_runs"] == 2 and week["nightly_median_hours"] == 2.75 and week["nightly_max_hours"] == 3.5
    assert (week["flaky_runs"], week["hardware_runs"]) == (1, 40 * 3 + 1 + 4)
    assert week["quarantines"] == 2 and week["rerun_results"] == 1

    assert main(["--data-dir", str(tmp_path), "report", "nightly"]) == 0
    page = (tmp_path / "nightly.html").read_text()
    assert "<h2>CI health</h2>" in page and "node-05 quarantined since" in page
    assert "node-06 quarantined" not in page and "Nodes now: 1 healthy, 1 quarantined." in page  # node-06 is back
    assert "Reruns: 1 by fastci-rerun, 1 answered, 1 passed, 1 reproduced the run they repeat." in page


def test_queue_waits_come_from_the_pool_schedule(tmp_path):
    def decision(n, action, work_class, wait_s, attempt):
        return ScheduleEvent(
            cause_id=f"{n:032x}",
            pool="default",
            job_id=f"job-{n}",
            action=action,
            time=T0,
            request_id=f"{n:032x}",
            work_class=work_class,
            repo="acme/llm-framework",
            chips=8,
            attempt=attempt,
            queued_at=T0,
            wait_s=wait_s,
        )

    events = [decision(n, "placed", "presubmit", float(n), 1) for n in range(1, 11)] + [
        decision(11, "placed", "presubmit", 999.0, 2),  # a resumed job's second placement: not a wait of its own
        decision(12, "queued", "nightly", 0.0, 0),
        decision(13, "placed", "nightly", 3600.0, 1),
    ]
    publish_embedded(tmp_path, events)
    assert main(["--data-dir", str(tmp_path), "views", "refresh"]) == 0
    views = Views(tmp_path / "views.duckdb", read_only=True)
    try:
        waits = {
            r["work_class"]: (r["placed"], r["wait_p50_s"], r["wait_p90_s"], r["wait_max_s"])
            for r in query(views, "SELECT * FROM ci_queue_waits")
        }
    finally:
        views.close()
    assert waits == {"presubmit": (10, 5.5, 9.1, 10.0), "nightly": (1, 3600.0, 3600.0, 3600.0)}
    assert main(["--data-dir", str(tmp_path), "report", "nightly"]) == 0
    page = (tmp_path / "nightly.html").read_text()
    assert "<td>presubmit</td><td>10</td><td>6 s</td><td>9 s</td>" in page  # p50 5.5 s, shown rounded


def test_a_views_file_from_before_a_field_existed_gets_its_column(tmp_path):
    path = tmp_path / "views.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE results (id VARCHAR PRIMARY KEY, test_id VARCHAR)")  # an old, narrower table
    con.execute("INSERT INTO results VALUES ('x', 't')")
    con.close()
    publish_embedded(tmp_path, [result(run_id="r1", output_digest="ab" * 32)])
    assert main(["--data-dir", str(tmp_path), "views", "refresh"]) == 0
    views = Views(path, read_only=True)
    try:
        found = query(views, "SELECT test_id, output_digest, node_id FROM results ORDER BY test_id")
    finally:
        views.close()
    assert found == [
        {"test_id": "t", "output_digest": None, "node_id": None},
        {"test_id": "tests/test_a.py::test_x", "output_digest": "ab" * 32, "node_id": "node-01"},
    ]
