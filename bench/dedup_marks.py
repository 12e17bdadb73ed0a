"""What a key's dedup mark costs when its stream is released out of offset order.

    python bench/dedup_marks.py [--records 60000] [--disorder 30,300,3000,30000] [--rounds 3]

A producer's topic is released in time order within ``LATENESS_MS``, so a key's entry remembers the
offsets applied above its stream's floor (``Entry.past``). How many it holds grows with how far
releases run ahead of the floor: the records a key gets while the earliest held one waits. A busy key
(a repository's, a node's) in a backlog of a large fleet can hold thousands. This releases
``--records`` offsets of one stream to one entry, each offset displaced by up to ``--disorder``
places, and prints microseconds per mark (best of ``--rounds``), the most held at once, and the ratio
to the stream released in offset order, measured in the same run.
"""

from __future__ import annotations

import argparse
import random
import time

from fastci.runtime.driver import Entry, Origin, encode_entry


def release(order: list[int]) -> tuple[float, int, int]:
    """Seconds to mark every offset of ``order`` on one entry; the most offsets held past the mark,
    and the size of the entry's encoding then."""
    entry, released, floor = Entry(None), set(), 0
    most, biggest = 0, 0
    started = time.perf_counter()
    for offset in order:
        released.add(offset)
        while floor in released:
            floor += 1
        entry.mark(Origin("results/0", offset, floor))
        held = len(entry.past.get("results/0", ()))
        if held > most:
            most, biggest = held, len(encode_entry(entry))
    return time.perf_counter() - started, most, biggest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--disorder", default="30,300,3000,30000", help="comma-separated displacements")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(5)
    spans = [int(d) for d in args.disorder.split(",")]
    orders = {d: sorted(range(args.records), key=lambda o, d=d: o + rng.uniform(0, d)) for d in spans}
    in_order = list(range(args.records))
    best: dict[int | None, float] = {}
    held: dict[int, tuple[int, int]] = {}
    for _ in range(args.rounds):  # the orders take turns, so drift on a shared machine hits them alike
        seconds, _, _ = release(in_order)
        best[None] = min(best.get(None, seconds), seconds)
        for d, order in orders.items():
            seconds, most, size = release(order)
            best[d] = min(best.get(d, seconds), seconds)
            held[d] = (most, size)
    baseline = best[None] / args.records * 1e6
    print(f"{'disorder':>9}  {'us/mark':>8}  {'vs in order':>11}  {'most held':>9}  {'entry bytes then':>16}")
    print(f"{'in order':>9}  {baseline:8.2f}  {1.0:10.2f}x  {0:9,}  {'':>16}")
    for d in spans:
        per = best[d] / args.records * 1e6
        most, size = held[d]
        print(f"{d:9,}  {per:8.2f}  {per / baseline:10.2f}x  {most:9,}  {size:16,}")


if __name__ == "__main__":
    main()
