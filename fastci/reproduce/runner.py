"""A runner for qualification tests: executes ``run-requested`` events for ``qualify/<model>/<precision>/
<check>`` on the emulated accelerator (or the reference backend) and publishes each outcome as a
``results`` event, as the run-request contract says: trigger = the work class, the same test, commit,
bundle and hardware revision, and the request's seed and config. Its run id is
``<work class>-<request id>``, which ties the result to the request.

Everything the run depends on comes from the request: the bundle (whose layer versions also pin any
injected defect), the backend and precision, the step count and the seed; when the config names a
baseline bundle, throughput is gated against it again. A config that the model code no longer
matches (batch size, learning rate, architecture) cannot be reproduced: the runner says so and
publishes nothing for that request.

``Runner`` reads the embedded log from a position of its own (``<data dir>/runner/<name>.json``),
written after each request's result is published; ``KafkaRunner`` reads the broker's
``run-requested`` in a consumer group of its own and commits each request's offset after its result
is acknowledged. Either way a crash in between runs that request again, and the result, having the
same id, is dropped by every consumer.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from fastci.contracts.runs import RunRequested
from fastci.core.codec import InvalidEvent
from fastci.core.config import KafkaSettings
from fastci.inputs import BUNDLE_LAYERS, Bundle, ResultEvent
from fastci.producer.context import RunContext
from fastci.qualify import runner
from fastci.qualify.models import FAMILIES
from fastci.qualify.results import BASELINE_CONFIG, to_results
from fastci.runtime.embedded import DataDir
from fastci.runtime.log import Position
from fastci.runtime.publish import publish_embedded
from fastci.topology import decode

QUALIFY_PREFIX = "qualify/"


class NotReproducible(ValueError):
    """The request names a run this runner cannot repeat as it was; the message says what differs."""


@dataclass(frozen=True)
class Handled:
    request: RunRequested
    result: ResultEvent | None  # None: skipped or not reproducible
    note: str


def run_id_for(request: RunRequested) -> str:
    return f"{request.work_class}-{request.id}"


def execute(request: RunRequested, node_id: str, now: datetime | None = None) -> ResultEvent:
    """Run the requested qualification check and return its result (not published)."""
    parts = request.test_id.split("/")
    if len(parts) != 4 or parts[0] != "qualify":
        raise NotReproducible(f"{request.test_id}: not a qualification test (qualify/<model>/<precision>/<check>)")
    _, model, precision, check = parts
    if model not in FAMILIES:
        raise NotReproducible(f"{request.test_id}: model {model!r} is not in the qualification set")
    config = dict(request.config)
    family = FAMILIES[model]
    expected = {
        "model": model,
        "precision": precision,
        "family": family.kind,
        "batch": family.batch_size,
        "learning_rate": family.lr,
        **family.config,
    }
    differs = [
        f"{key} {config[key]!r} (the code has {value!r})"
        for key, value in expected.items()
        if key in config and _normal(config[key]) != _normal(value)
    ]
    if differs:
        raise NotReproducible(f"{request.test_id}: the config differs from the model code: {', '.join(differs)}")
    backend_name = str(config.get("backend", f"emulated-{precision}"))
    kind = "reference" if backend_name == "reference" else "emulated"
    if kind == "emulated" and backend_name != f"emulated-{precision}":
        raise NotReproducible(f"{request.test_id}: backend {backend_name!r} does not match precision {precision!r}")
    steps = config.get("steps")
    if steps is not None and (not isinstance(steps, int) or steps < 1):
        raise NotReproducible(f"{request.test_id}: config 'steps' must be a positive integer (got {steps!r})")
    try:
        backend = runner.make_backend(kind, request.bundle, precision)  # type: ignore[arg-type]
        baseline = None
        if BASELINE_CONFIG in config:
            versions = config[BASELINE_CONFIG]
            if not isinstance(versions, list) or len(versions) != len(BUNDLE_LAYERS):
                raise NotReproducible(
                    f"{request.test_id}: config '{BASELINE_CONFIG}' must list the {len(BUNDLE_LAYERS)} layer versions"
                )
            baseline = runner.make_backend(
                "emulated", Bundle(**dict(zip(BUNDLE_LAYERS, map(str, versions)))), precision
            )  # type: ignore[arg-type]
    except ValueError as error:
        raise NotReproducible(f"{request.test_id}: {error}") from None
    qualification = runner.qualify(backend, [model], baseline, seed=request.seed, steps=steps)  # type: ignore[arg-type]
    context = RunContext(
        bundle=request.bundle,
        node_id=node_id,
        hardware_revision=request.hardware_revision,
        repo=request.repo,
        commit=request.commit,
        trigger=request.work_class,
    )
    results = to_results(qualification, context, run_id_for(request), now or datetime.now(UTC))
    (chosen,) = [r for r in results if r.test_id == request.test_id]
    return chosen


def _normal(value: object) -> object:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


class Runner:
    """Consumes ``run-requested`` from the embedded log of ``data_dir``."""

    def __init__(
        self, data_dir: Path, node_id: str, hardware_revision: str | None = None, name: str | None = None
    ) -> None:
        self.data = DataDir(Path(data_dir))
        self.node_id = node_id
        self.hardware_revision = hardware_revision
        self.position_path = Path(data_dir) / "runner" / f"{name or node_id}.json"

    def position(self) -> Position:
        try:
            saved = json.loads(self.position_path.read_text())
            return Position(saved["offset"], saved["segment"], saved["byte"])
        except FileNotFoundError:
            return Position()

    def _save(self, position: Position) -> None:
        self.position_path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.position_path.with_suffix(".tmp")
        temporary.write_text(
            json.dumps({"offset": position.offset, "segment": position.segment, "byte": position.byte})
        )
        os.replace(temporary, self.position_path)

    def run_once(self, progress: Callable[[Handled], None] | None = None) -> list[Handled]:
        """Handle every request in the log past this runner's position."""
        handled = []
        log = self.data.log.topic(RunRequested.TOPIC)
        for record in log.read(self.position()):
            try:
                event = decode(RunRequested.TOPIC, record.payload)
            except InvalidEvent:
                self._save(record.next)  # the processors dead-letter it; nothing to run
                continue
            assert isinstance(event, RunRequested)
            outcome = self._handle(event)
            if outcome.result is not None:
                publish_embedded(self.data.root, [outcome.result])
            self._save(record.next)
            handled.append(outcome)
            if progress:
                progress(outcome)
        return handled

    def follow(self, progress: Callable[[Handled], None] | None = None, poll_s: float = 1.0) -> None:
        while True:
            if not self.run_once(progress):
                time.sleep(poll_s)

    def _handle(self, request: RunRequested) -> Handled:
        return handle(request, self.node_id, self.hardware_revision)


