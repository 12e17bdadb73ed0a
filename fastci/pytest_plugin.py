"""The fastci pytest plugin: turns any pytest suite into a fastci producer.

Installed, it loads itself through the ``pytest11`` entry point named ``fastci``; where plugin
autoloading is off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``) load it with ``-p fastci.pytest_plugin``
(with autoloading on, that second registration is refused, so use ``-p fastci`` there). Each
feature lives in its own module, listed in ``FEATURES``;
a feature module provides ``addoption(group)`` and ``configure(config)`` and stays inert
unless its options are given.
"""

from __future__ import annotations

import importlib
from typing import Any

FEATURES: tuple[str, ...] = (
    "fastci.producer.pytest_results",
    "fastci.evidence.pytest_evidence",
    "fastci.ci.pytest_select",
)


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("fastci", "fastci: run what the change needs; publish evidence and results")
    for module in FEATURES:
        importlib.import_module(module).addoption(group)


def pytest_configure(config: Any) -> None:
    for module in FEATURES:
        importlib.import_module(module).configure(config)
