"""A pytest plugin for bench/selection_replay.py --record: a test that hangs fails, and only it.

A mutant can turn a loop infinite. To learn every test that fails on it, the suite must go on past
such a test, so its call phase gets a SIGALRM after ``FASTCI_HANG_LIMIT_S`` seconds that raises
``TestHung``, and again every 0.5 s until the test ends: unittest's ``subTest`` records an
exception and runs the next subtest, which may hang too (pytest-timeout fires once per test).
Load it with ``-p hang_guard`` and this directory on PYTHONPATH.
"""

from __future__ import annotations

import os
import signal

import pytest

LIMIT_S = float(os.environ.get("FASTCI_HANG_LIMIT_S", "2"))
REPEAT_S = 0.5


class TestHung(BaseException):  # not an Exception: `except Exception` in the code under test must not swallow it
    pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    def alarm(signum, frame):
        raise TestHung(f"{item.nodeid} still running after {LIMIT_S:g} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, LIMIT_S, REPEAT_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
