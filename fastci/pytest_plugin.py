"""The fastci pytest plugin: turns any pytest suite into a fastci producer.

Installed, it loads itself through the ``pytest11`` entry point named ``fastci``; where plugin
autoloading is off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``) load it with ``-p fastci.pytest_plugin``
(with autoloading on, that second registration is refused, so use ``-p fastci`` there). Each
feature lives in its own module, listed in ``FEATURES``;
a feature module provides ``addoption(group)``, ``configure(config)`` and, if it must start before
the initial conftests load, ``early(early_config)``; each stays inert unless its options are given.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

FEATURES: tuple[str, ...] = (
    "fastci.producer.pytest_results",
    "fastci.evidence.pytest_evidence",
    "fastci.ci.pytest_select",
)


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("fastci", "fastci: run what the change needs; publish evidence and results")
    for module in FEATURES:
        importlib.import_module(module).addoption(group)


@pytest.hookimpl(hookwrapper=True)
def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Any) -> Any:
    """The earliest a plugin hears of a session: before the initial conftests import anything."""
    for module in FEATURES:
        early = getattr(importlib.import_module(module), "early", None)
        if early is not None:
            early(early_config)
    yield


def pytest_configure(config: Any) -> None:
    for module in FEATURES:
        importlib.import_module(module).configure(config)
