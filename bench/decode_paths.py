"""What decoding an input record costs by each of pydantic's paths, before writing a decoder of our own.

    python bench/decode_paths.py [--events 20000] [--rounds 5]

Takes the throughput benchmark's event mix (``bench/throughput.py``), encodes it as the producers do,
and times, per input topic and per record (best of ``--rounds``, the paths taking turns, all in
this one process):
  orjson           ``orjson.loads`` alone: the floor of any JSON decoder
  today            ``decode_as``: ``model_validate_json``, the model's validators, the id re-derived
  dict between     ``model_validate(orjson.loads(raw))``
  TypeAdapter      ``TypeAdapter(model).validate_json``
  construct        ``model_construct(**orjson.loads(raw))``: no validation at all, and shallow
                   (nested models stay dicts, which the processors could not read)
  id alone         ``derive_id`` of a decoded event's identity: the share of "today" a decoder that
                   trusts the producer's id would save
Prints microseconds per record and each path's ratio to today's.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import orjson
from pydantic import TypeAdapter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import INPUTS, workload  # noqa: E402

from fastci.core.codec import decode_as, encode  # noqa: E402
from fastci.topology import SYSTEM  # noqa: E402


def best_per_record(paths: dict[str, Callable[[bytes], object]], records: list[bytes], rounds: int) -> dict[str, float]:
    """Each path's fastest pass over ``records`` in microseconds per record; the paths take turns
    within each round, so a busy moment of the machine does not fall on one path only."""
    best = dict.fromkeys(paths, float("inf"))
    for _ in range(rounds):
        for name, decode in paths.items():
            start = time.perf_counter()
            for raw in records:
                decode(raw)
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: seconds / len(records) * 1e6 for name, seconds in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    by_topic: dict[str, list[bytes]] = defaultdict(list)
    for event in workload(args.events):
        if event.TOPIC in INPUTS:
            by_topic[event.TOPIC].append(encode(event))

    print(f"{sum(map(len, by_topic.values())):,} input records, best of {args.rounds} passes, µs per record")
    print("| topic | records | mean bytes | path | µs | vs today |")
    print("|---|---|---|---|---|---|")
    for topic in INPUTS:
        records = by_topic.get(topic)
        if not records:
            continue
        model = SYSTEM.model_for(topic)
        adapter = TypeAdapter(model)
        decoded = [decode_as(model, raw) for raw in records]
        identities = iter(decoded * args.rounds)  # each pass takes the next decoded event
        paths: dict[str, Callable[[bytes], object]] = {
            "orjson": orjson.loads,
            "today": lambda raw, model=model: decode_as(model, raw),
            "dict between": lambda raw, model=model: model.model_validate(orjson.loads(raw)),
            "TypeAdapter": adapter.validate_json,
            "construct": lambda raw, model=model: model.model_construct(**orjson.loads(raw)),
            "id alone": lambda raw, events=identities: next(events).expected_id(),
        }
        timings = best_per_record(paths, records, args.rounds)
        size = sum(map(len, records)) / len(records)
        for name, micros in timings.items():
            ratio = micros / timings["today"]
            print(f"| {topic} | {len(records):,} | {size:,.0f} | {name} | {micros:.1f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
