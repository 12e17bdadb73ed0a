"""The CI examples in ``examples/`` run as written: their steps, as shell scripts, against a real git
repository (an origin, a CI checkout of a pull request), on the embedded runtime and on the broker.

Steps that install (``id: install``, ``id: install-fastci``, GitLab's ``before_script``) and ``uses:``
actions are the CI service's business and are skipped: this environment already has the project and
fastci (``tests/test_wheel.py`` runs the fastci install too, into a fresh venv). The two settings are
given as GitHub gives a repository variable: an unset one reads as ''."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from ci_repo import clean_env, collect_evidence, edit, git, make_repo
from kafka_helpers import start_worker, stop_worker, wait_until_consumed

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
INSTALLS = ("install", "install-fastci")  # the project's install step and fastci's


def evaluate(expression: str, variables: dict[str, str]) -> str:
    """A GitHub expression of the forms the examples use: ``vars.NAME``, ``'text'``, joined by ``&&`` and
    ``||`` (``a && 'x' || 'y'``); an unset variable is ''. Any other form fails the test: teach it here."""

    def term(text: str) -> str:
        text = text.strip()
        if match := re.fullmatch(r"vars\.(\w+)", text):
            return variables.get(match.group(1), "")
        if match := re.fullmatch(r"'([^']*)'", text):
            return match.group(1)
        raise AssertionError(f"expression {expression!r}: {text!r} is not vars.NAME or a quoted text")

    value = ""
    for alternative in expression.split("||"):
        for conjunct in alternative.split("&&"):
            value = term(conjunct)
            if not value:
                break
        if value:
            return value
    return value


def github_steps(
    name: str, variables: dict[str, str], skipped: tuple[str, ...] = INSTALLS
) -> list[tuple[str, str, dict[str, str]]]:
    """(step name, script, env) of the workflow's runnable steps, less those whose id is ``skipped``."""
    workflow = yaml.safe_load((EXAMPLES / "github-actions" / name).read_text())
    (job,) = workflow["jobs"].values()
    base = {**workflow.get("env", {}), **job.get("env", {})}
    steps = []
    for step in job["steps"]:
        if "run" not in step or step.get("id") in skipped:
            continue
        env = {
            k: EXPRESSION.sub(lambda m: evaluate(m.group(1), variables), str(v))
            for k, v in {**base, **step.get("env", {})}.items()
        }
        steps.append((step.get("name", ""), step["run"], env))
    return steps


def gitlab_job(name: str, variables: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The job's script and its variables: the file's, those its workflow rules set (rules of the form
    ``if: $NAME`` only) and ``variables``, the project's CI/CD variables (they win over the file's)."""
    pipeline = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    job = pipeline[name]
    ruled = {}
    for rule in pipeline.get("workflow", {}).get("rules", []):
        condition = rule.get("if")
        if condition is None or variables.get(re.fullmatch(r"\$(\w+)", condition).group(1)):
            ruled = rule.get("variables", {})
            break
    return "\n".join(job["script"]), {**pipeline.get("variables", {}), **ruled, **job.get("variables", {}), **variables}


def run(script: str, cwd: Path, env: dict[str, str], bin_dir: Path | None = None) -> subprocess.CompletedProcess:
    """``script`` as a CI step: ``python`` (and ``fastci``) from ``bin_dir``, default this environment's."""
    path = f"{bin_dir or Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env={**env, "PATH": path},
        capture_output=True,
        text=True,
        timeout=600,
    )


def workflow(
    name: str,
    checkout: Path,
    env: dict[str, str],
    variables: dict[str, str],
    bin_dir: Path | None = None,
    skipped: tuple[str, ...] = INSTALLS,
) -> str:
    """Run every step of a GitHub workflow; fail on the first that fails; return what they printed."""
    printed = []
    for step, script, step_env in github_steps(name, variables, skipped):
        done = run(script, checkout, {**env, **{k: v for k, v in step_env.items() if k not in env}}, bin_dir)
        printed.append(done.stdout + done.stderr)
        if done.returncode != 0:
            raise StepFailed(step, done.returncode, "".join(printed))
    return "".join(printed)


