"""Every command and pytest flag answers a newcomer's mistake (a missing file, a folder for a file, a file
for a data dir, a data dir inside another's log, a typo in a name, an empty setting) with one line and a
non-zero exit: never a traceback, never an INTERNALERROR.

The commands are found by walking the parser, so a new command is fed the same mistakes without a line
here: each of its path arguments the wrong kind of path, each name and choice a typo, its data dir every
wrong kind, its Kafka settings empty."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from factories import result

from fastci.cli.base import NameArgument, PathArgument
from fastci.cli.main import build_parser, main
from fastci.core.codec import encode
from fastci.runtime.publish import publish_embedded

TYPO = "no-such-name"


@dataclass
class Scene:
    """The paths a mistake is made of, under one folder."""

    root: Path
    file: Path = field(init=False)  # an ordinary file
    folder: Path = field(init=False)  # an ordinary folder
    data: Path = field(init=False)  # a data dir with a log

    def __post_init__(self) -> None:
        self.file = self.root / "notes.txt"
        self.file.write_text("not an event\n")
        self.folder = self.root / "a-folder"
        self.folder.mkdir()
        self.data = self.root / "data"
        publish_embedded(self.data, [result()])

    @property
    def missing(self) -> Path:
        return self.root / "missing"

    def bad_paths(self, kind: str) -> list[str]:
        """Paths that are wrong for an argument of ``kind`` (``PathArgument.KINDS``)."""
        under_a_file = str(self.file / "x")
        return {
            "file": [str(self.missing), str(self.folder), under_a_file],
            "output": [str(self.folder), under_a_file],
            "folder": [str(self.file), under_a_file],
            "existing folder": [str(self.missing), str(self.file), under_a_file],
        }[kind]

    def good_path(self, kind: str) -> str:
        return {
            "file": str(self.file),
            "output": str(self.root / "out.html"),
            "folder": str(self.root / "new-folder"),
            "existing folder": str(self.folder),
        }[kind]


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every (sub)command of ``parser`` as (its words, its parser), groups before their leaves."""
    found = [(path, parser)] if path else []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += commands(sub, (*path, name))
    return found


def is_group(parser: argparse.ArgumentParser) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def filler(action: argparse.Action, scene: Scene) -> list[str]:
    """A value that parses, for an argument the command requires."""
    if isinstance(action.type, PathArgument):
        value = scene.good_path(action.type.kind)
    elif isinstance(action.type, NameArgument):
        value = next(iter(action.type.known()))
    elif action.choices:
        value = next(iter(action.choices))
    elif action.type in (int, float):
        value = "1"
    else:
        value = "x"
    return [*action.option_strings[:1], value]


