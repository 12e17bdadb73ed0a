"""The runtimes' garbage-collector policy: freeze after every batch, a full collection when due, and
no automatic collection while a runtime runs."""

from __future__ import annotations

import gc
import weakref

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


def cyclic_garbage() -> weakref.ref:
    a, b = Node(), Node()
    a.other, b.other = b, a  # unreachable once this returns; only the cycle collector frees it
    return weakref.ref(a)


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


def test_without_automatic_collection_cyclic_garbage_waits_for_the_full_collection():
    assert gc.isenabled()
    pauses = PauseControl(full_every_s=60.0, clock=Clock(), automatic=False)
    try:
        pauses.start()
        assert not gc.isenabled()
        pauses.after_batch()  # starts the interval
        cycle = cyclic_garbage()
        garbage = [Node() for _ in range(100_000)]  # far past every generation's threshold
        del garbage
        assert cycle() is not None  # no collection ran
        pauses.clock.now = 60.0
        full = pauses.after_batch()
        assert full is not None and full.unreachable >= 2
        assert cycle() is None
        assert not gc.isenabled()  # a full collection does not turn the collector back on
    finally:
        pauses.stop()
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_stop_leaves_the_collector_off_when_it_was_off_before_start():
    gc.disable()
    try:
        pauses = PauseControl(automatic=False)
        pauses.start()
        pauses.stop()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_an_embedded_run_collects_nothing_between_batches_and_leaves_the_collector_as_it_found_it(tmp_path):
    from fastci.demo.history import Workload
    from fastci.runtime.embedded import EmbeddedRuntime
    from fastci.runtime.publish import publish_embedded

    publish_embedded(tmp_path, Workload(commits=20).events())
    runtime = EmbeddedRuntime(tmp_path, SYSTEM, batch_size=50)
    enabled: list[bool] = []
    try:
        assert runtime.run(progress=lambda name, done, total: enabled.append(gc.isenabled())).events > 0
    finally:
        runtime.close()
    assert len(enabled) > 10 and not any(enabled)
    assert gc.isenabled() and gc.get_freeze_count() == 0
