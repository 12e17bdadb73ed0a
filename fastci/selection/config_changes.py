"""Config and CI files read by section, job and target: which part of a change can alter how the
tests run, and which cannot.

A changed ``setup.cfg``, ``tox.ini``, ``pyproject.toml``, ``Makefile``, GitHub workflow or
``.gitlab-ci.yml`` is compared part by part with its previous version. Parts that cannot change a
test's outcome (a linter's settings, a docs or release job, a version bump, the project's
description) change nothing; parts that can (pytest's own settings, the test job's command and
environment, dependencies, the build) run the whole suite, and the reason names the part. A part
fastci does not know, or a file that does not parse, runs the suite: safe by default.

Dependency pins (requirements files, ``pyproject.toml``'s dependency tables, lock files) are compared
pin by pin (``fastci.selection.dependencies``): a change that only moves pins is ``dependencies``,
naming the distributions, whose importers then run.

``judge(path, old, new)`` returns ``(effect, detail, distributions)`` with effect ``none``,
``dependencies`` or ``suite``, or None for a file that is not one of these (the path rules of
``fastci.selection.files`` then apply).
"""

from __future__ import annotations

import configparser
import fnmatch
import functools
import re
import textwrap
import tomllib
from collections.abc import Callable
from typing import Any

from fastci.selection import dependencies
from fastci.selection.dependencies import Unbounded
from fastci.selection.sessions import Read, Sessions, job_commands

# What a test run reads from these files: pytest's settings, dependencies, the build, the test env.
_INI_HARMLESS = (
    "flake8",
    "pycodestyle",
    "pydocstyle",
    "pylint*",
    "isort",
    "tool:isort",
    "mypy",
    "mypy-*",
    "coverage:*",
    "bdist_wheel",
    "metadata",
    "sdist",
    "check-manifest",
    "bumpversion*",
    "codespell",
    "doc8",
    "build_sphinx",
    "testenv:docs",
    "testenv:lint*",
    "testenv:flake8",
    "testenv:mypy",
    "testenv:type*",
    "testenv:format*",
)
_TOML_HARMLESS = (
    "tool.ruff*",
    "tool.black",
    "tool.isort",
    "tool.mypy*",
    "tool.pyright",
    "tool.pylint*",
    "tool.coverage*",
    "tool.codespell",
    "tool.towncrier*",
    "tool.bumpversion*",
    "tool.check-manifest",
    "tool.fastci",  # read by the job itself (fastci.selection.settings)
    "tool.interrogate",
    "tool.pydocstyle",
    "project.version",
    "project.description",
    "project.readme",
    "project.urls",
    "project.authors",
    "project.maintainers",
    "project.keywords",
    "project.classifiers",
    "project.license",
    "project.license-files",
)
_TEST_COMMAND = re.compile(r"\b(pytest|py\.test|tox|nox|unittest|make\s+(test|check)|hatch\s+test|\.ci/run)\b")
_GITLAB_RESERVED = ("stages", "variables", "default", "include", "workflow", "image", "services", "cache")
_GITLAB_HARMLESS = ("stages", "workflow")
_MAKE_TARGET = re.compile(r"^([A-Za-z0-9_./%-][A-Za-z0-9_./% -]*)\s*:(?![=:])")
_MAKE_VARIABLE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*(?:[:?+!]?=)")

Verdict = tuple[str, str, tuple[str, ...]]
_LOCKS = ("poetry.lock", "uv.lock", "pdm.lock", "Pipfile.lock")
_REQUIREMENTS = ("requirements*.txt", "requirements/*.txt", "constraints*.txt")
_DEPENDENCY_TABLES = ("project.dependencies", "project.optional-dependencies")


