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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

FEATURES: tuple[str, ...] = (
    "fastci.producer.pytest_results",
    "fastci.evidence.pytest_evidence",
    "fastci.ci.pytest_select",
)
# Each feature's flag, to name it in a usage error about the settings it reads.
FLAGS = {
    "fastci.producer.pytest_results": "--fastci-results",
    "fastci.evidence.pytest_evidence": "--fastci-evidence",
    "fastci.ci.pytest_select": "--fastci-select",
}


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("fastci", "fastci: run what the change needs; publish evidence and results")
    group.addoption(
        "--fastci-env",
        metavar="NAME",
        help="this job's name for its CI matrix cell, for axes fastci cannot see (a CUDA version, a "
        "dependency set); recorded with the interpreter and platform on results and evidence; default $FASTCI_ENV",
    )
    for module in FEATURES:
        importlib.import_module(module).addoption(group)


@pytest.hookimpl(hookwrapper=True)
def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Any) -> Any:
    """The earliest a plugin hears of a session: before the initial conftests import anything."""
    _check_data_dir(early_config.known_args_namespace)
    for module in FEATURES:
        early = getattr(importlib.import_module(module), "early", None)
        if early is not None:
            with _settings_of(module):
                early(early_config)
    yield


def pytest_configure(config: Any) -> None:
    for module in FEATURES:
        with _settings_of(module):
            importlib.import_module(module).configure(config)


def _check_data_dir(options: Any) -> None:
    """A ``$FASTCI_DATA_DIR`` no flag can use (empty, a file, inside a data dir's log) is a usage error
    naming it, before any feature starts. One that does not exist yet is made: a first session starts
    the history, as a first ``fastci import`` does."""
    given = [flag for flag in FLAGS.values() if getattr(options, flag[2:].replace("-", "_"), False)]
    if not given:
        return
    from fastci.core import config

    try:
        path = config.data_dir()
        config.check_data_dir(path, f"FASTCI_DATA_DIR={path}", must_exist=False)
    except config.ConfigError as error:
        raise pytest.UsageError(f"{given[0]}: {error}") from None


@contextmanager
def _settings_of(module: str) -> Iterator[None]:
    """A setting a feature cannot work with (an empty ``$FASTCI_KAFKA_BOOTSTRAP``...) as a usage error
    naming the feature's flag, not an INTERNALERROR."""
    from fastci.core.config import ConfigError

    try:
        yield
    except ConfigError as error:
        raise pytest.UsageError(f"{FLAGS[module]}: {error}") from None
