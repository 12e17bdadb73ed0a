"""The producer API: publish typed events from CI, test suites and qualification runs, with the run
context (stack bundle, node, code under test) attached and a local spool so nothing is dropped.

Names are imported on first use: the pytest plugin lives in this package and is loaded by every
pytest session, which should not pay for pydantic and aiokafka unless it publishes.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "FlushReport": "client",
    "Producer": "client",
    "RetryPolicy": "client",
    "ContextError": "context",
    "RunContext": "context",
    "load_context": "context",
    "Spool": "spool",
    "EmbeddedTarget": "targets",
    "KafkaTarget": "targets",
    "Target": "targets",
    "TargetUnavailable": "targets",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'fastci.producer' has no attribute {name!r}")
    return getattr(importlib.import_module(f"fastci.producer.{_EXPORTS[name]}"), name)