def judge(path: str, old: bytes | None, new: bytes | None, read: Read | None = None) -> Verdict | None:
    """What a change to ``path`` (``old`` -> ``new``; None: absent) can do, or None when the file
    is not a config, CI or dependency file read by parts. ``read``: the repository's files at the
    commit, to resolve the nox sessions and tox environments a CI job runs (without it, a job that
    runs nox or tox is a test job)."""
    name = path.rsplit("/", 1)[-1]
    handler: Callable[[str, str, str], Verdict] | None = None
    if name in _LOCKS or any(fnmatch.fnmatchcase(path, p) for p in _REQUIREMENTS):
        handler = _pins
    elif name in ("setup.cfg", "tox.ini"):
        handler = _ini
    elif name == "pyproject.toml":
        handler = _pyproject
    elif name == "Makefile" or name.endswith(".mk"):
        handler = _makefile
    elif fnmatch.fnmatchcase(path, ".github/workflows/*.y*ml"):
        handler = _github_workflow
    elif name == ".gitlab-ci.yml":
        handler = _gitlab
    if handler is None:
        return None
    if handler in _CI_DEFINITIONS:
        handler = functools.partial(handler, sessions=None if read is None else Sessions(read))
    if (old is None or new is None) and not isinstance(handler, functools.partial):
        return "suite", f"{path} {'added' if old is None else 'deleted'}", ()
    try:
        # A CI definition added or deleted is judged job by job against an empty one, as a change
        # is: a publishing workflow added runs no test, a test job added (or removed) runs them all.
        verdict = handler(path, (old or b"{}").decode("utf-8"), (new or b"{}").decode("utf-8"))
        if old is None or new is None:
            detail = verdict[1].removeprefix(f"{path}: ")
            verdict = (verdict[0], f"{path} {'added' if old is None else 'deleted'}: {detail}", verdict[2])
        return verdict
    except Unbounded as error:
        return "suite", f"{path}: not only pins changed ({error})", ()
    except (ValueError, TypeError, KeyError, AttributeError, configparser.Error, tomllib.TOMLDecodeError) as error:
        return "suite", f"{path} changed and could not be read by section ({type(error).__name__})", ()


def _verdict(path: str, changed: list[str], harmful: list[str], what: str = "") -> Verdict:
    if not changed:
        return "none", f"{path}: nothing a test reads changed (formatting, comments)", ()
    if harmful:
        more = f" and {len(harmful) - 3} more" if len(harmful) > 3 else ""
        return "suite", f"{path}: {what}{', '.join(harmful[:3])}{more} changed", ()
    return "none", f"{path}: only {', '.join(changed[:3])} changed (nothing a test run reads)", ()


def _pinned(path: str, distributions: tuple[str, ...]) -> Verdict:
    if not distributions:
        return "none", f"{path}: no pin changed", ()
    more = f" and {len(distributions) - 5} more" if len(distributions) > 5 else ""
    return "dependencies", f"{path}: pins of {', '.join(distributions[:5])}{more} changed", distributions


def _pins(path: str, old: str, new: str) -> Verdict:
    name = path.rsplit("/", 1)[-1]
    if name in _LOCKS:
        return _pinned(path, dependencies.changed(dependencies.lock_pins(name, old), dependencies.lock_pins(name, new)))
    return _pinned(path, dependencies.changed(dependencies.requirements(old), dependencies.requirements(new)))


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


# ----- INI: setup.cfg, tox.ini


def _ini(path: str, old: str, new: str) -> Verdict:
    before, after = _read_ini(old), _read_ini(new)
    changed = sorted(s for s in before.keys() | after.keys() if before.get(s) != after.get(s))
    harmful = [s for s in changed if not _matches(s, _INI_HARMLESS)]
    return _verdict(path, [f"[{s}]" for s in changed], [f"[{s}]" for s in harmful], "section(s) ")


def _read_ini(text: str) -> dict[str, dict[str, str]]:
    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    parser.read_string(text)
    return {section: dict(parser.items(section)) for section in parser.sections()}


# ----- pyproject.toml


def _pyproject(path: str, old: str, new: str) -> Verdict:
    documents = tomllib.loads(old), tomllib.loads(new)
    before, after = _toml_parts(documents[0]), _toml_parts(documents[1])
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    harmful = [k for k in changed if not _matches(k, _TOML_HARMLESS)]
    if harmful and all(k in _DEPENDENCY_TABLES for k in harmful):  # only pins moved: their importers run
        pins = [dependencies.pyproject_pins(d) for d in documents]
        return _pinned(path, dependencies.changed(*pins))
    return _verdict(path, changed, harmful, "table(s) ")


