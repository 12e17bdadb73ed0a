"""The nightly report fits the repository it reports on: a plain repository's report has no accelerator
section, time to signal is measured from when a commit entered CI (never negative, never years), and the
page carries no raw markdown."""

from __future__ import annotations

import contextlib
import io
from datetime import UTC, datetime, timedelta

from factories import result

from fastci.cli.main import main
from fastci.inputs import CommitEvent
from fastci.runtime.publish import publish_embedded
from fastci.views.store import Views

TODAY = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
OLD = datetime(2019, 3, 4, 12, 0, tzinfo=UTC)  # an old commit's author date, checked out and tested today


def commit(n: int, at: datetime) -> CommitEvent:
    return CommitEvent(repo="acme/lib", sha=f"{n:040x}", author="a <a@x>", time=at, title=f"change {n}")


def presubmit(c: CommitEvent, test: str, finished: datetime, duration_s: float, **fields):
    return result(
        test,
        run_id=f"job-{c.sha[-4:]}",
        repo=c.repo,
        commit=c.sha,
        trigger="presubmit",
        time=finished,
        duration_s=duration_s,
        **fields,
    )


def plain(c: CommitEvent, test: str, finished: datetime, duration_s: float):
    return presubmit(c, test, finished, duration_s, bundle=None, hardware_revision=None, chips=0)


def report(data_dir) -> tuple[str, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--data-dir", str(data_dir), "run"]) == 0
        assert main(["--data-dir", str(data_dir), "views", "refresh"]) == 0
        assert main(["--data-dir", str(data_dir), "report", "nightly"]) == 0
    return (data_dir / "nightly.html").read_text(), out.getvalue()


def test_a_plain_repository_gets_no_accelerator_section_and_a_true_time_to_signal(tmp_path, capsys):
    old, fresh, skewed = commit(1, OLD), commit(2, TODAY), commit(3, TODAY + timedelta(hours=1))
    events = [
        old,
        fresh,
        skewed,
        # the old commit's job started today: its signal took 4 minutes, not seven years
        plain(old, "tests/test_a.py::test_x", TODAY - timedelta(hours=2, minutes=-0.5), 30.0),
        plain(old, "tests/test_b.py::test_y", TODAY - timedelta(hours=2, minutes=-4), 60.0),
        # tested within minutes of its commit: measured from the commit
        plain(fresh, "tests/test_a.py::test_x", TODAY + timedelta(minutes=10), 30.0),
        # its job started a minute before its commit time (clocks apart): measured from the start
        plain(skewed, "tests/test_a.py::test_x", skewed.time + timedelta(minutes=1), 120.0),
    ]
    publish_embedded(tmp_path, events)
    page, out = report(tmp_path)
    out += capsys.readouterr().out
    views = Views(tmp_path / "views.duckdb", read_only=True)
    try:
        _, found = views.query('SELECT "commit", minutes_to_signal FROM ci_presubmit_signal')
        (week,) = views.query("SELECT presubmit_p90_minutes FROM ci_health")[1]
    finally:
        views.close()
    minutes = {sha: m for sha, m in found}
    assert minutes == {old.sha: 4.0, fresh.sha: 10.0, skewed.sha: 2.0}
    assert week[0] < 11
    for accelerator_only in ("Correctness gates", "flake rate of hardware tests", "Queue waits", "Nodes now"):
        assert accelerator_only not in page
    assert "not covered" not in out.lower() and "gates" not in out and "hardware runs" not in out
    assert "time to trustworthy signal, presubmit p50" in page and "name a stack" in page
    assert "`" not in page
    # no selection ran a subset (no evidence): what the presubmits ran is all they knew, nothing was saved
    assert "0 of 3 commits ran a subset; their presubmits ran 4 of 4 test runs (100%)" in out and "0.0 h saved" in out


def test_a_stack_repository_gets_its_sections_with_names_as_code_not_backticks(tmp_path):
    c = commit(1, TODAY)
    publish_embedded(tmp_path, [c, presubmit(c, "tests/test_a.py::test_x", TODAY + timedelta(minutes=5), 30.0)])
    page, _ = report(tmp_path)
    assert "Correctness gates" in page and "flake rate of hardware tests" in page
    assert "no <code>node-state-changed</code> event yet" in page  # no node state published: the page says so
    assert "`" not in page
