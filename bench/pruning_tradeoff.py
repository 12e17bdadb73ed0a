"""Pruning's trade-off on the packaged replay (100 real more-itertools commits, 86 mutants the full
suite catches): the share of the suite's test time each rule keeps and the mutants its kept sets
catch, through the real selection processor.

- off: every selected test runs;
- wrapper-blind (the rule the replay was recorded with): a unit's context is its library call path,
  so tests that reach it through the same thin wrapper share one context and all but one are pruned;
- direct through one wrapper (the production rule): a test that reaches the unit through at most
  ``DIRECT_HOPS`` library frames is part of its context (``fastci.selection.graph``);
- K contexts per unit: the evidence the first-call collector records (``--fastci-evidence-contexts
  K``), made from the recorded stacks: each test keeps, per unit, K of the contexts it ran it in, as
  the collector keeps what it sees (``fastci.evidence.first_calls.kept_context``) of the first calls.
  The recording keeps no call order, so the K are the first in the recording's own order (most
  frequent stack first, as py-spy's folded stacks sort): an estimate of what a unit's first calls show.

    .venv/bin/python bench/pruning_tradeoff.py [--replay more-itertools] [--contexts 1 2 4 8]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.evidence.first_calls import kept_context
from fastci.evidence.publish import encode_executed
from fastci.evidence.stacks import units_of
from fastci.inputs import EvidenceEvent
from fastci.selection.graph import DIRECT_HOPS
from fastci.selection.processor import SelectionProcessor
from fastci.selection.units import is_test_file
from fastci.simulate.replay_selection import check


def first_calls(contexts: int):
    """Recorded stacks -> units and calls with at most ``contexts`` contexts per unit."""

    def reshaped(event: EvidenceEvent) -> EvidenceEvent:
        if not event.stacks:
            return event
        executed: dict[str, list[tuple[str, ...]]] = {}
        for stack in event.stacks:
            frames = [f"{path}::{qualname}" for path, qualname in units_of(stack.stack)]
            for position, unit in enumerate(frames):
                callers = ((name, is_test_file(name.split("::")[0])) for name in reversed(frames[:position]))
                known = executed.setdefault(unit, [])
                if len(known) < contexts and (call := kept_context(callers, unit)) not in known:
                    known.append(call)
        units, calls = encode_executed(executed)
        return event.model_copy(update={"stacks": (), "units": units, "calls": calls})

    return reshaped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replay", default="more-itertools")
    parser.add_argument("--contexts", nargs="*", type=int, default=[1, 2, 4, 8])
    args = parser.parse_args()
    rules = {
        "pruning off": (SelectionProcessor(pruning=False), None),
        "pruning, wrapper-blind contexts": (SelectionProcessor(direct_hops=0), None),
        f"pruning, direct through {DIRECT_HOPS} wrapper (default), every context": (SelectionProcessor(), None),
    }
    for k in args.contexts:
        rules[f"the same, {k} context(s) per unit per test (first calls)"] = (SelectionProcessor(), first_calls(k))
    print("| rule | share of the suite's test time | kept s of full s | mutants caught / caught by the full suite |")
    print("|---|---|---|---|")
    for name, (processor, evidence) in rules.items():
        found = check(args.replay, processor, evidence)
        caught, detected = found["faults_caught"], found["faults_detected"]
        print(
            f"| {name} | {found['kept_share']:.2%} | {found['kept_s']:.1f} of {found['full_s']:.1f} "
            f"| {caught} / {detected} ({caught / detected:.1%}) |",
            flush=True,
        )


if __name__ == "__main__":
    main()
