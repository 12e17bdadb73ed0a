"""What arrives at the simulated CI: the replayed change stream, injected faults, nightly and experiments.

- **Changes.** The replay's commits in their recorded order, replayed in a loop. Their real gaps
  (commit times, first parent) are kept and scaled by one factor so that the mean rate is the
  requested changes per day: the stream keeps its real bursts and lulls. Loop ``k > 0`` gives each
  commit a new sha (derived from the loop and the original) so every arrival is a new change; the
  evidence graph is reset to the recording's base at the start of every loop and grows again as
  recorded, so each commit is selected against the graph it was selected against live.
- **Hardware path.** About ``hardware_share`` of the changes (60%: 240 of 400 a day) are on the
  hardware path: more-itertools has no accelerator code, so this is the one property of a change the
  simulation assigns. It follows the content: a change that touches no library code (only tests,
  docs, CI or packaging files) is never on it; each change that does is, with the probability that
  makes the overall share ``hardware_share`` (drawn per change from the seed). ``hardware_path =
  "random"`` draws it for every change alike.
- **Faults.** The recording's mutant matrix: a mutant of a function the commit changed, with every
  test that fails on it. ``faults_per_day`` of them are injected per day, each at an occurrence of
  its own commit that day (mutants that no test kills, or that hung the suite, are left out: there
  is nothing to catch, or nothing definite).
- **Nightly.** At 00:00 every day, the full qualification set: every model at its nightly length.
- **Developer experiments.** ``experiments_per_day`` training runs at uniform times in working hours
  (09:00-18:00), 8 chips (70%), 16 (20%) or 32 (10%), 1-4 nightly lengths (0.5-2 h for the median
  model), checkpointed: 20 a day ask for about a quarter of the pool through working hours.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fastci.core.events import derive_id

DAY = 86_400.0
HOUR = 3_600.0


@dataclass(frozen=True)
class Settings:
    changes_per_day: float = 400.0
    hardware_share: float = 0.6
    days: int = 1  # measured days, from 00:00
    warmup_h: float = 12.0  # simulated before the first measured day, so it starts with the queues of a working day
    faults_per_day: int = 20
    experiments_per_day: int = 20
    working_day_h: float = 8.0  # when the nightly set should be done
    experiments_from_h: float = 9.0
    experiments_to_h: float = 18.0
    drain_days: float = (
        0.5  # after the last measured day, changes keep coming until the measured ones finish, or this long
    )
    hardware_path: str = "library"  # or "random" (see the module's docstring)
    seed: int = 1


@dataclass
class Change:
    """One arrival of a replayed commit."""

    number: int  # arrival order
    index: int  # position of the commit in the replay
    loop: int
    arrival_s: float
    sha: str
    hardware_path: bool
    loop_start: bool
    day: int = 0  # from the first measured day (0); the warm-up is day -1
    fault: Any | None = None  # the replay's Fault injected into this change
    commit_id: str = ""


@dataclass
class Stream:
    changes: list[Change]
    scale: float  # simulated seconds per real second of the repository's history
    faults: list[Change] = field(default_factory=list)


def real_gaps(times: Sequence[float]) -> list[float]:
    """Seconds between consecutive commits (negative ones, from rewritten history, count as 0)."""
    return [max(0.0, later - earlier) for earlier, later in zip(times, times[1:])]


def change_stream(
    commit_times: Sequence[float],
    shas: Sequence[str],
    fault_lists: Sequence[Sequence[Any]],
    settings: Settings,
    start_s: float = 0.0,
    touches_library: Sequence[bool] | None = None,
) -> Stream:
    """Every arrival from the warm-up before ``start_s`` (the first measured day's 00:00) to the end of
    the simulated span (measured days + drain), with faults in the measured days."""
    gaps = real_gaps(commit_times)
    mean_gap = sum(gaps) / len(gaps) if gaps and sum(gaps) > 0 else 1.0
    target_gap = DAY / settings.changes_per_day
    scale = target_gap / mean_gap
    scaled = [gap * scale for gap in gaps] + [target_gap]  # the loop closes with one mean gap
    rng = random.Random(f"{settings.seed}:changes")
    library = list(touches_library) if touches_library is not None and settings.hardware_path == "library" else None
    if library is not None and any(library):
        share = min(1.0, settings.hardware_share * len(library) / sum(library))
        eligible = library
    else:
        share, eligible = settings.hardware_share, [True] * len(shas)
    end = start_s + (settings.days + settings.drain_days) * DAY
    changes: list[Change] = []
    time, loop, index, number = start_s - settings.warmup_h * HOUR, 0, 0, 0
    while time < end:
        sha = shas[index] if loop == 0 else derive_id("loop", loop, shas[index])
        changes.append(
            Change(
                number,
                index,
                loop,
                time,
                sha,
                eligible[index] and rng.random() < share,
                loop_start=index == 0,
                day=math.floor((time - start_s) / DAY),
            )
        )
        time += scaled[index]
        number += 1
        index += 1
        if index == len(shas):
            index, loop = 0, loop + 1
    injected = inject_faults(changes, fault_lists, settings)
    return Stream(changes, scale, injected)


def inject_faults(changes: list[Change], fault_lists: Sequence[Sequence[Any]], settings: Settings) -> list[Change]:
    """Give ``faults_per_day`` changes of each simulated day one fault of their own commit."""
    rng = random.Random(f"{settings.seed}:faults")
    catchable = [(i, f) for i, faults in enumerate(fault_lists) for f in faults if f.failing and not f.timed_out]
    injected: list[Change] = []
    for day in range(settings.days):
        today = [c for c in changes if c.day == day]
        by_index: dict[int, list[Change]] = {}
        for change in today:
            by_index.setdefault(change.index, []).append(change)
        options = [(i, f) for i, f in catchable if i in by_index]
        for index, fault in rng.sample(options, min(settings.faults_per_day, len(options))):
            free = [c for c in by_index[index] if c.fault is None]
            if free:
                change = rng.choice(free)
                change.fault = fault
                injected.append(change)
    return sorted(injected, key=lambda c: c.number)


@dataclass(frozen=True)
class Experiment:
    arrival_s: float
    name: str
    family_index: int
    chips: int
    length: float  # multiple of a nightly run


def experiments(settings: Settings, start_s: float) -> list[Experiment]:
    rng = random.Random(f"{settings.seed}:experiments")
    planned = []
    for day in range(-1, int(settings.days + settings.drain_days + 1)):
        base = start_s + day * DAY
        for number in range(settings.experiments_per_day):
            at = base + rng.uniform(settings.experiments_from_h, settings.experiments_to_h) * HOUR
            chips = rng.choices((8, 16, 32), weights=(0.7, 0.2, 0.1))[0]
            planned.append(
                Experiment(at, f"dev/experiment-{day}-{number:03d}", rng.randrange(4), chips, rng.uniform(1.0, 4.0))
            )
    begin = start_s - settings.warmup_h * HOUR
    return sorted((e for e in planned if e.arrival_s >= begin), key=lambda e: e.arrival_s)
