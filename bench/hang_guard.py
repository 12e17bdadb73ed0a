"""A pytest plugin for bench/selection_replay.py --record: a test that hangs fails, and only it.

A mutant can turn a loop infinite. To learn every test that fails on it, the suite must go on past
such a test, so its call phase gets a SIGALRM when it has run far longer than it did without the
mutant, which raises ``TestHung``, and again every 0.5 s until the test ends: unittest's
``subTest`` records an exception and runs the next subtest, which may hang too (pytest-timeout
fires once per test).

The limit is relative, because on a loaded host a test that takes 0.3 s alone can take 3 s: per
test, ``FASTCI_HANG_FACTOR`` (20) times its duration in the unmutated run (a JSON file of node id
-> seconds, ``FASTCI_HANG_BASELINE``), and never less than ``FASTCI_HANG_LIMIT_S`` (5). Load it with
``-p hang_guard`` and this directory on PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

FLOOR_S = float(os.environ.get("FASTCI_HANG_LIMIT_S", "5"))
FACTOR = float(os.environ.get("FASTCI_HANG_FACTOR", "20"))
REPEAT_S = 0.5
_BASELINE_FILE = os.environ.get("FASTCI_HANG_BASELINE")
BASELINE: dict[str, float] = json.loads(open(_BASELINE_FILE).read()) if _BASELINE_FILE else {}


class TestHung(BaseException):  # not an Exception: `except Exception` in the code under test must not swallow it
    __test__ = False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    limit = max(FLOOR_S, FACTOR * BASELINE.get(item.nodeid, 0.0))

    def alarm(signum, frame):
        raise TestHung(f"{item.nodeid} still running after {limit:g} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, limit, REPEAT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
