"""The fastci pytest plugin: turns any pytest suite into a fastci producer.

Load it with ``pytest -p fastci.pytest_plugin`` (installed packages load it through the
``pytest11`` entry point). Each feature lives in its own module, listed in ``FEATURES``;
a feature module provides ``addoption(group)`` and ``configure(config)`` and stays inert
unless its options are given.
"""

from __future__ import annotations

import importlib
from typing import Any

FEATURES: tuple[str, ...] = ("fastci.producer.plugin",)


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("fastci", "fastci: publish evidence and results of this test session")
    for module in FEATURES:
        importlib.import_module(module).addoption(group)


def pytest_configure(config: Any) -> None:
    for module in FEATURES:
        importlib.import_module(module).configure(config)
