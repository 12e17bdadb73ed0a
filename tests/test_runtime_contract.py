"""One contract for every runtime (``fastci.runtime.contract``), run on each backend.

The backends: ``memory`` (``MemoryRuntime``), ``embedded`` (``EmbeddedRuntime`` over its log and
checkpoint) and ``kafka`` (the faust worker, a subprocess, on the real broker). Each is driven the
same way: publish input events (or raw records), apply, read the decision topics. What a backend
promises is judged against the embedded runtime's decisions on the same events published once,
in time order: every case asks for the same decision ids, each once.

Cases, and the backends each runs on:

| case | memory | embedded | kafka |
|---|---|---|---|
| each event applied once (a producer sends each twice) | yes | yes | yes |
| a crash between outputs and state changes nothing | no: nothing is durable | yes | yes (1) |
| the ordering rule across topics (topics appended in turn) | no: delivers as published | yes | yes |
| bad records on dead letters, state untouched | no: takes events, not bytes | yes | yes |
| a restart resumes where the state ends | no: keeps nothing | yes | yes |

(1) the same decision ids; the batch the crash cut short appends its outputs again, which readers drop.

The whole-pipeline comparisons (every view, two workers, kills, other clients) stay in
``tests/test_kafka_ordering_views.py`` and ``tests/test_kafka_equivalence.py``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from kafka_helpers import read_events, start_worker, stop_worker, wait_until_consumed

from fastci.core.config import DEFAULT_BATCH, KafkaSettings
from fastci.core.dead_letters import DeadLetter
from fastci.core.events import Event
from fastci.demo.history import Workload, in_time_order, per_topic
from fastci.runtime import checkpoint as checkpoint_module
from fastci.runtime.embedded import DataDir, EmbeddedRuntime
from fastci.runtime.kafka.broker import ensure_topics, publish
from fastci.runtime.kafka.runtime import CRASH_AFTER_OUTPUTS_TO
from fastci.runtime.memory import MemoryRuntime
from fastci.topology import SYSTEM, TOPICS

DECISIONS = sorted({model.TOPIC for model in SYSTEM.decisions})
CRASH_TOPIC = "selection"  # a decision every commit makes
# The embedded runtime under test reads a few records at a time, so its merges hold and release across
# many rounds (the reference reads its usual batches).
SMALL_BATCH = 7
BAD_RECORDS = [b'{"test_id": "tests/x.py::t", "run_id": "r"}', b"not json at all"]


@pytest.fixture(scope="module")
def history() -> list[Event]:
    return in_time_order(Workload(commits=30, presubmit_tests=4, nightly_every=10, seed=5).events())


@pytest.fixture(scope="module")
def expected(history, tmp_path_factory) -> dict[str, Counter[str]]:
    """The embedded runtime's decisions, each id counted, for ``history`` published once in time order."""
    reference = EmbeddedBackend(tmp_path_factory.mktemp("reference"))
    reference.publish(history)
    reference.apply()
    return reference.decisions()


class Backend:
    """A runtime as the contract drives it."""

    durable = True  # keeps state and positions across a restart
    takes_bytes = True  # can be given records that do not decode
    orders_by_time = True  # applies the ordering rule

    def publish(self, events: Iterable[Event]) -> None:
        raise NotImplementedError

    def publish_raw(self, topic: str, payloads: list[bytes]) -> None:
        raise NotImplementedError

    def apply(self) -> None:
        raise NotImplementedError

    def apply_crashing_after_outputs_to(self, topic: str) -> None:
        """Apply until a batch's outputs to ``topic`` are durable and its state is not, then die."""
        raise NotImplementedError

    def restart(self) -> None:
        """Stop, and start anew from what is durable."""
        raise NotImplementedError

    def events(self, topic: str) -> list[Event]:
        raise NotImplementedError

    def decisions(self) -> dict[str, Counter[str]]:
        return {topic: Counter(event.id for event in self.events(topic)) for topic in DECISIONS}

    def close(self) -> None:
        pass


class MemoryBackend(Backend):
    durable = takes_bytes = orders_by_time = False

    def __init__(self) -> None:
        self.runtime = MemoryRuntime(SYSTEM)

    def publish(self, events: Iterable[Event]) -> None:
        self.runtime.publish(events)

    def apply(self) -> None:
        self.runtime.apply()

    def events(self, topic: str) -> list[Event]:
        return self.runtime.events(topic)


class EmbeddedBackend(Backend):
    def __init__(self, root: Path, batch_size: int = DEFAULT_BATCH) -> None:
        self.root = root
        self.batch_size = batch_size
        self.runtime = EmbeddedRuntime(root, SYSTEM, batch_size=batch_size)

    def publish(self, events: Iterable[Event]) -> None:
        self.runtime.publish(events)

    def publish_raw(self, topic: str, payloads: list[bytes]) -> None:
        DataDir(self.root).log.topic(topic).append(payloads, 0)

    def apply(self) -> None:
        self.runtime.apply()

    def apply_crashing_after_outputs_to(self, topic: str) -> None:
        log = self.runtime.data.log.topic(topic)
        commit = checkpoint_module.Checkpoint.commit

        def crash_once_outputs_are_there(checkpoint, *args, **kwargs):
            if log.end().offset:
                raise KeyboardInterrupt("killed after the outputs were appended, before the state was committed")
            return commit(checkpoint, *args, **kwargs)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(checkpoint_module.Checkpoint, "commit", crash_once_outputs_are_there)
            with pytest.raises(KeyboardInterrupt):
                self.runtime.apply()
        assert log.end().offset, f"the crash came before any output to {topic}"
        self.restart()

    def restart(self) -> None:
        self.runtime.close()
        self.runtime = EmbeddedRuntime(self.root, SYSTEM, batch_size=self.batch_size)

    def events(self, topic: str) -> list[Event]:
        return self.runtime.events(topic)

    def close(self) -> None:
        self.runtime.close()