def _toml_parts(document: dict[str, Any]) -> dict[str, Any]:
    """``project.dependencies``, ``tool.ruff``, ``build-system``...: top level, and one level in
    under ``project`` and ``tool`` (where one table holds unrelated settings)."""
    parts: dict[str, Any] = {}
    for key, value in document.items():
        if key in ("project", "tool") and isinstance(value, dict):
            parts.update({f"{key}.{inner}": part for inner, part in value.items()})
        else:
            parts[key] = value
    return parts


# ----- Makefile


def _makefile(path: str, old: str, new: str) -> Verdict:
    before, after = _make_parts(old), _make_parts(new)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    targets = {**before, **after}
    testing = _testing_targets({k: v for k, v in targets.items() if k.startswith("target ")})
    harmful = [k for k in changed if not k.startswith("target ") or k in testing]
    return _verdict(path, changed, harmful)


def _make_parts(text: str) -> dict[str, str]:
    """``target NAME`` -> its prerequisites and recipe; ``variable NAME`` -> its assignments; the rest
    (conditionals, includes) as ``other``."""
    parts: dict[str, list[str]] = {}
    current = "other"
    for line in text.replace("\\\n", " ").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.startswith("\t") and current.startswith("target "):
            parts[current].append(line.strip())
            continue
        variable = _MAKE_VARIABLE.match(line)
        target = _MAKE_TARGET.match(line)
        if variable and not target:
            current = f"variable {variable[1]}"
            parts.setdefault(current, []).append(line.strip())
            current = "other"
        elif target:
            for name in target[1].split():
                parts.setdefault(f"target {name}", []).append(line.strip())
            current = f"target {target[1].split()[0]}"
        else:
            parts.setdefault("other", []).append(line.strip())
            current = "other"
    return {name: "\n".join(lines) for name, lines in parts.items()}


def _testing_targets(targets: dict[str, str]) -> set[str]:
    """Targets that run tests (by name or command), and every target they depend on."""
    testing = {
        name for name, body in targets.items() if re.search(r"test|check", name[7:]) or _TEST_COMMAND.search(body)
    }
    pending = list(testing)
    while pending:
        body = targets.get(pending.pop(), "")
        first = body.splitlines()[0] if body else ""
        for dependency in first.partition(":")[2].split():
            key = f"target {dependency}"
            if key in targets and key not in testing:
                testing.add(key)
                pending.append(key)
    return testing


# ----- CI definitions


def _github_workflow(path: str, old: str, new: str, sessions: Sessions | None = None) -> Verdict:
    before, after = _yaml(old), _yaml(new)
    changed: list[str] = []
    harmful: list[str] = []
    jobs_before, jobs_after = before.get("jobs") or {}, after.get("jobs") or {}
    # The workflow's env and defaults reach its jobs only: they matter where one of them runs tests.
    has_tests = any(_runs_tests(job, sessions) for job in (*jobs_before.values(), *jobs_after.values()))
    for key in sorted({*before, *after} - {"jobs"}, key=str):
        if before.get(key) != after.get(key):
            label = "on" if key is True else str(key)  # YAML 1.1 reads the key 'on' as True
            changed.append(label)
            if label in ("env", "defaults") and has_tests:
                harmful.append(label)
    for job in sorted(jobs_before.keys() | jobs_after.keys()):
        old_job, new_job = jobs_before.get(job), jobs_after.get(job)
        if old_job != new_job:
            changed.append(f"job {job}")
            runs = _runs_tests(old_job, sessions) or _runs_tests(new_job, sessions)
            if runs and (what := _test_job_change(old_job, new_job)):
                harmful.append(f"the test job {job} ({what})")
    return _verdict(path, changed, harmful)


_INSTALLS = re.compile(
    r"\b(pip|pip3|conda|mamba|poetry|uv|pdm|apt-get|apt|brew|npm)\b.*\b(install|sync|add)\b|\bmake\b"
)


