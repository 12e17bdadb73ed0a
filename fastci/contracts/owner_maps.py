"""Owner maps: who owns what in a repository, as producers publish it (an input topic).

- ``owner-maps`` (key repo): written by ``fastci owners publish`` (the file format and the matching
  are ``fastci/shared/owners.py``); read by ``flaky-owners`` (the fleet) and ``bisect-planner``
  (regression), which name a flaky test's or a culprit's owners.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field, StringConstraints

from fastci.core.events import Event, Name, Record, Text
from fastci.inputs import Layer

TeamName = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\s]+$")]


class OwnerRule(Record):
    pattern: Name = Field(description="CODEOWNERS-style path pattern ('/src/**', '*.cu', 'docs/').")
    teams: tuple[TeamName, ...] = Field(min_length=1, max_length=16)


class OwnerMap(Event):
    """Who owns what in a repository: path rules (last match wins) and stack layers. Key: repo.

    The latest map published for a repo is the one in force.
    """

    TOPIC: ClassVar[str] = "owner-maps"
    KEY: ClassVar[str] = "repo"
    IDENTITY: ClassVar[tuple[str, ...]] = ("repo", "version")

    repo: Name
    version: Name = Field(description="Identifies the map's content, e.g. a digest of the file it came from.")
    rules: tuple[OwnerRule, ...] = Field(default=(), max_length=20_000)
    layers: dict[Layer, tuple[TeamName, ...]] = Field(default_factory=dict)
    source: Text = ""