class KafkaBackend(Backend):
    def __init__(self, settings: KafkaSettings, root: Path) -> None:
        self.settings = settings
        self.root = root
        self.worker = None
        self.starts = 0
        asyncio.run(ensure_topics(settings, TOPICS))

    def publish(self, events: Iterable[Event]) -> None:
        asyncio.run(publish(self.settings, list(events)))

    def publish_raw(self, topic: str, payloads: list[bytes]) -> None:
        async def send() -> None:
            producer = AIOKafkaProducer(**self.settings.client_options())
            await producer.start()
            try:
                for n, payload in enumerate(payloads):
                    await producer.send_and_wait(self.settings.topic(topic), value=payload, key=f"bad-{n}".encode())
            finally:
                await producer.stop()

        asyncio.run(send())

    def _start(self, extra_env: dict[str, str] | None = None) -> None:
        self.starts += 1
        self.log = self.root / f"worker-{self.starts}.log"
        self.worker = start_worker(self.settings, self.log, extra_env)

    def apply(self) -> None:
        if self.worker is None:
            self._start()
        wait_until_consumed(self.settings, self.worker, self.log)

    def apply_crashing_after_outputs_to(self, topic: str) -> None:
        self._start({CRASH_AFTER_OUTPUTS_TO: topic})
        assert self.worker.wait(180) == -9, self.log.read_text()[-3000:]  # it SIGKILLed itself
        self.worker = None

    def restart(self) -> None:
        if self.worker is not None:
            stop_worker(self.worker)
            self.worker = None

    def events(self, topic: str) -> list[Event]:
        return read_events(self.settings, topic)

    def close(self) -> None:
        if self.worker is not None:
            stop_worker(self.worker)


BACKENDS = ["memory", "embedded", pytest.param("kafka", marks=[pytest.mark.kafka, pytest.mark.slow])]


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path) -> Iterator[Backend]:
    if request.param == "memory":
        made: Backend = MemoryBackend()
    elif request.param == "embedded":
        made = EmbeddedBackend(tmp_path / "data", SMALL_BATCH)
    else:
        made = KafkaBackend(request.getfixturevalue("kafka"), tmp_path)
    try:
        yield made
    finally:
        made.close()


def needs(backend: Backend, promise: str) -> None:
    if not getattr(backend, promise):
        pytest.skip(f"{type(backend).__name__} does not promise this ({promise}: fastci/runtime/contract.py)")


def test_each_event_is_applied_once_when_a_producer_sends_it_again(backend, history, expected):
    # A producer that retried: each event appended twice, the copy at a new offset. (The same event
    # appended again much later is caught only for decisions, by applied markers: driver.py.)
    backend.publish(event for event in history for _ in range(2))
    backend.apply()
    decisions = backend.decisions()
    assert all(count == 1 for counted in decisions.values() for count in counted.values())
    if backend.orders_by_time:
        assert decisions == expected
    else:  # the same decisions, in the order they were made
        alone = MemoryBackend()
        alone.publish(history)
        assert decisions == alone.decisions()


def test_a_crash_between_outputs_and_state_changes_nothing(backend, history, expected):
    needs(backend, "durable")
    backend.publish(history)
    backend.apply_crashing_after_outputs_to(CRASH_TOPIC)
    backend.apply()
    decisions = backend.decisions()
    # The same decisions. On Kafka the batch the crash cut short is applied again and its outputs are
    # appended again under the same ids, which every reader drops (the embedded log appends them once).
    assert {topic: set(ids) for topic, ids in decisions.items()} == {topic: set(ids) for topic, ids in expected.items()}
    if isinstance(backend, EmbeddedBackend):
        assert decisions == expected
        return
    assert any(n > 1 for n in decisions[CRASH_TOPIC].values()), f"the crash must append {CRASH_TOPIC} again"
    # A copy is the same decision: applied again to later state it would make a different answer under
    # the same id (test-planner planning a commit a second time with its tests known by then).
    for topic in DECISIONS:
        by_id: dict[str, Event] = {}
        for event in backend.events(topic):
            assert by_id.setdefault(event.id, event) == event, f"{topic} {event.id}: two different decisions"
    assert all(n == 1 for n in decisions["test-plan"].values()), "test-planner applied a copied selection again"


def test_the_ordering_rule_holds_across_topics_whatever_order_they_are_appended_in(backend, history, expected):
    needs(backend, "orders_by_time")
    for block in reversed(per_topic(history)):  # every topic whole, the last written first
        backend.publish(block)
    backend.apply()
    assert backend.decisions() == expected


def test_bad_records_go_to_dead_letters_and_touch_no_state(backend, history, expected):
    needs(backend, "takes_bytes")
    backend.publish(history)
    backend.publish_raw("results", BAD_RECORDS)
    backend.apply()
    decisions = backend.decisions()
    dead = [event for event in backend.events(DeadLetter.TOPIC) if event.topic == "results"]
    assert len(dead) == len(BAD_RECORDS), dead
    assert {topic: ids for topic, ids in decisions.items() if topic != DeadLetter.TOPIC} == {
        topic: ids for topic, ids in expected.items() if topic != DeadLetter.TOPIC
    }


def test_a_restart_resumes_where_the_state_ends(backend, history, expected):
    needs(backend, "durable")
    half = len(history) // 2
    backend.publish(history[:half])
    backend.apply()
    backend.restart()
    backend.publish(history[half:])
    backend.apply()
    assert backend.decisions() == expected
