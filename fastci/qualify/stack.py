"""The emulated accelerator's software stack: each layer is versioned, and a version's behaviour is
its changelog folded up to that version, like a real stack's release notes.

Defects are injected by version: a release can introduce a defect and a later one fix it, so a
bundle that pins a version in between carries it, and bisecting over versions finds the release
that brought it in. The four defects are the classic ways a stack goes wrong:

- ``kernel-rounding-bug`` (kernels 2.1.0, fixed in 2.1.1): the bf16 pack adds its rounding
  increment one hex digit too high; outputs are plausible but several percent off (correctness gate).
- ``compiler-bf16-accumulation`` (compiler 1.2.0, fixed in 1.2.1): the mixed-precision pass lowers
  the accumulators it owns, including the fused optimizer update, to bf16; updates smaller than half
  a bf16 ulp of a weight are lost, so training stalls once the learning rate has decayed and the loss
  curve drifts off the reference after some steps (loss-curve gate).
- ``kernel-extra-work`` (kernels 2.2.0, fixed in 2.2.1): every matmul recomputes 3% of its rows
  (a halo the tiling reads twice); outputs are right, throughput drops (performance gate).
- ``kernel-nondeterministic-reduction`` (kernels 2.3.0, fixed in 2.3.1): split-K partial sums are
  combined in arrival order, which changes from call to call; every run is within tolerance but
  no two runs agree bit for bit (determinism gate: the test is flaky).

Driver and firmware versions are recorded in every bundle but change nothing in the emulation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, TypeVar

from fastci.inputs import Bundle

VERSION_PATTERN = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def parse_version(layer: str, version: str) -> tuple[int, int, int]:
    match = VERSION_PATTERN.match(version)
    if not match:
        raise ValueError(f"bundle field '{layer}': {version!r} is not a version like 1.2.0")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


@dataclass(frozen=True)
class CompilerConfig:
    tile_k: int = 32  # K elements per tile: one fp32 rounding per tile partial
    tile_order: Literal["sequential", "pairwise"] = "sequential"  # how tile partials are summed
    accumulate: Literal["float32", "bfloat16"] = "float32"  # accumulators and the fused update


@dataclass(frozen=True)
class KernelsConfig:
    rounding: Literal["nearest-even", "wrong-increment"] = "nearest-even"  # bf16 packing
    extra_rows: float = 0.0  # fraction of each matmul's rows computed twice
    split_k_order: Literal["fixed", "arrival"] = "fixed"  # order split-K partials are combined in


@dataclass(frozen=True)
class RuntimeConfig:
    warmup_steps: int = 5  # steps whose timings are discarded (first calls, caches)
    steps_per_sample: int = 5  # steps per throughput sample


C = TypeVar("C")


@dataclass(frozen=True)
class Release:
    version: str
    note: str
    changes: dict[str, Any] = field(default_factory=dict)
    introduces: str | None = None  # a defect this release brings in
    fixes: str | None = None  # a defect this release removes


@dataclass(frozen=True)
class Changelog(Generic[C]):
    layer: str
    base: C
    releases: tuple[Release, ...]

    def __post_init__(self) -> None:
        versions = [parse_version(self.layer, r.version) for r in self.releases]
        assert versions == sorted(versions) and len(set(versions)) == len(versions), (
            f"{self.layer}: releases out of order"
        )

    def resolve(self, version: str) -> tuple[C, tuple[str, ...]]:
        """The behaviour of ``version`` and the defects it carries."""
        wanted = parse_version(self.layer, version)
        first = self.releases[0].version
        if wanted < parse_version(self.layer, first):
            raise ValueError(f"bundle field '{self.layer}': {version} predates the first release ({first})")
        config, defects = self.base, []
        for release in self.releases:
            if parse_version(self.layer, release.version) > wanted:
                break
            config = replace(config, **release.changes)  # type: ignore[type-var]
            if release.introduces:
                defects.append(release.introduces)
            if release.fixes in defects:
                defects.remove(release.fixes)
        return config, tuple(defects)

    def release(self, version: str) -> Release:
        for release in self.releases:
            if release.version == version:
                return release
        raise KeyError(version)


COMPILER = Changelog(
    "compiler",
    CompilerConfig(),
    (
        Release("1.0.0", "baseline: 32-wide K tiles summed in order, fp32 accumulators"),
        Release(
            "1.1.0",
            "64-wide K tiles summed as a tree (other bits, same accuracy)",
            {"tile_k": 64, "tile_order": "pairwise"},
        ),
        Release(
            "1.2.0",
            "mixed-precision pass lowers accumulators and the fused optimizer update to bf16",
            {"accumulate": "bfloat16"},
            introduces="compiler-bf16-accumulation",
        ),
        Release("1.2.1", "accumulators back to fp32", {"accumulate": "float32"}, fixes="compiler-bf16-accumulation"),
    ),
)

KERNELS = Changelog(
    "kernels",
    KernelsConfig(),
    (
        Release("2.0.0", "baseline: round-to-nearest-even packing, fp32 accumulation"),
        Release(
            "2.1.0",
            "faster bf16 pack (rounding increment written as 0x80000)",
            {"rounding": "wrong-increment"},
            introduces="kernel-rounding-bug",
        ),
        Release(
            "2.1.1",
            "bf16 pack rounding increment fixed (0x8000)",
            {"rounding": "nearest-even"},
            fixes="kernel-rounding-bug",
        ),
        Release(
            "2.2.0", "new M tiling (recomputes a 3% halo of rows)", {"extra_rows": 0.03}, introduces="kernel-extra-work"
        ),
        Release("2.2.1", "M tiling halo removed", {"extra_rows": 0.0}, fixes="kernel-extra-work"),
        Release(
            "2.3.0",
            "split-K with atomic accumulation (partials land in arrival order)",
            {"split_k_order": "arrival"},
            introduces="kernel-nondeterministic-reduction",
        ),
        Release(
            "2.3.1",
            "split-K partials combined in a fixed order",
            {"split_k_order": "fixed"},
            fixes="kernel-nondeterministic-reduction",
        ),
    ),
)

RUNTIME = Changelog(
    "runtime",
    RuntimeConfig(),
    (
        Release("3.0.0", "baseline: 5 warmup steps, one throughput sample per 5 steps"),
        Release("3.1.0", "asynchronous host-to-device copies (no numeric change)"),
    ),
)

LAYERS: dict[str, Changelog[Any]] = {"compiler": COMPILER, "kernels": KERNELS, "runtime": RUNTIME}

DEFECTS: dict[str, str] = {
    release.introduces: f"{changelog.layer} {release.version}"
    for changelog in LAYERS.values()
    for release in changelog.releases
    if release.introduces
}

# A healthy bundle: the newest release of every emulated layer.
HEALTHY = Bundle(compiler="1.2.1", kernels="2.3.1", runtime="3.1.0", driver="550.54.15", firmware="96.00.5e.00.01")


@dataclass(frozen=True)
class Stack:
    """What an emulated bundle does: every layer's behaviour and the defects it carries."""

    bundle: Bundle
    compiler: CompilerConfig
    kernels: KernelsConfig
    runtime: RuntimeConfig
    defects: tuple[str, ...]

    @classmethod
    def of(cls, bundle: Bundle) -> Stack:
        compiler, compiler_defects = COMPILER.resolve(bundle.compiler)
        kernels, kernel_defects = KERNELS.resolve(bundle.kernels)
        runtime, runtime_defects = RUNTIME.resolve(bundle.runtime)
        return cls(bundle, compiler, kernels, runtime, (*compiler_defects, *kernel_defects, *runtime_defects))


def with_defect(defect: str, bundle: Bundle = HEALTHY) -> Bundle:
    """``bundle`` with the one layer version that introduces ``defect``."""
    if defect not in DEFECTS:
        raise ValueError(f"unknown defect {defect!r} (known: {', '.join(DEFECTS)})")
    layer, version = DEFECTS[defect].split(" ")
    return bundle.model_copy(update={layer: version})
