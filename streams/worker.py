"""Run the Kafka runtime: ``fastci worker`` (or ``faust -A streams.worker worker``).

Topics are created before faust starts: a worker that starts before its source
topic exists ignores that topic until it is restarted (measured, see KAFKA.md).
"""

from __future__ import annotations

import asyncio

import faust

from fastci.config import KafkaSettings
from fastci.events import TOPICS
from fastci.processors import build_processors
from fastci.runtime.kafka_io import ensure_topics
from streams.app import create_app


def run_worker(settings: KafkaSettings, processor_names: list[str] | None = None, loglevel: str = "warn") -> None:
    processors = build_processors(processor_names)
    asyncio.run(ensure_topics(settings, TOPICS))
    app = create_app(settings, processors)
    worker = faust.Worker(app, loglevel=loglevel, quiet=True)
    worker.execute_from_commandline()


def __getattr__(name: str) -> faust.App:
    # ``faust -A streams.worker`` looks up ``app``; build it only then, from the environment.
    if name == "app":
        return create_app(KafkaSettings.from_env())
    raise AttributeError(name)
