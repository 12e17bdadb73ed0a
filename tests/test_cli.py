"""The fastci command line, as a user drives it."""

from __future__ import annotations

import argparse
import io

import orjson
from factories import result, result_doc
from rich.console import Console

from fastci.cli.main import main
from fastci.core.codec import encode


def fastci(tmp_path, *args: str) -> int:
    return main(["--data-dir", str(tmp_path), *args])


def test_publish_run_refresh_and_query(tmp_path, capsys):
    source = tmp_path / "results.jsonl"
    source.write_bytes(b"\n".join(encode(result(run_id=f"r{n}", status=s)) for n, s in enumerate(["passed", "failed"])))
    assert fastci(tmp_path, "publish", "--topic", "results", str(source)) == 0
    assert "accepted 2 event(s)" in capsys.readouterr().err
    assert fastci(tmp_path, "run") == 0
    assert fastci(tmp_path, "views", "refresh") == 0
    capsys.readouterr()
    assert fastci(tmp_path, "sql", "SELECT test_id, runs, health FROM test_history", "--format", "json") == 0
    assert orjson.loads(capsys.readouterr().out) == {
        "test_id": "tests/test_a.py::test_x",
        "runs": 2,
        "health": "failing",
    }


def test_publish_envelopes_and_reports_each_refusal(tmp_path, capsys):
    lines = [
        orjson.dumps({"topic": "results", "event": result_doc(run_id="r1")}),
        orjson.dumps({"topic": "results", "event": result_doc(run_id="r2", chips=-1)}),
        orjson.dumps({"topic": "test-status-changed", "event": {}}),
        b"{oops",
    ]
    source = tmp_path / "mixed.jsonl"
    source.write_bytes(b"\n".join(lines))
    assert fastci(tmp_path, "publish", str(source)) == 1
    err = capsys.readouterr().err
    assert "accepted 1 event(s)" in err and "refused 3 event(s)" in err
    assert "line 2: results: field 'chips'" in err
    assert "line 3: test-status-changed: field 'topic': 'test-status-changed' is written by its processor" in err
    assert "line 4: (none): malformed JSON" in err
    fastci(tmp_path, "views", "refresh")
    capsys.readouterr()
    fastci(tmp_path, "sql", "SELECT count(*) AS n FROM dead_letters", "--format", "csv")
    assert capsys.readouterr().out.splitlines() == ["n", "3"]


def test_sql_errors_are_reported_without_a_traceback(tmp_path, capsys):
    assert fastci(tmp_path, "sql", "SELECT 1") == 2
    assert f"run 'fastci --data-dir {tmp_path} views refresh' first" in capsys.readouterr().err
    fastci(tmp_path, "views", "refresh")
    assert fastci(tmp_path, "sql", "SELECT nope FROM results") == 2
    assert "query failed" in capsys.readouterr().err


def test_run_refuses_a_batch_or_commit_interval_under_one(tmp_path, capsys):
    assert fastci(tmp_path, "run", "--commit-every", "0") == 2
    assert "--commit-every 0" in capsys.readouterr().err
    assert fastci(tmp_path, "run", "--batch", "-1") == 2
    assert "--batch -1" in capsys.readouterr().err


def test_schemas_check(tmp_path, capsys):
    out = tmp_path / "schemas"
    assert fastci(tmp_path, "schemas", "--out", str(out), "--check") == 1
    assert fastci(tmp_path, "schemas", "--out", str(out)) == 0
    assert fastci(tmp_path, "schemas", "--out", str(out), "--check") == 0


