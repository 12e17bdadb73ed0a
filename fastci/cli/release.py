"""``fastci release init|propose|promote|rollback|status``: bundles promoted and rolled back through git."""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastci.cli.base import (
    PathArgument,
    UsageError,
    console,
    kafka_settings,
    out,
    refresh_views,
    uses_data_dir,
    views_path,
)

REPO_ENV = "FASTCI_RELEASE_REPO"


def register(commands: Any) -> None:
    release = commands.add_parser(
        "release",
        help="release bundles: propose, promote (when every gate passes), roll back, in a git repo",
        description="The desired state of each environment (dev, staging, production) is files in a git repository "
        f"(--repo or ${REPO_ENV}). Gates are evaluated from the views of the data dir (refreshed first).",
    )
    actions = release.add_subparsers(dest="release_command", required=True, metavar="ACTION")

    init = actions.add_parser("init", help="make a directory (or an empty git repo) a release repository")
    init.add_argument(
        "--hardware-revision",
        action="append",
        dest="revisions",
        help="a hardware revision full qualification is required on (repeatable; default rev-a and rev-b)",
    )
    _repo_option(init)
    init.set_defaults(func=cmd_init)
    uses_data_dir(init, "none")

    propose = actions.add_parser("propose", help="a branch and a commit setting ENV to BUNDLE, with the gate results")
    propose.add_argument("environment", metavar="ENV")
    propose.add_argument(
        "bundle",
        metavar="BUNDLE",
        help="a bundle manifest (TOML: [bundle] versions, [serving.<model>] configs), or an environment "
        "whose bundle to propose (e.g. 'staging' for production)",
    )
    _common(propose)
    propose.set_defaults(func=cmd_propose)
    uses_data_dir(propose, "write")

    promote = actions.add_parser("promote", help="merge ENV's open proposal, only if every gate passes now")
    promote.add_argument("environment", metavar="ENV")
    promote.add_argument("--bundle", metavar="ID", help="the proposal to promote when ENV has several")
    _common(promote)
    promote.set_defaults(func=cmd_promote)
    uses_data_dir(promote, "write")

    rollback = actions.add_parser("rollback", help="git revert of ENV's last promotion")
    rollback.add_argument("environment", metavar="ENV")
    _repo_option(rollback)
    rollback.add_argument(
        "--kafka", action="store_true", help="publish the release event to Kafka, not the embedded log"
    )
    rollback.set_defaults(func=cmd_rollback)
    uses_data_dir(rollback, "write")

    status = actions.add_parser("status", help="each environment's bundle, open proposals and the audit log")
    _repo_option(status)
    status.add_argument("--history", type=int, default=10, metavar="N", help="release commits to list (default 10)")
    status.set_defaults(func=cmd_status)
    uses_data_dir(status, "none")


def _repo_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo", type=PathArgument("folder"), help=f"the release repository (default ${REPO_ENV})")


def _common(parser: argparse.ArgumentParser) -> None:
    _repo_option(parser)
    parser.add_argument(
        "--kafka", action="store_true", help="refresh the views from, and publish the release event to, Kafka"
    )
    parser.add_argument("--no-refresh", action="store_true", help="evaluate the gates on the views as they are")
    parser.add_argument("--views", type=PathArgument("output"), help="DuckDB file (default <data dir>/views.duckdb)")


def _repo(args: argparse.Namespace) -> Path:

    path = args.repo or os.environ.get(REPO_ENV)
    if not path:
        raise UsageError(f"which release repository? give --repo PATH or set {REPO_ENV}")
    return Path(path)


def _evidence_source(args: argparse.Namespace):
    """Refresh the views once, then read the evidence about any bundle from them, each result's
    provenance checked with the keys in FASTCI_PROVENANCE_KEYS."""
    from fastci.core.provenance import ProvenanceError, load_keyring
    from fastci.report.release_evidence import collect
    from fastci.views.store import Views

    try:
        keys = load_keyring()
    except ProvenanceError as error:
        raise UsageError(str(error)) from None
    path = views_path(args)
    if not args.no_refresh:
        refresh_views(args)

    def evidence(bundle):
        try:
            views = Views(path, read_only=True)
        except FileNotFoundError as error:
            raise UsageError(str(error)) from None
        try:
            return collect(views, bundle, keys)
        finally:
            views.close()

    return evidence


def _run(action):
    from fastci.release.bundle import BundleError
    from fastci.release.flow import ReleaseError
    from fastci.release.git import GitError

    try:
        return action()
    except (ReleaseError, BundleError) as error:
        raise UsageError(str(error)) from None
    except GitError as error:
        raise UsageError(f"release repo: {error}") from None


def cmd_init(args: argparse.Namespace) -> int:
    from fastci.release import flow

    repo = _run(lambda: flow.init(_repo(args), args.revisions or flow.DEFAULT_REVISIONS))
    console.print(
        f"release repo ready at {repo.path}: environments {', '.join(flow.ENVIRONMENTS)}; full qualification "
        f"required on {', '.join(args.revisions or flow.DEFAULT_REVISIONS)} (release.toml)"
    )
    return 0


