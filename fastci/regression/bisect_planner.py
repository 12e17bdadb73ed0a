"""bisect-planner: turns a detected regression into the list of changes a bisect must search.

Keyed by repo: it keeps the repo's commit graph (one small value per commit) and its owner map,
and reads ``regression-alert`` repartitioned by repo. For a 'detected' alert it walks first parents
from the bad commit back to the good one (as ``git bisect --first-parent``), names each change's
owners from the owner map, lists the bundle components that differ between the two runs, and emits
a ``bisect-plan`` keyed by test, which the bisect processor (keyed by test) works from.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from pydantic import Field

from fastci.contracts.owner_maps import OwnerMap
from fastci.contracts.regression_alerts import RegressionAlert
from fastci.core.events import Event, Record
from fastci.core.processor import KeySpace, Processor, StateReader, Step
from fastci.inputs import Bundle, CommitEvent
from fastci.regression.events import BisectPlan, ComponentBump, PlannedChange
from fastci.shared.owners import owners_of_change, owners_of_layer, owners_of_path

MAX_CHANGES = 1500  # ~4 days of a 400-changes/day stack; the plan must stay under the 1 MiB event limit
MAX_PATHS = 64
TITLE_CHARS, AUTHOR_CHARS = 120, 80
COMPONENTS: tuple[str, ...] = tuple(Bundle.model_fields)  # compiler, kernels, runtime, driver, firmware


class CommitNode(Record):
    parents: tuple[str, ...] = ()
    title: str = ""
    author: str = ""
    time: datetime | None = None
    layers: tuple[str, ...] = ()
    paths: tuple[str, ...] = Field(default=(), max_length=MAX_PATHS)


# The planner's kinds of state, each under a repo.
COMMITS = KeySpace("commit", CommitNode, ("sha",))  # the commit graph, one commit per key
OWNERS = KeySpace("owners", OwnerMap)  # the repo's latest owner map


def commit_key(repo: str, sha: str) -> str:
    return COMMITS.key(repo, sha)


def owners_key(repo: str) -> str:
    return OWNERS.key(repo)


class BisectPlannerProcessor(Processor[Record]):
    name: ClassVar[str] = "bisect-planner"
    inputs: ClassVar[tuple[str, ...]] = (CommitEvent.TOPIC, OwnerMap.TOPIC, RegressionAlert.TOPIC)
    outputs: ClassVar[tuple[str, ...]] = (BisectPlan.TOPIC,)
    key_spaces = (COMMITS, OWNERS)
    state_key: ClassVar[str] = "key"
    partition_by = {RegressionAlert.TOPIC: "repo"}

    def process(self, state: StateReader[Record], event: Event) -> Step[Record]:
        if isinstance(event, CommitEvent):
            node = CommitNode(
                parents=event.parents,
                title=event.title[:TITLE_CHARS],
                author=event.author[:AUTHOR_CHARS],
                time=event.time,
                layers=event.layers,
                paths=tuple(f.path for f in event.changed_files[:MAX_PATHS]),
            )
            return Step(writes={commit_key(event.repo, event.sha): node})
        if isinstance(event, OwnerMap):
            return Step(writes={owners_key(event.repo): event})
        assert isinstance(event, RegressionAlert)
        if event.stage != "detected":
            return Step()
        return Step(outputs=[self._plan(state, event)])

    def _plan(self, state: StateReader[Record], alert: RegressionAlert) -> BisectPlan:
        owner_map = OWNERS.get(state, owners_key(alert.repo))
        changes, problem = self._range(state, alert, owner_map)
        bumps = []
        for component in COMPONENTS:
            before, after = getattr(alert.good.bundle, component), getattr(alert.bad.bundle, component)
            if before != after:
                related = tuple(c.sha for c in changes if component in c.layers)[:50]
                bumps.append(
                    ComponentBump(
                        component=component,
                        from_version=before,
                        to_version=after,
                        owners=owners_of_layer(component, owner_map),
                        related_commits=related,
                    )
                )
        test_owners = owners_of_path(alert.test_id.split("::", 1)[0], owner_map) if owner_map else ()
        return BisectPlan(
            alert_id=alert.id,
            test_id=alert.test_id,
            alert=alert,
            changes=tuple(changes),
            bumps=tuple(bumps),
            test_owners=test_owners,
            problem=problem,
        )

    def _range(self, state: StateReader[Record], alert: RegressionAlert, owner_map: OwnerMap | None):
        """Commits after good up to bad (oldest first), and what went wrong if the walk could not finish."""
        good, sha = alert.good.commit, alert.bad.commit
        walked: list[PlannedChange] = []
        while sha != good:
            if len(walked) >= MAX_CHANGES:
                return [], f"more than {MAX_CHANGES} changes between {good[:10]} and {alert.bad.commit[:10]}"
            node = COMMITS.get(state, commit_key(alert.repo, sha))
            if node is None:
                return [], f"commit {sha[:10]} of {alert.repo} was never seen on 'commits'"
            walked.append(
                PlannedChange(
                    sha=sha,
                    title=node.title,
                    author=node.author,
                    layers=node.layers,  # type: ignore[arg-type]
                    owners=owners_of_change(node.paths, node.layers, owner_map),
                )
            )
            if not node.parents:
                return [], f"{good[:10]} is not a first-parent ancestor of {alert.bad.commit[:10]}"
            sha = node.parents[0]
        return list(reversed(walked)), ""
