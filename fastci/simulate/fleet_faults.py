"""A simulated accelerator fleet with injected faults, run through the real fleet processors.

16 nodes x 8 chips on two hardware revisions (node-00..07 rev-a, node-08..15 rev-b, as the pool's
default), over a few days:

- **nightly** at 01:00 on every node in service, spread over four hours: the qualification set's
  inference checks (four models x bf16/fp8), the throughput test, the two-node data-parallel
  inference tests (nodes paired within a revision) and a flaky checkpoint test; from
  ``regression_day`` on, the nightly also qualifies a candidate bundle that carries the emulated
  stack's ``kernel-rounding-bug`` (its inference checks on every node);
- **burn-in** at 05, 09, 13, 17 and 21 h (trigger 'dev'): the throughput test on every node in
  service and the two-node inference test on pairs (a fleet's periodic health checks);
- **presubmit** every two hours from 09:00 to 19:00: a smoke set on a few nodes;
- **signals** every 30 minutes from every node: a heartbeat and a temperature reading;
- **reruns** that ``node-state`` asks for are placed by this harness (issue7-pool's scheduler is
  not in this loop) on a random node in state healthy of the requested revision, not one it must
  avoid, 30 minutes after the request;
- **diagnostics** on a node that became quarantined start 2 hours later and report an hour after
  that; they pass once the node's fault is repaired (``repair_h`` after its quarantine), else they
  run again 5 hours later.

Real numerics: inference checks run on the emulated accelerator (once per model, precision and
bundle: both stacks are bit-reproducible, so every node computes the same bits), and every
throughput run is a real short training run on the emulated chip, timed by its kernel clock; the
slow node's chip has ``KernelClock``'s slowdown (real extra CPU time). Drawn from a seeded
generator: which runs the faulty nodes break, XID codes, pairings, placements, temperatures and the
flaky test's failures.

Faults, from ``onset_h``: ``xid_node`` crashes a share of the runs it hosts with an XID (13, 31 or
43; now and then 79, a fatal kind); ``nccl_node`` makes a share of the two-node runs it is part of
time out (an NCCL timeout signal for it; the result names the rank that did not join, with
probability ``root_cause_accuracy``, else its peer); ``slow_node`` computes ``slowdown`` slower.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import random
import time as wallclock
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from fastci.contracts.node_states import OUT_OF_SERVICE_STATES, NodeStateChanged
from fastci.contracts.runs import RunRequested
from fastci.core.events import Event
from fastci.fleet.events import NodeAttribution
from fastci.inputs import Bundle, NodeHealthEvent, ResultEvent
from fastci.qualify import golden
from fastci.qualify.emulated import EmulatedAccelerator
from fastci.qualify.models import FAMILIES
from fastci.qualify.runner import check_inference
from fastci.qualify.stack import HEALTHY, RuntimeConfig, with_defect
from fastci.qualify.train import Trainer
from fastci.runtime.embedded import EmbeddedRuntime
from fastci.runtime.memory import MemoryRuntime
from fastci.runtime.publish import publish_embedded
from fastci.shared.owners import parse_owner_file
from fastci.topology import SYSTEM

REPO = "acme/fleet-models"
START = datetime(2026, 12, 7, 0, 0, tzinfo=UTC)
PROCESSORS = ["baseline-guard", "flaky-detector", "flaky-owners", "failure-attribution", "node-state"]
INFERENCE_TESTS = [
    (m, p) for m in ("lm-tiny", "convnet-small", "speech-conv-attn", "dlrm-small") for p in ("bf16", "fp8")
]
THROUGHPUT_TEST = ("convnet-small", "bf16")
BURN_IN_HOURS = (5, 9, 13, 17, 21)  # besides the nightly at 01:00, every node in service runs short checks then
DP2_TESTS = [("lm-tiny", "bf16"), ("convnet-small", "fp8")]
FLAKY_TEST = "tests/dist/test_checkpoint.py::test_async_save"
OWNERS = "*  @models-team\n/tests/dist/  @distributed-team\n"
NON_FATAL_XIDS = (13, 31, 43)


@dataclass(frozen=True)
class FleetConfig:
    seed: int = 0
    days: int = 3
    nodes: int = 16
    chips: int = 8
    onset_h: float = 6.0  # faults start this long after the start (after the first nightly)
    xid_node: str = "node-03"
    nccl_node: str = "node-06"
    slow_node: str = "node-12"
    slowdown: float = 0.10
    xid_crash_rate: float = 0.5  # share of the xid node's runs that crash
    xid_fatal_share: float = 0.15  # share of its XIDs that are 79 (fallen off the bus)
    nccl_error_rate: float = 0.5  # share of the nccl node's two-node runs that time out
    root_cause_accuracy: float = 1.0
    flaky_rate: float = 0.10  # the flaky test's first attempt fails this often, on any node ...
    flaky_retry_fails: float = 0.3  # ... and its one retry then fails too this often ('failed', else 'flaky')
    regression_day: int = 1  # the candidate bundle with kernel-rounding-bug is qualified from this night on
    throughput_steps: int = 12  # training steps per throughput run (5 warmup, one sample per step after)
    repair_h: float = 12.0
    rerun_delay_h: float = 0.5

    @property
    def faulty(self) -> dict[str, str]:
        return {
            self.xid_node: "XID errors",
            self.slow_node: f"{self.slowdown:.0%} slower",
            self.nccl_node: "NCCL timeouts",
        }


def revision_of(node: str, nodes: int) -> str:
    return "rev-a" if int(node.split("-")[1]) < nodes // 2 else "rev-b"


@dataclass
class Fault:
    kind: str
    onset: datetime
    repaired: datetime | None = None

    def active(self, at: datetime) -> bool:
        return at >= self.onset and (self.repaired is None or at < self.repaired)


@dataclass
class NodeRecord:
    """What happened to one node, for the table: states, and its runs and fault signals over time."""

    state: str = "healthy"
    transitions: list[NodeStateChanged] = field(default_factory=list)
    runs: list[datetime] = field(default_factory=list)
    throughput_runs: list[datetime] = field(default_factory=list)  # passing ones: each a throughput ratio
    fault_signals: list[datetime] = field(default_factory=list)


@dataclass
class Rerun:
    request: RunRequested
    failed: ResultEvent
    result: ResultEvent | None = None


@dataclass
class FleetOutcome:
    config: FleetConfig
    nodes: dict[str, NodeRecord]
    faults: dict[str, Fault]
    reruns: list[Rerun]
    attributions: dict[str, NodeAttribution]
    outputs: list[Event]
    inputs: list[Event]  # everything published, in order (results, signals, the owner map)
    results: list[ResultEvent]
    bad_bundle: Bundle
    throughput_seconds: float
    seconds: float


class ThroughputRig:
    """Real short training runs of an emulated chip, timed as if its node had the host to itself.

    Sixteen emulated nodes share this one host (and its other tenants), whose load moves run levels
    by 5-20%; a real node's clock does not see another node's load. So the node's chip trains step
    by step interleaved with a reference chip (healthy, no slowdown), and each step's kernel time is
    scaled by how far the reference's time of that step is from the reference's typical time
    (measured once, in the first run): what the host's load added to both is taken out, what the
    node's chip adds (its slowdown) stays. Samples are items per second after ``WARMUP`` steps.
    """

    WARMUP = 5

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.datasets: dict[str, Any] = {}
        self.typical_step: dict[tuple[str, str], float] = {}

    def samples(self, model: str, precision: str, slowdown: float) -> tuple[tuple[float, ...], str]:
        family = FAMILIES[model]
        if model not in self.datasets:
            self.datasets[model] = family.make_data(np.random.default_rng(golden.SEED))
        data = self.datasets[model]
        runtime = RuntimeConfig(warmup_steps=self.WARMUP, steps_per_sample=1)
        chip = Trainer(
            family,
            EmulatedAccelerator(HEALTHY, precision, slowdown=slowdown),
            golden.SEED,
            runtime,  # type: ignore[arg-type]
            data=data,
            steps=self.steps,
        )
        reference = Trainer(
            family,
            EmulatedAccelerator(HEALTHY, precision),
            golden.SEED,
            runtime,
            data=data,  # type: ignore[arg-type]
            steps=self.steps,
        )
        with threadpool_limits(1, user_api="blas"):
            while not chip.done:
                for trainer in (chip, reference) if len(chip.loss_curve) % 2 == 0 else (reference, chip):
                    trainer.step()
        mine = np.asarray(chip.step_kernel_seconds[self.WARMUP :])
        host = np.asarray(reference.step_kernel_seconds[self.WARMUP :])
        typical = self.typical_step.setdefault((model, precision), float(np.median(host)))
        items = family.items(data.train_x[: family.batch_size])
        return tuple(float(v) for v in items / (mine * typical / host)), family.item_unit


class FleetSimulation:
    def __init__(self, config: FleetConfig, progress: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.pipeline = MemoryRuntime(SYSTEM, SYSTEM.build(PROCESSORS))
        self.node_ids = [f"node-{i:02d}" for i in range(config.nodes)]
        self.records = {n: NodeRecord() for n in self.node_ids}
        onset = START + timedelta(hours=config.onset_h)
        self.faults = {node: Fault(kind, onset) for node, kind in config.faulty.items()}
        self.bad_bundle = with_defect("kernel-rounding-bug")
        self.queue: list[tuple[datetime, int, Callable[[datetime], None]]] = []
        self.counter = itertools.count()
        self.results: list[ResultEvent] = []
        self.inputs: list[Event] = []
        self.reruns: dict[str, Rerun] = {}
        self.by_id: dict[str, ResultEvent] = {}
        self.attributions: dict[str, NodeAttribution] = {}
        self.inference_cache: dict[tuple[str, str, Bundle], tuple[str, float]] = {}
        self.rig = ThroughputRig(config.throughput_steps)
        self.throughput_seconds = 0.0
        self.now = START
        self.progress = progress

    # ----- the event loop

    def at(self, when: datetime, action: Callable[[datetime], None]) -> None:
        heapq.heappush(self.queue, (when, next(self.counter), action))

    def run(self) -> FleetOutcome:
        started = wallclock.perf_counter()
        end = START + timedelta(days=self.config.days)
        self._publish([parse_owner_file(OWNERS, repo=REPO)])
        for day in range(self.config.days):
            midnight = START + timedelta(days=day)
            self.at(midnight + timedelta(hours=1), lambda t, d=day: self._nightly(d, t))
            for k, hour in enumerate(range(9, 20, 2)):
                self.at(midnight + timedelta(hours=hour), lambda t, d=day, k=k: self._presubmit(d, k, t))
            for hour in BURN_IN_HOURS:
                self.at(midnight + timedelta(hours=hour, minutes=30), lambda t, d=day: self._burn_in(d, t))
            for half_hour in range(48):
                self.at(midnight + timedelta(minutes=30 * half_hour, seconds=7), self._signals)
        while self.queue and self.queue[0][0] < end:
            when, _, action = heapq.heappop(self.queue)
            self.now = when
            action(when)
        return FleetOutcome(
            self.config,
            self.records,
            self.faults,
            list(self.reruns.values()),
            self.attributions,
            self.pipeline.outputs,
            self.inputs,
            self.results,
            self.bad_bundle,
            self.throughput_seconds,
            wallclock.perf_counter() - started,
        )

    def _publish(self, events: list[Event]) -> None:
        self.inputs += events
        for output in self.pipeline.publish(events):
            if isinstance(output, NodeStateChanged):
                self._state_changed(output)
            elif isinstance(output, RunRequested) and output.work_class == "rerun":
                self.reruns[output.id] = Rerun(output, self.by_id[output.cause_id])
                self.at(self.now + timedelta(hours=self.config.rerun_delay_h), lambda t, r=output: self._rerun(r, t))
            elif isinstance(output, NodeAttribution):
                self.attributions[output.id] = output

    def _state_changed(self, change: NodeStateChanged) -> None:
        record = self.records[change.node_id]
        record.state = change.state
        record.transitions.append(change)
        if change.state == "quarantined" and change.previous in ("healthy", "suspect"):
            fault = self.faults.get(change.node_id)
            if fault is not None and fault.repaired is None and fault.active(change.time):
                fault.repaired = change.time + timedelta(hours=self.config.repair_h)
            self.at(change.time + timedelta(hours=2), lambda t, n=change.node_id: self._diagnose(n, t))
        if self.progress:
            self.progress(
                f"{change.time:%a %H:%M} {change.node_id} {change.previous} -> {change.state} ({change.rule})"
            )

    # ----- what happens

    def _signals(self, when: datetime) -> None:
        events: list[Event] = []
        for node in self.node_ids:
            temperature = self.rng.uniform(55, 80) if self.rng.random() > 0.01 else self.rng.uniform(91, 93)
            events.append(NodeHealthEvent(node_id=node, kind="heartbeat", value=30.0, time=when))
            events.append(NodeHealthEvent(node_id=node, kind="temperature", value=round(temperature, 1), time=when))
        self._publish(events)

    def _nightly(self, day: int, when: datetime) -> None:
        """Every test on every node in service, spread over four hours (each run an action at its time)."""
        commit = sha(f"nightly-{day}")
        in_service = [n for n in self.node_ids if self.records[n].state not in OUT_OF_SERVICE_STATES]
        bundles = [HEALTHY] + ([self.bad_bundle] if day >= self.config.regression_day else [])
        runs: list[Callable[[datetime], object]] = []
        for bundle in bundles:
            for model, precision in INFERENCE_TESTS:
                runs += [
                    lambda t, m=model, p=precision, b=bundle, n=node: self._run_inference(
                        m, p, b, [n], commit, "nightly", t
                    )
                    for node in in_service
                ]
        runs += [
            lambda t, n=node: self._run_throughput(*THROUGHPUT_TEST, n, commit, "nightly", t) for node in in_service
        ]
        for model, precision in DP2_TESTS:
            runs += [
                lambda t, m=model, p=precision, pair=pair: self._run_inference(
                    m, p, HEALTHY, pair, commit, "nightly", t
                )
                for pair in self._pairs(in_service)
            ]
        runs += [lambda t, n=node: self._run_flaky(n, commit, "nightly", t) for node in in_service]
        self._spread(runs, when, timedelta(hours=4))
        if self.progress:
            self.progress(f"{when:%a %H:%M} nightly {day}: {len(runs)} runs on {len(in_service)} nodes")

    def _burn_in(self, day: int, when: datetime) -> None:
        """The short checks every node in service runs a few times a day (trigger 'dev'): the throughput
        test on each node and the two-node all-reduce inference test on pairs."""
        commit = sha(f"nightly-{day}")
        in_service = [n for n in self.node_ids if self.records[n].state not in OUT_OF_SERVICE_STATES]
        runs: list[Callable[[datetime], object]] = [
            lambda t, n=node: self._run_throughput(*THROUGHPUT_TEST, n, commit, "dev", t) for node in in_service
        ]
        runs += [
            lambda t, pair=pair: self._run_inference(*DP2_TESTS[0], HEALTHY, pair, commit, "dev", t)
            for pair in self._pairs(in_service)
        ]
        self._spread(runs, when, timedelta(hours=1))

    def _spread(self, runs: list[Callable[[datetime], object]], start: datetime, span: timedelta) -> None:
        step = span / max(len(runs), 1)
        for i, run in enumerate(runs):
            self.at(start + i * step, run)

    def _presubmit(self, day: int, k: int, when: datetime) -> None:
        commit = sha(f"presubmit-{day}-{k}")
        in_service = [n for n in self.node_ids if self.records[n].state not in OUT_OF_SERVICE_STATES]
        minute = timedelta(minutes=5)
        for i, node in enumerate(self.rng.sample(in_service, 2)):
            self._run_inference("dlrm-small", "bf16", HEALTHY, [node], commit, "presubmit", when + i * minute)
            self._run_inference("lm-tiny", "bf16", HEALTHY, [node], commit, "presubmit", when + i * minute)
        self._run_throughput(*THROUGHPUT_TEST, self.rng.choice(in_service), commit, "presubmit", when + 2 * minute)
        pairs = self._pairs(in_service)
        if pairs:
            self._run_inference(
                "lm-tiny", "bf16", HEALTHY, self.rng.choice(pairs), commit, "presubmit", when + 4 * minute
            )
        self._run_flaky(self.rng.choice(in_service), commit, "presubmit", when + 5 * minute)

    def _pairs(self, in_service: list[str]) -> list[list[str]]:
        """Two-node gangs, each on one hardware revision."""
        pairs = []
        for revision in ("rev-a", "rev-b"):
            nodes = [n for n in in_service if revision_of(n, self.config.nodes) == revision]
            self.rng.shuffle(nodes)
            pairs += [nodes[i : i + 2] for i in range(0, len(nodes) - 1, 2)]
        return pairs

    def _rerun(self, request: RunRequested, when: datetime) -> None:
        candidates = [
            n
            for n in self.node_ids
            if self.records[n].state == "healthy"
            and revision_of(n, self.config.nodes) == request.hardware_revision
            and n not in request.avoid_nodes
        ]
        if not candidates:  # nowhere healthy to run it yet: try again later
            self.at(when + timedelta(hours=1), lambda t: self._rerun(request, t))
            return
        failed = self.reruns[request.id].failed
        model, precision, check = (
            failed.test_id.split("/")[1:] if failed.test_id.startswith("qualify/") else ("", "", "")
        )
        node = self.rng.choice(candidates)
        if check == "throughput":
            result = self._run_throughput(model, precision, node, request.commit, "rerun", when)
        elif check == "inference":
            result = self._run_inference(model, precision, request.bundle, [node], request.commit, "rerun", when)
        elif check == "inference-dp2":
            peers = [n for n in candidates if n != node]
            pair = [node, self.rng.choice(peers)] if peers else [node, node]
            result = self._run_inference(model, precision, request.bundle, pair, request.commit, "rerun", when)
        else:
            result = self._run_flaky(node, request.commit, "rerun", when)
        self.reruns[request.id].result = result

    def _diagnose(self, node: str, when: datetime) -> None:
        """Start the diagnostic suite on a quarantined node; it reports an hour later."""
        if self.records[node].state != "quarantined":
            return
        self._publish([NodeHealthEvent(node_id=node, kind="diagnostic_started", value=3600.0, time=when)])
        self.at(when + timedelta(hours=1), lambda t: self._diagnosed(node, t))

    def _diagnosed(self, node: str, when: datetime) -> None:
        fault = self.faults.get(node)
        passes = fault is None or not fault.active(when)
        self._publish(
            [
                NodeHealthEvent(
                    node_id=node,
                    kind="diagnostic",
                    value=1.0 if passes else 0.0,
                    time=when,
                    detail="fleet diagnostic suite",
                )
            ]
        )
        if not passes:
            self.at(when + timedelta(hours=5), lambda t: self._diagnose(node, t))

    # ----- runs

    def _skipped(self, nodes: list[str], trigger: str) -> bool:
        """A run planned before one of its nodes left service does not start (the scheduler would not
        place it there); a rerun was placed on a healthy node just now."""
        return trigger != "rerun" and any(self.records[n].state in OUT_OF_SERVICE_STATES for n in nodes)

    def _faulty(self, node: str, when: datetime) -> bool:
        fault = self.faults.get(node)
        return fault is not None and fault.active(when)

    def _crash(self, nodes: list[str], when: datetime) -> tuple[str, list[Event]] | None:
        """Does a node fault end this run? (the node that failed, and the signals it sent)"""
        xid = self.config.xid_node
        if xid in nodes and self._faulty(xid, when) and self.rng.random() < self.config.xid_crash_rate:
            code = 79 if self.rng.random() < self.config.xid_fatal_share else self.rng.choice(NON_FATAL_XIDS)
            self.records[xid].fault_signals.append(when)
            return xid, [NodeHealthEvent(node_id=xid, kind="xid", value=float(code), time=when, detail="during a run")]
        nccl = self.config.nccl_node
        if (
            len(nodes) > 1
            and nccl in nodes
            and self._faulty(nccl, when)
            and self.rng.random() < self.config.nccl_error_rate
        ):
            self.records[nccl].fault_signals.append(when)
            peer = next(n for n in nodes if n != nccl)
            named = nccl if self.rng.random() < self.config.root_cause_accuracy else peer
            return named, [
                NodeHealthEvent(
                    node_id=nccl,
                    kind="nccl_timeout",
                    value=1.0,
                    time=when,
                    detail="allreduce timed out waiting for this rank",
                )
            ]
        return None

    def _result(
        self,
        test_id: str,
        nodes: list[str],
        bundle: Bundle,
        commit: str,
        trigger: str,
        when: datetime,
        status: str,
        seconds: float,
        chips: int,
        config: dict,
        metrics: dict | None = None,
        signals: list[Event] = (),
    ) -> ResultEvent:
        node = nodes[0]
        for n in set(nodes):
            self.records[n].runs.append(when)
        result = ResultEvent(
            test_id=test_id,
            run_id=f"{trigger}-{commit[:8]}-{bundle.kernels}-{'+'.join(nodes)}-{when:%d%H%M}",
            repo=REPO,
            commit=commit,
            bundle=bundle,
            node_id=node,
            hardware_revision=revision_of(node, self.config.nodes),
            trigger=trigger,
            status=status,
            duration_s=round(seconds, 6),
            chips=chips,
            metrics=metrics or {},
            seed=golden.SEED,
            config=config,
            time=when + timedelta(seconds=max(seconds, 1.0)),
        )
        self.results.append(result)
        self.by_id[result.id] = result
        self._publish([*signals, result])
        return result

    def _run_inference(
        self, model: str, precision: str, bundle: Bundle, nodes: list[str], commit: str, trigger: str, when: datetime
    ) -> ResultEvent | None:
        if self._skipped(nodes, trigger):
            return None
        check = "inference" if len(nodes) == 1 else "inference-dp2"
        test_id = f"qualify/{model}/{precision}/{check}"
        config = {"model": model, "precision": precision, "nodes": len(nodes)}
        chips = 1 if len(nodes) == 1 else self.config.chips * len(nodes)
        crashed = self._crash(nodes, when)
        if crashed is not None:
            named, signals = crashed
            ordered = [named, *[n for n in nodes if n != named]]
            return self._result(
                test_id, ordered, bundle, commit, trigger, when, "error", 0.0, chips, config, signals=signals
            )
        status, error = self._inference_check(model, precision, bundle)
        return self._result(
            test_id,
            nodes,
            bundle,
            commit,
            trigger,
            when,
            status,
            0.05,
            chips,
            config,
            metrics={"relative_error": (error,)},
        )

    def _inference_check(self, model: str, precision: str, bundle: Bundle) -> tuple[str, float]:
        key = (model, precision, bundle)
        if key not in self.inference_cache:
            family = FAMILIES[model]
            check = check_inference(family, EmulatedAccelerator(bundle, precision), golden.load(family))  # type: ignore[arg-type]
            self.inference_cache[key] = (check.status, check.relative_error)
        return self.inference_cache[key]

    def _run_throughput(
        self, model: str, precision: str, node: str, commit: str, trigger: str, when: datetime
    ) -> ResultEvent | None:
        if self._skipped([node], trigger):
            return None
        test_id = f"qualify/{model}/{precision}/throughput"
        config = {"model": model, "precision": precision, "steps": self.config.throughput_steps}
        crashed = self._crash([node], when)
        if crashed is not None:
            return self._result(
                test_id, [node], HEALTHY, commit, trigger, when, "error", 0.0, 1, config, signals=crashed[1]
            )
        slowdown = self.config.slowdown if node == self.config.slow_node and self._faulty(node, when) else 0.0
        started = wallclock.perf_counter()
        samples, unit = self.rig.samples(model, precision, slowdown)
        seconds = wallclock.perf_counter() - started
        self.throughput_seconds += seconds
        self.records[node].throughput_runs.append(when)
        return self._result(
            test_id,
            [node],
            HEALTHY,
            commit,
            trigger,
            when,
            "passed",
            seconds,
            1,
            config,
            metrics={f"throughput_{unit}_per_s": samples},
        )

    def _run_flaky(self, node: str, commit: str, trigger: str, when: datetime) -> ResultEvent | None:
        if self._skipped([node], trigger):
            return None
        crashed = self._crash([node], when)
        if crashed is not None:
            return self._result(
                FLAKY_TEST,
                [node],
                HEALTHY,
                commit,
                trigger,
                when,
                "error",
                0.0,
                self.config.chips,
                {"shards": 8},
                signals=crashed[1],
            )
        status = "passed"
        if self.rng.random() < self.config.flaky_rate:  # a race in the async save; the plugin retries once
            status = "failed" if self.rng.random() < self.config.flaky_retry_fails else "flaky"
        return self._result(
            FLAKY_TEST, [node], HEALTHY, commit, trigger, when, status, 30.0, self.config.chips, {"shards": 8}
        )


def sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


# ----- what the table reports


@dataclass(frozen=True)
class Detection:
    node: str
    fault: str
    suspect_h: float | None  # hours from onset
    quarantined_h: float | None
    signals_to_suspect: int | None
    signals_to_quarantine: int | None
    runs_to_suspect: int | None
    runs_to_quarantine: int | None
    throughput_runs_to_quarantine: int | None
    quarantine_rule: str | None
    reruns: int  # of the failures the node's fault caused
    reruns_passed: int
    regression_reruns: int  # of the candidate bundle's failures on the node (they must fail again)
    regression_reruns_failed: int
    returned: bool  # back to healthy after passing diagnostics


@dataclass(frozen=True)
class Misattribution:
    healthy_nodes_suspect: list[str]
    healthy_nodes_quarantined: list[str]
    regression_attributions: int  # failure attributions about the candidate bundle's results, not withdrawn
    regression_blamed_nodes: list[str]  # nodes a state change blamed with evidence from the regression
    flaky_marked: list[str]  # ever, in the run
    wrongly_flaky: list[str]  # ever marked, and not the flaky test
    flaky_withdrawn: list[str]  # verdicts withdrawn when a sick node's exclusion arrived


def detections(outcome: FleetOutcome) -> list[Detection]:
    rows = []
    for node, fault in outcome.faults.items():
        record = outcome.nodes[node]
        after = [c for c in record.transitions if c.time >= fault.onset]
        suspect = next((c for c in after if c.state in ("suspect", "quarantined")), None)
        quarantine = next((c for c in after if c.state == "quarantined"), None)

        def count(times: list[datetime], until: NodeStateChanged | None, fault: Fault = fault) -> int | None:
            return None if until is None else sum(fault.onset <= t <= until.time for t in times)

        def hours(change: NodeStateChanged | None, fault: Fault = fault) -> float | None:
            return None if change is None else round((change.time - fault.onset).total_seconds() / 3600, 1)

        asked = [r for r in outcome.reruns if r.request.avoid_nodes == (node,)]
        regression = [r for r in asked if r.failed.bundle == outcome.bad_bundle]
        reruns = [r for r in asked if r.failed.bundle != outcome.bad_bundle]
        passed = [r for r in reruns if r.result is not None and r.result.status in ("passed", "flaky")]
        failed_again = [r for r in regression if r.result is not None and r.result.status in ("failed", "error")]
        returned = any(c.state == "healthy" and c.rule == "diagnostics-passed" for c in after)
        rows.append(
            Detection(
                node=node,
                fault=fault.kind,
                suspect_h=hours(suspect),
                quarantined_h=hours(quarantine),
                signals_to_suspect=count(record.fault_signals, suspect),
                signals_to_quarantine=count(record.fault_signals, quarantine),
                runs_to_suspect=count(record.runs, suspect),
                runs_to_quarantine=count(record.runs, quarantine),
                throughput_runs_to_quarantine=count(record.throughput_runs, quarantine),
                quarantine_rule=quarantine.rule if quarantine else None,
                reruns=len(reruns),
                reruns_passed=len(passed),
                regression_reruns=len(regression),
                regression_reruns_failed=len(failed_again),
                returned=returned,
            )
        )
    return rows


def misattribution(outcome: FleetOutcome) -> Misattribution:
    healthy = [n for n in outcome.nodes if n not in outcome.faults]
    suspect = [n for n in healthy if any(c.state == "suspect" for c in outcome.nodes[n].transitions)]
    quarantined = [n for n in healthy if any(c.state == "quarantined" for c in outcome.nodes[n].transitions)]
    regression_ids = {
        a.id for a in outcome.attributions.values() if a.kind == "failure" and a.bundle == outcome.bad_bundle
    }
    withdrawn = {a.clears for a in outcome.attributions.values() if a.kind == "cleared"}
    blamed = sorted(
        {
            c.node_id
            for r in outcome.nodes.values()
            for c in r.transitions
            if c.state in ("suspect", "quarantined") and any(e.event_id in regression_ids for e in c.evidence)
        }
    )
    verdicts = [e for e in outcome.outputs if e.TOPIC == "flaky-verdicts"]
    ever = sorted({v.test_id for v in verdicts if v.flaky})  # type: ignore[attr-defined]
    withdrawn_flaky = sorted({v.test_id for v in verdicts if v.rule == "withdrawn"})  # type: ignore[attr-defined]
    return Misattribution(
        healthy_nodes_suspect=suspect,
        healthy_nodes_quarantined=quarantined,
        regression_attributions=len(regression_ids - withdrawn),
        regression_blamed_nodes=blamed,
        flaky_marked=ever,
        wrongly_flaky=[t for t in ever if t != FLAKY_TEST],
        flaky_withdrawn=withdrawn_flaky,
    )


def throughput_noise(outcome: FleetOutcome) -> tuple[float, int]:
    """Robust sd of log(ratio) of healthy nodes' throughput runs: this host's run-to-run noise."""
    logs = [
        np.log(a.ratio)
        for a in outcome.attributions.values()
        if a.kind == "throughput" and a.ratio and a.node_id not in outcome.faults
    ]
    if len(logs) < 2:
        return float("nan"), len(logs)
    x = np.asarray(logs)
    return float(1.4826 * np.median(np.abs(x - np.median(x)))), len(logs)


def slow_false_suspects(outcome: FleetOutcome) -> list[str]:
    """Healthy nodes the throughput rule made suspect (or worse)."""
    return sorted(
        {
            c.node_id
            for r in outcome.nodes.values()
            for c in r.transitions
            if c.node_id not in outcome.faults and c.rule == "throughput-slow"
        }
    )


def flake_rate(outcome: FleetOutcome) -> tuple[int, int]:
    """Flaky runs of hardware tests and all their runs, as the fleet_hardware_flake_rate view counts them:
    a failure is a flake when a run of the same test, code, stack, config and seed passed; runs that
    baseline-guard excluded (their node was not healthy) count neither way."""
    excluded = {e.result_id for e in outcome.outputs if e.TOPIC == "baseline-exclusions"}  # type: ignore[attr-defined]
    counted = [r for r in outcome.results if r.chips > 0 and r.id not in excluded]

    def group(r: ResultEvent) -> tuple:
        return r.test_id, r.commit, r.bundle, tuple(sorted(r.config.items())), r.seed

    passed: set[tuple] = {group(r) for r in counted if r.status in ("passed", "flaky")}
    flaky = [r for r in counted if r.status == "flaky" or (r.status in ("failed", "error") and group(r) in passed)]
    return len(flaky), len(counted)


def replay_embedded(inputs: list[Event], data_dir, hours: float = 1.0) -> int:
    """Publish a simulation's input events to an embedded log an hour of simulated time at a time,
    running the embedded runtime (every processor) after each hour, as a live fleet would feed it;
    return how many hours were published. Each run applies what is pending in event-time order; the
    hours bound what one run holds, and what it decides, as the fleet's own cadence would."""

    def hour(event: Event) -> int:
        when = getattr(event, "time", None)
        return -1 if when is None else int((when - START).total_seconds() // (3600 * hours))

    runtime = EmbeddedRuntime(data_dir, SYSTEM, sync=False)
    published = 0
    try:
        for _, batch in itertools.groupby(inputs, key=hour):
            publish_embedded(data_dir, list(batch))
            runtime.run()
            published += 1
    finally:
        runtime.close()
    return published
