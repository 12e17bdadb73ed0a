"""A real repository's history, recorded once, replayed anywhere (no network, no git mirror).

``bench/selection_replay.py --record FILE`` writes one gzipped JSON-lines file while it replays
a repository: every event it fed to test selection, in the order it fed them, plus what it
measured that no event carries. Each line is an object with a ``kind``:

- ``header``: repo, base commit, the replayed shas, the harness's settings, format version;
- ``event``: ``{"topic": T, "event": {...}}``, a ``commits``, ``results`` or ``evidence`` event as
  fed: first the base commit's results and evidence, then per commit its ``commits`` event, its
  full run's ``results`` (real per-test durations and statuses, in pytest's collection order)
  and the fresh ``evidence`` of a traced run. A test's evidence is written only when what
  selection reads from it (the units it ran, their calling contexts, its files) differs from
  the last evidence written for it, so replaying the file builds the same graph as the live run;
- ``selection``: what the live run's selection kept at that commit (test ids present in the
  full run) with their measured seconds and the full suite's, to check a replay against;
- ``fault``: a mutant of a function the commit changed, and every test that fails on it (the
  full suite ran on the mutant without ``-x``); ``timed_out`` when the suite hung on it.

``load()`` reads it into a ``Replay``; ``Replay.events()`` yields the events in feed order.
Replaying them through the real selection processor (which takes a runtime's ``Driver``) is
``fastci/simulate/replay_selection.py``, above the runtimes.
"""

from __future__ import annotations

import gzip
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from fastci.core.events import Event
from fastci.inputs import CommitEvent, EvidenceEvent, ResultEvent
from fastci.selection.processor import executed_by

FORMAT = 1
REPLAY_DIR = Path(__file__).resolve().parent / "replays"
REPLAYS = {"more-itertools": "more-itertools.jsonl.gz"}


@dataclass(frozen=True)
class Fault:
    """A seeded fault (mutant) at one commit and the tests that detect it."""

    sha: str
    path: str
    qualname: str
    operator: str
    line: int
    description: str
    failing: frozenset[str]
    timed_out: bool = False

    @property
    def name(self) -> str:
        return f"{self.sha[:10]} {self.path}::{self.qualname}:{self.line} {self.operator}"


@dataclass(frozen=True)
class RecordedSelection:
    """What the live replay's selection kept at a commit, measured on the full run there."""

    sha: str
    run_all: bool
    kept: tuple[str, ...]  # test ids that the full run had (all of them when run_all)
    kept_s: float
    full_s: float


@dataclass
class ReplayCommit:
    index: int
    commit: CommitEvent
    results: list[ResultEvent] = field(default_factory=list)
    evidence: list[EvidenceEvent] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    recorded: RecordedSelection | None = None

    @property
    def durations(self) -> dict[str, float]:
        """Measured seconds of every test of the full run, in collection order."""
        return {r.test_id: r.duration_s for r in self.results}


@dataclass
class Replay:
    header: dict[str, Any]
    base_results: list[ResultEvent] = field(default_factory=list)
    base_evidence: list[EvidenceEvent] = field(default_factory=list)
    commits: list[ReplayCommit] = field(default_factory=list)

    def events(self) -> Iterator[Event]:
        """Every recorded event in the order the live replay fed them to selection."""
        yield from self.base_results
        yield from self.base_evidence
        for step in self.commits:
            yield step.commit
            yield from step.results
            yield from step.evidence


def replay_path(name: str) -> Path:
    """The packaged recording called ``name``, or ``name`` itself when it is a file path."""
    if name in REPLAYS:
        return REPLAY_DIR / REPLAYS[name]
    path = Path(name)
    if not path.is_file():
        raise FileNotFoundError(f"no recorded replay {name!r} (packaged: {', '.join(REPLAYS)}; or give a file path)")
    return path


def read_lines(name: str = "more-itertools") -> Iterator[dict[str, Any]]:
    with gzip.open(replay_path(name), "rb") as file:
        for number, line in enumerate(file, 1):
            document = orjson.loads(line)
            if number == 1 and (document.get("kind") != "header" or document.get("format") != FORMAT):
                raise ValueError(f"{name}: not a fastci replay of format {FORMAT} (first line {line[:80]!r})")
            yield document


_RECORDED = {model.TOPIC: model for model in (CommitEvent, EvidenceEvent, ResultEvent)}  # what a recording holds


