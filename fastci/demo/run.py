"""``fastci demo``'s run: the demo world's history through fastci's processors, then the nightly report.

A presubmit runs what the selection kept, so the selection must exist before the results do. The history
is therefore played in time order through test-selection first (the real processor, in the in-memory
runtime): each commit's selection goes to the world's runner, whose presubmit results join the history at
their own times. Then the whole history is appended to the embedded log and every processor applies it,
as a real deployment's would; the run requests they make (confirmations, bisect steps, reruns) are
answered by the runner and applied, round after round, until none is left. test-selection in the
embedded runtime sees the same events in the same order as it did while the history was played (every
event has a distinct time, and the answers come after the history), so it makes the same selections:
``tests/test_demo.py`` checks that every presubmit ran exactly what its selection kept.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.text import Text

from fastci.contracts.runs import RunRequested
from fastci.core.events import Event
from fastci.demo.history import malformed_lines
from fastci.demo.world import NIGHTLY_EVERY, NODES, REGRESSION_NIGHTS, REPO, World
from fastci.runtime.embedded import DataDir, EmbeddedRuntime
from fastci.runtime.memory import MemoryRuntime
from fastci.runtime.publish import publish_embedded
from fastci.selection.events import Selection
from fastci.selection.processor import SelectionProcessor
from fastci.topology import SYSTEM, decode


@dataclass
class DemoRun:
    """What the run did, for the demo's own lines (what fastci found is the report's)."""

    events: dict[str, int] = field(default_factory=dict)  # published inputs by topic
    applied: int = 0  # events the processors applied, over every round
    seconds: float = 0.0  # the processors' own time
    answered: dict[str, int] = field(default_factory=dict)  # run requests the runner answered, by work class
    rounds: int = 0


def play(world: World) -> list[Event]:
    """The whole history in time order, presubmit results included: each commit's selection, made by
    test-selection from what came before it, decides what its presubmit runs."""
    selection = MemoryRuntime(SYSTEM, [SelectionProcessor()])
    topics = {topic: rank for rank, topic in enumerate(SelectionProcessor.inputs)}
    pending: list[tuple[datetime, int, str, int, Event]] = []
    order = 0  # keeps the heap from comparing events

    def schedule(event: Event) -> None:
        nonlocal order
        order += 1
        heapq.heappush(pending, (event.time, topics.get(event.TOPIC, len(topics)), event.id, order, event))  # type: ignore[attr-defined]

    for event in world.evidence():
        schedule(event)
    for index in range(world.commits):
        schedule(world.commit(index))
        for signal in world.node_health(index):
            schedule(signal)
        if index % NIGHTLY_EVERY == NIGHTLY_EVERY - 1:
            for result in world.nightly(index):
                schedule(result)
    history: list[Event] = [world.owner_map(), *world.goldens()]  # untimed: ordered before the rest
    while pending:
        *_, event = heapq.heappop(pending)
        history.append(event)
        if event.TOPIC in topics:
            for decision in selection.publish(event):
                if isinstance(decision, Selection):
                    for result in world.presubmit(decision):
                        schedule(result)
    return history


def run(data_dir: Path, world: World, extra: Sequence[Event] = ()) -> DemoRun:
    """Publish the history (and ``extra`` events) to ``data_dir``'s log, and apply it with every processor,
    answering the run requests they make until none is left."""
    done = DemoRun()
    history = play(world)
    for event in history:
        done.events[event.TOPIC] = done.events.get(event.TOPIC, 0) + 1
    publish_embedded(data_dir, [*history, *extra])
    answered: set[str] = set()
    while True:
        runtime = EmbeddedRuntime(data_dir, SYSTEM, sync=False)  # the demo can be run again from scratch
        try:
            stats = runtime.run()
        finally:
            runtime.close()
        done.applied += stats.events
        done.seconds += sum(s.seconds for s in stats.by_processor.values()) + stats.decode_seconds
        answers = []
        for record in DataDir(data_dir).log.topic(RunRequested.TOPIC).read():
            request = decode(RunRequested.TOPIC, record.payload)
            if request.id in answered:
                continue
            answered.add(request.id)
            requested_at = datetime.fromtimestamp(record.timestamp_ms / 1000, UTC)  # its cause's time
            answers.append(world.answer(request, requested_at))  # type: ignore[arg-type]
            done.answered[request.work_class] = done.answered.get(request.work_class, 0) + 1  # type: ignore[attr-defined]
        if not answers:
            return done
        done.rounds += 1
        publish_embedded(data_dir, answers)


def demo(data_dir: Path, commits: int, out: Console) -> None:
    """The demo, into an empty ``data_dir``: the history played and published, applied by every processor,
    the views refreshed, the tickets opened, the nightly report written; and what fastci found, printed."""
    from fastci.demo import refresh_and_report
    from fastci.producer.lines import check_lines
    from fastci.report.nightly import headlines

    started = time.perf_counter()
    world = World(commits=commits)
    refused = check_lines(malformed_lines(), topic=None)
    done = run(data_dir, world, refused.dead_letters())
    nights = commits // NIGHTLY_EVERY
    out.print(
        f"fastci demo: {commits} commits to {REPO}, one an hour, and their CI, played by a seeded world "
        "(fastci.demo.world); every decision below is fastci's own processors'",
        markup=False,
    )
    out.print(
        f"1. each presubmit ran the tests test-selection kept for its commit; {nights} nightly run(s) ran all "
        f"{len(world.tests)} tests on {NODES} nodes. Published to {data_dir / 'log'}: "
        + ", ".join(f"{n:,} {topic}" for topic, n in done.events.items()),
        markup=False,
    )
    if world.culprit is None:
        needed = REGRESSION_NIGHTS * NIGHTLY_EVERY
        out.print(f"   (too few commits to plant the regression: it needs --commits {needed} or more)")
    out.print(f"   and {len(refused.refused)} malformed events, each refused to dead-letters with its reason:")
    for refusal in refused.refused:
        out.print(f"     {refusal.error}", markup=False)
    asked = ", ".join(f"{n} {work_class}" for work_class, n in sorted(done.answered.items()))
    out.print(
        f"2. the {len(SYSTEM.processors)} processors applied {done.applied:,} events in {done.seconds:.1f} s (embedded "
        "runtime, no broker); "
        + (
            f"the runner answered the {sum(done.answered.values())} runs they asked for ({asked}) in "
            f"{done.rounds} round(s)"
            if asked
            else "they asked for no run"
        ),
        markup=False,
    )
    tickets, report, page = refresh_and_report(data_dir)
    out.print(
        f"3. refreshed the views ({data_dir / 'views.duckdb'}), opened {len(tickets.written)} ticket(s) in "
        f"{data_dir / 'tickets'}, wrote the nightly report: {page}",
        markup=False,
    )
    out.print("\n[bold]What fastci found[/bold]")
    for line in headlines(report):
        out.print(Text(f"- {line}"))
    out.print(f"\ndone in {time.perf_counter() - started:.1f} s. Next:")
    for line in (
        f"  open {page}                  # the report: culprits, charts, bisect trails, owners",
        f"  fastci --data-dir {data_dir} report nightly   # every detail in the terminal",
        f'  fastci --data-dir {data_dir} sql "SELECT trigger, status, count(*) FROM results GROUP BY ALL ORDER BY ALL"',
    ):
        out.print(line, markup=False)
