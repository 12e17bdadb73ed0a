"""Run the Kafka runtime: ``fastci worker`` (or ``faust -A streams.worker worker``).

Topics are created before faust starts: a worker that starts before its source
topic exists ignores that topic until it is restarted (measured, see KAFKA.md).
"""

from __future__ import annotations

import asyncio

import faust

from fastci.core.config import KafkaSettings
from fastci.core.processor import Processor
from fastci.runtime.kafka_io import ensure_topics
from fastci.topology import TOPICS, build_processors
from streams.app import create_app, internal_topics


def run_worker(settings: KafkaSettings, processor_names: list[str] | None = None, loglevel: str = "warn") -> None:
    run_processors(settings, build_processors(processor_names), loglevel)


def run_processors(settings: KafkaSettings, processors: list[Processor], loglevel: str = "warn") -> None:
    internal = internal_topics(settings, processors)
    asyncio.run(ensure_topics(settings, [*TOPICS, *internal]))
    app = create_app(settings, processors)
    worker = faust.Worker(app, loglevel=loglevel, quiet=True)
    worker.execute_from_commandline()


def __getattr__(name: str) -> faust.App:
    # ``faust -A streams.worker`` looks up ``app``; build it only then, from the environment.
    if name == "app":
        return create_app(KafkaSettings.from_env())
    raise AttributeError(name)