def load(name: str = "more-itertools") -> Replay:
    """The whole recording, events validated by their models (their ids checked)."""
    lines = read_lines(name)
    replay = Replay(header=next(lines))
    current: ReplayCommit | None = None
    for document in lines:
        kind = document["kind"]
        if kind == "event":
            event = _RECORDED[document["topic"]].model_validate(document["event"])
            if isinstance(event, CommitEvent):
                current = ReplayCommit(index=len(replay.commits) + 1, commit=event)
                replay.commits.append(current)
            elif isinstance(event, ResultEvent):
                (replay.base_results if current is None else current.results).append(event)
            elif isinstance(event, EvidenceEvent):
                (replay.base_evidence if current is None else current.evidence).append(event)
            else:
                raise ValueError(f"{name}: unexpected topic {document['topic']!r} in a replay")
        elif kind == "selection" and current is not None:
            current.recorded = RecordedSelection(
                sha=document["sha"],
                run_all=document["run_all"],
                kept=tuple(document["kept"]),
                kept_s=document["kept_s"],
                full_s=document["full_s"],
            )
        elif kind == "fault" and current is not None:
            current.faults.append(
                Fault(
                    sha=document["sha"],
                    path=document["path"],
                    qualname=document["qualname"],
                    operator=document["operator"],
                    line=document["line"],
                    description=document["description"],
                    failing=frozenset(document["failing"]),
                    timed_out=document["timed_out"],
                )
            )
        else:
            raise ValueError(f"{name}: unexpected line of kind {kind!r}")
    return replay


# ----- writing (used by bench/selection_replay.py --record)


def _evidence_digest(event: EvidenceEvent) -> bytes:
    """What selection reads from an evidence event: units with their contexts, and files."""
    units, files = executed_by(event)
    canonical = orjson.dumps([sorted((u, sorted(c)) for u, c in units.items()), sorted(files)])
    return hashlib.blake2b(canonical, digest_size=16).digest()


class ReplayWriter:
    """Writes a recording line by line (gzip with a fixed mtime, so equal content gives equal bytes)."""

    def __init__(self, path: Path, **header: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._raw = open(path, "wb")
        self._file = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=9, mtime=0)
        self._last_evidence: dict[str, bytes] = {}
        self.counts: dict[str, int] = {}
        self._write({"kind": "header", "format": FORMAT, **header})

    def _write(self, document: dict[str, Any]) -> None:
        self._file.write(orjson.dumps(document) + b"\n")
        label = document.get("topic", document["kind"])
        self.counts[label] = self.counts.get(label, 0) + 1

    def event(self, event: Event) -> None:
        self._write({"kind": "event", "topic": event.TOPIC, "event": event.model_dump(mode="json")})

    def results(self, events: Iterable[ResultEvent]) -> None:
        for event in events:
            self.event(event)

    def evidence(self, events: Iterable[EvidenceEvent], present: set[str]) -> None:
        """Write the evidence that changed what selection knows; tests absent from the run are
        forgotten (selection forgets deleted tests, so their next evidence must be written)."""
        for test in set(self._last_evidence) - present:
            del self._last_evidence[test]
        skipped = 0
        for event in events:
            digest = _evidence_digest(event)
            if self._last_evidence.get(event.test_id) == digest:
                skipped += 1
                continue
            self._last_evidence[event.test_id] = digest
            self.event(event)
        self.counts["evidence unchanged, not written"] = self.counts.get("evidence unchanged, not written", 0) + skipped

    def selection(self, selection: Any, kept: set[str], kept_s: float, full_s: float) -> None:
        self._write(
            {
                "kind": "selection",
                "sha": selection.sha,
                "run_all": selection.run_all,
                "kept": sorted(kept),
                "kept_s": kept_s,
                "full_s": full_s,
            }
        )

    def fault(self, sha: str, mutant: Any, failing: set[str], timed_out: bool) -> None:
        self._write(
            {
                "kind": "fault",
                "sha": sha,
                "path": mutant.path,
                "qualname": mutant.qualname,
                "operator": mutant.operator,
                "line": mutant.line,
                "description": mutant.description,
                "failing": sorted(failing),
                "timed_out": timed_out,
            }
        )

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()
        self._raw.close()

    def summary(self) -> str:
        return ", ".join(f"{count} {label}" for label, count in self.counts.items())
