"""``fastci import``: a real pytest run's JUnit XML becomes results with pytest's own node ids; an
import killed part-way resumes without publishing anything twice; bad input is named by file and line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from test_evidence_collect import committed_project, git

from fastci.cli.main import main
from fastci.inputs import ResultEvent
from fastci.producer.context import load_context
from fastci.producer.history import import_file
from fastci.producer.targets import EmbeddedTarget
from fastci.runtime.embedded import DataDir

TESTS = """
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("setup fails")

def test_plain():
    pass

def test_fails():
    assert 1 == 2

@pytest.mark.skip(reason="not today")
def test_skipped():
    pass

def test_setup_error(broken):
    pass

class TestModel:
    @pytest.mark.parametrize("n", [1, 2])
    def test_forward(self, n):
        pass

    class TestNested:
        def test_deep(self):
            pass
"""


@pytest.fixture
def junit(tmp_path) -> tuple[Path, Path, list[str]]:
    """A project, the JUnit XML of a real pytest run of it, and pytest's node ids."""
    project = committed_project(
        tmp_path / "proj", {"tests/test_model.py": TESTS, "tests/sub/test_more.py": "def test_x(): pass\n"}
    )
    (project / "tests" / "sub" / "__init__.py").write_text("")
    report = tmp_path / "report.xml"
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "tests"]
    subprocess.run([*run, f"--junitxml={report}"], cwd=project, capture_output=True)
    collected = subprocess.run([*run, "--collect-only"], cwd=project, capture_output=True, text=True).stdout
    node_ids = [line for line in collected.splitlines() if "::" in line]
    return project, report, node_ids


def results(data: Path) -> list[ResultEvent]:
    return [ResultEvent.model_validate_json(r.payload) for r in DataDir(data).log.topic("results").read()]


def test_a_pytest_junit_report_becomes_results_with_pytests_node_ids_and_statuses(junit, tmp_path, capfd):
    project, report, node_ids = junit
    data = tmp_path / "data"
    assert main(["--data-dir", str(data), "import", str(report), "--root", str(project), "--trigger", "nightly"]) == 0
    imported = {r.test_id: r for r in results(data)}
    assert sorted(imported) == sorted(node_ids)  # pytest's own ids, classes and parameters included
    assert {t: r.status for t, r in imported.items() if r.status != "passed"} == {
        "tests/test_model.py::test_fails": "failed",
        "tests/test_model.py::test_skipped": "skipped",
        "tests/test_model.py::test_setup_error": "error",
    }
    head = git(project, "rev-parse", "HEAD")
    assert {(r.repo, r.commit, r.trigger) for r in imported.values()} == {("proj", head, "nightly")}
    assert len({r.run_id for r in imported.values()}) == 1 and all(r.time is not None for r in imported.values())
    assert "8 result(s) published" in capfd.readouterr().err

    # Imported again: skipped, nothing published twice.
    assert main(["--data-dir", str(data), "import", str(report), "--root", str(project)]) == 0
    assert "imported before, skipped" in capfd.readouterr().err
    assert len(results(data)) == 8
    # And the runtime takes them like any results.
    assert main(["--data-dir", str(data), "run"]) == 0


def test_without_the_work_tree_classes_are_told_from_modules_by_their_names(junit, tmp_path):
    project, report, node_ids = junit
    data = tmp_path / "data"
    assert main(["--data-dir", str(data), "import", str(report), "--root", str(tmp_path), "--commit", "abcdef1",
                 "--repo", "acme/proj"]) == 0  # fmt: skip
    assert sorted(r.test_id for r in results(data)) == sorted(node_ids)


class ListTarget:
    """A target that holds what it was given, in order, and dies on the send ``dies_at`` (1-based):
    before appending (``after=False``) or after (a kill between the send and the progress record)."""

    def __init__(self, dies_at: int | None = None, after: bool = False) -> None:
        self.events: list = []
        self.publishes = 0
        self.dies_at, self.after = dies_at, after

    description = "a list"

    def send(self, events: list) -> None:
        self.publishes += 1
        dying = self.publishes == self.dies_at
        if dying and not self.after:
            raise KeyboardInterrupt
        self.events.extend(events)
        if dying:
            raise KeyboardInterrupt

    def mark(self) -> int:
        return len(self.events)

    def ids_since(self, mark: int, topics: set[str]) -> set[str]:
        return {e.id for e in self.events[mark:] if e.TOPIC in topics}