def _load_bundle(args: argparse.Namespace, repo: Path):
    from fastci.release import flow
    from fastci.release.bundle import load_manifest

    given = Path(args.bundle)
    if not given.exists() and args.bundle in flow.ENVIRONMENTS:
        handle, policy = flow.open_repo(repo, for_change=False)
        bundle = flow.environment_bundle(handle, policy.main_branch, args.bundle)
        if bundle is None:
            raise UsageError(f"{args.bundle} has no bundle yet: nothing to propose from it")
        return bundle
    return load_manifest(given)


def cmd_propose(args: argparse.Namespace) -> int:
    from fastci.release import flow

    repo = _repo(args)

    def act():
        flow.check_environment(args.environment)
        flow.open_repo(repo)  # refuse a dirty or odd repo before spending time on the views
        bundle = _load_bundle(args, repo)
        return flow.propose(repo, args.environment, bundle, _evidence_source(args))

    outcome = _run(act)
    _print_gates(outcome.gates)
    _publish(args, repo, outcome)
    console.print(
        f"proposed bundle {outcome.bundle.label()} for {outcome.environment}: branch {outcome.branch}, "
        f"commit {outcome.commit[:10]}, review record {flow.review_path(outcome.environment, outcome.bundle.id)}"
    )
    if outcome.failing:
        console.print(
            f"[yellow]{len(outcome.failing)} gate(s) failing[/yellow] ({', '.join(g.gate for g in outcome.failing)}): "
            "promotion will be refused until they pass"
        )
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    from fastci.release import flow

    repo = _repo(args)

    def act():
        flow.check_environment(args.environment)
        flow.open_repo(repo)
        return flow.promote(repo, args.environment, args.bundle, _evidence_source(args))

    outcome = _run(act)
    _print_gates(outcome.gates)
    _publish(args, repo, outcome)
    if outcome.action == "refused":
        console.print(
            f"[red]refused:[/red] bundle {outcome.bundle.label()} stays out of {outcome.environment}; "
            f"{len(outcome.failing)} gate(s) failing:",
            highlight=False,
        )
        for gate in outcome.failing:
            console.print(f"  {gate.gate}: {gate.detail}", markup=False)
        return 1
    console.print(
        f"promoted bundle {outcome.bundle.label()} to {outcome.environment}: merge commit {outcome.commit[:10]}"
    )
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    from fastci.release import flow

    repo = _repo(args)
    outcome = _run(lambda: flow.rollback(repo, args.environment))
    _publish(args, repo, outcome)
    back = outcome.previous.label() if outcome.previous is not None else "no bundle"
    console.print(
        f"rolled back bundle {outcome.bundle.label()} in {outcome.environment}: revert commit "
        f"{outcome.commit[:10]} of {outcome.reverts[:10] if outcome.reverts else '?'}; {outcome.environment} "
        f"holds {back} again"
    )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from rich.text import Text

    from fastci.release import flow

    states, history = _run(lambda: flow.status(_repo(args)))
    for s in states:
        if s.bundle is None:
            out.print(Text(f"{s.environment}: no bundle"))
        else:
            out.print(
                Text(
                    f"{s.environment}: bundle {s.bundle.label()}, serves {', '.join(s.bundle.models)}, "
                    f"since {(s.changed_in or '?')[:10]}"
                )
            )
            out.print(Text(f"  {s.bundle.versions_text()}"))
        for branch, passed in s.proposals:
            verdict = "gates pass" if passed else "gates failing" if passed is False else "no review record"
            out.print(Text(f"  open proposal {branch} ({verdict} at proposal)"))
    if history and args.history > 0:
        out.print(Text("audit log (release commits on main, newest first):"))
        for c in history[: args.history]:
            out.print(Text(f"  {c.sha[:10]} {c.action:8s} {c.trailers.get('Fastci-Env', ''):10s} {c.subject}"))
    return 0


def _print_gates(gates) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table("gate", "verdict", "detail", title="release gates")
    for g in gates:
        table.add_row(
            Text(g.gate), Text("PASS", style="green") if g.passed else Text("FAIL", style="red"), Text(g.detail)
        )
    out.print(table)


def _publish(args: argparse.Namespace, repo: Path, outcome) -> None:
    from fastci.release.events import ReleaseEvent
    from fastci.release.git import Repo
    from fastci.runtime.publish import publish_embedded, publish_kafka

    event = ReleaseEvent(
        environment=outcome.environment,
        bundle_id=outcome.bundle.id,
        bundle_name=outcome.bundle.name,
        action=outcome.action,
        git_commit=outcome.commit,
        branch=outcome.branch,
        reverts=outcome.reverts,
        bundle=outcome.bundle.versions,
        models=outcome.bundle.models,
        gates=tuple(outcome.gates),
        hardware_revisions=_revisions(repo),
        release_repo=str(repo.resolve()),
        actor=Repo(repo).author(),
        time=datetime.now(UTC),
    )
    if args.kafka:
        publish_kafka(kafka_settings(args), [event])
    else:
        publish_embedded(args.data_dir, [event])
    console.print(f"release event {event.id} ({event.action}) published", highlight=False)


def _revisions(repo: Path) -> tuple[str, ...]:
    from fastci.release.flow import read_policy
    from fastci.release.git import Repo

    return read_policy(Repo(repo)).hardware_revisions
