"""History import: how fast ``fastci import`` publishes a history and ``fastci run`` applies it,
extrapolated to a year of a 400-changes/day fleet (40 million results).

Writes JUnit XML files (``--files`` of ``--cases`` test cases each: ``--tests`` distinct tests, 3%
failing, 2% skipped, one suite per file with its own timestamp), then times, as whole processes,
``fastci import`` of all of them into a fresh data dir and ``fastci run --no-sync`` over the result.
``--format parquet`` imports the same cases once more from Parquet files (one per JUnit file, the
results the JUnit import published, written by DuckDB) into another data dir, and requires the same
events. ``--floor`` then times what no runtime can take away: each processor's own ``process`` over
the imported results grouped by partition key, its state in a plain dict (no driver, log, merge,
checkpoint or encoding), and decoding the results once; as a year, against the apply.

    .venv/bin/python bench/import_rate.py [--files 20] [--cases 10000] [--tests 2000] [--format junit|parquet] [--floor]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

YEAR_OF_RESULTS = 40_000_000
START = datetime(2026, 1, 1, 2, tzinfo=UTC)


def write_junit(path: Path, night: int, cases: int, tests: int, rng: random.Random) -> None:
    stamp = (START + timedelta(days=night)).replace(tzinfo=None).isoformat()
    lines = [f'<?xml version="1.0"?>\n<testsuites><testsuite name="pytest" timestamp="{stamp}">']
    for index in range(cases):
        test = index % tests
        module, cls = f"tests.area{test % 40}.test_mod{test % 7}", f"TestCase{test % 11}"
        inner = ""
        roll = rng.random()
        if roll < 0.03:
            inner = '<failure message="assert 1 == 2">trace</failure>'
        elif roll < 0.05:
            inner = '<skipped message="not today"/>'
        time_s = f"{rng.uniform(0.01, 3.0):.3f}"
        name = f"test_{test}[{index // tests}]"
        lines.append(f'<testcase classname="{module}.{cls}" name="{name}" time="{time_s}">{inner}</testcase>')
    lines.append("</testsuite></testsuites>\n")
    path.write_text("\n".join(lines))


def results_of(data: Path) -> bytes:
    """The results topic of a data dir, as its bytes."""
    return b"".join(path.read_bytes() for path in sorted((data / "log" / "results").glob("*.log")))


def write_parquet(data: Path, scratch: Path, files: int, cases: int) -> list[Path]:
    """The results a JUnit import published, ``cases`` to a Parquet file, as a warehouse would export them."""
    import duckdb

    from fastci.runtime.log import Log

    lines = scratch / "published.jsonl"
    with open(lines, "wb") as out:
        for record in Log(data / "log").topic("results").read():
            out.write(record.payload + b"\n")
    tables = []
    with duckdb.connect() as db:
        for n in range(files):
            table = scratch / f"night-{n:03d}.parquet"
            db.execute(
                f"COPY (SELECT * EXCLUDE (id) FROM read_json_auto('{lines}') LIMIT {cases} OFFSET {n * cases}) "
                f"TO '{table}' (FORMAT parquet)"
            )
            tables.append(table)
    return tables


def floor(data: Path) -> list[tuple[str, float]]:
    """Seconds of decoding the results, then of each processor's own ``process`` over them."""
    import gc

    from fastci.core.codec import decode_as
    from fastci.inputs import ResultEvent
    from fastci.runtime.log import Log
    from fastci.topology import SYSTEM

    raws = [record.payload for record in Log(data / "log").topic(ResultEvent.TOPIC).read()]
    started = time.perf_counter()
    events = [decode_as(ResultEvent, raw) for raw in raws]
    rows = [("decoding", time.perf_counter() - started)]
    gc.disable()  # as the runtime runs a catch-up
    try:
        for processor in SYSTEM.build():
            if ResultEvent.TOPIC not in processor.inputs:
                continue
            by_key: dict[str, list] = {}
            for event in events:
                if not processor.ignores(event):
                    by_key.setdefault(processor.partition_key(event), []).append(event)
            state: dict = {}  # a StateReader: get(key) is None for a key never written
            started = time.perf_counter()
            for group in by_key.values():
                for event in group:
                    for key, value in processor.process(state, event).writes.items():
                        if value is None:
                            state.pop(key, None)
                        else:
                            state[key] = value
            rows.append((processor.name, time.perf_counter() - started))
    finally:
        gc.enable()
    return rows


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--cases", type=int, default=10_000, help="test cases per file")
    parser.add_argument("--tests", type=int, default=2_000, help="distinct tests")
    parser.add_argument(
        "--format", choices=("junit", "parquet"), default="junit", help="parquet: the JUnit import, then Parquet's"
    )
    parser.add_argument("--floor", action="store_true", help="then the processors' own code alone, in-process")
    args = parser.parse_args()
    rng = random.Random(11)
    with tempfile.TemporaryDirectory(prefix="fastci-import-") as scratch_name:
        scratch = Path(scratch_name)
        files = [scratch / f"night-{n:03d}.xml" for n in range(args.files)]
        for night, path in enumerate(files):
            write_junit(path, night, args.cases, args.tests, rng)
        total = args.files * args.cases
        megabytes = sum(p.stat().st_size for p in files) / 1e6
        fastci = [sys.executable, "-m", "fastci.cli", "--data-dir", str(scratch / "data")]
        context = ["--repo", "acme/big", "--commit", "abcdef1", "--trigger", "nightly", "--root", str(scratch)]
        publish_s = timed([*fastci, "import", *map(str, files), *context])
        run_s = timed([*fastci, "run", "--no-sync"])
        print(f"{total:,} results in {args.files} JUnit files ({megabytes:.1f} MB), {args.tests:,} distinct tests")
        rows = [("import (publish)", publish_s), ("run (apply)", run_s), ("both", publish_s + run_s)]
        if args.format == "parquet":
            tables = write_parquet(scratch / "data", scratch, args.files, args.cases)
            megabytes = sum(p.stat().st_size for p in tables) / 1e6
            parquet = [sys.executable, "-m", "fastci.cli", "--data-dir", str(scratch / "from-parquet")]
            publish_s = timed([*parquet, "import", *map(str, tables)])
            if results_of(scratch / "from-parquet") != results_of(scratch / "data"):
                sys.exit("the Parquet import published other events than the JUnit import")
            print(f"the same {total:,} results in {len(tables)} Parquet files ({megabytes:.1f} MB): the same events")
            rows.append(("Parquet (publish)", publish_s))
        for name, seconds in rows:
            rate = total / seconds
            year = YEAR_OF_RESULTS / rate / 60
            print(
                f"{name:<18}{seconds:>8.1f} s {rate:>10,.0f} results/s   a year (40 M, extrapolated): {year:,.0f} min"
            )
        if args.floor:
            parts = floor(scratch / "data")
            print("the floor: no runtime, each processor's own process() over the results, state in a dict")
            for name, seconds in parts:
                print(f"  {name:<22}{seconds:>7.2f} s {seconds / total * 1e6:>7.1f} us a result")
            whole = sum(seconds for _, seconds in parts)
            print(
                f"  {'all':<22}{whole:>7.2f} s {whole / total * 1e6:>7.1f} us a result, {whole / run_s:.2f}x the apply;"
                f" a year (extrapolated): {YEAR_OF_RESULTS / total * whole / 60:,.0f} min"
            )


if __name__ == "__main__":
    main()
