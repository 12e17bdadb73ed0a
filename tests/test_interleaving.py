"""The ordering rule (docs/topology.md), checked on the embedded runtime: the same events appended in
cross-topic interleavings unlike the one ``publish_embedded`` writes give every view equal, decisions
included, because each processor applies its inputs in event-time order, not in the order they were
appended."""

from __future__ import annotations

import random

import pytest

from fastci.core.events import Event
from fastci.demo.history import Workload, in_time_order, per_topic
from fastci.planning.processor import TestPlanProcessor
from fastci.runtime.embedded import DataDir, EmbeddedRuntime, ProcessorStats
from fastci.runtime.publish import publish_embedded
from fastci.selection.processor import SelectionProcessor
from fastci.topology import SYSTEM
from fastci.views.refresh import refreshed_views


def append(data_dir, blocks: list[list[Event]]) -> None:
    """Each block published on its own, after the one before: the blocks fix the order of appends."""
    for block in blocks:
        publish_embedded(data_dir, block)


def interleavings(events: list[Event]) -> dict[str, list[list[Event]]]:
    blocks = per_topic(events)
    return {
        "as generated, one event per block": [[e] for e in events],
        "per-topic blocks": blocks,
        "per-topic blocks, reversed": blocks[::-1],
    }


def run(data_dir, batch_size: int | None = None) -> dict[str, list[tuple]]:
    options = {} if batch_size is None else {"batch_size": batch_size}
    runtime = EmbeddedRuntime(data_dir, SYSTEM, sync=False, **options)
    try:
        runtime.run()
    finally:
        runtime.close()
    with refreshed_views(data_dir) as views:
        return views.event_tables()


@pytest.mark.slow
def test_any_cross_topic_interleaving_gives_every_view_equal(tmp_path):
    events = Workload(commits=40, seed=5).events()
    assert all(e.time_ms() is not None for e in events)  # an event without a time is ordered by its arrival
    results = {}
    for index, (name, blocks) in enumerate(interleavings(events).items()):
        data_dir = tmp_path / f"order-{index}"
        append(data_dir, blocks)
        results[name] = run(data_dir)
    baseline_name, baseline = next(iter(results.items()))
    for name, tables in results.items():
        for table, rows in tables.items():
            ids = [row[0] for row in rows] if table != "test_history" else []
            assert len(ids) == len(set(ids)), f"{name}: duplicate ids in {table}"
            assert rows == baseline[table], f"{name}: {table} differs from {baseline_name}"
    decided = {t: len(baseline[t]) for t in ("selection", "test_plan", "schedule", "test_status_changed")}
    assert all(decided.values()), f"the history must make every kind of decision, or the check says little: {decided}"


@pytest.mark.slow
def test_every_view_is_the_same_whatever_the_batch_size(tmp_path):
    """The fleet's loop (node-state back to baseline-guard) is a feedback pipe: its reader runs at most
    FEEDBACK_LEAD_MS ahead of node-state. With batches of 2,000 records baseline-guard had run days ahead,
    and a late quarantine found the runs it reaches back over forgotten: 58 exclusions against 118
    with batches of 50 (200 commits)."""
    events = Workload(commits=200, seed=5).events()
    tables = {}
    for size in (2000, 50):
        append(tmp_path / str(size), [events])
        tables[size] = run(tmp_path / str(size), batch_size=size)
    assert len(tables[50]["baseline_exclusions"]) > 100  # the history quarantines nodes, or this says little
    for table, rows in tables[2000].items():
        assert sorted(map(repr, rows)) == sorted(map(repr, tables[50][table])), table


def test_appends_in_another_order_are_applied_in_the_same_event_time_order(tmp_path):
    """The records' times, not their place among appends to other topics, order a processor's inputs."""
    events = Workload(commits=3, seed=5).events()
    commits = [e for e in events if e.TOPIC == "commits"]
    results = [e for e in events if e.TOPIC == "results"]
    read_order = {}
    for name, blocks in {"results first": [results, commits], "commits first": [commits, results]}.items():
        append(tmp_path / name, blocks)
        # test-selection reads producers' topics only: no writer bounds its merge
        runtime = EmbeddedRuntime(
            tmp_path / name, SYSTEM, processors=[SelectionProcessor()], sync=False, batch_size=10_000
        )
        (selection,) = runtime.runners
        read_order[name] = [(window.topic, held.record.offset) for window, held, _ in selection._merged()]
        runtime.close()
        log = DataDir(tmp_path / name).log
        assert [r.timestamp_ms for r in log.topic("commits").read()] == [c.time_ms() for c in commits]
    assert read_order["results first"] == read_order["commits first"]
    topics = [topic for topic, _ in read_order["commits first"]]
    last_result = len(topics) - 1 - topics[::-1].index("results")
    assert topics[0] == "commits" and topics.index("commits", 1) < last_result  # interleaved, not topic by topic


