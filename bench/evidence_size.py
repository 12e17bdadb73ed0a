"""Evidence size: what one traced run stores, how the data dir grows over nightly runs, and what
``fastci compact`` leaves.

Traces a real suite once (``pytest --fastci-evidence``, the default collector), then
publishes that run's evidence again as each night's (new run ids and times: what a nightly that
re-traces every test stores; with ``--retrace-share`` below 1, an incremental nightly re-tracing
that share of the tests), running the embedded runtime and refreshing the views after each night,
and ``fastci compact`` at the end (or after every N nights: ``--compact-every N``). Prints the
evidence events in the log and the disk taken by the log's evidence topic, the checkpoint (the
processors' state, the evidence graph among it) and the views, in all and per test.

    .venv/bin/python bench/evidence_size.py [--suite more-itertools|autograd] [--nights 100]
        [--retrace-share 1.0] [--report 1 10 100] [--compact-every 0]
        [--mirror /work/.mirror/more-itertools+more-itertools/repo]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from evidence_overhead import DEFAULT_MIRROR, MORE_ITERTOOLS_BASE, Suite, autograd, checkout, run

from fastci.inputs import EvidenceEvent
from fastci.runtime.compaction import disk_bytes
from fastci.runtime.embedded import DataDir
from fastci.runtime.publish import publish_embedded

T0 = datetime(2026, 11, 1, 2, tzinfo=UTC)


def traced_run(suite_name: str, mirror: Path, scratch: Path) -> list[EvidenceEvent]:
    if suite_name == "more-itertools":
        work = checkout(mirror, scratch, "more-itertools", MORE_ITERTOOLS_BASE)
        suite = Suite(f"more-itertools {MORE_ITERTOOLS_BASE[:12]}", work, ["tests"])
    else:
        suite = autograd(None, scratch)
    data = scratch / "traced"
    seconds = run(sys.executable, suite, ["--fastci-evidence"], data, scratch / "cache", cold=False)
    events = [EvidenceEvent.model_validate_json(r.payload) for r in DataDir(data).log.topic("evidence").read()]
    tests = sum(1 for e in events if e.kind == "test")
    modules = len(events) - tests
    print(f"{suite.name}: traced in {seconds:.1f} s: {tests} tests' evidence, {modules} modules' import evidence")
    return events


def as_night(event: EvidenceEvent, night: int) -> EvidenceEvent:
    document = event.model_dump(exclude={"id"})
    document |= {"run_id": f"night-{night}", "time": T0 + timedelta(days=night)}
    return EvidenceEvent.model_validate(document)


def sizes(data: Path) -> dict[str, int]:
    views = data / "views.duckdb"
    return {
        "log": disk_bytes(DataDir(data).log.topic("evidence").dir),
        "state": sum(disk_bytes(p) for p in data.glob("state.sqlite*")),
        "views": disk_bytes(views),
    }


def compact(data: Path) -> None:
    cli = [sys.executable, "-m", "fastci.cli", "--data-dir", str(data), "compact"]
    subprocess.run(cli, check=True, capture_output=True)


def evidence_records(data: Path) -> int:
    return sum(1 for _ in DataDir(data).log.topic("evidence").read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=("more-itertools", "autograd"), default="more-itertools")
    parser.add_argument("--nights", type=int, default=100)
    parser.add_argument("--retrace-share", type=float, default=1.0, help="share of tests each night re-traces")
    parser.add_argument("--report", type=int, nargs="+", default=[1, 10, 100], help="nights after which to print")
    parser.add_argument("--compact-every", type=int, default=0, help="compact after every N nights (0: at the end)")
    parser.add_argument("--mirror", type=Path, default=DEFAULT_MIRROR)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="fastci-evidence-size-") as scratch_name:
        scratch = Path(scratch_name)
        traced = traced_run(args.suite, args.mirror, scratch)
        tests = [e for e in traced if e.kind == "test"]
        data = scratch / "nights"
        rng = random.Random(7)
        header = f"{'after':<22}{'evidence events':>16}{'log MB':>10}{'state MB':>10}{'views MB':>10}{'KB/test':>9}"
        print(f"\n{args.nights} nights re-tracing {args.retrace_share:.0%} of {len(tests)} tests\n{header}")

        def report(label: str) -> None:
            size = sizes(data)
            total = sum(size.values())
            print(
                f"{label:<22}{evidence_records(data):>16,}{size['log'] / 1e6:>10.2f}{size['state'] / 1e6:>10.2f}"
                f"{size['views'] / 1e6:>10.2f}{total / 1e3 / len(tests):>9.1f}"
            )

        for night in range(1, args.nights + 1):
            if night == 1 or args.retrace_share >= 1:
                chosen = traced
            else:
                chosen = [e for e in tests if rng.random() < args.retrace_share]
            publish_embedded(data, [as_night(e, night) for e in chosen])
            for command in (["run", "--no-sync"], ["views", "refresh"]):
                cli = [sys.executable, "-m", "fastci.cli", "--data-dir", str(data), *command]
                subprocess.run(cli, check=True, capture_output=True)
            if args.compact_every and night % args.compact_every == 0:
                compact(data)
            if night in args.report or night == args.nights:
                report(f"night {night}" + (", compacted" if args.compact_every else ""))
        if not args.compact_every:
            compact(data)
            report(f"night {args.nights}, compacted")


if __name__ == "__main__":
    main()
