"""Every view, the faust worker against the embedded runtime, over cross-topic interleavings: which
views a Kafka run decides differently from the embedded runtime's event-time order.

One synthetic history (``--commits``) is published in each order (as generated, one event after
another; per-topic blocks; per-topic blocks reversed) to the embedded log and, in fresh topics, to
the broker, where ``fastci worker`` applies it (one worker, or two, one of them SIGKILLed part way,
published by aiokafka or by librdkafka: see the options); then every view of both is compared, row
for row. Prints one line per view: its rows in the embedded runtime (the same in every order, by
the ordering rule) and, per order, ``=`` when the Kafka run's rows are the same, else its row count
and how many rows differ. With ``--runs N`` (two workers race, so one run says little), each order
is run N times and each run prints the views it decided differently, then a tally.

    export $(docker/kafka/kafka.sh start)
    .venv/bin/python bench/kafka_views.py [--commits 100] [--orders generated,blocks,reversed]
        [--in-time-order] [--workers 2] [--kill-after 5] [--producer librdkafka] [--runs 10]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.core.codec import encode
from fastci.core.config import KafkaSettings
from fastci.core.events import Event
from fastci.demo.history import Workload, in_time_order, per_topic
from fastci.runtime.embedded import EmbeddedRuntime
from fastci.runtime.kafka.broker import drop_namespace, ensure_topics, publish, time_headers
from fastci.runtime.kafka.progress import unapplied
from fastci.runtime.kafka.routes import internal_topics
from fastci.runtime.publish import publish_embedded
from fastci.topology import SYSTEM, TOPICS, build_processors
from fastci.views.refresh import refreshed_kafka_views, refreshed_views

ORDERS = ("generated", "blocks", "reversed")


def blocks(events: list[Event], order: str) -> list[list[Event]]:
    if order == "generated":
        return [events]
    blocks = per_topic(events)
    return blocks if order == "blocks" else blocks[::-1]


def embedded(events: list[Event], order: str, scratch: Path) -> dict[str, list[tuple]]:
    data = scratch / f"embedded-{order}"
    for block in blocks(events, order):
        publish_embedded(data, block)
    runtime = EmbeddedRuntime(data, SYSTEM, sync=False)
    runtime.run()
    runtime.close()
    with refreshed_views(data) as views:
        return views.event_tables()


def publish_librdkafka(settings: KafkaSettings, events: list[Event]) -> None:
    """Publish with librdkafka (confluent-kafka): records placed by its default partitioner
    (consistent_random, CRC32), not murmur2; keys, values and time headers as fastci's own."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": settings.bootstrap, "acks": "all", "enable.idempotence": True})
    for event, headers in zip(events, time_headers(events), strict=True):
        producer.produce(settings.topic(event.TOPIC), key=event.key.encode(), value=encode(event), headers=headers)
        producer.poll(0)
    if producer.flush(60):
        sys.exit("librdkafka did not deliver every record in 60 s")


def on_kafka(
    events: list[Event], order: str, base: KafkaSettings, scratch: Path, options: argparse.Namespace
) -> dict[str, list[tuple]]:
    settings = replace(base, namespace=f"views{uuid.uuid4().hex[:6]}-")
    processors = build_processors()

    async def load() -> None:
        internal = internal_topics(settings, processors)
        await ensure_topics(settings, [*TOPICS, *internal])
        if options.producer == "aiokafka":
            for block in blocks(events, order):
                await publish(settings, block)

    asyncio.run(load())
    if options.producer == "librdkafka":
        for block in blocks(events, order):
            publish_librdkafka(settings, block)
    env = {
        **os.environ,
        "FASTCI_KAFKA_BOOTSTRAP": settings.bootstrap,
        "FASTCI_KAFKA_NAMESPACE": settings.namespace,
        "FASTCI_KAFKA_PARTITIONS": str(settings.partitions),
    }
    logs = []

    def start() -> subprocess.Popen:
        log = scratch / f"worker-{order}-{len(logs)}.log"
        logs.append(log)
        env["FASTCI_DATA_DIR"] = str(log.with_suffix(".data"))
        out = open(log, "wb")
        return subprocess.Popen([sys.executable, "-m", "fastci.cli", "worker"], env=env, stdout=out, stderr=out)

    workers = [start() for _ in range(options.workers)]
    killed = not options.kill_after
    started = time.monotonic()
    try:
        settled, deadline = 0, started + 900
        while settled < 3:  # nothing left to apply, three polls in a row
            if not killed and time.monotonic() - started > options.kill_after:
                workers[0].kill()  # SIGKILL mid-stream; with one worker, a new one takes over
                workers[0].wait()
                workers = workers[1:] or [start()]
                killed = True
            if any(w.poll() is not None for w in workers) or time.monotonic() > deadline:
                sys.exit(f"the workers did not finish ({order}); see {[str(log) for log in logs]}")
            time.sleep(1)
            try:
                settled = settled + 1 if not any(asyncio.run(unapplied(settings, processors)).values()) else 0
            except Exception:  # the group coordinator of fresh topics may not answer yet
                settled = 0
    finally:
        for worker in workers:
            worker.terminate()
            worker.wait(60)
    with refreshed_kafka_views(settings, scratch / f"kafka-{order}.duckdb") as views:
        tables = views.event_tables()
    asyncio.run(drop_namespace(settings))  # a broker holding every run's partitions ran out of heap after ~50
    return tables


