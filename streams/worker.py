"""Run the Kafka runtime: ``fastci worker`` (or ``faust -A streams.worker worker``).

Topics are created before faust starts: a worker that starts before its source
topic exists ignores that topic until it is restarted.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import faust

from fastci.core.config import KafkaSettings
from fastci.core.processor import Processor
from fastci.runtime.kafka.broker import ensure_topics
from fastci.runtime.kafka.routes import internal_topics
from fastci.topology import TOPICS, build_processors
from streams.app import create_app

SHUTDOWN_S = 30.0  # how long a stopping worker may take before it exits anyway


class BoundedShutdownWorker(faust.Worker):
    """faust's worker, whose shutdown ends within ``SHUTDOWN_S``.

    After SIGTERM, faust's worker stopped its services and then, now and then, waited forever in
    mode's final loop teardown (seen with two workers, the first one terminated; robinhood/faust#484
    reports the same). A worker that never exits blocks a deploy until the orchestrator kills it.
    Exiting is safe at any point: outputs, state and positions are durable before offsets are
    committed, so a worker killed mid-batch loses nothing (the SIGKILL fault tests)."""

    def __init__(self, *args: Any, exit: Callable[[int], object] = os._exit, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._exit = exit

    def on_worker_shutdown(self) -> None:
        super().on_worker_shutdown()
        watchdog = threading.Timer(SHUTDOWN_S, self._give_up)
        watchdog.daemon = True  # a shutdown that finishes in time is not held up by it
        watchdog.start()

    def _give_up(self) -> None:
        print(f"fastci worker: shutdown not finished after {SHUTDOWN_S:g} s; exiting anyway", file=sys.stderr)
        sys.stderr.flush()
        self._exit(1 if self.crash_reason else 0)


def run_worker(settings: KafkaSettings, processor_names: list[str] | None = None, loglevel: str = "warn") -> None:
    run_processors(settings, build_processors(processor_names), loglevel)


def run_processors(settings: KafkaSettings, processors: list[Processor], loglevel: str = "warn") -> None:
    internal = internal_topics(settings, processors)
    asyncio.run(ensure_topics(settings, [*TOPICS, *internal]))
    app = create_app(settings, processors)
    worker = BoundedShutdownWorker(app, loglevel=loglevel, quiet=True)
    worker.execute_from_commandline()


def __getattr__(name: str) -> faust.App:
    # ``faust -A streams.worker`` looks up ``app``; build it only then, from the environment.
    if name == "app":
        return create_app(KafkaSettings.from_env())
    raise AttributeError(name)
