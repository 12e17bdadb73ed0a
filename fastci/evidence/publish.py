"""``evidence`` events: the code under test they name, and the producer they go through.

Events go through the producer's spool like results do, so a collector whose target is down
loses nothing (``fastci spool drain`` sends it later). The spool and target conventions are the
results plugin's and ``fastci spool``'s: ``<data dir>/spool/embedded``, ``.../spool/kafka/<ns>``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastci.inputs import Environment, EvidenceEvent, FoldedStack


class NoCommit(ValueError):
    """The commit under test is unknown (not a git work tree, and FASTCI_COMMIT unset)."""


def code_under_test(root: Path) -> tuple[str, str]:
    """(repo, commit) as results carry them: ``$FASTCI_REPO`` / ``$FASTCI_COMMIT``, else git's
    ``origin`` remote (or the work tree's name) and ``HEAD`` of the work tree at ``root``."""
    from fastci.selection.repos import git_line, repo_name_of  # one definition of "the code under test"

    repo = os.environ.get("FASTCI_REPO") or repo_name_of(root)
    commit = os.environ.get("FASTCI_COMMIT") or git_line(root, "rev-parse", "HEAD")
    if not commit:
        raise NoCommit(
            f"field 'commit': not given (set FASTCI_COMMIT, or run inside a git work tree; {root} is not one)"
        )
    return repo, commit


def evidence_event(
    test_id: str,
    run_id: str,
    repo: str,
    commit: str,
    method: str,
    stacks: list[tuple[str, int]],
    rate_hz: float | None = None,
    config: dict[str, Any] | None = None,
    workload: Any = None,
    kind: str = "test",
    importers: list[str] | tuple[str, ...] = (),
    reads: list[str] | tuple[str, ...] | None = None,
    fixtures: list[str] | tuple[str, ...] = (),
    distributions: list[str] | tuple[str, ...] = (),
    executed: Mapping[str, Sequence[Sequence[str]]] | None = None,
    environment: Environment | None = None,
) -> EvidenceEvent:
    """The event, with its stacks shortened when it would not fit in one Kafka message. ``executed``:
    exact evidence, each unit the test ran with the contexts of its first calls (callers root first,
    the unit last: ``fastci.evidence.first_calls``), published as units and calls by index. Raises
    TooMuchEvidence when even its units alone would not fit."""
    if sum(len(stack) + 24 for stack, _ in stacks) > STACK_BUDGET:
        stacks, dropped = fit(stacks)
        config = {**(config or {}), "stacks_shortened_to_frames": KEPT_FRAMES, "stacks_dropped": dropped}
    units, calls = encode_executed(executed or {})
    if sum(len(unit) + 3 for unit in units) + sum(4 * len(call) + 2 for call in calls) > STACK_BUDGET:
        calls = _first_context_only(calls)
        config = {**(config or {}), "contexts_cut_to": 1}
        if sum(len(unit) + 3 for unit in units) + sum(4 * len(call) + 2 for call in calls) > STACK_BUDGET:
            raise TooMuchEvidence(f"{test_id}: {len(units)} units do not fit in one event of {STACK_BUDGET:,} bytes")
    return EvidenceEvent(
        test_id=test_id,
        run_id=run_id,
        repo=repo,
        commit=commit,
        method=method,
        sampling_rate_hz=rate_hz if method == "sampling" else None,
        stacks=tuple(FoldedStack(stack=stack, count=count) for stack, count in stacks),
        units=units,
        calls=calls,
        config=config or {},
        workload=workload,
        kind=kind,
        importers=tuple(importers),
        reads=None if reads is None else tuple(reads),
        fixtures=tuple(fixtures),
        distributions=tuple(distributions),
        time=datetime.now(UTC),
        environment=environment,
    )


class TooMuchEvidence(ValueError):
    """A test ran more code units than one event holds (then it gets no evidence, and always runs)."""


def encode_executed(
    executed: Mapping[str, Sequence[Sequence[str]]],
) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]:
    """Units sorted, and each (context, unit) call as the indexes of its units, in a stable order.
    A unit named only as a caller is a unit the test ran too."""
    names = sorted({*executed, *(name for contexts in executed.values() for context in contexts for name in context)})
    index = {name: i for i, name in enumerate(names)}
    calls = sorted({tuple(index[name] for name in context) for contexts in executed.values() for context in contexts})
    return tuple(names), tuple(calls)


def _first_context_only(calls: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
    kept: dict[int, tuple[int, ...]] = {}
    for call in calls:
        kept.setdefault(call[-1], call)
    return tuple(sorted(kept.values()))


STACK_BUDGET = 900_000  # bytes of stacks per event, under the 1 MiB event limit with room for the rest
KEPT_FRAMES = 5  # the root (the test) and the innermost 4: a unit and its 3 callers, all the graph uses


def fit(stacks: list[tuple[str, int]]) -> tuple[list[tuple[str, int]], int]:
    """Stacks cut to the test frame and their innermost frames, merged. The evidence graph reads a
    unit and up to 3 callers (``fastci.selection.graph.CONTEXT_DEPTH``), so nothing it uses is
    lost; if that is still too big, the longest stacks go last and the rest is dropped."""
    from fastci.evidence.stacks import merge

    merged = merge((";".join(_shortened(stack.split(";"))), count) for stack, count in stacks)
    kept, size = [], 0
    for stack, count in sorted(merged, key=lambda item: (len(item[0]), item[0])):
        size += len(stack) + 24
        if size > STACK_BUDGET:
            break
        kept.append((stack, count))
    return kept, len(merged) - len(kept)


def _shortened(frames: list[str]) -> list[str]:
    return frames if len(frames) <= KEPT_FRAMES else [frames[0], *frames[1 - KEPT_FRAMES :]]


def producer_for(kafka: bool, data_dir: Path, kafka_settings: Any = None, spool: Path | None = None) -> Any:
    """A producer to the embedded log in ``data_dir``, or to Kafka (``kafka_settings``)."""
    from fastci.producer.client import Producer, RetryPolicy
    from fastci.producer.spool import Spool
    from fastci.producer.targets import EmbeddedTarget, KafkaTarget

    if kafka:
        target: Any = KafkaTarget(kafka_settings)
        default = data_dir / "spool" / "kafka" / (kafka_settings.namespace.rstrip("-") or "default")
    else:
        target, default = EmbeddedTarget(data_dir), data_dir / "spool" / "embedded"
    return Producer(target, Spool(spool or default), retry=RetryPolicy(attempts=2, first_backoff_s=0.5, cooldown_s=60))