@pytest.mark.parametrize("after", [False, True], ids=["before-publishing", "after-publishing"])
def test_an_import_killed_part_way_resumes_where_it_stopped_publishing_each_result_once(junit, tmp_path, after):
    project, report, node_ids = junit
    context = load_context(cwd=project)
    progress = tmp_path / "data" / "import"
    target = ListTarget(dies_at=3, after=after)  # killed at the third batch of 3
    with pytest.raises(KeyboardInterrupt):
        import_file(report, "junit", context, target, progress, root=project, batch=3)
    assert len(target.events) == (8 if after else 6)
    target.dies_at = None
    resumed = import_file(report, "junit", context, target, progress, root=project, batch=3)
    assert resumed.resumed_at == 6 and resumed.published == (0 if after else 2)
    ids = [e.id for e in target.events]
    assert len(ids) == len(set(ids)) == len(node_ids)  # every result once
    assert import_file(report, "junit", context, target, progress, root=project).already


def test_bad_input_is_named_by_file_and_line_and_dead_lettered(tmp_path, capfd):
    data = tmp_path / "data"
    xml = tmp_path / "bad.xml"
    xml.write_text(
        '<?xml version="1.0"?>\n<testsuites><testsuite timestamp="2026-12-01T02:00:00">\n'
        '<testcase classname="tests.test_a" name="test_ok" time="0.5"/>\n'
        '<testcase classname="tests.test_a" time="0.1"/>\n'  # no name
        '<testcase classname="tests.test_a" name="test_neg" time="-3"/>\n'
        "</testsuite></testsuites>\n"
    )
    args = [
        "--data-dir",
        str(data),
        "import",
        str(xml),
        "--commit",
        "abcdef1",
        "--repo",
        "acme/a",
        "--root",
        str(tmp_path),
    ]
    assert main(args) == 1
    err = capfd.readouterr().err
    assert f"refused {xml}:4: " in err and "test_id" in err and "'name'" in err
    assert f"refused {xml}:5: " in err and "duration_s" in err  # a negative time
    assert [r.test_id for r in results(data)] == ["tests/test_a.py::test_ok"]
    dead = [orjson.loads(r.payload) for r in DataDir(data).log.topic("dead-letters").read()]
    assert [(d["topic"], d["source"]) for d in dead] == [("results", "import")] * 2

    cut = tmp_path / "cut.xml"
    cut.write_text(xml.read_text()[:200])  # a file cut short after its first test case
    assert main(["--data-dir", str(data), "import", str(cut), "--commit", "abcdef1", "--repo", "acme/a"]) == 1
    assert f"{cut}:" in capfd.readouterr().err
    assert len(results(data)) == 2  # the case before the damage was published

    lines = tmp_path / "history.jsonl"
    good = results(data)[0].model_dump(mode="json", exclude={"id"})
    bad = {**good, "run_id": "old-2", "status": "meh"}
    lines.write_bytes(orjson.dumps({**good, "run_id": "old-1"}) + b"\n{not json\n" + orjson.dumps(bad) + b"\n")
    assert main(["--data-dir", str(data), "import", str(lines)]) == 1
    err = capfd.readouterr().err
    assert f"{lines}:2: " in err and "malformed JSON" in err and f"{lines}:3: " in err and "status" in err


def test_the_embedded_log_tells_which_events_it_took_since_a_mark(junit, tmp_path):
    project, report, _ = junit
    data = tmp_path / "data"
    target = EmbeddedTarget(data)
    assert main(["--data-dir", str(data), "import", str(report), "--root", str(project), "--batch", "3"]) == 0
    mark = target.mark()
    assert target.ids_since(mark, {"results"}) == set()
    later = ResultEvent.model_validate({**results(data)[0].model_dump(exclude={"id"}), "run_id": "later"})
    target.send([later])
    assert target.ids_since(mark, {"results"}) == {later.id} and target.ids_since(mark, {"commits"}) == set()


