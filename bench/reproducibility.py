"""Does ``fastci rerun`` reproduce a qualification run? Qualify a bundle, rerun every result through
the runner, and compare outputs bit for bit (the rerun_outcomes view), per model, precision and check.

    .venv/bin/python bench/reproducibility.py                       # the healthy bundle, whole set
    .venv/bin/python bench/reproducibility.py --inject kernel-nondeterministic-reduction

Prints one row per result and the time the runner took against the original qualification's (the
baseline measured in the same run). Throughput samples are timings: a rerun never repeats them, and
'reproduced' compares status, loss curve, eval score and output digest only.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.cli.main import main
from fastci.views.store import Views


def fastci(data: Path, *args: str) -> int:
    return main(["--data-dir", str(data), *args])


def rows(data: Path, sql: str) -> list[tuple]:
    views = Views(data / "views.duckdb", read_only=True)
    try:
        return views.query(sql)[1]
    finally:
        views.close()


def run(args: argparse.Namespace) -> None:
    os.environ.update(
        {
            "FASTCI_NODE_ID": "node-03",
            "FASTCI_REPO": "acme/accel-stack",
            "FASTCI_COMMIT": "0123abc",
            "FASTCI_HARDWARE_REVISION": "rev-a",
        }
    )
    data = Path(tempfile.mkdtemp(prefix="fastci-repro-"))
    extra = ["--inject", args.inject] if args.inject else []
    models = [a for m in args.model for a in ("--model", m)]
    started = time.perf_counter()
    fastci(data, "qualify", "--trigger", "nightly", *models, *extra)
    qualify_s = time.perf_counter() - started
    fastci(data, "views", "refresh")
    for (result_id,) in rows(data, "SELECT id FROM results ORDER BY test_id"):
        assert fastci(data, "rerun", result_id, "--elsewhere", "--no-refresh") == 0
    started = time.perf_counter()
    assert fastci(data, "runner", "--once", "--node-id", "node-07") == 0
    runner_s = time.perf_counter() - started
    fastci(data, "views", "refresh")
    outcomes = rows(
        data,
        "SELECT test_id, original_status, rerun_status, same_seed, same_config, reproduced "
        "FROM rerun_outcomes ORDER BY test_id",
    )
    print(f"\n{'result':44s} {'original':9s} {'rerun':9s} seed config reproduced")
    for test_id, original, again, seed, config, reproduced in outcomes:
        print(
            f"{test_id:44s} {original:9s} {again or '-':9s} {'same' if seed else 'DIFF':4s} "
            f"{'same' if config else 'DIFF':6s} "
            f"{'yes' if reproduced else 'NO'}"
        )
    outputs = [o for o in outcomes if not o[0].endswith("/throughput")]
    print(
        f"\nbundle: {'healthy' if not args.inject else args.inject}; "
        f"{sum(1 for o in outcomes if o[5])} of {len(outcomes)} "
        f"results reproduced ({sum(1 for o in outputs if o[5])} of {len(outputs)} with outputs: inference, training); "
        f"seed and config identical in {sum(1 for o in outcomes if o[3] and o[4])} of {len(outcomes)}"
    )
    print(
        f"time: qualification {qualify_s:.1f} s (baseline), runner {runner_s:.1f} s for {len(outcomes)} reruns "
        f"({runner_s / qualify_s:.2f}x; each rerun trains its model again, whatever its check)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inject", help="a defect of the emulated stack (fastci qualify --list-defects)")
    parser.add_argument("--model", action="append", default=[], help="only this model (repeatable; default all four)")
    run(parser.parse_args())
