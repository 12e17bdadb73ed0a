"""The CI examples in ``examples/`` run as written: their steps, as shell scripts, against a real git
repository (an origin, a CI checkout of a pull request), on the embedded runtime and on the broker.

Steps that install (``id: install``, GitLab's ``before_script``) and ``uses:`` actions are the CI
service's business and are skipped: this environment already has the project and fastci."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ci_repo import clean_env, collect_evidence, edit, git, make_repo
from kafka_helpers import start_worker, stop_worker, wait_until_consumed

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXPRESSION = re.compile(r"\$\{\{\s*vars\.(\w+)\s*\}\}")


def github_steps(name: str, variables: dict[str, str]) -> list[tuple[str, str, dict[str, str]]]:
    """(step name, script, env) of the workflow's runnable steps."""
    workflow = yaml.safe_load((EXAMPLES / "github-actions" / name).read_text())
    (job,) = workflow["jobs"].values()
    base = {**workflow.get("env", {}), **job.get("env", {})}
    steps = []
    for step in job["steps"]:
        if "run" not in step or step.get("id") == "install":
            continue
        env = {
            k: EXPRESSION.sub(lambda m: variables[m.group(1)], str(v))
            for k, v in {**base, **step.get("env", {})}.items()
        }
        steps.append((step.get("name", ""), step["run"], env))
    return steps


def gitlab_job(name: str) -> tuple[str, dict[str, str]]:
    pipeline = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    job = pipeline[name]
    return "\n".join(job["script"]), {**pipeline.get("variables", {}), **job.get("variables", {})}


def run(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # `python` is this environment's
    return subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env={**env, "PATH": path},
        capture_output=True,
        text=True,
        timeout=600,
    )


def workflow(name: str, checkout: Path, env: dict[str, str], variables: dict[str, str]) -> str:
    """Run every step of a GitHub workflow; fail on the first that fails; return what they printed."""
    printed = []
    for step, script, step_env in github_steps(name, variables):
        done = run(script, checkout, {**env, **{k: v for k, v in step_env.items() if k not in env}})
        printed.append(done.stdout + done.stderr)
        if done.returncode != 0:
            raise StepFailed(step, done.returncode, "".join(printed))
    return "".join(printed)


class StepFailed(AssertionError):
    def __init__(self, step: str, code: int, output: str) -> None:
        super().__init__(f"step {step!r} exited {code}:\n{output[-4000:]}")
        self.code, self.output = code, output


def origin_and_checkout(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A developer's repository, its origin (bare), and a CI service's clone of the origin."""
    developer = make_repo(tmp_path)
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


def exercise(tmp_path: Path, env: dict[str, str], variables: dict[str, str], settle=lambda: None) -> None:
    developer, _, checkout = origin_and_checkout(tmp_path)
    nightly = workflow("nightly.yml", checkout, env, variables)
    assert "shadow mode, ran all 7 collected tests" in nightly or "running all 7 collected tests" in nightly, nightly
    settle()
    open_pull_request(developer, checkout, MEAN, WHISPER)
    presubmit = workflow("presubmit.yml", checkout, {**env, "GITHUB_BASE_REF": "main"}, variables)
    assert "3 passed, 4 deselected" in presubmit and "2 commits up to" in presubmit, presubmit
    script, gitlab_env = gitlab_job("presubmit")
    merge_request = run(script, checkout, {**gitlab_env, **env, "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main"})
    assert merge_request.returncode == 0 and "3 passed, 4 deselected" in merge_request.stdout, merge_request.stderr
    open_pull_request(developer, checkout, BREAK)
    with pytest.raises(StepFailed) as failed:
        workflow("presubmit.yml", checkout, {**env, "GITHUB_BASE_REF": "main"}, variables)
    assert "2 failed, 1 passed, 4 deselected" in failed.value.output  # the broken mean fails the job


def test_the_examples_run_on_the_embedded_runtime(tmp_path):
    data = tmp_path / "data"
    env = clean_env(data, FASTCI_TARGET="embedded")  # the examples' FASTCI_TARGET=kafka, overridden here
    exercise(tmp_path, env, {"FASTCI_KAFKA_BOOTSTRAP": "127.0.0.1:1"})


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
    """The CI-loop tests seed evidence as the nightly example does (tracing, every test, results)."""
    steps = github_steps("nightly.yml", {"FASTCI_KAFKA_BOOTSTRAP": "x"})
    (_, script, env), *_ = steps
    assert "--fastci-evidence-method tracing" in script and "--fastci-results" in script
    assert env["FASTCI_TRIGGER"] == "nightly"
    repo = make_repo(tmp_path)
    collect_evidence(repo, tmp_path / "data")