def test_files_imported_newest_first_are_named_for_their_late_results(tmp_path, capfd):
    """A result more than the lateness bound older than one published before it is applied when it arrives,
    not in time order: the import says which file and how many, and what to do."""

    def night(day: int) -> Path:
        path = tmp_path / f"night-{day}.xml"
        cases = "".join(f'<testcase classname="tests.test_a" name="test_{n}" time="1.0"/>' for n in range(3))
        path.write_text(
            f'<testsuites><testsuite name="pytest" timestamp="2026-01-0{day}T02:00:00">{cases}</testsuite></testsuites>'
        )
        return path

    data = tmp_path / "data"
    common = ["--commit", "abcdef1", "--repo", "acme/a", "--root", str(tmp_path)]
    assert main(["--data-dir", str(data), "import", str(night(1)), str(night(2)), *common]) == 0
    assert "warning" not in "".join(capfd.readouterr())
    assert main(["--data-dir", str(tmp_path / "other"), "import", str(night(4)), str(night(3)), *common]) == 0
    out = " ".join("".join(capfd.readouterr()).split())
    assert "night-3.xml: 3 result(s) more than 6 h older than results imported before them" in out
    assert "night-4.xml" not in out.split("warning")[1]


def test_a_parquet_history_imports_as_the_same_results_as_its_json_lines(junit, tmp_path, capfd):
    """Results exported to Parquet (DuckDB here: a warehouse's table of past runs) import as the same
    events as the same rows in JSON lines; a null column is an absent field, a zoned timestamp is read
    in UTC; a bad row is named by its row number; a file DuckDB cannot read stops its import."""
    import duckdb

    project, report, node_ids = junit
    first = tmp_path / "first"
    assert main(["--data-dir", str(first), "import", str(report), "--root", str(project)]) == 0
    lines = tmp_path / "history.jsonl"
    lines.write_bytes(b"".join(orjson.dumps(r.model_dump(mode="json", exclude={"id"})) + b"\n" for r in results(first)))
    table = tmp_path / "history.parquet"
    with duckdb.connect() as db:
        db.execute("SET TimeZone = 'Europe/Paris'")  # the zone a TIMESTAMPTZ is written in does not matter
        db.execute(
            "COPY (SELECT test_id, run_id, repo, commit, NULL::VARCHAR AS bundle, node_id, trigger, status, "
            "duration_s, CAST(time AS TIMESTAMPTZ) AS time, NULL::BIGINT AS seed "
            f"FROM read_json_auto('{lines}')) TO '{table}' (FORMAT parquet)"
        )
    from_lines, from_table = tmp_path / "lines", tmp_path / "table"
    assert main(["--data-dir", str(from_lines), "import", str(lines)]) == 0
    assert main(["--data-dir", str(from_table), "import", str(table), "--batch", "3"]) == 0
    imported = results(from_table)
    assert imported == results(from_lines) == results(first)
    assert len(imported) == len(node_ids) and all(r.time is not None for r in imported)

    # killed at its third batch of 3, the import resumes after the rows it recorded
    target = ListTarget(dies_at=3, after=True)
    progress = tmp_path / "resumed" / "import"
    with pytest.raises(KeyboardInterrupt):
        import_file(table, "parquet", None, target, progress, batch=3)
    target.dies_at = None
    assert import_file(table, "parquet", None, target, progress, batch=3).resumed_at == 6
    assert [e.id for e in target.events] == [r.id for r in imported]

    bad = tmp_path / "bad.parquet"
    with duckdb.connect() as db:
        db.execute(
            "COPY (SELECT * EXCLUDE (file_row_number) "
            "REPLACE (CASE WHEN file_row_number = 1 THEN -1.0 ELSE duration_s END AS duration_s) "
            f"FROM read_parquet('{table}', file_row_number = true)) TO '{bad}' (FORMAT parquet)"
        )
    assert main(["--data-dir", str(tmp_path / "bad"), "import", str(bad)]) == 1
    err = capfd.readouterr().err
    assert f"refused {bad}:2: " in err and "duration_s" in err
    assert len(results(tmp_path / "bad")) == len(node_ids) - 1

    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(table.read_bytes()[:100])
    assert main(["--data-dir", str(tmp_path / "damaged"), "import", str(damaged)]) == 1
    assert f"{damaged}: not a Parquet file" in capfd.readouterr().err
