"""Release events: what ``fastci release`` did to an environment's desired state in the release repo.

Git history is the audit log; these events put the same facts on a topic so the views (and anyone
consuming the stream) see proposals, promotions, refusals and rollbacks next to the results that
justified them.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from fastci.core.events import Event, Name, Record, Sha, Text, Timestamp
from fastci.inputs import Bundle

ReleaseAction = Literal["propose", "promote", "refused", "rollback"]
GateName = Literal["correctness", "eval", "performance", "qualification", "provenance", "staging"]


class GateOutcome(Record):
    """One release gate evaluated for a bundle and an environment."""

    gate: GateName
    passed: bool
    detail: Text = Field(description="Why, in one line: what was checked and what failed.")


class ReleaseEvent(Event):
    """An environment change in the release repo (or a refused one). Key: environment.

    ``git_commit`` is the commit the action made: the proposal commit (propose), the merge commit
    (promote), the revert commit (rollback); for a refused promotion, the proposal commit it refused.
    """

    TOPIC: ClassVar[str] = "release"
    KEY: ClassVar[str] = "environment"
    IDENTITY: ClassVar[tuple[str, ...]] = ("environment", "bundle_id", "action", "git_commit")

    environment: Name
    bundle_id: Name = Field(description="Content id of the bundle: its versions and serving configs.")
    bundle_name: Text = ""
    action: ReleaseAction
    git_commit: Sha
    branch: Name = Field(description="The proposal branch (the pull request).")
    reverts: Sha | None = Field(default=None, description="For a rollback: the promotion merge it reverted.")
    bundle: Bundle
    models: tuple[Name, ...] = Field(default=(), max_length=256, description="Models the bundle serves.")
    hardware_revisions: tuple[Name, ...] = Field(
        default=(), max_length=16, description="Revisions qualification was required on."
    )
    gates: tuple[GateOutcome, ...] = Field(default=(), max_length=16)
    release_repo: Text = Field(default="", description="Where the release repository was (a path).")
    actor: Text = ""
    time: Timestamp
