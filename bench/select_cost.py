"""The cost of asking: ``pytest --fastci-select`` on a commit that changes nothing Python, against
plain pytest on the same suite, on the embedded runtime and on Kafka.

The suite is more-itertools at the replay's base (a real suite of ~570 tests and ~2,200 subtests,
2-3 s). A traced shadow-mode nightly first gives fastci its evidence; then a commit that edits only
the README, whose plan needs no test. Timed, as whole processes, in interleaved rounds so that load
on the machine falls on every variant alike:

- ``plain``: ``pytest`` (what the job would run without fastci);
- ``collect``: ``pytest --collect-only`` (the floor: any selection must collect);
- ``select-embedded``: ``pytest --fastci-select`` on the embedded runtime (its data dir);
- ``select-kafka``: ``pytest --fastci-select`` against the broker in ``$FASTCI_KAFKA_BOOTSTRAP``,
  with a ``fastci worker`` of a fresh namespace (skipped without ``--kafka``).

The first ask of each target is reported apart: it publishes the commit and waits for (or makes)
the plan; the rounds after it find the plan already there, as a job retried on the same commit does.

    .venv/bin/python bench/select_cost.py [--runs 10] [--kafka] [--mirror PATH] [--workdir /tmp/select-cost]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from selection_replay import DEFAULT_BASE, DEFAULT_MIRROR, git

REPO = "more-itertools"


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    return time.perf_counter() - started, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--kafka", action="store_true", help="also against the broker in $FASTCI_KAFKA_BOOTSTRAP")
    parser.add_argument("--mirror", type=Path, default=DEFAULT_MIRROR)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/select-cost"))
    args = parser.parse_args()

    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    checkout = args.workdir / "checkout"
    subprocess.run(["git", "clone", "-q", str(args.mirror), str(checkout)], check=True)
    git(checkout, "checkout", "-q", "-b", "bench", DEFAULT_BASE)
    base = {k: v for k, v in os.environ.items() if not k.startswith("FASTCI_")}
    base.update(PYTHONDONTWRITEBYTECODE="1", FASTCI_REPO=REPO)
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    nightly = [*pytest, "--fastci-select", "--fastci-select-mode", "shadow", "--fastci-results"]
    nightly += ["--fastci-evidence", "--fastci-evidence-method", "tracing"]
    targets: dict[str, dict[str, str]] = {
        "embedded": {**base, "FASTCI_DATA_DIR": str(args.workdir / "data"), "FASTCI_TARGET": "embedded"}
    }
    worker = None
    if args.kafka:
        bootstrap = os.environ.get("FASTCI_KAFKA_BOOTSTRAP")
        if not bootstrap:
            raise SystemExit("--kafka: set FASTCI_KAFKA_BOOTSTRAP (export $(docker/kafka/kafka.sh start))")
        targets["kafka"] = {
            **base,
            "FASTCI_DATA_DIR": str(args.workdir / "kafka-data"),
            "FASTCI_TARGET": "kafka",
            "FASTCI_KAFKA_BOOTSTRAP": bootstrap,
            "FASTCI_KAFKA_NAMESPACE": f"cost{uuid.uuid4().hex[:8]}-",
        }
        log = open(args.workdir / "worker.log", "wb")
        worker = subprocess.Popen(
            [sys.executable, "-m", "fastci.cli", "worker"], env=targets["kafka"], stdout=log, stderr=subprocess.STDOUT
        )
    try:
        for name, env in targets.items():
            seconds, done = timed(nightly, checkout, env)
            print(f"nightly ({name}): evidence of the suite in {seconds:.1f} s, exit {done.returncode}", flush=True)
        if worker is not None:
            deadline = time.monotonic() + 600
            while subprocess.run([sys.executable, "-m", "fastci.cli", "lag"], env=targets["kafka"]).returncode != 0:
                if time.monotonic() > deadline:
                    raise SystemExit("the worker did not catch up within 10 minutes")
                time.sleep(2)
        readme = checkout / "README.rst"
        readme.write_text(readme.read_text() + "\nA line of documentation.\n")
        git(checkout, "-c", "user.name=bench", "-c", "user.email=b@example.com", "commit", "-q", "-am", "docs")

        variants: dict[str, tuple[list[str], dict[str, str]]] = {
            "plain": (pytest, base),
            "collect": ([*pytest, "--collect-only"], base),
        }
        for name, env in targets.items():
            variants[f"select-{name}"] = ([*pytest, "--fastci-select"], env)
        first: dict[str, float] = {}
        for name, env in targets.items():
            seconds, done = timed([*pytest, "--fastci-select"], checkout, env)
            line = next((x for x in done.stdout.splitlines() if x.startswith("fastci: commit")), done.stdout[-300:])
            print(f"first ask ({name}): {seconds:.2f} s, exit {done.returncode}: {line}", flush=True)
            first[name] = seconds
        times: dict[str, list[float]] = {name: [] for name in variants}
        for round_number in range(args.runs):
            for name, (command, env) in variants.items():
                seconds, done = timed(command, checkout, env)
                if done.returncode != 0:
                    raise SystemExit(f"{name} exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
                times[name].append(seconds)
            print(f"round {round_number + 1}: " + ", ".join(f"{n} {t[-1]:.2f} s" for n, t in times.items()), flush=True)
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(60)

    plain, collect = statistics.median(times["plain"]), statistics.median(times["collect"])
    print()
    print(f"| variant | median s (of {args.runs}) | min | max | vs plain pytest | vs collect-only |")
    print("|---|---|---|---|---|---|")
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"| {name} | {median:.2f} | {min(values):.2f} | {max(values):.2f} | {median / plain:.2f}x "
            f"| {median / collect:.2f}x |"
        )
    for name, seconds in first.items():
        print(f"first ask on {name} (publishes the commit, makes the plan): {seconds:.2f} s")


if __name__ == "__main__":
    main()
