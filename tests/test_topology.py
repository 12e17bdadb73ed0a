"""The declared topology: every processor's inputs have a writer, pipes against the order are declared
feedback, and the order the embedded runtime runs is the declared one."""

from __future__ import annotations

from typing import ClassVar

import pytest

from fastci.core.events import Record
from fastci.core.processor import Processor, Step
from fastci.core.system import System
from fastci.inputs import ResultEvent
from fastci.runtime.embedded import EmbeddedRuntime
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
