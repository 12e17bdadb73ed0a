"""nox sessions and tox environments resolved to what they run: whether a CI command that runs them
runs tests.

A CI job whose command is ``nox -s lint`` or ``tox -e docs`` is not a test job, though ``nox`` and
``tox`` are how most projects also run their tests. So the sessions a command names are looked up
in the repository's ``noxfile.py`` (each ``@nox.session`` function, read from its source without
running it) or ``tox.ini`` (each environment's ``commands``): a session runs tests when one of its
commands is a test command. A command whose sessions cannot be resolved (a name not found, an
expression fastci cannot evaluate, a session built in a loop) counts as running tests: safe.
"""

from __future__ import annotations

import ast
import configparser
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

TEST_RUNNERS = re.compile(r"\b(pytest|py\.test|unittest|hatch\s+test)\b")
_VARIABLE = re.compile(r"^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")  # a GitHub expression, kept one word for the split
_MATRIX = re.compile(r"^\$\{\{\s*matrix\.([A-Za-z0-9_-]+)\s*\}\}$")
_NOX_NAMES = ("-s", "-e", "--session", "--sessions")
_NOX_TAGS = ("-t", "--tags")
_TOX_NAMES = ("-e", "--env")

Read = Callable[[str], "bytes | None"]  # a file of the repository at the commit, or None


@dataclass(frozen=True)
class Session:
    runs_tests: bool
    tags: tuple[str, ...] = ()


@dataclass
class Sessions:
    """The repository's nox sessions and tox environments, read on first use through ``read``."""

    read: Read
    _nox: dict[str, Session] | None = None
    _nox_default: tuple[str, ...] | None = None
    _tox: dict[str, Session] | None = None
    _tox_default: tuple[str, ...] = field(default=())
    _read: set[str] = field(default_factory=set)

    def runs_tests(self, command: str, variables: dict[str, Any], matrix: dict[str, Any]) -> bool:
        """Whether a shell line that invokes nox or tox runs a session that runs tests (or one that
        cannot be resolved). ``variables``: the step's and job's env; ``matrix``: the job's matrix."""
        command = _EXPRESSION.sub(lambda found: "${{" + found.group(1).replace(" ", "") + "}}", command)
        try:
            words = shlex.split(command, comments=True)
        except ValueError:
            return True
        for tool in ("nox", "tox"):
            if tool in words and _invoked(words[: words.index(tool)]):
                args = words[words.index(tool) + 1 :]
                if self._tool_runs_tests(tool, args, variables, matrix):
                    return True
        return False

    def _tool_runs_tests(self, tool: str, args: list[str], variables: dict[str, Any], matrix: dict[str, Any]) -> bool:
        names, tags, unknown = _named(args, _NOX_NAMES if tool == "nox" else _TOX_NAMES, _NOX_TAGS)
        if unknown:
            return True
        resolved: list[str] = []
        for name in names:
            values = _values(name, variables, matrix)
            if values is None:
                return True
            resolved += [v for value in values for v in str(value).split(",") if v]
        sessions, default = self._nox_sessions() if tool == "nox" else self._tox_envs()
        if sessions is None:
            return True
        if tags:
            chosen = [s for s in sessions.values() if set(s.tags) & set(tags)]
            return not chosen or any(s.runs_tests for s in chosen)
        if not resolved:
            resolved = list(default or sessions)
        for name in resolved:
            session = sessions.get(name) if tool == "nox" else _tox_env(sessions, name)
            if session is None or session.runs_tests:
                return True
        return False

    def _nox_sessions(self) -> tuple[dict[str, Session] | None, tuple[str, ...] | None]:
        if "noxfile.py" not in self._read:
            self._read.add("noxfile.py")
            source = self.read("noxfile.py")
            if source is not None:
                try:
                    self._nox, self._nox_default = nox_sessions(source.decode("utf-8"))
                except (SyntaxError, UnicodeDecodeError, ValueError):
                    self._nox = None
        return self._nox, self._nox_default

    def _tox_envs(self) -> tuple[dict[str, Session] | None, tuple[str, ...]]:
        if "tox.ini" not in self._read:
            self._read.add("tox.ini")
            text = self.read("tox.ini")
            if text is not None:
                try:
                    self._tox, self._tox_default = tox_envs(text.decode("utf-8"))
                except (configparser.Error, UnicodeDecodeError):
                    self._tox = None
        return self._tox, self._tox_default


_LAUNCHERS = {"uvx", "pipx", "run", "python", "python3", "-m", "uv", "poetry", "pdm", "hatch", "exec", "env", "time"}


