"""A recorded replay (``fastci/selection/replay.py``) through the real selection processor.

``replay_selections()`` feeds the recording's events to the selection processor in the order the
live run fed them, through the ``Driver`` every runtime uses, and yields each commit's selection;
``check()`` measures what the live run measured and compares every kept set with the recorded one.
``python -m fastci.simulate.replay_selection [NAME]`` prints that check.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fastci.core.events import Event
from fastci.inputs import EvidenceEvent
from fastci.runtime.driver import Driver
from fastci.selection.processor import SelectionProcessor
from fastci.selection.replay import Replay, ReplayCommit, load


def replay_selections(
    replay: Replay, processor: SelectionProcessor | None = None
) -> Iterator[tuple[ReplayCommit, Event]]:
    """Each commit with the ``selection`` the real selection processor (``processor``, default the
    production one) makes for it, fed exactly as the live replay fed it (Driver over an in-memory
    store)."""

    store: dict[str, bytes] = {}
    driver = Driver(processor or SelectionProcessor(), store)

    def feed(events: Iterable[Event]) -> None:
        for event in events:
            driver.handle(event)
        store.update(driver.drain_writes())

    feed(replay.base_results)
    feed(replay.base_evidence)
    for step in replay.commits:
        (selection,) = driver.handle(step.commit)
        store.update(driver.drain_writes())
        yield step, selection
        feed(step.results)
        feed(step.evidence)


def check(
    name: str = "more-itertools",
    processor: SelectionProcessor | None = None,
    evidence: Callable[[EvidenceEvent], EvidenceEvent] | None = None,
) -> dict[str, Any]:
    """Replay the recording through the real selection processor and measure what the live run
    measured: the share of the suite's test time kept, whether every kept set is the same, and
    the mutants the kept sets catch of those the full suite catches. ``evidence`` reshapes each
    recorded evidence event first (to replay what another collector would have recorded)."""
    replay = load(name)
    if evidence is not None:
        replay.base_evidence = [evidence(event) for event in replay.base_evidence]
        for step in replay.commits:
            step.evidence = [evidence(event) for event in step.evidence]
    kept_s = full_s = 0.0
    differing: list[str] = []
    run_all = caught = 0
    for step, selection in replay_selections(replay, processor):
        durations = step.durations
        tests = set(durations)
        kept = tests if selection.run_all else {k.test_id for k in selection.kept} & tests
        run_all += selection.run_all
        kept_s += sum(durations[t] for t in kept)
        full_s += sum(durations.values())
        if step.recorded is not None and tuple(sorted(kept)) != step.recorded.kept:
            differing.append(step.commit.sha)
        caught += sum(1 for f in step.faults if f.failing & kept)
    faults = [f for step in replay.commits for f in step.faults]
    return {
        "commits": len(replay.commits),
        "run_all": run_all,
        "kept_share": kept_s / full_s if full_s else 1.0,
        "kept_s": kept_s,
        "full_s": full_s,
        "differing": differing,
        "faults": len(faults),
        "faults_detected": sum(1 for f in faults if f.failing),
        "faults_caught": caught,
        "base_tests": len(replay.base_results),
    }


if __name__ == "__main__":
    import sys

    target = sys.argv[1] if len(sys.argv) > 1 else "more-itertools"
    found = check(target)
    print(
        f"{target}: {found['commits']} commits after a base of {found['base_tests']} tests; selection kept "
        f"{found['kept_share']:.1%} of the suite's test time ({found['kept_s']:.1f} of {found['full_s']:.1f} s), "
        f"{found['run_all']} commits ran everything; kept sets equal to the live run's at "
        f"{found['commits'] - len(found['differing'])} of {found['commits']} commits; "
        f"{found['faults']} mutants, {found['faults_detected']} detected by the full suite"
    )
