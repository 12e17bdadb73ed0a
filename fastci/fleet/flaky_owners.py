"""flaky-owners: names the owners of every test a flaky verdict is about.

Keyed by repo, like the owner map it holds (``owner-maps``, the latest map of the repo is in force);
reads ``flaky-verdicts`` repartitioned by repo and writes each one again on ``flaky-tests`` with the
owners of the test's file (the part of the test id before '::'), keyed by test again.
"""

from __future__ import annotations

from typing import ClassVar

from fastci.contracts.flaky_verdicts import FlakyVerdict
from fastci.contracts.owner_maps import OwnerMap
from fastci.core.events import Event, Record
from fastci.core.processor import Processor, StateReader, Step, compound_key
from fastci.fleet.events import FlakyTest
from fastci.shared.owners import owners_of_path

NAME = "flaky-owners"


class OwnersHeld(Record):
    owners: OwnerMap | None = None


def owners_key(repo: str) -> str:
    return compound_key(repo, "owners")


class FlakyOwnersProcessor(Processor[OwnersHeld]):
    name: ClassVar[str] = NAME
    inputs: ClassVar[tuple[str, ...]] = (OwnerMap.TOPIC, FlakyVerdict.TOPIC)
    outputs: ClassVar[tuple[str, ...]] = (FlakyTest.TOPIC,)
    state_model: ClassVar[type[Record]] = OwnersHeld
    state_key: ClassVar[str] = "key"
    partition_by = {FlakyVerdict.TOPIC: "repo"}

    def process(self, state: StateReader[OwnersHeld], event: Event) -> Step[OwnersHeld]:
        if isinstance(event, OwnerMap):
            return Step(writes={owners_key(event.repo): OwnersHeld(owners=event)})
        assert isinstance(event, FlakyVerdict)
        held = state.get(owners_key(event.repo))
        owner_map = held.owners if held else None
        owners = owners_of_path(event.test_id.split("::", 1)[0], owner_map) if owner_map else ()
        return Step(
            outputs=[
                FlakyTest(
                    verdict_id=event.id,
                    test_id=event.test_id,
                    repo=event.repo,
                    flaky=event.flaky,
                    owners=owners,
                    owner_map_version=owner_map.version if owner_map else None,
                    rule=event.rule,
                    reason=event.reason,
                    time=event.time,
                    chips=event.chips,
                )
            ]
        )