def test_global_options_work_after_the_subcommand_too(tmp_path, capsys):
    fastci(tmp_path, "views", "refresh")
    capsys.readouterr()
    assert main(["sql", "--data-dir", str(tmp_path), "SELECT 1 AS one", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["one", "1"]


def test_every_subcommand_help_has_a_description():
    from fastci.cli.main import build_parser

    def leaves(parser, path):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield path, parser
        for action in subs:
            for name, sub in action.choices.items():
                yield from leaves(sub, [*path, name])

    missing = [" ".join(path) for path, parser in leaves(build_parser(), []) if not parser.description]
    assert missing == []


def test_an_unreachable_broker_is_a_clear_error_not_a_traceback(capsys):
    assert main(["--bootstrap", "127.0.0.1:1", "worker"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach Kafka at 127.0.0.1:1" in err and "Traceback" not in err


def test_long_work_in_a_log_not_a_terminal_says_how_far_it_got_and_how_long_is_left(tmp_path, capsys, monkeypatch):
    from fastci.cli.base import PlainProgress

    now = [100.0]
    progress = PlainProgress("records applied", Console(file=io.StringIO()), clock=lambda: now[0])
    first, second = progress.add_task("a", total=100), progress.add_task("b", total=300)
    now[0] += 60
    progress.update(first, 50)
    progress.update(second, 150)
    assert progress.line(60.0) == "records applied: 200 of 400 (50%) in 1m 00s, about 1m 00s left at this rate"
    assert progress.to.file.getvalue() == "records applied: 50 of 400 (12%) in 1m 00s, about 7m 00s left at this rate\n"
    progress.add_task("c", total=None)
    assert progress.line(3_700.0) == "records applied: 200 in 1h 01m"  # a task of unknown size: no share

    # the real command, under pytest (no terminal), a line at every update
    monkeypatch.setattr(PlainProgress, "EVERY_S", 0.0)
    source = tmp_path / "results.jsonl"
    source.write_bytes(b"\n".join(encode(result(run_id=f"r{n}")) for n in range(30)))
    assert fastci(tmp_path, "publish", "--topic", "results", str(source)) == 0
    capsys.readouterr()
    assert fastci(tmp_path, "run", "--batch", "10") == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("records applied")]
    assert lines and "left at this rate" in lines[0] and " of " in lines[-1]


def test_help_lists_every_command_in_a_group_and_names_the_plugin_and_the_docs(capsys):
    from fastci.cli.main import HELP_GROUPS, build_parser

    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    grouped = [name for _, names in HELP_GROUPS for name in names]
    assert sorted(grouped) == sorted(commands)  # each command in exactly one group
    for title, names in HELP_GROUPS:
        section = text.split(f"\n{title}:\n", 1)[1].split("\n\n", 1)[0]
        assert [line.split()[0] for line in section.splitlines() if line.startswith("  ") and line[2] != " "] == [
            *names
        ]
    assert "other commands" not in text
    for mention in ("pytest --fastci-select", "pytest --fastci-results", "pytest --fastci-evidence", "docs/README.md"):
        assert mention in text


def test_version_is_the_installed_packages(capsys):
    from importlib import metadata

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"fastci {metadata.version('fastci')}\n"


def test_publish_and_plan_help_say_what_they_do(capsys):
    from fastci.topology import SYSTEM

    assert main(["publish", "--help"]) == 0
    text = capsys.readouterr().out
    assert all(f"\n  {topic}\n" in text for topic in SYSTEM.input_topics) and "exit codes:" in text
    assert main(["plan", "--help"]) == 0
    assert "publishes the change's commits into the data dir" in " ".join(capsys.readouterr().out.split())


def test_output_to_a_log_keeps_whole_values_and_a_terminal_keeps_its_width(tmp_path, capsys):
    from rich.table import Table
    from rich.text import Text

    from fastci.cli.base import LogConsole

    test_id = "tests/models/test_whisper_mini.py::test_eval[" + "beam-width-" * 12 + "]"
    table = Table("stage", "test")  # rich's default columns: cut with an ellipsis to fit the width
    table.add_row("culprit", Text(test_id))  # as the regressions table prints it
    log = LogConsole(file=io.StringIO())
    log.print(table)
    assert test_id in log.file.getvalue()
    terminal = LogConsole(file=io.StringIO(), force_terminal=True, color_system=None, width=80)
    terminal.print(table)
    assert max(len(line) for line in terminal.file.getvalue().splitlines()) <= 80

    # the real command, its stdout not a terminal: sql's table holds the whole id on one line
    source = tmp_path / "results.jsonl"
    source.write_bytes(encode(result(test_id=test_id)) + b"\n")
    assert fastci(tmp_path, "publish", "--topic", "results", str(source)) == 0
    assert fastci(tmp_path, "views", "refresh") == 0
    capsys.readouterr()
    assert fastci(tmp_path, "sql", "SELECT test_id, node_id, status FROM results") == 0
    assert any(test_id in line and "node-01" in line for line in capsys.readouterr().out.splitlines())