def _invoked(before: list[str]) -> bool:
    """Whether the words before ``nox``/``tox`` launch it (``uvx nox``, ``python -m tox``), rather
    than name it (``pip install tox``)."""
    return all(word in _LAUNCHERS or "=" in word or word.startswith("--") for word in before)


def _named(
    args: list[str], name_flags: tuple[str, ...], tag_flags: tuple[str, ...]
) -> tuple[list[str], list[str], bool]:
    """The session names and tags a command line gives, and whether it selects in a way not read
    here (a keyword expression, a label)."""
    names: list[str] = []
    tags: list[str] = []
    into: list[str] | None = None
    for arg in args:
        if arg in ("&&", "||", ";", "|"):
            break
        if arg in name_flags:
            into = names
        elif arg in tag_flags:
            into = tags
        elif arg in ("-k", "--keywords", "-m", "--labels", "-f", "--noxfile", "-c", "--conf"):
            return names, tags, True
        elif arg == "--":
            break
        elif arg.startswith("-"):
            into = None
        elif into is not None:
            into.append(arg)
    return names, tags, False


def _values(word: str, variables: dict[str, Any], matrix: dict[str, Any], depth: int = 0) -> list[Any] | None:
    """What a word of a command stands for: itself, an env variable's value, a matrix axis's values;
    None when it cannot be told."""
    if "$" not in word:
        return [word]
    if depth > 2:
        return None
    if found := _MATRIX.match(word):
        values = matrix.get(found.group(1))
        return list(values) if isinstance(values, list) and all(isinstance(v, str) for v in values) else None
    if found := _VARIABLE.match(word):
        value = variables.get(found.group(1))
        return None if value is None else _values(str(value), variables, matrix, depth + 1)
    return None


def nox_sessions(source: str) -> tuple[dict[str, Session], tuple[str, ...] | None]:
    """Each ``@nox.session`` of a noxfile by name, and the sessions ``nox.options.sessions`` runs by
    default (None: all). A session runs tests when one of its ``session.run`` calls is a test command."""
    tree = ast.parse(source)
    sessions: dict[str, Session] = {}
    default: tuple[str, ...] | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(ast.unparse(t) == "nox.options.sessions" for t in node.targets):
            value = ast.literal_eval(node.value)
            default = tuple(value) if isinstance(value, list | tuple) else None
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if ast.unparse(target) not in ("nox.session", "session"):
                continue
            keywords = {k.arg: k.value for k in decorator.keywords} if isinstance(decorator, ast.Call) else {}
            name = keywords["name"].value if isinstance(keywords.get("name"), ast.Constant) else node.name
            tags = ast.literal_eval(keywords["tags"]) if "tags" in keywords else ()
            sessions[str(name)] = Session(_runs_a_test(node), tuple(tags))
    return sessions, default


def _runs_a_test(function: ast.AST) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run":
            words = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if len(words) < len(node.args) and not words:
                return True  # a command built at run time: cannot tell
            if TEST_RUNNERS.search(" ".join(words)):
                return True
    return False


def tox_envs(text: str) -> tuple[dict[str, Session], tuple[str, ...]]:
    """Each ``[testenv:NAME]`` of a tox.ini (``[testenv]`` under the name ``""``: what the others
    inherit) with whether its commands run tests, and the ``envlist``."""
    parser = configparser.RawConfigParser(strict=False)
    parser.read_string(text)
    base = parser.get("testenv", "commands", fallback="")
    envs = {"": Session(bool(TEST_RUNNERS.search(base)))}
    for section in parser.sections():
        if section.startswith("testenv:"):
            commands = parser.get(section, "commands", fallback=base)
            envs[section.removeprefix("testenv:")] = Session(bool(TEST_RUNNERS.search(commands)))
    envlist = parser.get("tox", "envlist", fallback="")
    return envs, tuple(e.strip() for e in re.split(r"[,\n]", envlist) if e.strip())


def _tox_env(envs: dict[str, Session], name: str) -> Session | None:
    """An environment: its own section, else the base ``[testenv]`` (``py312`` and the like)."""
    return envs.get(name) or envs.get("")


def job_commands(job: dict[Any, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
    """Each shell line a CI job runs, with the env it runs in (a GitHub job's steps, a GitLab job's
    scripts)."""
    job_env = job.get("env") or job.get("variables") or {}
    for step in job.get("steps") or ():
        if isinstance(step, dict) and "run" in step:
            env = {**(job_env if isinstance(job_env, dict) else {}), **(step.get("env") or {})}
            for line in str(step["run"]).splitlines():
                yield line, env
    for key in ("before_script", "script", "after_script"):
        lines = job.get(key) or ()
        for line in [lines] if isinstance(lines, str) else lines:
            yield str(line), job_env if isinstance(job_env, dict) else {}
