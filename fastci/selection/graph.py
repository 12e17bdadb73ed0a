"""From evidence stacks to what a test executed: code units, and the calling context of each.

Stacks arrive in py-spy's folded shape, root first: ``QUALNAME (PATH:LINE);...`` with only the
project's own frames (the collector resolves QUALNAME from the source, see
``fastci.selection.units``). A unit is ``PATH::QUALNAME``; its calling context in one execution
is the chain of the ``CONTEXT_DEPTH`` units that called it, leaving out test code (test files
and conftest.py): two tests that reach ``attention`` through ``Model.forward`` exercise it in
the same context, whichever test function made the call. A unit a test calls directly, or through
at most ``DIRECT_HOPS`` library frames (a thin public wrapper over a private helper), has the test
in its context too: such a test exercises it with inputs of its own, and is not pruned for another
(a pruned test that reached ``_zip_equal`` through ``zip_equal`` with unequal inputs was the only
one to catch a fault there). Ids are short hashes, so the graph
stores 12 hex characters per unit, test or context instead of their names.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Sequence

from fastci.selection.units import is_test_file
from fastci.shared.test_ids import short_id

CONTEXT_DEPTH = 3  # callers kept per context: deep enough to tell call paths apart, bounded
DIRECT_HOPS = 1  # library frames between a test and a unit within which the test is part of its context
MAX_CONTEXTS = 32  # per (test, unit): a recursive or very polymorphic unit stays bounded


def unit_name(path: str, qualname: str) -> str:
    return f"{path}::{qualname}"


def parse_frame(frame: str) -> tuple[str, str] | None:
    """(path, qualname) of one folded frame ``QUALNAME (PATH:LINE)``; None when malformed."""
    qualname, sep, location = frame.rpartition(" (")
    if not sep or not location.endswith(")"):
        return None
    path, colon, _ = location[:-1].rpartition(":")
    return (path, qualname) if colon and path and qualname else None


@functools.lru_cache(maxsize=1 << 16)  # a test's frames recur in most of its stacks and runs
def _frame_unit(frame: str) -> tuple[str, str, bool] | None:
    """(path, unit id, whether it is test code) of one folded frame; None when malformed."""
    parsed = parse_frame(frame)
    if parsed is None:
        return None
    path, qualname = parsed
    return path, short_id(unit_name(path, qualname)), is_test_file(path)


def executions(stacks: Iterable[str], direct_hops: int = DIRECT_HOPS) -> tuple[dict[str, set[str]], set[str]]:
    """Unit id -> ids of the contexts it ran in; and the files whose code ran. ``direct_hops`` 0 is
    the rule before wrappers counted as direct calls (kept to replay recordings made with it)."""
    units: dict[str, set[str]] = {}
    files: set[str] = set()
    for stack in stacks:
        calls, paths = (
            _stack_calls(stack, direct_hops) if len(stack) <= _CACHED_STACK_CHARS else _calls_of(stack, direct_hops)
        )
        files.update(paths)
        for uid, context in calls:
            contexts = units.setdefault(uid, set())
            if len(contexts) < MAX_CONTEXTS:
                contexts.add(context)
    return units, files


_CACHED_STACK_CHARS = 4096  # longer stacks are rare, and would make the cache's memory unbounded


@functools.lru_cache(maxsize=1 << 14)  # a test's stacks recur run after run; parsing them was most of its cost
def _stack_calls(stack: str, direct_hops: int) -> tuple[tuple[tuple[str, str], ...], frozenset[str]]:
    return _calls_of(stack, direct_hops)


def _calls_of(stack: str, direct_hops: int = DIRECT_HOPS) -> tuple[tuple[tuple[str, str], ...], frozenset[str]]:
    """The (unit id, context id) pairs of one folded stack, root first, and the files it ran."""
    frames = [parsed for frame in stack.split(";") if (parsed := _frame_unit(frame)) is not None]
    return tuple((uid, context) for _, uid, context in _contexts(frames, direct_hops)), frozenset(f[0] for f in frames)


def _contexts(frames: list[tuple[str, str, bool]], direct_hops: int) -> Iterator[tuple[int, str, str]]:
    """(position, unit id, context id) of each frame of a call path, root first, that is not a
    direct recursion."""
    chain: list[str] = []
    test_frame = ""  # the innermost test-code unit so far
    for position, (_, uid, test_code) in enumerate(frames):
        if chain and chain[-1] == uid:
            continue  # direct recursion adds no new context
        callers = chain[-CONTEXT_DEPTH:]
        # Called straight from test code, or through a thin wrapper, the test is in the context: it
        # tests the function with inputs of its own, and is never pruned for another such test.
        # Reached through deeper library code, the call path alone is the context.
        if len(chain) <= direct_hops:
            context = short_id(f"test:{test_frame};{';'.join(callers)}" if callers else f"test:{test_frame}")
        else:
            context = short_id(";".join(callers))
        yield position, uid, context
        if test_code:
            test_frame = uid
        else:
            chain.append(uid)


@functools.lru_cache(maxsize=1 << 16)  # a test's units recur in most of its calls and runs
def _named_unit(name: str) -> tuple[str, str, bool]:
    """(path, unit id, whether it is test code) of a unit named 'path::qualname'."""
    path = name.partition("::")[0]
    return path, short_id(name), is_test_file(path)


def unit_executions(
    units: Sequence[str], calls: Iterable[Sequence[int]], direct_hops: int = DIRECT_HOPS
) -> tuple[dict[str, set[str]], set[str]]:
    """``executions`` of evidence shaped as units and calls (``EvidenceEvent.units``): each call gives
    the context of its last unit, computed from its callers as from a stack's; a unit with no call
    has no context recorded (an empty set)."""
    named = [_named_unit(unit) for unit in units]
    found: dict[str, set[str]] = {uid: set() for _, uid, _ in named}
    for call in calls:
        frames = [named[i] for i in call]
        last = len(frames) - 1
        for position, uid, context in _contexts(frames, direct_hops):
            if position == last and len(found[uid]) < MAX_CONTEXTS:
                found[uid].add(context)
    return found, {path for path, _, _ in named}