def handle(request: RunRequested, node_id: str, hardware_revision: str | None) -> Handled:
    """Run one request if it is this runner's to run (a qualification test, its hardware revision,
    a node it is not asked to avoid); say why not otherwise."""
    if not request.test_id.startswith(QUALIFY_PREFIX):
        return Handled(request, None, "skipped: not a qualification test (another runner's)")
    if hardware_revision is not None and request.hardware_revision != hardware_revision:
        return Handled(request, None, f"skipped: for hardware revision {request.hardware_revision}")
    if node_id in request.avoid_nodes:
        return Handled(request, None, f"skipped: asked to avoid {node_id}")
    try:
        result = execute(request, node_id)
    except NotReproducible as error:
        return Handled(request, None, f"not reproducible: {error}")
    return Handled(request, result, f"{result.status} (run {result.run_id})")


class KafkaRunner:
    """Consumes ``run-requested`` from Kafka in the consumer group ``<app id>-runner-<name>``."""

    def __init__(
        self, settings: KafkaSettings, node_id: str, hardware_revision: str | None = None, name: str | None = None
    ) -> None:
        self.settings = settings
        self.node_id = node_id
        self.hardware_revision = hardware_revision
        self.group = f"{settings.app_id}-runner-{name or node_id}"

    def run_once(self, progress: Callable[[Handled], None] | None = None) -> list[Handled]:
        """Handle every request published up to now that this runner's group has not handled."""
        return asyncio.run(self._consume(follow=False, progress=progress))

    def follow(self, progress: Callable[[Handled], None] | None = None) -> None:
        asyncio.run(self._consume(follow=True, progress=progress))

    async def _consume(self, follow: bool, progress: Callable[[Handled], None] | None) -> list[Handled]:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

        from fastci.core.codec import encode
        from fastci.runtime.kafka.broker import ensure_topics

        settings = self.settings
        await ensure_topics(settings, [RunRequested.TOPIC, ResultEvent.TOPIC])
        consumer = AIOKafkaConsumer(
            settings.topic(RunRequested.TOPIC),
            group_id=self.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **settings.client_options(),
        )
        producer = AIOKafkaProducer(acks="all", enable_idempotence=True, **settings.client_options())
        await consumer.start()
        await producer.start()
        handled: list[Handled] = []
        try:
            ends: dict[TopicPartition, int] | None = None
            while True:
                batches = await consumer.getmany(timeout_ms=1000)
                if ends is None and consumer.assignment():
                    ends = await consumer.end_offsets(list(consumer.assignment()))
                for tp, records in batches.items():
                    for record in records:
                        outcome = await self._one(record.value or b"")
                        if outcome is not None:
                            if outcome.result is not None:
                                await producer.send_and_wait(
                                    settings.topic(ResultEvent.TOPIC),
                                    value=encode(outcome.result),
                                    key=outcome.result.key.encode(),
                                )
                            handled.append(outcome)
                            if progress:
                                progress(outcome)
                        await consumer.commit({tp: record.offset + 1})
                if not follow and ends is not None:
                    positions = [await consumer.position(tp) for tp in ends]
                    if all(position >= ends[tp] for position, tp in zip(positions, ends)):
                        return handled
        finally:
            await producer.stop()
            await consumer.stop()

    async def _one(self, payload: bytes) -> Handled | None:
        try:
            event = decode(RunRequested.TOPIC, payload)
        except InvalidEvent:
            return None  # the processors dead-letter it; nothing to run
        assert isinstance(event, RunRequested)
        # A run takes seconds of CPU: off the event loop, so the group's heartbeats go on.
        return await asyncio.to_thread(handle, event, self.node_id, self.hardware_revision)
