"""Attributing py-spy samples of a whole pytest session to its tests, by what is on the stack.

py-spy's raw output merges samples by stack and keeps no time, so a sample must say by itself
which test it belongs to. Each test's setup, call and teardown run inside a *marker*: a frame of
a function made for that test (same code, its own name ``fastci_evidence_<session>_test_<n>``),
so every sample taken while test n runs, in its fixtures as in its body, holds that frame; the
frames under it are the test's. Samples of other threads and of collection hold no marker and
are left out: evidence is what the test's own thread ran.

Why not boundary markers (a function called between tests that waits a few intervals to be
seen): raw output has no order, so a boundary delimits nothing, and the wait would cost ~10 ms
a test. Why not time windows (``--format chrometrace`` has timestamps): py-spy's sample times
scatter against the program's clock over several sampling intervals, longer than many unit tests
last, so samples near a boundary would land in the neighbour test. A marker
costs one frame per phase and no waiting, and never puts a sample in the wrong test
(bench/evidence_overhead.py: precision 100% against tracing).
"""

from __future__ import annotations

import secrets
import types
from collections.abc import Callable
from typing import TypeVar

from fastci.evidence.stacks import Frame

T = TypeVar("T")


def _inside(run: Callable[[], T]) -> T:
    return run()  # the marker's body: its frame, under the marker's name, is what py-spy sees


class Markers:
    """Marker functions for the tests of one session; the session tag keeps a nested session
    (pytester in-process) from claiming the outer session's samples."""

    def __init__(self, tag: str | None = None) -> None:
        self.prefix = f"fastci_evidence_{tag or secrets.token_hex(4)}_test_"

    def marker(self, index: int) -> Callable[[Callable[[], T]], T]:
        name = f"{self.prefix}{index}"
        code = _inside.__code__.replace(co_name=name, co_qualname=name)
        return types.FunctionType(code, _inside.__globals__, name)

    def index_of(self, frame: Frame) -> int | None:
        if frame.name.startswith(self.prefix):
            suffix = frame.name[len(self.prefix) :]
            if suffix.isdigit():
                return int(suffix)
        return None

    def attribute(self, samples: list[tuple[list[Frame], int]]) -> tuple[dict[int, list[tuple[list[Frame], int]]], int]:
        """Samples by test index (each cut to the frames under its marker), and how many samples
        held no marker (collection, session start and end, other threads)."""
        by_test: dict[int, list[tuple[list[Frame], int]]] = {}
        outside = 0
        for frames, count in samples:
            for position, frame in enumerate(frames):
                index = self.index_of(frame)
                if index is not None:
                    by_test.setdefault(index, []).append((frames[position + 1 :], count))
                    break
            else:
                outside += count
        return by_test, outside
