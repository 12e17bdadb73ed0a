"""`fastci demo`: the demo world's history through every processor, and what fastci found in it.

The demo must show the product from the processors' own decisions: presubmits that ran what the selection
kept (and the time that saved, measured from the results), the planted regression bisected to its culprit
and ticketed to its owners, the sick node quarantined, the flaky tests owned. These tests read the views
and the files the demo wrote, and hold each figure against the events themselves.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

import pytest

from fastci.cli.main import main
from fastci.demo.run import play
from fastci.demo.world import CULPRIT_TITLE, REGRESSED, World
from fastci.views.store import Views

COMMITS = 168  # seven nights: the smallest history with the regression planted (a faster run than the default)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    data = tmp_path_factory.mktemp("demo") / "demo"
    assert main(["--data-dir", str(data), "demo", "--commits", str(COMMITS)]) == 0
    return data


def rows(data, sql: str) -> list[dict]:
    views = Views(data / "views.duckdb", read_only=True)  # not held open: the report command writes the file
    try:
        columns, found = views.query(sql)
    finally:
        views.close()
    return [dict(zip(columns, row)) for row in found]


def test_each_presubmit_ran_what_its_selection_kept(demo):
    data = demo
    world = World(commits=COMMITS)
    selections = rows(data, "SELECT sha, run_all, kept FROM selection")
    ran: dict[str, set[str]] = {}
    for r in rows(data, "SELECT \"commit\", test_id FROM results WHERE trigger = 'presubmit'"):
        ran.setdefault(r["commit"], set()).add(r["test_id"])
    assert len(selections) == COMMITS
    every = {t.id for t in world.tests}
    subsets = 0
    for selection in selections:
        kept = {k["test_id"] for k in json.loads(selection["kept"])}
        expected = every if selection["run_all"] else kept
        assert ran.get(selection["sha"], set()) == expected, selection["sha"]
        subsets += not selection["run_all"] and len(kept) < len(every)
    assert subsets > COMMITS * 0.9  # evidence narrows nearly every commit
    nightly = rows(
        data, "SELECT run_id, count(DISTINCT test_id) AS tests FROM results WHERE trigger = 'nightly' GROUP BY 1"
    )
    assert len(nightly) == COMMITS // 24 and all(n["tests"] == len(every) for n in nightly)
    # a build file runs everything, and the selection says why
    assert rows(data, "SELECT count(*) AS n FROM selection WHERE run_all AND run_all_reason LIKE '%pyproject.toml%'")[
        0
    ]["n"]


def test_the_hours_saved_are_measured_from_the_presubmit_durations(demo, capsys):
    data = demo
    presubmit = rows(data, "SELECT \"commit\", test_id, duration_s, time FROM results WHERE trigger = 'presubmit'")
    subsets = {
        r["sha"]
        for r in rows(
            data,
            "SELECT sha FROM selection WHERE NOT run_all "
            "AND CAST(metrics->>'kept' AS BIGINT) < CAST(metrics->>'tests_known' AS BIGINT)",
        )
    }
    durations: dict[str, list[float]] = {}
    first_run: dict[str, object] = {}
    jobs: dict[str, list] = {}  # commit -> [runs, seconds, last result's time]
    for r in presubmit:
        durations.setdefault(r["test_id"], []).append(r["duration_s"])
        first_run[r["test_id"]] = min(first_run.get(r["test_id"], r["time"]), r["time"])
        job = jobs.setdefault(r["commit"], [0, 0.0, r["time"]])
        job[0], job[1], job[2] = job[0] + 1, job[1] + r["duration_s"], max(job[2], r["time"])
    suite_runs, suite_s = 0, 0.0
    for commit, (runs, seconds, done) in jobs.items():
        # a subset is held against every test presubmits had run by its end, each at its median run
        known = [t for t in durations if first_run[t] <= done] if commit in subsets else []
        suite_runs += max(len(known), runs)
        suite_s += max(sum(statistics.median(durations[t]) for t in known), seconds)
    saved_h = (suite_s - sum(r["duration_s"] for r in presubmit)) / 3600
    assert saved_h > 10
    assert main(["--data-dir", str(data), "report", "nightly"]) == 0
    out = capsys.readouterr().out
    assert f"their presubmits ran {len(presubmit):,} of {suite_runs:,} test runs" in out
    assert f"{saved_h:,.1f} h saved" in out


def test_the_regression_is_bisected_to_its_culprit_and_ticketed_to_its_owners(demo):
    data = demo
    world = World(commits=COMMITS)
    culprit = world.sha(world.culprit)
    final = rows(
        data,
        "SELECT test_id, stage, json_extract_string(culprit, '$.commit') AS commit, owners FROM regression_alert "
        "WHERE stage <> 'detected'",
    )
    assert {a["test_id"] for a in final} == set(REGRESSED)
    assert all(a["stage"] == "culprit" and a["commit"] == culprit and a["owners"] == ["kernels-team"] for a in final)
    tickets = [json.loads(p.read_text()) for p in (data / "tickets").glob("*.json")]
    assert sorted(t["alert"]["test_id"] for t in tickets) == sorted(REGRESSED)
    assert {t["team"] for t in tickets} == {"kernels-team"}
    assert {t["alert"]["culprit"]["title"] for t in tickets} == {CULPRIT_TITLE}
    # every run the processors asked for was answered: nothing is left pending in the report
    assert rows(data, "SELECT count(*) AS n FROM run_requested")[0]["n"] > 0
    page = (data / "nightly.html").read_text()
    assert "0 run request(s) not answered yet" in page
    assert page.count("<svg") >= 6  # the trend, the bisect trails, the nightly trends, the loss curves


def test_the_sick_node_is_quarantined_its_failures_rerun_and_the_flaky_tests_owned(demo):
    data = demo
    world = World(commits=COMMITS)
    (node,) = rows(data, "SELECT node_id, state FROM fleet_quarantined_nodes")
    assert node["node_id"] == world.sick_node and node["state"] == "quarantined"
    reruns = rows(data, "SELECT failed_on, rerun_on, rerun_status FROM fleet_reruns")
    assert reruns and all(
        r["failed_on"] == world.sick_node and r["rerun_on"] != world.sick_node and r["rerun_status"] == "passed"
        for r in reruns
    )
    flaky = {r["test_id"]: r["owners"] for r in rows(data, "SELECT test_id, owners FROM fleet_flaky_tests")}
    assert set(flaky) <= world.flaky and flaky
    teams = {t.id: t.model.team for t in world.tests}
    assert all(owners == [teams[test]] for test, owners in flaky.items())


def test_the_report_leads_with_what_fastci_found(demo):
    data = demo
    page = (data / "nightly.html").read_text()
    glance = page.split("<ul class='glance'>", 1)[1].split("</ul>", 1)[0]
    assert "h saved" in glance and "kernels-team" in glance and "quarantined" in glance and "flaky" in glance
    assert "`" not in page  # no raw markdown


def test_the_history_is_the_same_every_time():
    first, second = play(World(commits=30)), play(World(commits=30))
    assert [e.id for e in first] == [e.id for e in second]
    assert first == second


def test_make_demo_says_what_it_found_and_never_deletes_a_folder_it_did_not_make(tmp_path):
    data = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "fastci.cli", "--data-dir", str(data), "demo"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "unknown topic" in out  # the refused events, with their reasons
    found = out.split("What fastci found", 1)[1]
    assert "commits ran a subset" in found and "h saved" in found
    assert "bisected to" in found and CULPRIT_TITLE in found and "owners: kernels-team" in found
    assert "node-08 quarantined" in found and "flaky test(s), each with its owners" in found
    again = subprocess.run(
        [sys.executable, "-m", "fastci.cli", "--data-dir", str(data), "demo", "--commits", "24"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode == 0, again.stderr  # a second demo replaces the first
    assert "--commits 144 or more" in again.stdout  # and says why this one has no regression
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "precious.txt").write_text("keep me")
    refused = subprocess.run(
        [sys.executable, "-m", "fastci.cli", "--data-dir", str(tmp_path / "mine"), "demo"],
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0 and (tmp_path / "mine" / "precious.txt").exists()
