"""correctness-gates: every passing result checked against its test's golden reference."""

from __future__ import annotations

from typing import ClassVar

from fastci.core.events import Event, Record
from fastci.core.processor import Processor, StateReader, Step, compound_key
from fastci.inputs import ResultEvent
from fastci.regression.correctness import canonical_dtype, check_result
from fastci.regression.events import GateResult
from fastci.regression.references import GoldenReference

GATED_STATUSES = frozenset({"passed", "flaky"})  # a failed run has no outputs worth judging


class GoldenHeld(Record):
    golden: GoldenReference | None = None


def golden_key(test_id: str) -> str:
    return compound_key(test_id, "golden")


class CorrectnessGatesProcessor(Processor[GoldenHeld]):
    name: ClassVar[str] = "correctness-gates"
    inputs: ClassVar[tuple[str, ...]] = (GoldenReference.TOPIC, ResultEvent.TOPIC)
    outputs: ClassVar[tuple[str, ...]] = (GateResult.TOPIC,)
    state_model: ClassVar[type[Record]] = GoldenHeld
    state_key: ClassVar[str] = "key"

    def ignores(self, event: Event) -> bool:
        # a golden is pinned to a stack: a result that names none cannot be gated
        return isinstance(event, ResultEvent) and (event.status not in GATED_STATUSES or event.bundle is None)

    def process(self, state: StateReader[GoldenHeld], event: Event) -> Step[GoldenHeld]:
        if isinstance(event, GoldenReference):
            return self._pin(state, event)
        assert isinstance(event, ResultEvent)
        held = state.get(golden_key(event.test_id))
        if held is None or held.golden is None or self.ignores(event):
            return Step()
        golden = held.golden
        # the precision the run computed in: config 'dtype', or 'precision' as fastci qualify names it
        dtype = canonical_dtype(str(event.config.get("dtype") or event.config.get("precision") or golden.dtype))
        checks = check_result(golden, event.metrics, event.loss_curve, event.eval_score, dtype)
        return Step(
            outputs=[
                GateResult(
                    result_id=event.id,
                    test_id=event.test_id,
                    run_id=event.run_id,
                    repo=event.repo,
                    commit=event.commit,
                    bundle=event.bundle,
                    hardware_revision=event.hardware_revision,
                    node_id=event.node_id,
                    trigger=event.trigger,
                    dtype=dtype,
                    golden_version=golden.version,
                    golden_commit=golden.commit,
                    golden_bundle=golden.bundle,
                    passed=all(c.passed for c in checks),
                    checks=tuple(checks),
                    seed=event.seed,
                    config=event.config,
                    time=event.time,
                )
            ]
        )

    def _pin(self, state: StateReader[GoldenHeld], golden: GoldenReference) -> Step[GoldenHeld]:
        """The highest version is in force; a published version never changes."""
        key = golden_key(golden.test_id)
        held = state.get(key)
        current = None if held is None else held.golden
        if current is not None and current.version == golden.version and current != golden:
            raise ValueError(
                f"golden-references: field 'version': version {golden.version} of {golden.test_id} is already "
                f"pinned to bundle {current.bundle.model_dump()} with other values; "
                f"publish version {current.version + 1}"
            )
        if current is not None and current.version >= golden.version:
            return Step()
        return Step(writes={key: GoldenHeld(golden=golden)})