def test_a_reader_goes_no_further_than_what_its_writer_may_still_append(tmp_path):
    """test-planner reads `selection`, which test-selection writes: while test-selection has a commit
    to apply, the planner's merge stops before anything its selection would sort ahead of."""
    events = Workload(commits=3, seed=5).events()
    append(tmp_path, [events])
    runtime = EmbeddedRuntime(
        tmp_path, SYSTEM, processors=[SelectionProcessor(), TestPlanProcessor()], sync=False, batch_size=10_000
    )
    try:
        selection, planner = runtime.runners
        first_commit = min(e.time_ms() for e in events if e.TOPIC == "commits")
        assert selection.low_watermark() <= first_commit
        held_back = [(window.topic, held.record) for window, held, _ in planner._merged()]
        assert held_back, "what sorts before the first selection goes"
        # nothing at or after the first commit but the commit itself (commits sort before selection)
        assert all(r.timestamp_ms < first_commit or t == "commits" for t, r in held_back)
        assert max(r.timestamp_ms for _, r in held_back) <= first_commit
        selection.step(False, ProcessorStats())  # the writer applies everything it has
        assert selection.low_watermark() == float("inf")
        runtime.shared.clear()  # what a round read (the runtime starts each round afresh)
        planner.reload()  # what its merge let go above was not applied: from its stored position again
        everything = list(planner._merged())
        assert len(everything) == sum(e.TOPIC in planner.processor.inputs for e in events) + 3  # and 3 selections
    finally:
        runtime.close()


def shuffled_within(events: list[Event], minutes: int, seed: int) -> list[Event]:
    """Each topic's events in time order but shuffled within windows of ``minutes`` (a producer whose
    records come up to that late), the topics' blocks interleaved as generated."""
    rng = random.Random(seed)
    window = minutes * 60_000
    keyed = [(e.time_ms() // window + rng.random(), n, e) for n, e in enumerate(in_time_order(events))]
    return [e for *_, e in sorted(keyed, key=lambda k: (k[0], k[1]))]


@pytest.mark.slow
def test_an_input_topic_appended_out_of_time_order_within_the_bound_gives_every_view_equal(tmp_path):
    """The synthetic history appends a run's results when the run ends (up to half an hour late); the
    same events in time order, or shuffled within windows of two hours, are applied in the same order."""
    events = Workload(commits=60, seed=5).events()
    orders = {
        "as generated": events,
        "in time order": in_time_order(events),
        "shuffled within two hours": shuffled_within(events, 120, seed=1),
    }
    assert orders["as generated"] != orders["in time order"]
    tables = {}
    for index, (name, ordered) in enumerate(orders.items()):
        append(tmp_path / str(index), [ordered])
        tables[name] = run(tmp_path / str(index), batch_size=97)
    for name, views in tables.items():
        for table, rows in views.items():
            assert rows == tables["in time order"][table], f"{name}: {table}"
    assert len(tables["as generated"]["selection"]) == 60


@pytest.mark.slow
def test_a_crash_between_batches_released_out_of_log_order_loses_and_doubles_nothing(tmp_path):
    """Records applied past the first one still waiting (the position) are remembered with it: a run
    that stops after a few commits and a later run apply each record once."""
    events = Workload(commits=40, seed=5).events()
    append(tmp_path / "whole", [events])
    whole = run(tmp_path / "whole", batch_size=61)
    append(tmp_path / "cut", [events])
    for commits_before_the_cut in (5, 17, 40):
        # a commit per 61 records applied: steps a writer's watermark cut short add up to one, so the
        # cut also drops applied steps that were never committed
        runtime = EmbeddedRuntime(tmp_path / "cut", SYSTEM, sync=False, batch_size=61, commit_every=61)
        commit, calls = runtime.checkpoint.commit, []

        def cut(*args, commit=commit, calls=calls, limit=commits_before_the_cut, **kwargs):
            if len(calls) == limit:
                raise SystemExit("power cut")
            calls.append(args)
            commit(*args, **kwargs)

        runtime.checkpoint.commit = cut
        with pytest.raises(SystemExit):
            runtime.run()
        runtime.close()
        assert any(released for *_, released in calls), "some batch applied records out of log order"
    assert run(tmp_path / "cut", batch_size=61) == whole
