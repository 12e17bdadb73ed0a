"""A seeded nightly workload for detection and bisect benchmarks and tests.

A test's throughput is ``base`` times (1 - ``drop``) once the culprit is in (a commit at or after
the culprit in the chain, or a bundle carrying the culprit component version), times
(1 + noise x N(0, 1)) per repeat: run-to-run noise as a benchmark sees it. Every draw is seeded from
the scenario seed and the run's id, so a scenario replays exactly. This is a noise *model*, the
point of a detection benchmark; real numerics come from the qualification runner.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property

import numpy as np

from fastci.contracts.runs import RunRequested
from fastci.core.events import Event
from fastci.inputs import Bundle, CommitEvent, ResultEvent
from fastci.regression.references import GoldenReference

REPO = "acme/llm-framework"
TEST = "tests/models/test_llama_tiny.py::test_throughput"
METRIC = "throughput_tokens_per_s"
START = datetime(2026, 11, 2, 1, tzinfo=UTC)
GOOD_BUNDLE = Bundle(compiler="cc-1.0", kernels="kn-1.0", runtime="rt-1.0", driver="dr-535", firmware="fw-7")


def sha(index: int) -> str:
    return hashlib.sha1(f"commit-{index}".encode()).hexdigest()


@dataclass
class Scenario:
    """Nights of a stable baseline, then ``changes`` commits, then the first bad night."""

    noise: float = 0.02
    drop: float = 0.02
    repeats: int = 100
    changes: int = 400
    culprit: int | None = 200  # position among the changes (0-based); None: no code culprit
    bumped: dict[str, str] = field(default_factory=dict)  # components the bad night's bundle bumps
    culprit_component: str | None = None  # one of ``bumped`` that carries the drop
    baseline_nights: int = 10
    base: float = 1000.0
    seed: int = 0
    layers: tuple[str, ...] = ("framework", "compiler", "kernels", "model")
    # 'performance': the culprit slows the test; 'output' / 'loss_curve' / 'eval': it breaks that
    # correctness check instead (a wrong element, a loss drifting up from step 60, eval 1.5% down)
    kind: str = "performance"
    test_id: str = TEST

    @property
    def bad_bundle(self) -> Bundle:
        return GOOD_BUNDLE.model_copy(update=self.bumped)

    @property
    def first_change(self) -> int:
        return self.baseline_nights  # commits 0..baseline_nights-1 are the nightly ones before

    def culprit_sha(self) -> str | None:
        return None if self.culprit is None else sha(self.first_change + self.culprit)

    def commits(self) -> list[CommitEvent]:
        total = self.first_change + self.changes
        return [
            CommitEvent(
                repo=REPO,
                sha=sha(i),
                parents=(sha(i - 1),) if i else (),
                author=f"dev{i % 7}@acme.dev",
                time=START + timedelta(minutes=i),
                title=f"change {i}",
                changed_files=(
                    {"path": f"fastlm/{self.layers[i % len(self.layers)]}/m{i % 5}.py", "change": "modified"},
                ),
                layers=(self.layers[i % len(self.layers)],),
            )
            for i in range(total)
        ]

    def is_bad(self, commit: str, bundle: Bundle) -> bool:
        if self.culprit_component and getattr(bundle, self.culprit_component) == self.bumped[self.culprit_component]:
            return True
        if self.culprit is None:
            return False
        index = self._index(commit)
        return index >= self.first_change + self.culprit

    def _index(self, commit: str) -> int:
        return self._indexes[commit]

    @cached_property
    def _indexes(self) -> dict[str, int]:
        return {sha(i): i for i in range(self.first_change + self.changes)}

    def samples(self, commit: str, bundle: Bundle, repeats: int, key: str) -> tuple[float, ...]:
        rng = self._rng(key)
        level = self.base * (1 - self.drop) if self.is_bad(commit, bundle) else self.base
        return tuple((level * (1 + self.noise * rng.standard_normal(repeats))).tolist())

    def nightly_results(self) -> list[ResultEvent]:
        nights = []
        for night in range(self.baseline_nights + 1):
            last = night == self.baseline_nights
            commit = sha(self.first_change + self.changes - 1) if last else sha(night)
            bundle = self.bad_bundle if last else GOOD_BUNDLE
            nights.append(
                self._result(
                    f"nightly-{night:03d}",
                    commit,
                    bundle,
                    "nightly",
                    self.repeats,
                    node=f"node-{night % 8:02d}",
                    seed=night,
                )
            )
        return nights

    def _result(
        self,
        run_id: str,
        commit: str,
        bundle: Bundle,
        trigger: str,
        repeats: int,
        node: str,
        seed: int | None,
        config: dict | None = None,
    ) -> ResultEvent:
        if self.kind != "performance":
            return self._checked_result(run_id, commit, bundle, trigger, node, seed, config)
        return ResultEvent(
            test_id=self.test_id,
            run_id=run_id,
            repo=REPO,
            commit=commit,
            bundle=bundle,
            node_id=node,
            hardware_revision="rev-a",
            trigger=trigger,
            status="passed",
            duration_s=60.0,
            chips=8,  # type: ignore[arg-type]
            metrics={METRIC: self.samples(commit, bundle, repeats, run_id)},
            seed=seed,
            config=config or {},
        )

    # ----- correctness kinds: bf16-like outputs, a loss curve, an eval score

    def _rng(self, key: str) -> np.random.Generator:
        return np.random.default_rng(
            int.from_bytes(hashlib.sha256(f"{self.seed}/{key}".encode()).digest()[:8], "little")
        )

    def _reference_outputs(self) -> np.ndarray:
        return self._rng("outputs").standard_normal(64)

    def _loss_curve(self, key: str, bad: bool) -> tuple[float, ...]:
        t = np.arange(200)
        curve = 2.0 * np.exp(-t / 50) + 0.5 + 0.01 * self._rng(f"loss/{key}").standard_normal(200)
        if bad and self.kind == "loss_curve":
            curve[60:] += 0.004 * (t[60:] - 60)
        return tuple(curve.tolist())

    def golden(self) -> GoldenReference:
        return GoldenReference(
            test_id=self.test_id,
            version=1,
            repo=REPO,
            commit=sha(0),
            bundle=GOOD_BUNDLE,
            hardware_revision="cpu-fp32-reference",
            outputs={"logits": tuple(self._reference_outputs().tolist())},
            loss_curves=tuple(self._loss_curve(f"ref{i}", False) for i in range(4)),
            seeds=(0, 1, 2, 3),
            eval_score=0.8,
        )

    def _checked_result(
        self, run_id: str, commit: str, bundle: Bundle, trigger: str, node: str, seed: int | None, config: dict | None
    ) -> ResultEvent:
        bad = self.is_bad(commit, bundle)
        reference = self._reference_outputs()
        outputs = reference * (1 + 2e-3 * self._rng(f"out/{run_id}").standard_normal(64))  # bf16-like rounding
        if bad and self.kind == "output":
            outputs[17] *= 1.3  # a kernel rounding bug in one tile
        score = 0.8 * (0.985 if bad and self.kind == "eval" else 1.0 - 0.002 * self._rng(f"eval/{run_id}").random())
        return ResultEvent(
            test_id=self.test_id,
            run_id=run_id,
            repo=REPO,
            commit=commit,
            bundle=bundle,
            node_id=node,
            hardware_revision="rev-a",
            trigger=trigger,
            status="passed",
            duration_s=60.0,
            chips=8,  # type: ignore[arg-type]
            metrics={"logits": tuple(outputs.tolist())},
            loss_curve=self._loss_curve(run_id, bad),
            eval_score=score,
            seed=seed,
            config={**(config or {}), "dtype": "bf16"},
        )

    def run(self, request: RunRequested) -> list[Event]:
        """What the runner publishes for a request: one run with the requested repeats."""
        return [
            self._result(
                f"run-{request.id}",
                request.commit,
                request.bundle,
                request.work_class,
                request.repeats,
                node="node-15",
                seed=request.seed,
                config=dict(request.config),
            )
        ]
