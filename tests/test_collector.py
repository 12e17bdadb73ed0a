"""The runtimes' garbage-collector policy: freeze after every batch, a full collection when due."""

from __future__ import annotations

import gc

import pytest

from fastci.runtime.collector import PauseControl
from fastci.topology import SYSTEM


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def cyclic_garbage() -> None:
    a, b = Node(), Node()
    a.other, b.other = b, a  # unreachable once this returns; only the cycle collector frees it


@pytest.fixture
def pauses():
    control = PauseControl(full_every_s=60.0, clock=Clock())
    yield control
    gc.unfreeze()


def test_what_survives_a_batch_is_frozen_and_handed_back_on_stop(pauses):
    survivor = Node()
    assert pauses.after_batch() is None
    assert not any(o is survivor for o in gc.get_objects())  # collections no longer walk it
    pauses.stop()
    assert gc.get_freeze_count() == 0
    assert any(o is survivor for o in gc.get_objects())


def test_frozen_cyclic_garbage_waits_for_the_full_collection_when_it_is_due(pauses):
    gc.collect()
    pauses.after_batch()  # starts the interval
    cyclic_garbage()
    pauses.after_batch()  # the cycle is frozen with everything else
    assert gc.collect() == 0  # an ordinary collection no longer sees it
    pauses.clock.now = 59.0
    assert pauses.after_batch() is None
    pauses.clock.now = 60.0
    full = pauses.after_batch()
    assert full is not None and full.unreachable >= 2
    assert pauses.collections == [full]
    pauses.clock.now = 119.0
    assert pauses.after_batch() is None  # the next one is due 60 s after this one


def test_an_embedded_run_leaves_nothing_frozen(tmp_path):
    from fastci.demo.history import Workload
    from fastci.runtime.embedded import EmbeddedRuntime
    from fastci.runtime.publish import publish_embedded

    publish_embedded(tmp_path, Workload(commits=20).events())
    runtime = EmbeddedRuntime(tmp_path, SYSTEM)
    try:
        assert runtime.run().events > 0
    finally:
        runtime.close()
    assert gc.get_freeze_count() == 0
