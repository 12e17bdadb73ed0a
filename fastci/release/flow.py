"""Propose, promote and roll back bundles in the release repository: every change a commit on main.

- ``propose ENV BUNDLE``: a branch ``release/<env>/<bundle id>`` from main with one commit that
  writes the environment's files and the review record ``reviews/<env>/<bundle id>.json`` (the gates
  evaluated at proposal): the pull request, as a branch and a review record.
- ``promote ENV``: re-evaluates every gate; if any fails, nothing changes in git and the refusal says
  why, per gate; if all pass, a merge commit (``--no-ff``) of the proposal into main, its message
  carrying the gates as evaluated at promotion.
- ``rollback ENV``: ``git revert -m 1`` of the environment's last promotion merge that is not yet
  reverted: the environment's files (and the review record) return byte for byte to what they were
  before it. Rolling back again reverts the promotion before that one.

The messages end with trailers (``Fastci-Action``, ``-Env``, ``-Bundle``, ``-Proposal``, ``-Reverts``),
which is how fastci reads history back: which bundle staging promoted, which promotions were reverted.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from fastci.inputs import Bundle
from fastci.release import gates as release_gates
from fastci.release.bundle import BundleError, ReleaseBundle, environment_dir, parse_environment, render_environment
from fastci.release.events import GateOutcome
from fastci.release.git import GitError, LoggedCommit, Repo

ENVIRONMENTS = ("dev", "staging", "production")
PREREQUISITE = {"production": "staging"}  # an environment accepts only bundles its prerequisite promoted
POLICY_FILE = "release.toml"
DEFAULT_REVISIONS = ("rev-a", "rev-b")
DEFAULT_MAIN = "main"
BRANCH_PREFIX = "release"

EvidenceSource = Callable[[Bundle], release_gates.Evidence]


class ReleaseError(Exception):
    """A release action that cannot happen as asked; the message says why and what to do."""


@dataclass(frozen=True)
class Policy:
    hardware_revisions: tuple[str, ...] = DEFAULT_REVISIONS
    main_branch: str = DEFAULT_MAIN
    # Whose signed results count for a release: the principals that run qualification (nightly and
    # release runs), not every CI producer (fastci.core.provenance, docs/releases.md).
    qualifying_principals: tuple[str, ...] = release_gates.DEFAULT_QUALIFYING


@dataclass
class Outcome:
    action: str  # propose, promote, refused, rollback
    environment: str
    bundle: ReleaseBundle
    commit: str
    branch: str
    gates: list[GateOutcome] = field(default_factory=list)
    reverts: str | None = None
    previous: ReleaseBundle | None = None  # rollback: what the environment holds again

    @property
    def failing(self) -> list[GateOutcome]:
        return [g for g in self.gates if not g.passed]


def check_environment(env: str) -> None:
    if env not in ENVIRONMENTS:
        raise ReleaseError(f"unknown environment {env!r} (known: {', '.join(ENVIRONMENTS)})")


def proposal_branch(env: str, bundle_id: str) -> str:
    return f"{BRANCH_PREFIX}/{env}/{bundle_id}"


def review_path(env: str, bundle_id: str) -> str:
    return f"reviews/{env}/{bundle_id}.json"


# ----- the repository


def open_repo(path: Path | str, for_change: bool = True) -> tuple[Repo, Policy]:
    """The release repo and its policy; for a change it must be clean and on its main branch."""
    repo = Repo(Path(path))
    if not repo.path.is_dir():
        raise ReleaseError(f"release repo {repo.path}: no such directory (create one with 'fastci release init')")
    if not repo.is_work_tree() or not repo.is_top_level():
        raise ReleaseError(
            f"release repo {repo.path}: not the top of a git work tree (create one with 'fastci release init')"
        )
    if not repo.has_commits():
        raise ReleaseError(f"release repo {repo.path}: has no commits yet (create one with 'fastci release init')")
    policy = read_policy(repo)
    if for_change:
        dirty = repo.dirty()
        if dirty:
            shown = ", ".join(line[3:] for line in dirty[:5]) + (" ..." if len(dirty) > 5 else "")
            raise ReleaseError(
                f"release repo {repo.path} has uncommitted changes ({shown}); commit or stash them first: "
                "every environment change must be a commit"
            )
        branch = repo.current_branch()
        if branch != policy.main_branch:
            raise ReleaseError(
                f"release repo {repo.path} is on {branch or 'a detached HEAD'!s}, not on its main branch "
                f"{policy.main_branch!r}; check it out first"
            )
    elif repo.rev(policy.main_branch) is None:
        raise ReleaseError(f"release repo {repo.path}: no branch {policy.main_branch!r}")
    return repo, policy


def read_policy(repo: Repo) -> Policy:
    path = repo.path / POLICY_FILE
    if not path.exists():
        return Policy()
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ReleaseError(f"{path}: not valid TOML ({error})") from None
    revisions = document.get("hardware_revisions", list(DEFAULT_REVISIONS))
    if not isinstance(revisions, list) or not revisions or not all(isinstance(r, str) and r for r in revisions):
        raise ReleaseError(f"{path}: field 'hardware_revisions': must be a non-empty list of names")
    main = document.get("main_branch", DEFAULT_MAIN)
    if not isinstance(main, str) or not main:
        raise ReleaseError(f"{path}: field 'main_branch': must be a branch name")
    qualifying = document.get("qualifying_principals", list(release_gates.DEFAULT_QUALIFYING))
    if not isinstance(qualifying, list) or not all(isinstance(p, str) and p for p in qualifying):
        raise ReleaseError(f"{path}: field 'qualifying_principals': must be a list of principal names")
    return Policy(tuple(revisions), main, tuple(qualifying))


def init(path: Path | str, revisions: Sequence[str] = DEFAULT_REVISIONS) -> Repo:
    """A new release repository (or an empty git repo made one): the policy file, committed."""
    repo = Repo(Path(path))
    repo.path.mkdir(parents=True, exist_ok=True)
    if not repo.is_work_tree():
        repo.git("init", "--quiet", "--initial-branch", DEFAULT_MAIN)
    elif not repo.is_top_level():
        raise ReleaseError(
            f"{repo.path} is inside another git repository; give the top of a repository or a new directory"
        )
    if (repo.path / POLICY_FILE).exists():
        raise ReleaseError(f"{repo.path} already has {POLICY_FILE}: it is a release repo")
    if repo.has_commits() and repo.current_branch() != DEFAULT_MAIN:
        raise ReleaseError(f"{repo.path}: check out branch {DEFAULT_MAIN!r} first")
    quoted = ", ".join(orjson.dumps(r).decode() for r in revisions)
    qualifying = ", ".join(orjson.dumps(p).decode() for p in release_gates.DEFAULT_QUALIFYING)
    (repo.path / POLICY_FILE).write_text(
        "# fastci release policy: what every promotion requires (changed by a commit, like everything here).\n"
        f"hardware_revisions = [{quoted}]  # full qualification is required on each\n"
        f'main_branch = "{DEFAULT_MAIN}"\n'
        f"qualifying_principals = [{qualifying}]  # whose signed results count for a release\n",
        encoding="utf-8",
    )
    repo.git("add", "--", POLICY_FILE)
    repo.git("commit", "--quiet", "-m", "release repo: policy (environments dev, staging, production)")
    return repo


def environment_bundle(repo: Repo, commit: str, env: str) -> ReleaseBundle | None:
    try:
        return parse_environment(repo.files(commit, environment_dir(env)), env)
    except BundleError as error:
        raise ReleaseError(f"the {env} files at {commit[:10]} are not a bundle: {error}") from None


def staged(repo: Repo, policy: Policy, env: str, bundle_id: str) -> release_gates.Staged | None:
    """For an environment with a prerequisite: whether that one promoted the bundle (and kept it)."""
    before = PREREQUISITE.get(env)
    if before is None:
        return None
    history = repo.first_parent_log(policy.main_branch)
    reverted_by = {
        c.trailers["Fastci-Reverts"]: c.sha
        for c in history
        if c.action == "rollback" and "Fastci-Reverts" in c.trailers
    }
    promotions = [c for c in history if _is(c, "promote", before) and c.trailers.get("Fastci-Bundle") == bundle_id]
    for commit in promotions:  # newest first
        if commit.sha not in reverted_by:
            return release_gates.Staged(commit.sha)
    if promotions:
        return release_gates.Staged(promotions[0].sha, rolled_back_in=reverted_by[promotions[0].sha])
    return release_gates.Staged(None)


def _is(commit: LoggedCommit, action: str, env: str) -> bool:
    return commit.action == action and commit.trailers.get("Fastci-Env") == env


def evaluate(
    repo: Repo, policy: Policy, env: str, bundle: ReleaseBundle, evidence: EvidenceSource
) -> list[GateOutcome]:
    return release_gates.evaluate(
        env,
        evidence(bundle.versions),
        bundle.serving,
        policy.hardware_revisions,
        staged(repo, policy, env, bundle.id),
        policy.qualifying_principals,
    )


# ----- propose


def propose(path: Path | str, env: str, bundle: ReleaseBundle, evidence: EvidenceSource) -> Outcome:
    check_environment(env)
    repo, policy = open_repo(path)
    main = policy.main_branch
    current = environment_bundle(repo, main, env)
    if current is not None and current.id == bundle.id:
        raise ReleaseError(f"bundle {bundle.label()} is already in force in {env}")
    branch = proposal_branch(env, bundle.id)
    if repo.branch_exists(branch) and not repo.is_ancestor(branch, main):
        raise ReleaseError(
            f"bundle {bundle.id} is already proposed for {env} on branch {branch}; promote it "
            f"('fastci release promote {env} --bundle {bundle.id}') or delete the branch to propose again"
        )
    gates = evaluate(repo, policy, env, bundle, evidence)
    review = _review_record(env, bundle, policy, gates)
    message = _message(
        f"release({env}): propose bundle {bundle.label()}",
        [
            bundle.versions_text(),
            f"serves: {', '.join(bundle.models)}",
            "",
            "gates at proposal (promotion evaluates them again):",
            *_gate_lines(gates),
        ],
        {"Action": "propose", "Env": env, "Bundle": bundle.id},
    )
    repo.git("checkout", "--quiet", "-B", branch, main)
    try:
        root = environment_dir(env)
        repo.git("rm", "-r", "--quiet", "--ignore-unmatch", "--", root)
        for relative, data in {**render_environment(bundle, env), review_path(env, bundle.id): review}.items():
            target = repo.path / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        repo.git("add", "--all", "--", root, review_path(env, bundle.id))
        repo.git("commit", "--quiet", "-m", message)
        commit = repo.rev("HEAD")
    finally:
        repo.git("checkout", "--quiet", main, check=False)
    assert commit is not None
    return Outcome("propose", env, bundle, commit, branch, gates)


def _review_record(env: str, bundle: ReleaseBundle, policy: Policy, gates: list[GateOutcome]) -> bytes:
    document = {
        "environment": env,
        "bundle_id": bundle.id,
        "bundle_name": bundle.name,
        "bundle": bundle.versions.model_dump(),
        "serving": {m: dict(bundle.serving[m]) for m in bundle.models},
        "hardware_revisions": list(policy.hardware_revisions),
        "gates": [g.model_dump() for g in gates],
        "passed": all(g.passed for g in gates),
    }
    return orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


# ----- promote


def open_proposals(repo: Repo, policy: Policy, env: str) -> list[str]:
    return [b for b in repo.branches(f"{BRANCH_PREFIX}/{env}/") if not repo.is_ancestor(b, policy.main_branch)]


def promote(path: Path | str, env: str, bundle_id: str | None, evidence: EvidenceSource) -> Outcome:
    check_environment(env)
    repo, policy = open_repo(path)
    main = policy.main_branch
    branch = _pick_proposal(repo, policy, env, bundle_id)
    tip = repo.rev(branch)
    assert tip is not None
    bundle = environment_bundle(repo, tip, env)
    if bundle is None:
        raise ReleaseError(f"branch {branch} holds no bundle for {env}; propose again")
    root = environment_dir(env)
    base = repo.git("merge-base", main, tip).strip()
    if repo.tree_of(base, root) != repo.tree_of(main, root):
        raise ReleaseError(
            f"the proposal on {branch} is stale: {env} changed on {main} since it was proposed; "
            f"propose the bundle again"
        )
    gates = evaluate(repo, policy, env, bundle, evidence)
    if not all(g.passed for g in gates):
        return Outcome("refused", env, bundle, tip, branch, gates)
    message = _message(
        f"release({env}): promote bundle {bundle.label()}",
        [
            f"Merge branch '{branch}' (proposal {tip[:10]}).",
            bundle.versions_text(),
            "",
            "gates at promotion:",
            *_gate_lines(gates),
        ],
        {"Action": "promote", "Env": env, "Bundle": bundle.id, "Proposal": tip},
    )
    try:
        repo.git("merge", "--no-ff", "--quiet", "-m", message, branch)
    except GitError:
        repo.git("merge", "--abort", check=False)
        raise
    merge = repo.rev("HEAD")
    assert merge is not None
    return Outcome("promote", env, bundle, merge, branch, gates)


def _pick_proposal(repo: Repo, policy: Policy, env: str, bundle_id: str | None) -> str:
    if bundle_id is not None:
        branch = proposal_branch(env, bundle_id)
        if not repo.branch_exists(branch):
            raise ReleaseError(
                f"no proposal of bundle {bundle_id!r} for {env} (no branch {branch}); "
                f"propose it first: fastci release propose {env} BUNDLE"
            )
        if repo.is_ancestor(branch, policy.main_branch):
            raise ReleaseError(f"the proposal on {branch} is already merged into {policy.main_branch}")
        return branch
    proposals = open_proposals(repo, policy, env)
    if not proposals:
        raise ReleaseError(f"no open proposal for {env}: propose a bundle first (fastci release propose {env} BUNDLE)")
    if len(proposals) > 1:
        ids = ", ".join(b.rsplit("/", 1)[1] for b in proposals)
        raise ReleaseError(f"{len(proposals)} open proposals for {env} ({ids}): say which with --bundle ID")
    return proposals[0]


# ----- rollback


def rollback(path: Path | str, env: str) -> Outcome:
    check_environment(env)
    repo, policy = open_repo(path)
    history = repo.first_parent_log(policy.main_branch)
    reverted = {c.trailers.get("Fastci-Reverts") for c in history if c.action == "rollback"}
    target = next((c for c in history if _is(c, "promote", env) and c.sha not in reverted), None)
    if target is None:
        raise ReleaseError(
            f"nothing to roll back: no promotion to {env} on {policy.main_branch} that is not rolled back already"
        )
    bundle = environment_bundle(repo, target.sha, env)
    previous = environment_bundle(repo, target.parents[0], env)
    assert bundle is not None
    try:
        repo.git("revert", "--no-commit", "-m", "1", target.sha)
    except GitError as error:
        repo.git("revert", "--abort", check=False)
        raise ReleaseError(
            f"git revert of {target.sha[:10]} does not apply cleanly ({error}); {env} was changed by "
            "hand since; resolve it with a commit of your own"
        ) from None
    back_to = previous.label() if previous is not None else "no bundle (its state before any promotion)"
    message = _message(
        f"release({env}): roll back bundle {bundle.label()}",
        [
            f"Revert the promotion {target.sha[:10]} (git revert -m 1): {env} returns to {back_to}.",
        ],
        {"Action": "rollback", "Env": env, "Bundle": bundle.id, "Reverts": target.sha},
    )
    repo.git("commit", "--quiet", "--allow-empty", "-m", message)
    commit = repo.rev("HEAD")
    assert commit is not None
    return Outcome(
        "rollback", env, bundle, commit, proposal_branch(env, bundle.id), [], reverts=target.sha, previous=previous
    )


# ----- status


@dataclass
class EnvironmentStatus:
    environment: str
    bundle: ReleaseBundle | None
    changed_in: str | None
    proposals: list[tuple[str, bool | None]]  # (branch, whether its review record passed)


def status(path: Path | str) -> tuple[list[EnvironmentStatus], list[LoggedCommit]]:
    repo, policy = open_repo(path, for_change=False)
    main = policy.main_branch
    states = []
    for env in ENVIRONMENTS:
        changed = (
            repo.git("log", "-1", "--first-parent", "--format=%H", main, "--", environment_dir(env)).strip() or None
        )
        proposals = []
        for branch in open_proposals(repo, policy, env):
            try:
                review = orjson.loads(repo.blob(branch, review_path(env, branch.rsplit("/", 1)[1])))
                proposals.append((branch, bool(review.get("passed"))))
            except (GitError, orjson.JSONDecodeError):
                proposals.append((branch, None))
        states.append(EnvironmentStatus(env, environment_bundle(repo, main, env), changed, proposals))
    history = [c for c in repo.first_parent_log(main) if c.action]
    return states, history


# ----- messages


def _gate_lines(gates: list[GateOutcome]) -> list[str]:
    return [f"  {'PASS' if g.passed else 'FAIL'} {g.gate}: {' '.join(g.detail.split())}" for g in gates]


def _message(subject: str, body: list[str], trailers: dict[str, str]) -> str:
    lines = [subject, "", *body, "", *(f"Fastci-{key}: {value}" for key, value in trailers.items())]
    return "\n".join(lines) + "\n"
