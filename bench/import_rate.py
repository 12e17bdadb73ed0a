"""History import: how fast ``fastci import`` publishes a JUnit history and ``fastci run`` applies it,
extrapolated to a year of a 400-changes/day fleet (40 million results).

Writes JUnit XML files (``--files`` of ``--cases`` test cases each: ``--tests`` distinct tests, 3%
failing, 2% skipped, one suite per file with its own timestamp), then times, as whole processes,
``fastci import`` of all of them into a fresh data dir and ``fastci run --no-sync`` over the result.

    .venv/bin/python bench/import_rate.py [--files 20] [--cases 10000] [--tests 2000]
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
        for name, seconds in (("import (publish)", publish_s), ("run (apply)", run_s), ("both", publish_s + run_s)):
            rate = total / seconds
            year = YEAR_OF_RESULTS / rate / 60
            print(
                f"{name:<18}{seconds:>8.1f} s {rate:>10,.0f} results/s   a year (40 M, extrapolated): {year:,.0f} min"
            )


if __name__ == "__main__":
    main()
