"""Throughput of the stream processor against raw Kafka, all measured in one run.

    python bench/throughput.py [--events 200000] [--partitions 4] [--bootstrap 127.0.0.1:19092]
        [--parts raw,naive,worker1,worker2,embedded,replay] [--probes 200] [--replay-results 60000]

Produces a realistic mix of results, evidence and node-health events (plus the commits they refer
to) into fresh topics on the broker, then measures on that same data:
  raw      aiokafka consume + orjson decode of the input topics (the ceiling)
  naive    a faust agent handling one event at a time: one Table write and one send per event (the floor)
  worker   fastci's faust worker with every processor on, one worker, then two
  embedded fastci's embedded runtime on the same events in a local log
and prints events/s and the ratio of each to raw. While the single worker is still up (its graph
warm), it produces commits one at a time and prints p50/p99 latency from a commit being produced to
its `selection` event being readable. Each worker's own account of its batches' time (routing,
applying, sending; faust's delivery outside them) is printed after the table. Last, the replay: a
results-only history through the embedded runtime (every processor on), extrapolated to a year of a
400-changes/day fleet (40 million results), and (replay-worker) the same results through one faust
worker.
Needs the broker: export $(docker/kafka/kafka.sh start).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastci.core.codec import encode
from fastci.core.config import KafkaSettings
from fastci.core.events import Event
from fastci.demo.history import REPO, Workload
from fastci.inputs import ChangedFunction, CommitEvent, EvidenceEvent, FoldedStack
from fastci.runtime.embedded import EmbeddedRuntime, RunStats
from fastci.runtime.kafka.broker import drop_namespace, ensure_topics, group_lag, publish, topic_partitions
from fastci.runtime.kafka.routes import internal_topics
from fastci.runtime.publish import publish_embedded
from fastci.topology import ALL_PROCESSORS, SYSTEM, TOPICS

INPUTS = ["commits", "results", "evidence", "node-health"]
PARTS = ("raw", "naive", "worker1", "worker2", "embedded", "replay", "replay-worker")
KAFKA_PARTS = {"raw", "naive", "worker1", "worker2", "replay-worker"}
YEAR_OF_RESULTS = 40_000_000  # a year of a 400-changes/day fleet (issue 9)
STALL_S = 180.0  # a group whose committed offsets do not move for this long is stuck, not slow
SETTLE_S = 3.0  # the lag must stay 0 this long for a run to count as done
FUNCTIONS = [
    f"fastlm/{area}/{mod}.py:{cls}.{name}"
    for area in ("model", "kernels", "runtime")
    for mod in ("core", "ops", "io")
    for cls in ("Engine", "Plan", "Op")
    for name in ("run", "step", "load")
]


SAMPLED_SHARE = 0.2  # evidence events from py-spy sampling; the rest from exact tracing
SAMPLING_RECALL = 0.7  # share of a test's call paths one sampled run sees
DRIFT = 0.05  # chance a test's code paths changed since its last evidence (a commit touched them)


def workload(total: int) -> list[Event]:
    """About ``total`` events: the synthetic CI history plus evidence for a quarter of its results.

    Evidence is shaped like a real suite's: each test executes a stable set of call paths (its own,
    derived from its id); a traced run records all of them, so it repeats the test's last evidence
    unless its code changed (DRIFT); a sampled run (SAMPLED_SHARE) sees a random SAMPLING_RECALL of
    them, so it differs from the last almost every time."""
    commits = max(50, total // 8)
    history = Workload(commits=commits, seed=42).events()
    rng = random.Random(42)
    functions = FUNCTIONS

    def call_path(test_id: str, path_rng: random.Random) -> str:
        frames = [
            f"{f.split(':')[1]} ({f.split(':')[0]}:{path_rng.randrange(1, 400)})" for f in path_rng.sample(functions, 6)
        ]
        return ";".join([f"{test_id.split('::')[1]} (tests/t.py:3)", *frames])

    paths: dict[str, list[str]] = {}
    evidence: list[Event] = []
    for event in history:
        if event.TOPIC == "results" and rng.random() < 0.25:
            test = event.test_id
            if test not in paths:
                own = random.Random(test)
                paths[test] = [call_path(test, own) for _ in range(own.randrange(5, 30))]
            elif rng.random() < DRIFT:
                paths[test][rng.randrange(len(paths[test]))] = call_path(test, rng)
            sampled = rng.random() < SAMPLED_SHARE
            seen = [p for p in paths[test] if not sampled or rng.random() < SAMPLING_RECALL] or paths[test][:1]
            stacks = tuple(FoldedStack(stack=p, count=rng.randrange(1, 50) if sampled else 1) for p in seen)
            evidence.append(
                EvidenceEvent(
                    test_id=test,
                    run_id=event.run_id,
                    repo=REPO,
                    commit=event.commit,
                    method="sampling" if sampled else "tracing",
                    sampling_rate_hz=100.0 if sampled else None,
                    stacks=stacks,
                )
            )
    # Interleave evidence after the result it belongs to, as a collector would publish it.
    by_run = {(e.test_id, e.run_id): e for e in evidence}
    events = []
    for event in history:
        events.append(event)
        if event.TOPIC == "results" and (event.test_id, event.run_id) in by_run:
            events.append(by_run[(event.test_id, event.run_id)])
    return events[:total]


async def raw_consume(settings: KafkaSettings, expected: int) -> float:
    tps = await topic_partitions(settings, [settings.topic(t) for t in INPUTS])
    consumer = AIOKafkaConsumer(enable_auto_commit=False, auto_offset_reset="earliest", **settings.client_options())
    await consumer.start()
    try:
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        started, seen = time.perf_counter(), 0
        while seen < expected:
            if time.perf_counter() - started > 300:
                raise SystemExit(f"raw consume saw {seen} of {expected} records in 300 s")
            for messages in (await consumer.getmany(timeout_ms=1000, max_records=10_000)).values():
                for message in messages:
                    orjson.loads(message.value)
                    seen += 1
        return seen / (time.perf_counter() - started)
    finally:
        await consumer.stop()


NAIVE_AGENT = """
import faust, os, sys, tempfile
bootstrap, namespace, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
app = faust.App(namespace + "naive", broker="kafka://" + bootstrap, store="memory://", web_enabled=False,
                datadir=os.path.join(tempfile.gettempdir(), "fastci-bench-{conf.name}"),
                topic_partitions=partitions, consumer_auto_offset_reset="earliest")
