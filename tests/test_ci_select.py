"""``pytest --fastci-select`` and ``fastci plan`` on a real git repository the tests create, on the
embedded runtime: what a CI job runs for a change, and that it never skips silently."""

from __future__ import annotations

import orjson
from ci_repo import ALL_TESTS, TEXT, clean_env, collect_evidence, commit, edit, fastci_in, git, make_repo, pytest_in


def select(repo, data, *args, env=None):
    return pytest_in(repo, data, "-q", "-rA", "--fastci-select", *args, env=env)


def test_a_change_to_one_function_runs_only_the_tests_that_reach_it_and_a_break_fails_the_job(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    collect_evidence(repo, data)
    edit(repo, "pkg/stats.py", "return sum(values) / len(values)", "return sum(values) / float(len(values))", "mean")
    run = select(repo, data)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed, 5 deselected" in run.stdout  # mean() runs in test_mean and, through it, test_normalize
    assert "PASSED tests/test_stats.py::test_mean" in run.stdout
    assert "PASSED tests/test_stats.py::test_normalize" in run.stdout
    assert f"running 2 of {ALL_TESTS} known tests" in run.stdout and "5 deselected" in run.stdout

    edit(repo, "pkg/stats.py", "/ float(len(values))", "/ float(len(values) + 1)", "break mean")
    broken = select(repo, data)
    assert broken.returncode == 1, broken.stdout + broken.stderr  # the job fails, as the full suite would
    assert "2 failed, 5 deselected" in broken.stdout


def test_without_evidence_everything_runs_and_the_line_says_why(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    edit(repo, "pkg/text.py", 'return word.upper() + "!"', 'return word.upper() + "!!"[:1]', "shout")
    run = select(repo, data)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{ALL_TESTS} passed" in run.stdout and "deselected" not in run.stdout.split("fastci:")[0]
    assert f"running all {ALL_TESTS} collected tests: no test of plain is known yet" in run.stdout


def test_an_always_test_and_a_new_test_run_whatever_the_plan_says(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    commit(
        repo,
        {
            "pyproject.toml": '[tool.fastci]\nalways = ["tests/test_text.py::test_whisper"]\n',
            "tests/test_smoke.py": "import pytest\n\n@pytest.mark.fastci_always\ndef test_smoke():\n    pass\n",
        },
        "smoke test, always list",
    )
    collect_evidence(repo, data)
    commit(repo, {"tests/test_late.py": "def test_late():\n    pass\n"}, "a test added outside fastci's sight")
    (repo / "tests" / "test_unseen.py").write_text("def test_unseen():\n    pass\n")  # not even committed
    edit(repo, "pkg/text.py", 'return word.upper() + "!"', 'return word.upper() + "!!"[:1]', "shout")
    run = select(repo, data)
    assert run.returncode == 0, run.stdout + run.stderr
    ran = {line.split(" ", 1)[1] for line in run.stdout.splitlines() if line.startswith("PASSED ")}
    assert ran == {
        "tests/test_text.py::test_shout",  # the change
        "tests/test_text.py::test_whisper",  # [tool.fastci] always
        "tests/test_smoke.py::test_smoke",  # @pytest.mark.fastci_always
        "tests/test_late.py::test_late",  # known to the plan: a new test the commit before added
        "tests/test_unseen.py::test_unseen",  # unknown to the catalog: runs
    }
    assert "5 passed, 5 deselected" in run.stdout


def test_a_pull_request_of_three_commits_selects_the_union(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    collect_evidence(repo, data)
    git(repo, "checkout", "-q", "-b", "feature")
    edit(repo, "pkg/stats.py", "return max(values) - min(values)", "return abs(max(values) - min(values))", "spread")
    edit(repo, "pkg/text.py", 'return word.lower() + "..."', 'return word.lower() + "." * 3', "whisper")
    edit(repo, "README.md", "# plain", "# plain, documented", "docs")
    run = select(repo, data, "--fastci-select-base", "main")
    assert run.returncode == 0, run.stdout + run.stderr
    ran = {line.split(" ", 1)[1] for line in run.stdout.splitlines() if line.startswith("PASSED ")}
    assert ran == {"tests/test_stats.py::test_spread", "tests/test_text.py::test_whisper"}
    assert "3 commits up to" in run.stdout and "2 passed, 5 deselected" in run.stdout
    # HEAD alone is the README change: nothing to run, and that is a success (not pytest's exit 5)
    alone = select(repo, data)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert (
        "7 deselected" in alone.stdout
        and "nothing to run: the change reaches none of the 7 known tests" in alone.stdout
    )


def test_k_and_m_and_lf_still_compose_with_the_selection(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    collect_evidence(repo, data)
    edit(repo, "pkg/stats.py", "return sum(values) / len(values)", "return sum(values) / float(len(values))", "mean")
    run = select(repo, data, "-k", "normalize")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed, 6 deselected" in run.stdout  # -k kept test_normalize; the plan had no more to drop


def test_modes_subset_and_rest_and_shadow_run_everything_and_results_say_what_was_kept(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    collect_evidence(repo, data)
    edit(repo, "pkg/stats.py", "return sum(values) / len(values)", "return sum(values) / float(len(values))", "mean")
    rest = pytest_in(repo, data, "-v", "--fastci-select", "--fastci-select-mode", "subset-and-rest")
    assert rest.returncode == 0 and f"{ALL_TESTS} passed" in rest.stdout, rest.stdout + rest.stderr
    order = [line.split(" ")[0] for line in rest.stdout.splitlines() if " PASSED" in line and "::" in line]
    assert set(order[:2]) == {"tests/test_stats.py::test_mean", "tests/test_stats.py::test_normalize"}
    shadow = select(repo, data, "--fastci-select-mode", "shadow", "--fastci-results")
    assert shadow.returncode == 0 and f"{ALL_TESTS} passed" in shadow.stdout, shadow.stdout + shadow.stderr
    assert "shadow mode, ran all 7 collected tests; the selection keeps 2 of 7 known tests" in shadow.stdout
    from fastci.runtime.embedded import DataDir

    head = git(repo, "rev-parse", "HEAD")
    results = [orjson.loads(r.payload) for r in DataDir(data).log.topic("results").read()]
    kept = {r["test_id"]: r["selected"] for r in results if r["commit"] == head}
    assert {r["traced"] for r in results if r["commit"] == head} == {False}  # no evidence recorded in this job
    assert kept == {
        "tests/test_stats.py::test_mean": True,
        "tests/test_stats.py::test_normalize": True,
        **{
            t: False
            for t in (
                "tests/test_stats.py::test_median",
                "tests/test_stats.py::test_spread",
                "tests/test_stats.py::test_table",
                "tests/test_text.py::test_shout",
                "tests/test_text.py::test_whisper",
            )
        },
    }


def test_bad_options_and_settings_stop_the_job_naming_the_option(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    wrong_mode = select(repo, data, "--fastci-select-mode", "some")
    assert wrong_mode.returncode == 4 and "--fastci-select-mode: invalid choice: 'some'" in wrong_mode.stderr
    no_base = select(repo, data, "--fastci-select-base", "origin/nowhere")
    assert no_base.returncode == 4
    assert "--fastci-select-base: 'origin/nowhere' is not a commit of" in no_base.stderr
    commit(repo, {"pyproject.toml": "[tool.fastci]\nalways = 'tests/*'\nalwys = []\n"}, "typo")
    bad = select(repo, data)
    assert bad.returncode == 4 and "[tool.fastci] key(s) alwys: unknown (known: always, inert, build)" in bad.stderr
    assert not (data / "log" / "results").exists()  # nothing ran


def test_fastci_plan_prints_json_and_node_ids_with_documented_exit_codes(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    # A job's first ask on a cold cache: the named data dir is made, and the answer is to run everything.
    root = fastci_in(repo, data, "--data-dir", str(data), "plan", "--format", "lines")
    assert root.returncode == 3 and root.stdout == "", root.stderr  # the first commit adds a data file
    assert "run everything: data file changed: pkg/data/table.json (no evidence yet records" in root.stderr
    edit(repo, "pkg/text.py", 'return word.upper() + "!"', 'return word.upper() + "!!"[:1]', "shout")
    first = fastci_in(repo, data, "--data-dir", str(data), "plan", "--format", "lines")
    assert first.returncode == 3 and first.stdout == "", first.stderr  # no evidence yet: run everything
    assert "run everything: no test of plain is known yet" in first.stderr
    collect_evidence(repo, data, env=clean_env(data))
    edit(repo, "pkg/stats.py", "return sum(values) / len(values)", "return sum(values) / float(len(values))", "mean")
    lines = fastci_in(repo, data, "--data-dir", str(data), "plan", "--format", "lines")
    assert lines.returncode == 0, lines.stderr
    assert set(lines.stdout.split()) == {"tests/test_stats.py::test_mean", "tests/test_stats.py::test_normalize"}
    document = orjson.loads(fastci_in(repo, data, "--data-dir", str(data), "plan").stdout)
    assert document["run_all"] is False and document["answered"] is True and document["reason"] == ""
    assert [t["test_id"] for t in document["tests"]] == lines.stdout.split()
    assert {"risk", "expected_s", "estimated_s", "config", "reason"} <= set(document["tests"][0])
    assert document["metrics"]["tests_known"] == ALL_TESTS and 0 < document["metrics"]["share"] < 1
    run = pytest_in(repo, data, "-q", *lines.stdout.split())  # any runner can take the lines
    assert run.returncode == 0 and "2 passed" in run.stdout


def test_xdist_workers_take_the_controllers_plan_and_publish_every_result_once(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    collect_evidence(repo, data)
    edit(repo, "pkg/stats.py", "return sum(values) / len(values)", "return sum(values) / float(len(values))", "mean")
    run = select(repo, data, "-n", "2", "--fastci-select-mode", "shadow", "--fastci-results")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{ALL_TESTS} passed" in run.stdout
    assert run.stderr.count("record(s) pending in") == 1  # asked once, by the controller
    from fastci.runtime.embedded import DataDir

    head = git(repo, "rev-parse", "HEAD")
    results = [orjson.loads(r.payload) for r in DataDir(data).log.topic("results").read()]
    mine = [r for r in results if r["commit"] == head]
    assert len(mine) == ALL_TESTS and len({r["id"] for r in mine}) == ALL_TESTS  # nothing lost, nothing doubled
    assert {r["test_id"] for r in mine if r["selected"]} == {
        "tests/test_stats.py::test_mean",
        "tests/test_stats.py::test_normalize",
    }
    subset = select(repo, data, "-n", "2")
    assert subset.returncode == 0 and "2 passed" in subset.stdout, subset.stdout + subset.stderr


def test_shadow_mode_catches_a_planted_miss_and_the_next_selection_widens(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    collect_evidence(repo, data)
    # whisper() starts to call spread(): test_whisper's evidence (taken before) does not show it
    edit(
        repo,
        "pkg/text.py",
        "def whisper(word):\n",
        "def whisper(word):\n    from pkg.stats import spread\n\n    spread([1, 2])\n",
        "whisper uses spread",
    )
    assert select(repo, data).returncode == 0  # test_whisper runs (its code changed); evidence is not refreshed
    edit(
        repo,
        "pkg/stats.py",
        "return max(values) - min(values)",
        "return max(values) - min(values) - 1 / 0",
        "break spread",
    )
    shadow = select(repo, data, "--fastci-select-mode", "shadow", "--fastci-results")
    assert shadow.returncode == 1 and "2 failed, 5 passed" in shadow.stdout, shadow.stdout + shadow.stderr
    assert "the selection keeps 1 of 7 known tests" in shadow.stdout  # test_spread alone, by the evidence
    edit(repo, "pkg/text.py", 'return word.upper() + "!"', 'return word.upper() + "!!"[:1]', "shout")
    widened = select(repo, data)  # asking processes the shadow run's results: the audit, then the widening
    assert "widened after the miss at" in widened.stdout, widened.stdout
    ran = {line.split(" ")[1] for line in widened.stdout.splitlines() if line.split(" ")[0] in ("PASSED", "FAILED")}
    assert {"tests/test_stats.py::test_spread", "tests/test_stats.py::test_mean"} <= ran  # stats.py's tests
    assert "tests/test_text.py::test_shout" in ran
    assert fastci_in(repo, data, "--data-dir", str(data), "views", "refresh").returncode == 0
    query = "SELECT kind, test_id, evidence FROM selection_audit ORDER BY kind, test_id"
    rows = fastci_in(repo, data, "--data-dir", str(data), "sql", "--format", "json", query).stdout.splitlines()
    audits = [orjson.loads(row) for row in rows]
    assert [(a["kind"], a["test_id"]) for a in audits] == [
        ("audited", None),
        ("miss", "tests/test_text.py::test_whisper"),
    ]
    assert audits[1]["evidence"].startswith("not selected: its recorded evidence executes none of the changed code")
    report = fastci_in(repo, data, "--data-dir", str(data), "report", "nightly")
    assert "1 audited, 1 with a miss (100.0%)" in report.stdout + report.stderr


def test_a_data_file_change_runs_only_the_tests_that_read_it_and_a_readme_runs_none(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    collect_evidence(repo, data)
    edit(repo, "pkg/data/table.json", '"answer": 42', '"answer": 43', "a wrong value")
    run = select(repo, data)
    assert run.returncode == 1, run.stdout + run.stderr  # the test that reads it catches the value
    assert "1 failed, 6 deselected" in run.stdout and "FAILED tests/test_stats.py::test_table" in run.stdout
    edit(repo, "README.md", "# plain", "# plain: statistics", "docs")
    readme = select(repo, data)
    assert readme.returncode == 0 and "nothing to run" in readme.stdout, readme.stdout


def test_a_file_a_shared_fixture_reads_belongs_to_every_test_that_uses_the_fixture(tmp_path):
    """A session fixture reads its file once, while the first test using it is set up; the tests
    after that one depend on the file all the same (pint's unit registry is such a fixture)."""
    repo, data = make_repo(tmp_path), tmp_path / "data"
    fixture = """
        import pytest

        from pkg import stats


        @pytest.fixture(scope="session")
        def answers():
            return stats.table()
        """
    users = """
        def test_answer(answers):
            assert answers["answer"] == 42


        def test_answer_again(answers):
            assert answers["answer"] > 41


        def test_no_answer():
            assert True
        """
    commit(repo, {"tests/conftest.py": fixture, "tests/test_answers.py": users}, "a session fixture")
    collect_evidence(repo, data)
    edit(repo, "pkg/data/table.json", '"answer": 42', '"answer": 41', "a wrong value")
    run = select(repo, data)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED tests/test_answers.py::test_answer " in run.stdout  # the test the read happened in
    assert "FAILED tests/test_answers.py::test_answer_again" in run.stdout  # and the one after it
    assert "3 failed, 7 deselected" in run.stdout  # with test_table; test_no_answer is not run


def test_a_module_level_constant_change_runs_the_tests_of_the_functions_that_read_it(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    edit(repo, "pkg/stats.py", "def spread(values):\n", "OFFSET = 0\n\n\ndef spread(values):\n", "a constant")
    edit(repo, "pkg/stats.py", "return max(values) - min(values)", "return max(values) - min(values) + OFFSET", "use")
    collect_evidence(repo, data)
    edit(repo, "pkg/stats.py", "OFFSET = 0", "OFFSET = 1", "a wrong offset")
    run = select(repo, data)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 6 deselected" in run.stdout and "FAILED tests/test_stats.py::test_spread" in run.stdout


def test_a_method_added_to_a_class_runs_the_tests_that_use_the_class_and_fails_when_they_fail(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    echo = "\n\nclass Echo:\n    def __init__(self, word):\n        self.word = word\n"
    commit(repo, {"pkg/text.py": TEXT + echo}, "Echo")
    test_echo = "def test_echo():\n    assert text.Echo('a')\n\n\ndef test_whisper"
    edit(repo, "tests/test_text.py", "def test_whisper", test_echo, "its test")
    collect_evidence(repo, data)
    # __len__ makes every Echo false: no caller changed, but the class did.
    length = "self.word = word\n\n    def __len__(self):\n        return 0\n"
    edit(repo, "pkg/text.py", "self.word = word\n", length, "Echo has a length")
    run = select(repo, data)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"1 failed, {ALL_TESTS} deselected" in run.stdout and "FAILED tests/test_text.py::test_echo" in run.stdout


def test_an_incremental_nightly_retraces_only_the_tests_whose_evidence_may_be_stale(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    collect_evidence(repo, data)
    base = git(repo, "rev-parse", "HEAD")
    edit(repo, "pkg/stats.py", "return sum(values) / len(values)", "return sum(values) / float(len(values))", "mean")
    run = pytest_in(
        repo, data, "-q", "--fastci-evidence", "--fastci-evidence-method", "tracing", "--fastci-evidence-since", base
    )
    assert run.returncode == 0 and f"{ALL_TESTS} passed" in run.stdout, run.stdout + run.stderr
    assert (
        f"fastci: evidence since {base}: re-traced 2 of 7 tests" in run.stdout and "5 keep their evidence" in run.stdout
    )
    from fastci.runtime.embedded import DataDir

    head = git(repo, "rev-parse", "HEAD")
    events = [orjson.loads(r.payload) for r in DataDir(data).log.topic("evidence").read()]
    fresh = {e["test_id"] for e in events if e["commit"] == head and e["kind"] == "test"}
    assert fresh == {"tests/test_stats.py::test_mean", "tests/test_stats.py::test_normalize"}
    assert all(e["time"] for e in events)  # when each was taken, beside the commit it was taken at


def test_asking_reads_the_plans_from_about_the_commits_time_not_the_whole_history(tmp_path, monkeypatch):
    """A long-lived data dir holds every plan ever made: the embedded ask starts a day before the
    change's commits, as the Kafka ask does, and answers what a read of every plan answers."""
    from fastci.ci.change import change_of
    from fastci.ci.plan import ask_embedded
    from fastci.runtime import log as log_module
    from fastci.runtime.log import Position, TopicLog

    repo, data = make_repo(tmp_path), tmp_path / "data"
    collect_evidence(repo, data)
    monkeypatch.setattr(log_module, "TIME_INDEX_BYTES", 200)  # a stretch of the time index per plan or two
    for n, day in enumerate(("01", "04", "07", "10")):  # commits three days apart
        monkeypatch.setenv("GIT_AUTHOR_DATE", f"2027-01-{day}T12:00:00+00:00")
        before = "sum(values) / " if n == 0 else f"{n - 1} * 0 + sum(values) / "
        edit(repo, "pkg/stats.py", before, f"{n} * 0 + sum(values) / ", f"mean {n}")
        assert ask_embedded(change_of(repo), data, say=lambda line: None).answered

    starts: dict[str, list[int]] = {}
    read = TopicLog.read

    def recording(log, start=None, limit=None):
        start = start or Position()
        starts.setdefault(log.topic, []).append(start.offset)
        return read(log, start, limit)

    monkeypatch.setattr(TopicLog, "read", recording)
    latest = ask_embedded(change_of(repo), data, say=lambda line: None)
    kept = {test["test_id"] for test in latest.to_json()["tests"]}
    assert kept == {"tests/test_stats.py::test_mean", "tests/test_stats.py::test_normalize"} and not latest.run_all
    assert min(starts["selection"]) >= 2 and min(starts["test-plan"]) >= 2  # past the first commits' plans
    monkeypatch.setattr(TopicLog, "position_at", lambda log, time_ms: Position())
    assert ask_embedded(change_of(repo), data, say=lambda line: None).to_json() == latest.to_json()


def test_a_job_asking_behind_a_backlog_runs_everything_within_its_wait_and_keeps_what_was_applied(tmp_path):
    """An imported history nobody has applied yet is hours of work: the ask applies what its wait
    allows, commits it, publishes its commit and runs everything, saying why."""
    from factories import result

    from fastci.ci.change import change_of
    from fastci.ci.plan import ask_embedded
    from fastci.runtime.embedded import DataDir, EmbeddedRuntime
    from fastci.runtime.publish import publish_embedded
    from fastci.topology import SYSTEM

    repo, data = make_repo(tmp_path), tmp_path / "data"
    publish_embedded(data, [result(test_id=f"tests/test_{n % 500}.py::test_x", run_id=f"r{n}") for n in range(20_000)])

    def pending() -> int:  # over all processors
        runtime = EmbeddedRuntime(data, SYSTEM)
        try:
            return runtime.pending()
        finally:
            runtime.close()

    before = pending()
    plan = ask_embedded(change_of(repo), data, timeout_s=0.01, say=lambda line: None)
    assert plan.run_all and "records in" in plan.reason and "were still to be processed after 0.01 s" in plan.reason
    assert 0 < pending() < before  # stopped at its wait, and what it applied was committed
    assert any(b'"sha"' in r.payload for r in DataDir(data).log.topic("commits").read())  # planned for later jobs
    later = ask_embedded(change_of(repo), data, say=lambda line: None)  # with the time it needs: the plan's own answer
    assert later.reason.startswith("data file changed: pkg/data/table.json"), later.reason
    assert pending() == 0


def test_a_job_that_finds_another_runtime_at_work_says_so_once_and_runs_everything_at_its_wait(tmp_path):
    from fastci.ci.change import change_of
    from fastci.ci.plan import ask_embedded
    from fastci.runtime.embedded import DataDir

    repo, data = make_repo(tmp_path), tmp_path / "data"
    said: list[str] = []
    with DataDir(data).processing():  # a `fastci run` catching up, holding the data dir
        plan = ask_embedded(change_of(repo), data, timeout_s=1.5, say=said.append)
    assert plan.run_all and plan.reason.endswith(
        "(another fastci runtime was processing it: a `fastci run` catching up?)"
    )
    assert sum("another fastci runtime is processing" in line for line in said) == 1, said
    commits = [orjson.loads(r.payload) for r in DataDir(data).log.topic("commits").read()]
    assert [c["sha"] for c in commits] == [git(repo, "rev-parse", "HEAD")]  # planned for the jobs after it


def test_a_job_on_a_planned_commit_still_applies_what_is_pending_and_says_so_only_then(tmp_path):
    """A failing presubmit's results are pending when the next job asks for the same commit's plan:
    the job answers from the plan made before, applies them all the same, and the report after it
    lists the failures with no `fastci run` by hand."""
    from fastci.ci.pending import backlog

    repo, data = make_repo(tmp_path), tmp_path / "data"
    collect_evidence(repo, data)
    edit(repo, "pkg/stats.py", "/ len(values)", "/ (len(values) + 1)", "break mean")
    failing = select(repo, data, "--fastci-results")
    assert failing.returncode == 1 and "2 failed, 5 deselected" in failing.stdout, failing.stdout + failing.stderr
    assert backlog(data) > 0  # its results, published after it asked

    again = select(repo, data)  # the same commit: its plan was made by the job before
    assert again.returncode == 1 and "2 failed, 5 deselected" in again.stdout
    assert "record(s) pending in" in again.stderr, again.stderr
    assert backlog(data) == 0

    quiet = select(repo, data)  # nothing pending now: nothing said about it
    assert quiet.returncode == 1 and "pending" not in quiet.stderr, quiet.stderr
    report = fastci_in(repo, data, "--data-dir", str(data), "report", "nightly")
    assert report.returncode == 0, report.stderr
    assert "2 test(s) failing now: tests/test_stats.py::test_mean, tests/test_stats.py::test_normalize" in report.stdout


def test_the_nightly_report_applies_what_is_pending_or_says_another_runtime_has_it(tmp_path):
    from fastci.runtime.embedded import DataDir

    repo, data = make_repo(tmp_path), tmp_path / "data"
    edit(repo, "pkg/text.py", 'return word.upper() + "!"', 'return word.lower() + "!"', "break shout")
    ran = pytest_in(repo, data, "-q", "--fastci-results")
    assert ran.returncode == 1 and "1 failed, 6 passed" in ran.stdout, ran.stdout + ran.stderr
    with DataDir(data).processing():  # a `fastci run` at work on the data dir
        busy = fastci_in(repo, data, "--data-dir", str(data), "report", "nightly")
    assert busy.returncode == 0, busy.stderr
    assert f"another fastci runtime is processing {data} (7 record(s) pending)" in busy.stderr
    assert "failing now" not in busy.stdout  # nothing applied yet: the report says of what it is

    report = fastci_in(repo, data, "--data-dir", str(data), "report", "nightly")
    assert report.returncode == 0, report.stderr
    assert f"applying 7 record(s) pending in {data} first" in report.stderr
    assert "1 test(s) failing now: tests/test_text.py::test_shout" in report.stdout
    again = fastci_in(repo, data, "--data-dir", str(data), "report", "nightly")
    assert "applying" not in again.stderr and "1 test(s) failing now" in again.stdout


def test_the_jobs_line_counts_the_tests_without_evidence_and_names_the_command_that_gives_some(tmp_path):
    repo, data = make_repo(tmp_path), tmp_path / "data"
    edit(repo, "pkg/text.py", 'return word.upper() + "!"', 'return word.upper() + "!!"[:1]', "shout")
    first = select(repo, data)
    assert first.returncode == 0, first.stdout + first.stderr
    assert (
        f"running all {ALL_TESTS} collected tests: no test of plain is known yet; `pytest --fastci-evidence "
        "--fastci-results` (in a nightly) records what each test runs, so a change runs only its tests"
    ) in first.stdout
    results_only = pytest_in(repo, data, "-q", "--fastci-results")  # a history with results, no evidence
    assert results_only.returncode == 0, results_only.stdout + results_only.stderr
    edit(repo, "pkg/stats.py", "return sum(values) / len(values)", "return sum(values) / float(len(values))", "mean")
    run = select(repo, data)
    assert run.returncode == 0, run.stdout + run.stderr
    assert (
        f"running {ALL_TESTS} of {ALL_TESTS} known tests, ~100% of the suite's time; 0 deselected; "
        f"{ALL_TESTS} of the {ALL_TESTS} known tests have no evidence and always run: "
        "`pytest --fastci-evidence --fastci-results` (in a nightly) gives them some"
    ) in run.stdout
    document = orjson.loads(fastci_in(repo, data, "--data-dir", str(data), "plan").stdout)
    assert document["metrics"]["no_evidence"] == ALL_TESTS and document["metrics"]["share"] == 1.0
    assert {t["reason"] for t in document["tests"]} == {"no-evidence"}


def test_a_rule_that_keeps_every_test_is_named_with_the_unit_no_evidence_contains(tmp_path):
    """A function no test's evidence runs, in a module every test imports: every test runs, and the
    job's line and the plan say which rule kept them and for which unit."""
    repo, data = make_repo(tmp_path), tmp_path / "data"
    commit(repo, {"pkg/extra.py": "def unused():\n    return 1\n", "pkg/__init__.py": "from pkg import extra\n"}, "x")
    collect_evidence(repo, data)
    edit(repo, "pkg/extra.py", "return 1", "return 2", "change what no test runs")
    run = select(repo, data)
    assert run.returncode == 0 and f"{ALL_TESTS} passed" in run.stdout, run.stdout + run.stderr
    assert (
        "1 changed unit(s) no test's evidence runs: pkg/extra.py::unused (the tests importing their modules run); "
        f"every known test is kept: {ALL_TESTS} import-time for pkg/extra.py::unused"
    ) in run.stdout
    document = orjson.loads(fastci_in(repo, data, "--data-dir", str(data), "plan").stdout)
    assert document["metrics"]["unevidenced"] == ["pkg/extra.py::unused"]
    assert document["metrics"]["unevidenced_units"] == 1 and document["metrics"]["no_evidence"] == 0
    assert all(t["functions"] == ["pkg/extra.py::unused"] for t in document["tests"])