def _test_job_change(old: Any, new: Any) -> str | None:
    """What of a job that runs tests changed that can change what they do (its environment: runner,
    matrix, env, container, services; a step that runs tests or installs something; a setup
    action's inputs), or None when nothing did: an action moved to another version, a lint step."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return "its definition"
    keys = sorted(k for k in old.keys() | new.keys() if k != "steps" and old.get(k) != new.get(k))
    if keys:
        return ", ".join(map(str, keys))
    steps_before, steps_after = old.get("steps") or [], new.get("steps") or []
    if len(steps_before) != len(steps_after):
        added = [s for s in steps_after if s not in steps_before] + [s for s in steps_before if s not in steps_after]
        moved = [s for s in added if _step_matters(s)]
    else:
        moved = [b for a, b in zip(steps_before, steps_after) if a != b and _step_change_matters(a, b)]
    return ", ".join(f"step {_step_name(s)}" for s in moved) or None


def _step_name(step: Any) -> str:
    if not isinstance(step, dict):
        return repr(str(step)[:40])
    name = step.get("name") or step.get("uses") or str(step.get("run", "")).strip().splitlines()[:1]
    return repr(name if isinstance(name, str) else (name[0] if name else "?"))


def _step_matters(step: Any) -> bool:
    if not isinstance(step, dict):
        return True
    command = str(step.get("run", ""))
    return bool(_TEST_COMMAND.search(command) or _INSTALLS.search(command)) or str(step.get("uses", "")).startswith(
        ("actions/setup-", "conda-incubator/", "astral-sh/setup-")
    )


def _step_change_matters(old: Any, new: Any) -> bool:
    if not isinstance(old, dict) or not isinstance(new, dict):
        return True
    if _as_run(old) == _as_run(new):
        return False  # the same commands, laid out otherwise (`run: |` keeps a newline `run: cmd` has not)
    if {k: v for k, v in old.items() if k != "uses"} == {k: v for k, v in new.items() if k != "uses"}:
        same_action = str(old.get("uses", "")).split("@")[0] == str(new.get("uses", "")).split("@")[0]
        if same_action:
            return False  # the same action at another version: how the job is set up, not what it tests
    return _step_matters(old) or _step_matters(new)


def _as_run(step: dict[Any, Any]) -> dict[Any, Any]:
    """A step with its ``run`` script as its non-blank lines, the common indentation and trailing blanks
    removed (what is left of a line's indentation can matter: a here-document of Python)."""
    if "run" not in step:
        return step
    lines = [line.rstrip() for line in textwrap.dedent(str(step["run"])).splitlines()]
    return {**step, "run": [line for line in lines if line]}


def _gitlab(path: str, old: str, new: str, sessions: Sessions | None = None) -> Verdict:
    before, after = _yaml(old), _yaml(new)
    changed: list[str] = []
    harmful: list[str] = []
    for key in sorted(before.keys() | after.keys(), key=str):
        if before.get(key) == after.get(key):
            continue
        changed.append(str(key))
        if key in _GITLAB_RESERVED:
            if key not in _GITLAB_HARMLESS:
                harmful.append(str(key))
        elif (
            _runs_tests(before.get(key), sessions) or _runs_tests(after.get(key), sessions) or str(key).startswith(".")
        ):
            harmful.append(f"the test job {key}")  # a hidden job (.name) is a template others extend
    return _verdict(path, changed, harmful)


def _runs_tests(job: Any, sessions: Sessions | None = None) -> bool:
    """A job whose commands run tests, or that calls another workflow (which may). With
    ``sessions``, a nox or tox command counts only when a session it runs runs tests."""
    if not isinstance(job, dict):
        return False
    if "uses" in job:
        return True
    if not _TEST_COMMAND.search(str(job)):
        return False
    if sessions is None:
        return True
    matrix = (job.get("strategy") or {}).get("matrix") or {}
    for line, env in job_commands(job):
        found = _TEST_COMMAND.search(line)
        if found is None:
            continue
        if found.group(1) not in ("nox", "tox") or sessions.runs_tests(line, env, matrix):
            return True
    # Outside its commands, only an action can run tests (a job's name or a matrix value cannot).
    steps = job.get("steps") or ()
    return any(isinstance(s, dict) and "run" not in s and _TEST_COMMAND.search(str(s)) for s in steps)


_CI_DEFINITIONS = (_github_workflow, _gitlab)


def _yaml(text: str) -> dict[Any, Any]:
    import yaml

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:  # judged as a file that does not parse: the whole suite
        raise ValueError(f"not YAML: {error}") from None
    if not isinstance(document, dict):
        raise ValueError("not a mapping")
    return document