raw = dict(key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
source = app.topic(*[namespace + t for t in ("commits", "results", "evidence", "node-health")], **raw)
sink = app.topic(namespace + "naive-out", **raw)
counts = app.Table("naive-counts", default=int, partitions=partitions)

@app.agent(source)
async def count(stream):
    async for event in stream.events():
        counts[event.key] += 1
        await sink.send(key=event.key, value=event.value[:64])

faust.Worker(app, loglevel="info", quiet=True).execute_from_commandline()
"""


def faust_rate(
    settings: KafkaSettings,
    group: str,
    topics: list[str],
    command: list[str],
    env: dict,
    expected: int,
    work: Path,
    name: str,
    while_up=None,
) -> float:
    """Events/s of faust worker processes over pre-produced data: from the moment every process
    reports ready (its partitions assigned and its tables recovered) until the group's lag on
    ``topics`` is 0. ``while_up`` runs before the workers stop."""
    logs = [work / f"{name}-{n}.log" for n in range(len(command))]
    processes = [
        subprocess.Popen(c, env=env, stdout=open(log, "wb"), stderr=subprocess.STDOUT) for c, log in zip(command, logs)
    ]
    try:
        deadline = time.perf_counter() + 1800
        while not all(b"Worker]: Ready" in log.read_bytes() for log in logs):
            if time.perf_counter() > deadline or any(p.poll() is not None for p in processes):
                raise SystemExit(f"faust did not start; see {logs}")
            time.sleep(0.05)
        ready = time.perf_counter()
        last_lag, moved, done = None, ready, None
        # Done when the lag is 0 and stays 0: what the last inputs release (a producer's topic is held
        # until nothing earlier can still come in it) makes outputs that derived topics lag on again.
        while done is None or time.perf_counter() - done < SETTLE_S:
            lag = asyncio.run(group_lag(settings, group, topics))
            if lag == 0:
                done = time.perf_counter() if done is None else done
            else:
                done = None
            if lag != last_lag:
                last_lag, moved = lag, time.perf_counter()
            if lag and (time.perf_counter() > deadline or time.perf_counter() - moved > STALL_S):
                raise SystemExit(
                    f"{name}: the group's committed offsets stayed {lag:,} records behind for "
                    f"{time.perf_counter() - moved:.0f} s; see {logs}"
                )
            time.sleep(0.1)
        rate = expected / (done - ready)
        if while_up is not None:
            while_up()
        return rate
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(60)


def batch_times(log: Path) -> str | None:
    """The account a worker logs when it stops (``fastci.runtime.kafka.runtime.BatchTimes``), if it logged one."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if "batch times:" in line]
    return lines[-1][lines[-1].index("batch times:") :].strip() if lines else None


def measured(rates: dict[str, float], name: str, rate: float) -> None:
    rates[name] = rate
    print(f"measured {name}: {rate:,.0f} events/s")


def probe_commits(count: int) -> list[CommitEvent]:
    """Commits touching one to three functions the workload's tests execute."""
    rng = random.Random(7)
    commits = []
    for _ in range(count):
        changed = [f.split(":") for f in rng.sample(FUNCTIONS, rng.randrange(1, 4))]
        commits.append(
            CommitEvent(
                repo=REPO,
                sha=f"{rng.getrandbits(160):040x}",
                author="probe@acme.dev",
                title="latency probe",
                time="2026-12-03T00:00:00Z",
                changed_files=tuple({"path": path, "change": "modified"} for path in {p for p, _ in changed}),
                changed_functions=tuple(
                    ChangedFunction(path=path, qualname=name, change="modified") for path, name in changed
                ),
            )
        )
    return commits


async def selection_latency(settings: KafkaSettings, probes: int, interval_s: float) -> list[float]:
    """Seconds from producing each commit to its selection being readable, one commit at a time."""
    selection = settings.topic("selection")
    tps = await topic_partitions(settings, [selection])
    consumer = AIOKafkaConsumer(enable_auto_commit=False, **settings.client_options())
    producer = AIOKafkaProducer(acks="all", linger_ms=0, **settings.client_options())
    await consumer.start()
    await producer.start()
    try:
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        for tp in tps:
            await consumer.position(tp)  # resolve the end before the first probe
        sent: dict[str, float] = {}
        latencies: list[float] = []

        async def receive() -> None:
            while len(latencies) < probes:
                for messages in (await consumer.getmany(timeout_ms=100)).values():
                    now = time.perf_counter()
                    for message in messages:
                        started = sent.pop(orjson.loads(message.value).get("commit_id"), None)
                        if started is not None:
                            latencies.append(now - started)

        receiver = asyncio.create_task(receive())
        for commit in probe_commits(probes):
            sent[commit.id] = time.perf_counter()
            await producer.send(settings.topic("commits"), encode(commit), key=commit.key.encode())
            await asyncio.sleep(interval_s)
        await asyncio.wait_for(receiver, timeout=300)
        return latencies
    finally:
        await producer.stop()
        await consumer.stop()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def embedded_rate(events: list[Event], topics: list[str], work: Path) -> tuple[float, float, RunStats]:
    """Input events/s of the embedded runtime (every processor, fsync per batch) over ``events``;
    the elapsed seconds; and where the time went."""
    data = Path(tempfile.mkdtemp(prefix="embedded-", dir=work))
    publish_embedded(data, events)
    runtime = EmbeddedRuntime(data, SYSTEM, sync=True)
    started = time.perf_counter()
    stats = runtime.run()
    elapsed = time.perf_counter() - started
    runtime.close()
    shutil.rmtree(data)  # a log of the whole workload: runs would fill /tmp
    return sum(1 for e in events if e.TOPIC in topics) / elapsed, elapsed, stats


def print_profile(stats: RunStats, inputs: int) -> None:
    """Where the embedded runtime's time went, per processor, in microseconds per input event."""
    total = stats.decode_seconds + sum(s.seconds for s in stats.by_processor.values())
    rows = [("decoding (once per record)", inputs, stats.decode_seconds)]
    rows += [(name, s.events, s.seconds) for name, s in stats.by_processor.items() if s.events]
    print(f"\n{'embedded runtime, by part':40} {'events':>9} {'us/event':>9} {'us/input':>9} {'share':>7}")
    for name, events, seconds in sorted(rows, key=lambda row: -row[2]):
        print(
            f"{name:40} {events:>9,} {seconds / events * 1e6:>9.1f} {seconds / inputs * 1e6:>9.1f} "
            f"{seconds / total:>7.1%}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--bootstrap", default=os.environ.get("FASTCI_KAFKA_BOOTSTRAP", "127.0.0.1:19092"))
    parser.add_argument("--parts", default=",".join(PARTS), help=f"what to measure, of {','.join(PARTS)}")
    parser.add_argument("--probes", type=int, default=200, help="commits for the latency probe (0: none)")
    parser.add_argument("--probe-interval", type=float, default=0.25, help="seconds between probe commits")
    parser.add_argument("--replay-results", type=int, default=60_000, help="results in the replay run")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # each figure as it is measured, also into a file
    parts = set(args.parts.split(","))
    if parts - set(PARTS):
        parser.error(f"unknown part(s) {', '.join(sorted(parts - set(PARTS)))}; known: {', '.join(PARTS)}")
    base = KafkaSettings(
        bootstrap=args.bootstrap, partitions=args.partitions, namespace=f"bench{uuid.uuid4().hex[:6]}-"
    )
    try:
        measure(args, parts, base)
    finally:
        if parts & KAFKA_PARTS:  # a broker that keeps every run's topics slows down run after run
            print(f"dropped {len(asyncio.run(drop_namespace(base)))} topics of {base.namespace}")


def measure(args: argparse.Namespace, parts: set[str], base: KafkaSettings) -> None:
    """Every part of ``parts`` on one workload, the Kafka parts in topics of ``base``'s namespace."""
    events = workload(args.events)
    mix = {t: sum(1 for e in events if e.TOPIC == t) for t in INPUTS}
    consumed = sorted({t for p in ALL_PROCESSORS for t in p.inputs} & set(INPUTS))
    inputs = sum(mix[t] for t in consumed)  # the events the fastci rates count
    print(
        f"workload: {len(events):,} events {mix}; processors on: {', '.join(p.name for p in ALL_PROCESSORS)} "
        f"(reading {', '.join(consumed)}: the fastci rates count those events)"
    )
    work = Path(tempfile.mkdtemp(prefix="fastci-bench-"))
    rates: dict[str, float] = {}
    latencies: list[float] = []
    accounts: list[str] = []  # the workers' own account of their time

    if parts & {"raw", "naive", "worker1", "worker2"}:
        asyncio.run(ensure_topics(base, TOPICS))
        started = time.perf_counter()
        asyncio.run(publish(base, events))
        print(f"produced to Kafka in {time.perf_counter() - started:.1f} s ({args.partitions} partitions per topic)")
        measured(rates, "raw aiokafka consume + decode", asyncio.run(raw_consume(base, len(events))))

    env = {
        **os.environ,
        "FASTCI_KAFKA_BOOTSTRAP": base.bootstrap,
        "FASTCI_KAFKA_NAMESPACE": base.namespace,
        "FASTCI_KAFKA_PARTITIONS": str(base.partitions),
    }
    if "naive" in parts:
        asyncio.run(ensure_topics(base, ["naive-out"]))  # the broker creates no topic on first use
        naive = [sys.executable, "-c", NAIVE_AGENT, base.bootstrap, base.namespace, str(base.partitions)]
        measured(
            rates,
            "naive faust agent (1 event at a time)",
            faust_rate(base, base.namespace + "naive", INPUTS, [naive], env, len(events), work, "naive"),
        )

    worker = [sys.executable, "-m", "fastci.cli", "worker", "--log-level", "info"]
    # The group's lag counts the internal topics the worker repartitions through, too.
    for count in (1, 2):  # each configuration is its own app (consumer group, Tables) on the same topics
        if f"worker{count}" not in parts:
            continue
        app = f"fastci-x{count}"
        internal = internal_topics(replace(base, app=app), ALL_PROCESSORS)
        probe = None
        if count == 1 and args.probes:

            def probe(app: str = app) -> None:
                latencies.extend(
                    asyncio.run(selection_latency(replace(base, app=app), args.probes, args.probe_interval))
                )

        logs = f"worker-x{count}"
        rate = faust_rate(
            base,
            base.namespace + app,
            consumed + internal,
            [worker] * count,
            {**env, "FASTCI_KAFKA_APP": app},
            inputs,
            work,
            logs,
            while_up=probe,
        )
        measured(rates, f"fastci faust worker x{count}", rate)
        for log in sorted(work.glob(f"{logs}-*.log")):
            account = batch_times(log)
            if account:
                accounts.append(f"{log.stem} (caught up in {inputs / rate:.1f} s, then stopped): {account}")

    profile = None
    if "embedded" in parts:
        rates["fastci embedded runtime"], elapsed, profile = embedded_rate(events, consumed, work)
        print(f"embedded: {inputs:,} input events in {elapsed:.1f} s")

    raw = rates.get("raw aiokafka consume + decode")
    print(f"\n{'':40} {'events/s':>12} {'vs raw':>8}")
    for name, rate in rates.items():
        print(f"{name:40} {rate:>12,.0f} {rate / raw:>8.1%}" if raw else f"{name:40} {rate:>12,.0f}")
    if profile is not None:
        print_profile(profile, inputs)
    if accounts:
        print("\nwhere the workers' time went, each over its life from its first batch (probes included):")
        for account in accounts:
            print(f"  {account}")
    if latencies:
        print(
            f"\ncommit -> selection readable, warm graph, {len(latencies)} commits {args.probe_interval:g} s apart: "
            f"p50 {percentile(latencies, 0.5) * 1000:.0f} ms, p99 {percentile(latencies, 0.99) * 1000:.0f} ms, "
            f"max {max(latencies) * 1000:.0f} ms"
        )
    if parts & {"replay", "replay-worker"}:
        history = Workload(commits=args.replay_results // 9 + 24, seed=43).events()  # ~9.5 results per commit
        results = [e for e in history if e.TOPIC == "results"][: args.replay_results]
    if "replay" in parts:
        rate, elapsed, _ = embedded_rate(results, ["results"], work)
        print(
            f"\nreplay: {len(results):,} results through the embedded runtime (every processor on) in {elapsed:.1f} s, "
            f"{rate:,.0f} results/s; a year of a 400-changes/day fleet ({YEAR_OF_RESULTS / 1e6:.0f} million results) "
            f"would take {YEAR_OF_RESULTS / rate / 60:.0f} min at that rate (extrapolated)"
        )
    if "replay-worker" in parts:
        # The same results through one faust worker: about ten changelog records per result, so this
        # is where the worker's send path shows (the mix above is mostly small node-health signals).
        replay = replace(base, namespace=f"{base.namespace}replay-", app="fastci-replay")
        asyncio.run(ensure_topics(replay, TOPICS))
        asyncio.run(publish(replay, results))
        internal = internal_topics(replay, ALL_PROCESSORS)
        rate = faust_rate(
            replay,
            replay.app_id,
            ["results", *internal],
            [worker],
            {**env, "FASTCI_KAFKA_NAMESPACE": replay.namespace, "FASTCI_KAFKA_APP": replay.app},
            len(results),
            work,
            "replay-worker",
        )
        print(
            f"\nreplay through the faust worker x1: {len(results):,} results, {rate:,.0f} results/s; "
            f"a year ({YEAR_OF_RESULTS / 1e6:.0f} million results) would take {YEAR_OF_RESULTS / rate / 60:.0f} min "
            "on one worker (extrapolated)"
        )


if __name__ == "__main__":
    main()
