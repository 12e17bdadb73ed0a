"""``fastci regressions demo``: a nightly with three regressions, detected, bisected and ticketed.

Three tests share one history of 10 stable nights, then 120 commits and a driver bump:
- llama-tiny throughput drops 2% from a commit in the middle (performance, Mann-Whitney + bootstrap);
- vit-small's training loss drifts up from step 60 after another commit (loss-curve band);
- whisper-mini's eval score falls 1.5% with the driver bump (eval gate at 99%).
Each nightly run is confirmed by a rerun, bisected to its culprit with run requests that a seeded
noise model answers (standing in for the scheduler and the runner), and ticketed to the owning
team; then the views are refreshed and the nightly report is written. Embedded runtime, no broker.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from rich.console import Console

from fastci.contracts.runs import RunRequested
from fastci.core.events import Event
from fastci.demo import refresh_and_report
from fastci.regression.synthetic import REPO, Scenario
from fastci.report.nightly import print_summary
from fastci.runtime.embedded import DataDir, EmbeddedRuntime
from fastci.runtime.publish import publish_embedded
from fastci.shared.owners import parse_owner_file
from fastci.topology import SYSTEM, decode

MARKER = ".fastci-regressions-demo"
OWNERS = """\
*                   @framework-team
/fastlm/compiler/   @compiler-team
/fastlm/kernels/    @kernels-team
/fastlm/model/      @models-team
layer:driver        @driver-team
layer:firmware      @firmware-team
"""


def scenarios() -> list[Scenario]:
    driver = {"driver": "dr-545"}
    return [
        Scenario(
            test_id="tests/models/test_llama_tiny.py::test_throughput",
            kind="performance",
            culprit=77,
            changes=120,
            bumped=driver,
            repeats=120,
            seed=1,
        ),
        Scenario(
            test_id="tests/models/test_vit_small.py::test_train",
            kind="loss_curve",
            culprit=30,
            changes=120,
            bumped=driver,
            seed=2,
        ),
        Scenario(
            test_id="tests/models/test_whisper_mini.py::test_eval",
            kind="eval",
            culprit=None,
            changes=120,
            bumped=driver,
            culprit_component="driver",
            seed=3,
        ),
    ]


def run_demo(data_dir: Path, out: Console) -> None:

    _fresh(data_dir)
    started = time.perf_counter()
    tests = scenarios()
    by_test = {s.test_id: s for s in tests}
    publish_embedded(data_dir, [parse_owner_file(OWNERS, repo=REPO), *tests[0].commits()])
    publish_embedded(data_dir, [s.golden() for s in tests if s.kind != "performance"])
    publish_embedded(data_dir, [r for s in tests for r in s.nightly_results()])
    out.print(
        f"1. published an owner map, {len(tests[0].commits())} commits, golden references and "
        f"{len(tests) * (tests[0].baseline_nights + 1)} nightly results to {data_dir}"
    )

    answered: set[str] = set()
    rounds = runs = 0
    while True:
        runtime = EmbeddedRuntime(data_dir, SYSTEM, sync=False)
        try:
            runtime.run()
        finally:
            runtime.close()
        new = [r for r in _read(data_dir, RunRequested.TOPIC) if r.id not in answered]
        if not new:
            break
        rounds += 1
        for request in new:
            answered.add(request.id)
            publish_embedded(data_dir, by_test[request.test_id].run(request))  # type: ignore[arg-type]
            runs += 1
    out.print(f"2. processed it; answered {runs} run requests (confirmations and bisect steps) in {rounds} rounds")

    tickets, report, _ = refresh_and_report(data_dir)
    out.print(f"3. opened {len(tickets.written)} tickets in {data_dir / 'tickets'}")
    out.print(
        f"4. wrote the nightly report to {data_dir / 'nightly.html'} ({time.perf_counter() - started:.1f} s in all)\n"
    )
    print_summary(report, out)


def _read(data_dir: Path, topic: str) -> list[Event]:
    return [decode(topic, r.payload) for r in DataDir(data_dir).log.topic(topic).read()]


def _fresh(data_dir: Path) -> None:
    """Start from an empty folder; only ever delete one that an earlier run of this demo made."""
    if data_dir.exists() and any(data_dir.iterdir()):
        if not (data_dir / MARKER).exists():
            raise SystemExit(f"error: {data_dir} is not empty and was not made by 'fastci regressions demo'")
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / MARKER).touch()