def required(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments ``parser`` cannot parse without (not a trailing ``-- CMD ...``)."""
    return [
        a
        for a in parser._actions
        if a.nargs != argparse.REMAINDER and (a.required or (not a.option_strings and a.nargs not in ("?", "*")))
    ]


def argv_with(words: tuple[str, ...], parser: argparse.ArgumentParser, scene: Scene, **given: list[str]) -> list[str]:
    """The command's words and its required arguments, with ``given`` (by dest) in place of their fillers;
    options before positionals, so a trailing ``-- CMD ...`` takes none of them."""
    options, positionals = [], []
    for action in required(parser):
        values = given.pop(action.dest, None) or filler(action, scene)
        (options if action.option_strings else positionals).extend(values)
    for values in given.values():
        (options if values[0].startswith("-") else positionals).extend(values)
    return [*words, *options, *positionals]


@dataclass(frozen=True)
class Mistake:
    argv: tuple[str, ...]
    env: tuple[tuple[str, str | None], ...] = ()
    names: str = ""  # what the answer must name (the bad path, name or variable)

    def shown(self) -> str:
        env = " ".join(f"{k}={v or ''}" for k, v in self.env if v is not None)
        return f"{env + ' ' if env else ''}fastci {' '.join(self.argv)}"


def mistakes(scene: Scene) -> tuple[list[Mistake], set[tuple[str, ...]]]:
    """Every mistake to feed, and the commands none of them reaches (which must be none)."""
    fed: list[Mistake] = [Mistake((), names="COMMAND"), Mistake((TYPO,), names=TYPO)]
    uncovered = set()
    for words, parser in commands(build_parser()):
        if is_group(parser):
            fed.append(Mistake(words, names="required"))
            continue
        before = len(fed)
        for action in parser._actions:
            target = action.option_strings[:1]
            if isinstance(action.type, PathArgument):
                for bad in scene.bad_paths(action.type.kind):
                    fed.append(
                        Mistake(tuple(argv_with(words, parser, scene, **{action.dest: [*target, bad]})), names=bad)
                    )
            elif isinstance(action.type, NameArgument) or (action.choices and target):
                fed.append(
                    Mistake(tuple(argv_with(words, parser, scene, **{action.dest: [*target, TYPO]})), names=TYPO)
                )
        use = parser.get_default("data_dir_use") or "write"
        base = argv_with(words, parser, scene)
        if use not in ("none", "kafka"):
            bad_dirs = [scene.file, scene.file / "x", scene.data / "log", scene.data / "log" / "results" / "x"]
            if use != "create":
                bad_dirs.append(scene.missing)
            fed += [Mistake(("--data-dir", str(bad), *base), names=str(bad)) for bad in bad_dirs]
            fed.append(Mistake(tuple(base), env=(("FASTCI_DATA_DIR", ""),), names="FASTCI_DATA_DIR"))
        kafka = use == "kafka" or any("--kafka" in a.option_strings for a in parser._actions)
        if kafka:
            argv = base if use == "kafka" else [*base, "--kafka"]
            fed.append(Mistake(tuple(argv), env=(("FASTCI_KAFKA_BOOTSTRAP", ""),), names="FASTCI_KAFKA_BOOTSTRAP"))
            fed.append(
                Mistake(tuple(argv), env=(("FASTCI_KAFKA_PARTITIONS", "four"),), names="FASTCI_KAFKA_PARTITIONS")
            )
        if len(fed) == before:
            uncovered.add(words)
    return fed, uncovered


def answer(mistake: Mistake, capsys, monkeypatch) -> tuple[int, str, str]:
    """Feed one mistake to ``fastci`` in this process: its exit code, stderr and stdout."""
    with monkeypatch.context() as env:
        for name in ("FASTCI_DATA_DIR", "FASTCI_KAFKA_BOOTSTRAP", "FASTCI_KAFKA_PARTITIONS"):
            env.delenv(name, raising=False)
        for name, value in mistake.env:
            env.setenv(name, value)
        try:
            code = main(list(mistake.argv))
        except SystemExit as exit:  # argparse's usage errors
            code = exit.code
    captured = capsys.readouterr()
    return code, captured.err, captured.out


@pytest.fixture
def scene(tmp_path, monkeypatch) -> Scene:
    monkeypatch.chdir(tmp_path)  # a command that got past its mistake would write here, not in the checkout
    return Scene(tmp_path)


def test_every_command_answers_every_mistake_in_one_line(scene, capsys, monkeypatch):
    fed, uncovered = mistakes(scene)
    assert not uncovered, f"commands no mistake reaches (give them a path, a name or a data dir use): {uncovered}"
    wrong = []
    for mistake in fed:
        code, err, out = answer(mistake, capsys, monkeypatch)
        lines = err.strip().splitlines()
        if code in (0, None) or len(lines) != 1 or "Traceback" in err or mistake.names not in err or out:
            wrong.append(f"{mistake.shown()}\n  exit {code}, stderr {err!r}, stdout {out[:200]!r}")
    assert not wrong, f"{len(wrong)} of {len(fed)} mistakes not answered in one line:\n" + "\n".join(wrong)
    assert len(fed) > 150  # every command, fed several mistakes each


def test_no_mistake_leaves_a_folder_behind(scene, capsys, monkeypatch):
    """A refused data dir is not made: a typo must not start a history."""
    for argv in (["--data-dir", "typo-dd", "run"], ["--data-dir", "typo-dd", "publish", str(scene.file)]):
        code, err, _ = answer(Mistake(tuple(argv)), capsys, monkeypatch)
        assert code == 2 and "--data-dir typo-dd: no such folder" in err and "--create" in err
    assert not (scene.root / "typo-dd").exists()
    code, err, _ = answer(Mistake(("--data-dir", str(scene.data / "log"), "views", "refresh")), capsys, monkeypatch)
    assert code == 2 and "inside the log of the data dir data; give data itself" in err  # relative to the cwd
    assert not (scene.data / "log" / "views.duckdb").exists() and not (scene.data / "log" / "log").exists()


def test_create_makes_the_data_dir_and_the_default_is_made_unasked(scene, capsys, monkeypatch):
    events = scene.root / "one.jsonl"
    events.write_bytes(encode(result()) + b"\n")
    publish = ("publish", "--topic", "results", str(events))
    code, err, _ = answer(Mistake(("--data-dir", "fresh", "--create", *publish)), capsys, monkeypatch)
    assert code == 0 and (scene.root / "fresh" / "log" / "results").is_dir(), err
    code, err, _ = answer(Mistake(publish), capsys, monkeypatch)
    assert code == 0 and (scene.root / ".fastci" / "log" / "results").is_dir(), err


def test_an_unknown_topic_is_a_usage_error_not_dead_letters(scene, capsys, monkeypatch):
    code, err, _ = answer(
        Mistake(("--data-dir", str(scene.data), "publish", "--topic", "result", str(scene.file))), capsys, monkeypatch
    )
    assert code == 2 and "unknown topic 'result' (did you mean 'results'?" in err
    assert not (scene.data / "log" / "dead-letters").exists()


def test_a_views_file_that_is_not_duckdb_is_one_line(scene, capsys, monkeypatch):
    for argv in (
        ("sql", "--views", str(scene.file), "SELECT 1"),
        ("report", "nightly", "--views", str(scene.file)),
        ("--data-dir", str(scene.data), "views", "refresh", "--views", str(scene.file)),
    ):
        code, err, _ = answer(Mistake(argv), capsys, monkeypatch)
        assert code == 2 and err.count("\n") == 1 and "not a valid DuckDB database file" in err, (argv, err)


def test_the_real_command_answers_in_one_line(scene):
    """The installed entry point, in a process of its own: what a user's shell shows."""
    run = subprocess.run(
        [sys.executable, "-m", "fastci.cli", "publish", "--topic", "results", "results.jsonl"],
        capture_output=True,
        text=True,
        cwd=scene.root,
    )
    assert run.returncode == 2 and run.stdout == ""
    assert (
        run.stderr
        == "fastci publish: error: argument file: results.jsonl: no such file (see 'fastci publish --help')\n"
    )


@pytest.fixture
def project(tmp_path) -> Path:
    """A git repository with one test, for the pytest flags."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "test_one.py").write_text("def test_one():\n    pass\n")
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "one"]):
        subprocess.run(["git", *args], cwd=root, check=True)
    return root


PYTEST_FLAGS = ("--fastci-select", "--fastci-results", "--fastci-evidence")


def test_the_pytest_flags_answer_a_bad_setting_in_one_line(project, tmp_path):
    data = tmp_path / "data"
    publish_embedded(data, [result()])
    (tmp_path / "notes.txt").write_text("a file\n")
    cases = [
        *((flag, {"FASTCI_DATA_DIR": str(tmp_path / "notes.txt")}, "a file, not a folder") for flag in PYTEST_FLAGS),
        *((flag, {"FASTCI_DATA_DIR": str(data / "log")}, "inside the log of the data dir") for flag in PYTEST_FLAGS),
        (
            "--fastci-results",
            {"FASTCI_TARGET": "kafka", "FASTCI_KAFKA_BOOTSTRAP": ""},
            "FASTCI_KAFKA_BOOTSTRAP is set but empty",
        ),
    ]
    base = {k: v for k, v in os.environ.items() if not k.startswith("FASTCI_")}
    for flag, env, says in cases:
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", flag],
            capture_output=True,
            text=True,
            cwd=project,
            env={**base, **env},
        )
        output = run.stdout + run.stderr
        errors = [line for line in output.splitlines() if line.strip()]
        assert run.returncode == pytest.ExitCode.USAGE_ERROR, (flag, env, output)
        assert errors == [f"ERROR: {flag}: {errors[0].split(': ', 2)[2]}"] and says in errors[0], (flag, env, output)
        assert "INTERNALERROR" not in output and "Traceback" not in output
    assert not (data / "log" / "log").exists()  # nothing was written inside the log