def tally(
    events: list[Event],
    orders: list[str],
    reference: dict[str, list],
    base: KafkaSettings,
    scratch: Path,
    options: argparse.Namespace,
) -> None:
    """Each order ``options.runs`` times on Kafka: a line per run naming the views it decided
    differently from the embedded runtime (rows there against rows here), then how many runs had
    every view equal."""
    equal = 0
    for run in range(1, options.runs + 1):
        for order in orders:
            started = time.monotonic()
            got = on_kafka(events, order, base, scratch, options)
            differ = [
                f"{name} {len(got[name]):,} rows ({len(rows):,})"
                for name, rows in reference.items()
                if got[name] != rows
            ]
            equal += not differ
            said = "; ".join(differ) or "every view equal"
            print(f"run {run} {order:<10}{time.monotonic() - started:>5.0f} s  {said}", flush=True)
    print(f"{equal} of {options.runs * len(orders)} runs with every view equal to the embedded runtime's")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--orders", default=",".join(ORDERS))
    parser.add_argument("--workers", type=int, default=1, help="faust workers in the group")
    parser.add_argument("--kill-after", type=float, default=0, help="SIGKILL one worker this many seconds in")
    parser.add_argument("--producer", choices=("aiokafka", "librdkafka"), default="aiokafka")
    parser.add_argument(
        "--in-time-order",
        action="store_true",
        help="append each topic in time order (the history as generated appends results run by run)",
    )
    parser.add_argument("--runs", type=int, default=1, help="Kafka runs per order (above 1: a line per run)")
    args = parser.parse_args()
    logging.getLogger("aiokafka").setLevel(logging.ERROR)  # fresh topics' leader elections, retried
    logging.getLogger("aiokafka.cluster").setLevel(logging.CRITICAL)  # a deleted run's topics, missing
    orders = args.orders.split(",")
    events = Workload(commits=args.commits, seed=5).events()
    if args.in_time_order:
        events = in_time_order(events)
    base = KafkaSettings.from_env(partitions=4)
    with tempfile.TemporaryDirectory(prefix="fastci-kafka-views-") as scratch_name:
        scratch = Path(scratch_name)
        reference = {order: embedded(events, order, scratch) for order in orders}
        first = reference[orders[0]]
        assert all(r == first for r in reference.values()), "the embedded runtime differs between orders"
        if args.runs > 1:
            tally(events, orders, first, base, scratch, args)
            return
        kafka = {order: on_kafka(events, order, base, scratch, args) for order in orders}
        kill = f", one SIGKILLed {args.kill_after:g} s in" if args.kill_after else ""
        print(
            f"{len(events):,} events ({args.commits} commits); Kafka: {args.workers} worker(s){kill}, "
            f"4 partitions, {args.producer} producer"
        )
        print(f"{'view':<22}{'embedded':>10}" + "".join(f"{order:>26}" for order in orders))
        equal = 0
        for name, rows in first.items():
            cells = []
            for order in orders:
                got = kafka[order][name]
                differ = len({repr(r) for r in got} ^ {repr(r) for r in rows})
                cells.append("=" if got == rows else f"{len(got):,} rows, {differ:,} differ")
            equal += all(cell == "=" for cell in cells)
            print(f"{name:<22}{len(rows):>10,}" + "".join(f"{cell:>26}" for cell in cells))
        print(f"{equal} of {len(first)} views equal to the embedded runtime's in every order")
        alike = sum(all(kafka[order][name] == kafka[orders[0]][name] for order in orders) for name in first)
        print(f"{alike} of {len(first)} views the same in the Kafka runs of every order")


if __name__ == "__main__":
    main()
