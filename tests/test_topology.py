"""The declared topology: every processor's inputs have a writer, pipes against the order are declared
feedback, and the order the embedded runtime runs is the declared one."""

from __future__ import annotations

from typing import ClassVar

import pytest

from fastci.core.events import Record
from fastci.core.processor import Processor, Step
from fastci.core.system import System
from fastci.demo.history import Workload
from fastci.inputs import ResultEvent
from fastci.runtime.embedded import EmbeddedRuntime
from fastci.runtime.memory import MemoryRuntime
from fastci.topology import SYSTEM


def test_the_declared_system_has_no_problems():
    assert SYSTEM.problems() == []


def test_every_processor_input_is_written_by_a_processor_or_a_producer():
    written = {topic for cls in SYSTEM.processors for topic in cls.outputs}
    for cls in SYSTEM.processors:
        for topic in cls.inputs:
            assert topic in written or topic in SYSTEM.input_topics, (cls.name, topic)


def test_the_embedded_runtime_runs_the_declared_order(tmp_path):
    runtime = EmbeddedRuntime(tmp_path, SYSTEM)
    try:
        assert tuple(runner.processor.name for runner in runtime.runners) == SYSTEM.order
    finally:
        runtime.close()


def test_a_subset_keeps_the_declared_order():
    names = ["pool-scheduler", "test-history", "test-selection"]
    assert [p.name for p in SYSTEM.build(names)] == [n for n in SYSTEM.order if n in names]
    with pytest.raises(ValueError, match="unknown processor"):
        SYSTEM.build(["no-such-processor"])


class _Nothing(Record):
    pass


class _Echo(Processor[_Nothing]):
    name = "echo"
    inputs: ClassVar[tuple[str, ...]] = ("echo-back",)
    outputs: ClassVar[tuple[str, ...]] = (ResultEvent.TOPIC,)
    state_model = _Nothing

    def process(self, state, event) -> Step[_Nothing]:
        return Step()


class _Reader(Processor[_Nothing]):
    name = "reader"
    inputs: ClassVar[tuple[str, ...]] = (ResultEvent.TOPIC,)
    outputs: ClassVar[tuple[str, ...]] = ()
    state_model = _Nothing

    def process(self, state, event) -> Step[_Nothing]:
        return Step()


def test_problems_name_an_unwritten_input_an_unknown_topic_and_an_undeclared_pipe_back():
    broken = System(inputs=(), decisions=(ResultEvent,), processors=(_Reader, _Echo))
    problems = "\n".join(broken.problems())
    assert "echo: topic 'echo-back' has no event model" in problems
    assert "echo: reads 'echo-back', which no processor writes" in problems
    assert "echo -> reader ('results') runs against the order, undeclared" in problems
    declared = System(
        inputs=(), decisions=(ResultEvent,), processors=(_Reader, _Echo), feedback={("echo", "reader"): "a test"}
    )
    assert not any("against the order" in p for p in declared.problems())


def test_the_public_event_package_hands_on_every_registered_model():
    import fastci.events as public

    for topic, model in SYSTEM.topics.items():
        assert getattr(public, model.__name__) is model, topic
        assert model.__name__ in public.__all__


def test_a_colocated_writer_keys_every_output_by_what_it_processes():
    """``System.colocated`` goes by field names; this holds it to what the processors emit. The Kafka
    worker's markers bound a partition of such a topic by that partition's writer alone."""
    processors = SYSTEM.build()
    seen: dict[tuple[str, str], int] = {}

    def checked(processor: Processor) -> None:
        process = processor.process
        topics = [t for t in processor.outputs if SYSTEM.colocated(processor, t)]

        def wrapped(state, event):
            step = process(state, event)
            for output in step.outputs:
                if output.TOPIC in topics:
                    assert output.key == processor.partition_key(event), (processor.name, output.TOPIC)
                    seen[(processor.name, output.TOPIC)] = seen.get((processor.name, output.TOPIC), 0) + 1
            return step

        processor.process = wrapped  # type: ignore[method-assign]

    for processor in processors:
        checked(processor)
    MemoryRuntime(SYSTEM, processors).publish(Workload(commits=60, seed=5).events())
    # the pairs whose readers on another worker rely on it, each seen emitting
    for pair in (
        ("test-planner", "test-plan"),
        ("node-state", "node-state-changed"),
        ("flaky-detector", "flaky-verdicts"),
    ):
        assert seen.get(pair), pair
    assert not SYSTEM.colocated(processors[SYSTEM.order.index("node-state")], "run-requested")  # reruns, by test