class StepFailed(AssertionError):
    def __init__(self, step: str, code: int, output: str) -> None:
        super().__init__(f"step {step!r} exited {code}:\n{output[-4000:]}")
        self.code, self.output = code, output


def origin_and_checkout(tmp_path: Path, prepare: Callable[[Path], None] = lambda repo: None) -> tuple[Path, Path, Path]:
    """A developer's repository (``prepare`` may add to it), its origin (bare), and a CI service's clone."""
    developer = make_repo(tmp_path)
    prepare(developer)
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(developer), str(origin))
    git(developer, "remote", "add", "origin", str(origin))
    checkout = tmp_path / "ci"
    git(tmp_path, "clone", "-q", str(origin), str(checkout))
    return developer, origin, checkout


def open_pull_request(developer: Path, checkout: Path, *edits: tuple[str, str, str, str]) -> None:
    git(developer, "checkout", "-q", "-B", "feature")  # created from main, or the branch it is on
    for path, old, new, message in edits:
        edit(developer, path, old, new, message)
    git(developer, "push", "-q", "-f", "origin", "feature")
    git(checkout, "fetch", "-q", "origin", "feature")
    git(checkout, "checkout", "-q", "FETCH_HEAD")  # what a pull-request job checks out


MEAN = ("pkg/stats.py", "return sum(values) / len(values)", "return sum(values) / float(len(values))", "mean")
WHISPER = ("pkg/text.py", 'return word.lower() + "..."', 'return word.lower() + "." * 3', "whisper")
BREAK = ("pkg/stats.py", "/ float(len(values))", "/ float(len(values) + 1)", "break mean")


def exercise(
    tmp_path: Path,
    env: dict[str, str],
    variables: dict[str, str],
    settle=lambda: None,
    bin_dir: Path | None = None,
    skipped: tuple[str, ...] = INSTALLS,
    prepare: Callable[[Path], None] = lambda repo: None,
) -> None:
    """The nightly, then a pull request's presubmit (GitHub's and GitLab's), then one that breaks a test."""
    developer, _, checkout = origin_and_checkout(tmp_path, prepare)
    nightly = workflow("nightly.yml", checkout, env, variables, bin_dir, skipped)
    assert "shadow mode, ran all 7 collected tests" in nightly or "running all 7 collected tests" in nightly, nightly
    settle()
    open_pull_request(developer, checkout, MEAN, WHISPER)
    pull_request = {**env, "GITHUB_BASE_REF": "main"}
    presubmit = workflow("presubmit.yml", checkout, pull_request, variables, bin_dir, skipped)
    assert "3 passed, 4 deselected" in presubmit and "2 commits up to" in presubmit, presubmit
    script, gitlab_env = gitlab_job("presubmit", variables)
    merge_request = run(script, checkout, {**gitlab_env, **env, "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main"}, bin_dir)
    assert merge_request.returncode == 0 and "3 passed, 4 deselected" in merge_request.stdout, merge_request.stderr
    open_pull_request(developer, checkout, BREAK)
    with pytest.raises(StepFailed) as failed:
        workflow("presubmit.yml", checkout, pull_request, variables, bin_dir, skipped)
    assert "2 failed, 1 passed, 4 deselected" in failed.value.output  # the broken mean fails the job


def test_the_examples_run_on_the_embedded_runtime(tmp_path):
    """No service variable: the examples choose the embedded runtime themselves."""
    data = tmp_path / "data"
    exercise(tmp_path, clean_env(data), {})
    assert (data / "log").is_dir()


@pytest.mark.kafka
def test_the_examples_run_against_the_fastci_service(kafka, tmp_path):
    data = tmp_path / "data"
    variables = {"FASTCI_KAFKA_BOOTSTRAP": kafka.bootstrap}  # the one setting
    env = clean_env(data, FASTCI_KAFKA_NAMESPACE=kafka.namespace, FASTCI_KAFKA_PARTITIONS=str(kafka.partitions))
    worker = start_worker(kafka, tmp_path / "worker.log")
    try:
        exercise(tmp_path, env, variables, settle=lambda: wait_until_consumed(kafka, worker, tmp_path / "worker.log"))
    finally:
        stop_worker(worker)
    assert not (data / "log").exists()  # everything went through the service


