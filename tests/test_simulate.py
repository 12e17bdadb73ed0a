"""The CI simulator: its inputs come from the real processors, its stream from the recording."""

from __future__ import annotations

from processor_helpers import Store, feed, of_topic
from test_selection import ATTN, commit, history, kept_ids

from fastci.processors.selection import SelectionProcessor


def select_with(processor: SelectionProcessor, change):
    (selection,) = of_topic(feed(processor, Store(), [*history(), change]), "selection")
    return selection


def test_the_ablation_switches_pruning_and_selection_off_in_the_real_processor():
    change = commit((*ATTN, "modified"))
    assert kept_ids(select_with(SelectionProcessor(), change)) == ["tests/test_model.py::test_forward"]
    unpruned = select_with(SelectionProcessor(pruning=False), change)
    assert sorted(kept_ids(unpruned)) == ["tests/test_model.py::test_backward", "tests/test_model.py::test_forward"]
    assert unpruned.pruned == () and unpruned.metrics.selected == 2
    everything = select_with(SelectionProcessor(run_everything=True), change)
    assert everything.run_all and everything.metrics.kept == everything.metrics.tests_known == 3
