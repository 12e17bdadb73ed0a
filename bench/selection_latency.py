"""Selection latency on a synthetic evidence graph of 10,000 tests x 200,000 functions.

The graph is written straight into a store in the selection processor's own encoding (what the
embedded checkpoint or a faust Table holds), then commits are answered through the real ``Driver``
and ``SelectionProcessor``: cold (the first commit decodes the catalog) and warm (the driver's
cache holds it, as in a running worker). The baseline, measured in the same run, is the naive
answer a per-test store gives: decode every test's evidence and intersect it with the change.

Unit popularity follows a power law (a few functions, like a model's forward, run in most tests).

    .venv/bin/python bench/selection_latency.py [--tests 10000] [--functions 200000] [--per-test 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.core.events import Record
from fastci.inputs import CommitEvent
from fastci.runtime.driver import Driver, Entry, decode_entry, encode_entry
from fastci.selection.graph import unit_name
from fastci.selection.processor import (
    CatalogBucket,
    CatalogEntry,
    SelectionProcessor,
    TestEvidence,
    UnitPostings,
    catalog_key,
    evidence_key,
    unit_key,
)
from fastci.shared.test_ids import BUCKETS, bucket_of, short_id

REPO = "acme/llm-framework"


class BytesStore(dict):
    def get(self, key: str) -> bytes | None:
        return super().get(key)


def build(tests: int, functions: int, per_test: int, seed: int) -> tuple[BytesStore, list[tuple[str, str]]]:
    rng = np.random.default_rng(seed)
    names = [(f"fw/module_{i % 2000}.py", f"func_{i}") for i in range(functions)]
    uids = [short_id(unit_name(p, q)) for p, q in names]
    weights = 1.0 / np.arange(1, functions + 1) ** 0.8  # power law: func_0 runs almost everywhere
    weights /= weights.sum()
    test_ids = [f"tests/test_{i % 500}.py::test_case_{i}" for i in range(tests)]
    tids = [short_id(t) for t in test_ids]
    postings: dict[str, dict[str, tuple[str, ...]]] = {}
    store = BytesStore()
    for tid, test in zip(tids, test_ids, strict=True):
        executed = np.unique(rng.choice(functions, size=per_test, p=weights))
        contexts = {uids[f]: (short_id(f"ctx{f % 7}"),) for f in executed}
        store[evidence_key(REPO, test)] = _encode(TestEvidence(units=contexts))
        for f in executed:
            postings.setdefault(uids[f], {})[tid] = contexts[uids[f]]
    for uid, by_test in postings.items():
        store[unit_key(REPO, uid)] = _encode(UnitPostings(tests=by_test))
    buckets: dict[int, dict[str, CatalogEntry]] = {b: {} for b in range(BUCKETS)}
    for tid, test in zip(tids, test_ids, strict=True):
        duration = float(rng.lognormal(2.0, 1.0))
        buckets[bucket_of(tid)][tid] = CatalogEntry(test_id=test, recent_s={"r": duration}, chips=8, evidence=True)
    for bucket, entries in buckets.items():
        store[catalog_key(REPO, bucket)] = _encode(CatalogBucket(tests=entries))
    return store, names


def _encode(state: Record) -> bytes:
    return encode_entry(Entry(state))


def commit(names: list[tuple[str, str]], picks: list[int], n: int) -> CommitEvent:
    return CommitEvent(
        repo=REPO,
        sha=f"{n:07x}",
        author="dev",
        time=datetime(2026, 12, 1, tzinfo=UTC),
        title=f"change {n}",
        changed_files=[{"path": names[i][0], "change": "modified"} for i in picks],
        changed_functions=[{"path": names[i][0], "qualname": names[i][1], "change": "modified"} for i in picks],
    )


def naive(store: BytesStore, tests: list[str], change: CommitEvent) -> int:
    changed = {short_id(unit_name(f.path, f.qualname)) for f in change.changed_functions}
    hits = 0
    for test in tests:
        entry = decode_entry(TestEvidence, store[evidence_key(REPO, test)])
        hits += bool(changed & set(entry.state.units))
    return hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument("--functions", type=int, default=200_000)
    parser.add_argument("--per-test", type=int, default=200, help="functions each test executes (before dedup)")
    parser.add_argument("--commits", type=int, default=20)
    args = parser.parse_args()

    started = time.perf_counter()
    store, names = build(args.tests, args.functions, args.per_test, seed=1)
    stored_mb = sum(len(k) + len(v) for k, v in store.items()) / 1e6
    print(
        f"graph: {args.tests:,} tests x {args.functions:,} functions, {len(store):,} keys, "
        f"{stored_mb:,.0f} MB encoded, built in {time.perf_counter() - started:.1f} s"
    )

    rng = np.random.default_rng(2)
    # Realistic commits touch 1-8 functions, mostly unpopular ones, sometimes a hot one.
    changes = [
        commit(
            names,
            [int(x) for x in rng.integers(0, args.functions, size=int(rng.integers(1, 9)))]
            + ([int(rng.integers(0, 50))] if n % 4 == 0 else []),
            n,
        )
        for n in range(args.commits)
    ]
    driver = Driver(SelectionProcessor(), store)
    timings, kept, selected = [], [], []
    for change in changes:
        t0 = time.perf_counter()
        (selection,) = driver.handle(change)
        if selection.TOPIC != "selection":
            raise SystemExit(f"selection failed: {selection}")
        timings.append(time.perf_counter() - t0)
        kept.append(selection.metrics.kept)
        selected.append(selection.metrics.selected)
    tests = [f"tests/test_{i % 500}.py::test_case_{i}" for i in range(args.tests)]
    t0 = time.perf_counter()
    naive(store, tests, changes[1])
    naive_s = time.perf_counter() - t0

    cold, warm = timings[0], timings[1:]
    print(f"selection, cold (decodes the catalog): {cold * 1e3:7.1f} ms")
    print(
        f"selection, warm: median {statistics.median(warm) * 1e3:.1f} ms, max {max(warm) * 1e3:.1f} ms "
        f"over {len(warm)} commits (selected median {statistics.median(selected):.0f}, kept median "
        f"{statistics.median(kept):.0f} of {args.tests:,} tests)"
    )
    print(
        f"baseline (decode every test's evidence): {naive_s * 1e3:.0f} ms for one commit; "
        f"warm selection is {naive_s / statistics.median(warm):,.0f}x faster"
    )


if __name__ == "__main__":
    main()
