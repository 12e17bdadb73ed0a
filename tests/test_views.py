"""DuckDB views: incremental, idempotent, and the test_history view mirrors processor state."""

from __future__ import annotations

from factories import result

from fastci.runtime.embedded import DataDir, EmbeddedRuntime
from fastci.runtime.publish import publish_embedded
from fastci.topology import SYSTEM
from fastci.views.refresh import refresh_embedded
from fastci.views.store import Views


def run(data_dir) -> None:
    runtime = EmbeddedRuntime(data_dir, SYSTEM)
    try:
        runtime.run()
    finally:
        runtime.close()


def refresh(data_dir) -> dict[str, int]:
    views = Views(data_dir / "views.duckdb")
    try:
        return {table: n for table, n in refresh_embedded(data_dir, views).items() if n}
    finally:
        views.close()


def query(data_dir, sql: str) -> list[tuple]:
    views = Views(data_dir / "views.duckdb", read_only=True)
    try:
        return views.query(sql)[1]
    finally:
        views.close()


def test_refresh_loads_only_what_is_new(tmp_path):
    publish_embedded(tmp_path, [result(run_id="r1"), result(run_id="r2", status="failed")])
    run(tmp_path)
    # other processors' state tables load too; these are the ones this history touches for sure
    core = ("results", "test_status_changed", "test_history")
    assert {t: n for t, n in refresh(tmp_path).items() if t in core} == {
        "results": 2,
        "test_status_changed": 1,
        "test_history": 1,
    }
    assert refresh(tmp_path) == {}
    publish_embedded(tmp_path, [result(run_id="r3"), result("tests/test_b.py::test_y", run_id="r3")])
    run(tmp_path)
    assert {t: n for t, n in refresh(tmp_path).items() if t in core} == {
        "results": 2,
        "test_status_changed": 1,
        "test_history": 2,
    }
    assert query(tmp_path, "SELECT count(*) FROM results") == [(4,)]


def test_views_hold_one_row_per_event_id_even_when_the_log_repeats_it(tmp_path):
    event = result(run_id="r1")
    publish_embedded(tmp_path, [event, event])
    run(tmp_path)
    refresh(tmp_path)
    publish_embedded(tmp_path, [event])
    refresh(tmp_path)
    assert query(tmp_path, "SELECT id, _offset FROM results") == [(event.id, 0)]


def test_test_history_view_matches_the_processor_state(tmp_path):
    statuses = ["passed", "failed", "failed", "flaky", "skipped"]
    publish_embedded(tmp_path, [result(run_id=f"r{n}", status=s) for n, s in enumerate(statuses)])
    run(tmp_path)
    refresh(tmp_path)
    rows = query(
        tmp_path,
        "SELECT test_id, runs, passed, failed, flaky, skipped, health, last_status, last_run_id FROM test_history",
    )
    assert rows == [("tests/test_a.py::test_x", 5, 1, 2, 1, 1, "passing", "skipped", "r4")]


def test_results_rows_carry_bundle_node_and_typed_columns(tmp_path):
    event = result(run_id="r1", metrics={"tput": (10.0, 11.0)}, loss_curve=(2.0, 1.5), config={"layers": 2})
    publish_embedded(tmp_path, [event])
    refresh(tmp_path)
    [row] = query(
        tmp_path,
        "SELECT bundle.compiler, bundle.firmware, node_id, hardware_revision, loss_curve[2], "
        "metrics->'$.tput[1]', config->>'$.layers' FROM results",
    )
    assert row == ("cc-1.0", "fw-7", "node-01", "rev-a", 1.5, "11.0", "2")


def test_event_text_is_data_not_sql(tmp_path):
    nasty = "tests/x.py::t'); DROP TABLE results; --"
    publish_embedded(tmp_path, [result(nasty, run_id="r1")])
    refresh(tmp_path)
    assert query(tmp_path, "SELECT test_id FROM results") == [(nasty,)]


def test_dead_letters_view(tmp_path):
    DataDir(tmp_path).log.topic("results").append([b"not json"], 0)
    run(tmp_path)
    refresh(tmp_path)
    [(topic, source, error)] = query(tmp_path, "SELECT topic, source, error FROM dead_letters")
    assert (topic, source) == ("results", "decode") and "malformed JSON" in error
