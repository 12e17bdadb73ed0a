"""A synthetic CI history for the runtime tests (deterministic for a seed); the demo's is ``fastci.demo.world``.

It is a stand-in for a real fleet's stream, shaped like one: commits across the
stack's layers, presubmit runs of a few tests per commit and a nightly run of
all of them, a regression that breaks some tests for a while until a fix lands,
flaky tests, a node that fails more than its share and throws XID errors, and
health signals from every node. Statuses and durations are drawn, not measured:
it exercises the event path, not the statistics (real numerics come from
``fastci qualify``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from fastci.core.events import Event, record_times
from fastci.inputs import LAYERS, Bundle, ChangedFunction, CommitEvent, NodeHealthEvent, ResultEvent

START = datetime(2026, 11, 2, tzinfo=UTC)
REPO = "acme/llm-framework"
MODELS = ("llama-tiny", "vit-small", "whisper-mini", "dlrm-small", "moe-tiny", "t5-small")
CHECKS = ("forward[bf16]", "forward[fp8]", "backward[bf16]", "train_loss_curve", "eval_score", "throughput")


@dataclass(frozen=True)
class Workload:
    commits: int = 300
    nodes: int = 16
    presubmit_tests: int = 8  # tests run per commit
    nightly_every: int = 24  # commits between nightly runs
    seed: int = 7

    @property
    def tests(self) -> list[str]:
        return [f"tests/models/test_{m.replace('-', '_')}.py::test_{c}" for m in MODELS for c in CHECKS]

    def events(self) -> list[Event]:
        """The whole history, in the order it would be published."""
        rng = random.Random(self.seed)
        tests = self.tests
        flaky = set(rng.sample(tests, 4))
        broken_by_regression = set(rng.sample(tests, 3))
        regression = range(self.commits * 2 // 5, self.commits * 2 // 5 + self.commits // 8)
        sick_node = f"node-{self.nodes // 2:02d}"
        bundle = {
            "compiler": "cc-1.0",
            "kernels": "kn-1.0",
            "runtime": "rt-1.0",
            "driver": "dr-535",
            "firmware": "fw-7",
        }
        shas = [f"{rng.getrandbits(160):040x}" for _ in range(self.commits)]
        events: list[Event] = []
        for index, sha in enumerate(shas):
            time = START + timedelta(minutes=20 * index)
            layers = tuple(sorted(rng.sample(LAYERS, rng.choice((1, 1, 1, 2)))))
            if "compiler" in layers or "kernels" in layers:
                layer = "compiler" if "compiler" in layers else "kernels"
                major, minor = bundle[layer].split("-")[1].split(".")
                bundle[layer] = f"{bundle[layer].split('-')[0]}-{major}.{int(minor) + 1}"
            events.append(self._commit(rng, sha, shas[index - 1] if index else None, time, layers))
            nightly = index % self.nightly_every == self.nightly_every - 1
            chosen = tests if nightly else rng.sample(tests, self.presubmit_tests)
            for test in chosen:
                node = f"node-{rng.randrange(self.nodes):02d}"
                if test in broken_by_regression and index in regression:
                    status = "failed"
                elif node == sick_node and rng.random() < 0.3:
                    status = rng.choice(("failed", "error"))
                elif test in flaky and rng.random() < 0.15:
                    status = rng.choice(("flaky", "failed"))
                else:
                    status = "passed" if rng.random() > 0.01 else "skipped"
                model = test.split("test_", 2)[1].rsplit(".py", 1)[0]
                events.append(
                    ResultEvent(
                        test_id=test,
                        run_id=f"{'nightly' if nightly else 'presubmit'}-{index:04d}",
                        repo=REPO,
                        commit=sha,
                        bundle=Bundle(**bundle),
                        node_id=node,
                        hardware_revision="rev-a" if int(node[5:]) % 2 == 0 else "rev-b",
                        trigger="nightly" if nightly else "presubmit",
                        status=status,
                        duration_s=round(rng.lognormvariate(4.0, 0.6), 3),
                        chips=8,
                        seed=index,
                        config={"model": model, "steps": 50 if nightly else 10},
                        time=time + timedelta(minutes=5 + rng.randrange(30)),
                    )
                )
            for n in range(self.nodes):
                node = f"node-{n:02d}"
                events.append(NodeHealthEvent(node_id=node, kind="heartbeat", value=20.0, time=time))
                if index % 6 == 0:
                    events.append(
                        NodeHealthEvent(
                            node_id=node, kind="temperature", value=float(55 + rng.randrange(15)), time=time
                        )
                    )
                if node == sick_node and rng.random() < 0.1:
                    events.append(
                        NodeHealthEvent(
                            node_id=node, kind="xid", value=79.0, time=time, detail="GPU has fallen off the bus"
                        )
                    )
        return events

    def _commit(self, rng: random.Random, sha: str, parent: str | None, time: datetime, layers: tuple) -> CommitEvent:
        area = layers[0]
        module = f"fastlm/{area}/{rng.choice(('core', 'ops', 'utils', 'io'))}.py"
        functions = tuple(
            ChangedFunction(path=module, qualname=f"{rng.choice(('Engine', 'Plan', 'Op'))}.{name}", change="modified")
            for name in rng.sample(("run", "build", "step", "lower", "fuse", "load"), rng.randrange(1, 4))
        )
        return CommitEvent(
            repo=REPO,
            sha=sha,
            parents=(parent,) if parent else (),
            author=rng.choice(("ana@acme.dev", "bo@acme.dev", "chen@acme.dev", "dee@acme.dev")),
            time=time,
            title=f"{area}: {rng.choice(('speed up', 'fix', 'refactor', 'tune'))} {functions[0].qualname}",
            changed_files=({"path": module, "change": "modified"},),
            changed_functions=functions,
            layers=layers,
            hardware_path=any(layer in ("compiler", "kernels", "runtime", "driver", "firmware") for layer in layers),
        )


def per_topic(events: list[Event]) -> list[list[Event]]:
    """The events of each topic, in their order, one list per topic as they first appear: the
    per-topic blocks the ordering checks append in turn."""
    topics = list(dict.fromkeys(e.TOPIC for e in events))
    return [[e for e in events if e.TOPIC == topic] for topic in topics]


def in_time_order(events: list[Event]) -> list[Event]:
    """The events sorted by the time their records carry (stable): each topic appended in time order
    (the history as generated appends results run by run)."""
    times = record_times(events, 0)
    return [event for _, _, event in sorted(zip(times, range(len(events)), events, strict=True))]


def malformed_lines() -> list[bytes]:
    """A few bad events of the kinds producers really send, to show the dead-letter path."""
    return [
        b'{"topic": "results", "event": {"test_id": "tests/test_x.py::test_a", "run_id": "r1"',
        b'{"topic": "results", "event": {"test_id": "tests/test_x.py::test_a", "run_id": "r1", "commit": "abc1234"}}',
        b'{"topic": "node-health", "event": {"node_id": "node-01", "kind": "xid", "value": "seventy-nine", '
        b'"time": "2026-11-02T00:00:00Z"}}',
        b'{"topic": "deploys", "event": {"service": "web"}}',
    ]
