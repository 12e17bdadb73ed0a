"""Pruning's trade-off on the packaged replay (100 real more-itertools commits, 86 mutants the full
suite catches): the share of the suite's test time each rule keeps and the mutants its kept sets
catch, through the real selection processor.

- off: every selected test runs;
- wrapper-blind (the rule the replay was recorded with): a unit's context is its library call path,
  so tests that reach it through the same thin wrapper share one context and all but one are pruned;
- direct through one wrapper (the production rule): a test that reaches the unit through at most
  ``DIRECT_HOPS`` library frames is part of its context (``fastci.selection.graph``).

    .venv/bin/python bench/pruning_tradeoff.py [--replay more-itertools]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.selection.graph import DIRECT_HOPS
from fastci.selection.processor import SelectionProcessor
from fastci.selection.replay import check


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replay", default="more-itertools")
    args = parser.parse_args()
    rules = {
        "pruning off": SelectionProcessor(pruning=False),
        "pruning, wrapper-blind contexts": SelectionProcessor(direct_hops=0),
        f"pruning, direct through {DIRECT_HOPS} wrapper (default)": SelectionProcessor(),
    }
    print("| rule | share of the suite's test time | kept s of full s | mutants caught / caught by the full suite |")
    print("|---|---|---|---|")
    for name, processor in rules.items():
        found = check(args.replay, processor)
        caught, detected = found["faults_caught"], found["faults_detected"]
        print(
            f"| {name} | {found['kept_share']:.2%} | {found['kept_s']:.1f} of {found['full_s']:.1f} "
            f"| {caught} / {detected} ({caught / detected:.1%}) |"
        )


if __name__ == "__main__":
    main()
