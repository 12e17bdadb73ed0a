"""``Processor.ignores``: an event a processor does nothing with whatever its state is skipped by the
driver, which then neither reads nor writes the key's entry. Safe only if the processor really does
nothing with it in every state: checked here against each processor's own ``process``, in an empty
state and in the state a whole synthetic history leaves, over that history and a plain repository's
imported results (which the fleet-only processors never read)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastci.core.events import Event
from fastci.core.processor import Processor
from fastci.demo.history import Workload
from fastci.inputs import ResultEvent
from fastci.runtime.driver import Driver
from fastci.runtime.memory import BytesStore, MemoryRuntime
from fastci.topology import SYSTEM

START = datetime(2026, 3, 1, tzinfo=UTC)


def plain_results(count: int) -> list[ResultEvent]:
    """A plain repository's results as `fastci import` makes them: no bundle, no hardware, a run id of
    its own, every status."""
    statuses = ("passed", "failed", "skipped", "error", "passed")
    return [
        ResultEvent(
            test_id=f"tests/test_mod{n % 3}.py::test_{n % 7}",
            run_id=f"junit-{n // 7}",
            repo="acme/plain",
            commit="abcdef1",
            node_id="ci-runner-1",
            status=statuses[n % len(statuses)],
            duration_s=0.5,
            trigger="nightly",
            time=START + timedelta(seconds=n),
        )
        for n in range(count)
    ]


def overriding() -> list[Processor]:
    return [p for p in SYSTEM.build() if type(p).ignores is not Processor.ignores]


def test_a_processor_does_nothing_with_what_it_ignores_in_any_state():
    events: list[Event] = [*Workload(commits=40, seed=5).events(), *plain_results(60)]
    runtime = MemoryRuntime(SYSTEM)
    runtime.publish(events)
    every = events + runtime.outputs
    checked = 0
    for processor in overriding():
        _, store = runtime.state(processor.name)
        history = Driver(processor, store)  # the state the history left
        empty = Driver(processor, BytesStore())
        for event in every:
            if event.TOPIC not in processor.inputs or not processor.ignores(event):
                continue
            for state in (empty, history):
                step = processor.process(state, event)
                assert not step.writes and not list(step.outputs), (processor.name, event.id)
            checked += 1
    # the fleet-only processors ignore every plain result; the rest, what their rules never read
    assert {"regression-detector", "bisect", "correctness-gates", "pool-scheduler"} <= {p.name for p in overriding()}
    assert checked > 500


def test_the_driver_neither_reads_nor_writes_the_key_of_an_ignored_event():
    reads: list[str] = []

    class CountingStore(BytesStore):
        def get(self, key: str) -> bytes | None:
            reads.append(key)
            return super().get(key)

    processor = next(p for p in SYSTEM.build() if p.name == "regression-detector")
    driver = Driver(processor, CountingStore())
    (plain,) = plain_results(1)
    assert processor.ignores(plain)
    assert driver.handle(plain) == []
    assert reads == [] and driver.drain_writes() == {}
    with_stack = next(e for e in Workload(commits=5, seed=5).events() if isinstance(e, ResultEvent) and e.bundle)
    assert not processor.ignores(with_stack)
    driver.handle(with_stack)
    assert reads and driver.drain_writes()  # read and remembered (its dedup record at least)