def test_collect_evidence_helper_is_what_the_nightly_example_does(tmp_path):
    """The CI-loop tests seed evidence as the nightly example does (the default collector, every test,
    results)."""
    steps = github_steps("nightly.yml", {"FASTCI_KAFKA_BOOTSTRAP": "x"})
    (_, script, env), *_ = steps
    assert re.search(r"--fastci-evidence(\s|$)", script) and "--fastci-results" in script
    assert "--fastci-evidence-method" not in script  # the default method is the exact one
    assert env["FASTCI_TRIGGER"] == "nightly"
    repo = make_repo(tmp_path)
    collect_evidence(repo, tmp_path / "data")


def github_workflow(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / "github-actions" / name).read_text())


def test_the_examples_install_fastci_from_one_setting():
    """Every example installs fastci from $FASTCI_PIP_SPEC and nothing else names it; unset, the spec is
    the wheel ``python -m build`` makes of this version, at the path examples/README.md gives."""
    version = tomllib.loads((EXAMPLES.parent / "pyproject.toml").read_text())["project"]["version"]
    default = f"wheels/fastci-{version}-py3-none-any.whl"
    for name in ("nightly.yml", "presubmit.yml"):
        workflow = github_workflow(name)
        (job,) = workflow["jobs"].values()
        (install,) = [step for step in job["steps"] if step.get("id") == "install-fastci"]
        assert install["run"] == 'python -m pip install "$FASTCI_PIP_SPEC"', name
        (spec,) = EXPRESSION.findall(workflow["env"]["FASTCI_PIP_SPEC"])
        assert evaluate(spec, {}) == default, name
        assert evaluate(spec, {"FASTCI_PIP_SPEC": "fastci==9"}) == "fastci==9", name
    pipeline = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    assert pipeline["variables"]["FASTCI_PIP_SPEC"] == default
    assert 'python -m pip install "$FASTCI_PIP_SPEC"' in pipeline["default"]["before_script"]
    for path in EXAMPLES.rglob("*.yml"):
        installs = re.findall(r"pip install[^\n#]*", path.read_text())
        assert installs and not [line for line in installs if re.search(r"\bfastci\b", line)], (path, installs)
    assert default in (EXAMPLES / "README.md").read_text()


def test_without_a_service_the_examples_carry_fastci_from_run_to_run():
    """The embedded runtime's history is .fastci of the workspace: each GitHub workflow restores it before
    its tests and saves it after them, failed or not, when no service is set; GitLab caches it always."""
    for name in ("nightly.yml", "presubmit.yml"):
        workflow = github_workflow(name)
        (target,) = EXPRESSION.findall(workflow["env"]["FASTCI_TARGET"])
        assert evaluate(target, {}) == "embedded" and evaluate(target, {"FASTCI_KAFKA_BOOTSTRAP": "k:9092"}) == "kafka"
        (job,) = workflow["jobs"].values()
        steps = job["steps"]
        actions = [step.get("uses", "").split("@")[0] for step in steps]
        restore, save = steps[actions.index("actions/cache/restore")], steps[actions.index("actions/cache/save")]
        tests = next(i for i, step in enumerate(steps) if "pytest" in step.get("run", ""))
        assert actions.index("actions/cache/restore") < tests < actions.index("actions/cache/save"), name
        assert restore["with"]["path"] == save["with"]["path"] == ".fastci", name
        assert save["with"]["key"] == restore["with"]["key"], name  # a new key every run: caches are immutable
        assert save["with"]["key"].startswith(restore["with"]["restore-keys"]), name  # the next run finds it
        assert restore["if"] == "env.FASTCI_TARGET == 'embedded'", name
        assert save["if"] == "always() && env.FASTCI_TARGET == 'embedded'", name
    cache = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())["default"]["cache"]
    assert cache["paths"] == [".fastci/"] and cache["when"] == "always"
    for service, expected in (({}, "embedded"), ({"FASTCI_KAFKA_BOOTSTRAP": "k:9092"}, "kafka")):
        assert gitlab_job("nightly", service)[1]["FASTCI_TARGET"] == expected
