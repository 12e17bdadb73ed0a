"""The demo's world: a synthetic repository, its test suite, its fleet and the CI runner around fastci.

fastci decides; this module plays everything outside it, the same way for a seed: developers push a
commit an hour to ``acme/llm-framework``; the CI runner runs, for each commit, the tests fastci's
selection kept for it (``presubmit``, a smoke config), and every test once a day (``nightly``, the full
config); it answers fastci's run requests (confirmations, bisect steps, reruns); nodes send health
signals. Statuses, durations and numbers are a seeded noise model, not measurements (real numerics come
from ``fastci qualify``).

What it plants, for fastci to find:

- a commit to the attention kernel whose harm shows only at full scale: llama-tiny 4% slower, vit-small's
  training loss drifting up from step 60, whisper-mini's eval 1.5% down. Presubmit's smoke runs (a tenth
  of the steps, no benchmark) pass it; the nightly does not;
- a node that starts failing the tests it runs, throws an XID, then falls off the bus (XID 79);
- four flaky tests, each owned by its model's team (the owner map);
- a build-file change (every test must run) and documentation changes (no test needs to).

The repository's code is a call graph: each test's evidence is the stacks it executes, so the selection
narrows a commit to the tests that run what it changed, as on a real suite.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property

import numpy as np

from fastci.contracts.owner_maps import OwnerMap
from fastci.contracts.runs import RunRequested
from fastci.inputs import Bundle, ChangedFunction, CommitEvent, EvidenceEvent, FoldedStack, NodeHealthEvent, ResultEvent
from fastci.regression.references import GoldenReference
from fastci.selection.events import Selection
from fastci.shared.owners import parse_owner_file

REPO = "acme/llm-framework"
START = datetime(2026, 11, 2, tzinfo=UTC)  # a Monday: the history fills whole weeks from it
COMMIT_EVERY = timedelta(hours=1)
NIGHTLY_EVERY = 24  # commits: one nightly run a day, at the day's last commit
NODES = 16
HARDWARE = "rev-a"
BUNDLE = Bundle(compiler="cc-2.4.1", kernels="kn-1.9.0", runtime="rt-3.1.2", driver="dr-550", firmware="fw-7.2")
FULL_STEPS, SMOKE_STEPS = 200, 20  # nightly and presubmit training steps
SMOKE_SHARE = 0.12  # a smoke run's duration, as a share of the full one's
NIGHTLY_REPEATS = 30  # throughput samples a nightly benchmark takes
CHIPS = 8
QUEUE = timedelta(minutes=1)  # from a commit (or a request) to its first test starting
NIGHTLY_START = timedelta(minutes=10)  # after the day's last commit
FLAKE_CHANCE = 0.2  # a flaky test's run that fails, then passes on retry
SICK_FAILURE_CHANCE = 0.5
SICK_HOURS = 10  # from the sick node's first failures to its falling off the bus
NOISE = 0.015  # run-to-run noise of a throughput sample

# The code under test, as 'path::qualname' units.
ENGINE_RUN = "fastlm/framework/engine.py::Engine.run"
ENGINE_COMPILE = "fastlm/framework/engine.py::Engine.compile"
COMPILER = ("fastlm/compiler/lower.py::lower_graph", "fastlm/compiler/fuse.py::fuse_elementwise")
TILE = "fastlm/compiler/schedule.py::tile_loops"
LAUNCH = "fastlm/runtime/stream.py::Stream.launch"
SYNCHRONIZE = "fastlm/runtime/stream.py::Stream.synchronize"
ALLOCATE = "fastlm/runtime/memory.py::Pool.allocate"
BACKWARD = "fastlm/framework/autograd.py::Graph.backward"
FIT, TRAIN_STEP = "fastlm/framework/train.py::Trainer.fit", "fastlm/framework/train.py::Trainer.step"
OPTIMIZER = "fastlm/framework/optim.py::AdamW.step"
LOADER = "fastlm/framework/data.py::Loader.next"
SAVE, LOAD = "fastlm/framework/checkpoint.py::save", "fastlm/framework/checkpoint.py::load"
SCORE, ACCURACY = "fastlm/framework/evaluate.py::Evaluator.score", "fastlm/framework/metrics.py::accuracy"
MEASURE = "fastlm/framework/bench.py::Benchmark.measure"
ATTENTION = "fastlm/kernels/attention.py::flash_attention"
ATTENTION_BACKWARD = "fastlm/kernels/attention.py::flash_attention_bwd"
GEMM = {"bf16": "fastlm/kernels/matmul.py::gemm_bf16", "fp8": "fastlm/kernels/matmul.py::gemm_fp8"}
RMS_NORM, LAYER_NORM = "fastlm/kernels/norm.py::rms_norm", "fastlm/kernels/norm.py::layer_norm"
CONV2D, CONV1D = "fastlm/kernels/conv.py::conv2d", "fastlm/kernels/conv.py::conv1d"
EMBEDDING_BAG = "fastlm/kernels/embedding.py::embedding_bag"
TOP_K = "fastlm/kernels/routing.py::topk_gate"


@dataclass(frozen=True)
class Model:
    name: str
    path: str
    forward: str  # its top-level forward, a qualname in ``path``
    block: str  # the repeated block's forward
    extra: str  # one more unit of its own (an embedding, a router...)
    kernels: tuple[str, ...]  # what its blocks launch; GEMM["bf16"] stands for the run's matmul
    team: str
    scale: float  # its runs' length relative to the others'
    metric: str
    throughput: float
    eval_score: float
    loss: tuple[float, float]  # the loss curve's amplitude and floor


MODELS = (
    Model(
        "llama-tiny",
        "fastlm/model/llama.py",
        "Llama.forward",
        "LlamaBlock.forward",
        "RotaryEmbedding.forward",
        (ATTENTION, RMS_NORM, GEMM["bf16"]),
        "language-team",
        1.0,
        "throughput_tokens_per_s",
        5200.0,
        0.71,
        (2.0, 0.5),
    ),
    Model(
        "vit-small",
        "fastlm/model/vit.py",
        "ViT.forward",
        "ViTBlock.forward",
        "PatchEmbed.forward",
        (ATTENTION, LAYER_NORM, GEMM["bf16"], CONV2D),
        "vision-team",
        0.7,
        "throughput_images_per_s",
        3100.0,
        0.82,
        (1.6, 0.4),
    ),
    Model(
        "whisper-mini",
        "fastlm/model/whisper.py",
        "Whisper.forward",
        "WhisperBlock.forward",
        "AudioEncoder.forward",
        (ATTENTION, LAYER_NORM, GEMM["bf16"], CONV1D),
        "speech-team",
        0.9,
        "throughput_tokens_per_s",
        4100.0,
        0.77,
        (1.8, 0.6),
    ),
    Model(
        "dlrm-small",
        "fastlm/model/dlrm.py",
        "DLRM.forward",
        "Interaction.forward",
        "EmbeddingTables.lookup",
        (EMBEDDING_BAG, GEMM["bf16"]),
        "recsys-team",
        0.5,
        "throughput_samples_per_s",
        88000.0,
        0.79,
        (0.9, 0.45),
    ),
    Model(
        "moe-tiny",
        "fastlm/model/moe.py",
        "MoE.forward",
        "MoEBlock.forward",
        "Router.route",
        (ATTENTION, RMS_NORM, GEMM["bf16"], TOP_K),
        "language-team",
        1.4,
        "throughput_tokens_per_s",
        3900.0,
        0.66,
        (2.2, 0.55),
    ),
    Model(
        "t5-small",
        "fastlm/model/t5.py",
        "T5.forward",
        "T5Block.forward",
        "T5Decoder.forward",
        (ATTENTION, RMS_NORM, GEMM["bf16"]),
        "language-team",
        0.8,
        "throughput_tokens_per_s",
        4700.0,
        0.74,
        (1.9, 0.5),
    ),
)
CHECKS = ("forward[bf16]", "forward[fp8]", "backward[bf16]", "train_loss_curve", "eval_score", "throughput")
CHECK_MINUTES = {  # a full run's length per check, for a model of scale 1
    "forward[bf16]": 4.0,
    "forward[fp8]": 4.0,
    "backward[bf16]": 6.0,
    "train_loss_curve": 24.0,
    "eval_score": 10.0,
    "throughput": 8.0,
}
GATED = ("forward[bf16]", "forward[fp8]", "train_loss_curve", "eval_score")  # checks with a golden reference

# The planted regression: the culprit's change, what it breaks, and the commit that makes it.
CULPRIT_UNITS = (ATTENTION,)
CULPRIT_TITLE = "kernels: fuse the softmax rescale into flash_attention's inner loop"
CULPRIT_AUTHOR = "chen@acme.dev"
REGRESSED = {  # test -> how its full-scale runs break
    "tests/models/test_llama_tiny.py::test_throughput": "throughput",
    "tests/models/test_vit_small.py::test_train_loss_curve": "loss_curve",
    "tests/models/test_whisper_mini.py::test_eval_score": "eval",
}
THROUGHPUT_DROP, EVAL_RATIO, LOSS_DRIFT_FROM = 0.04, 0.985, 60
REGRESSION_NIGHTS = 6  # nightly runs a history needs for the regression: a baseline before it, two bad nights after
FLAKY_CANDIDATES = ("backward[bf16]", "forward[fp8]")  # checks with nothing the detector judges

OWNERS = """\
*                                   @framework-team
/fastlm/model/                      @models-team
/fastlm/kernels/                    @kernels-team
/fastlm/compiler/                   @compiler-team
/fastlm/runtime/                    @runtime-team
/tests/models/test_llama_tiny.py    @language-team
/tests/models/test_moe_tiny.py      @language-team
/tests/models/test_t5_small.py      @language-team
/tests/models/test_vit_small.py     @vision-team
/tests/models/test_whisper_mini.py  @speech-team
/tests/models/test_dlrm_small.py    @recsys-team
layer:driver                        @driver-team
layer:firmware                      @firmware-team
"""
AUTHORS = ("ana@acme.dev", "bo@acme.dev", "chen@acme.dev", "dee@acme.dev", "eli@acme.dev")
VERBS = ("speed up", "fix", "refactor", "tune", "simplify", "document")
# How often a commit changes each part of the repository (code by layer, then docs and the build).
CHANGE_WEIGHTS = {
    "fastlm/model/": 40,
    "fastlm/framework/": 30,
    "fastlm/kernels/": 14,
    "fastlm/compiler/": 7,
    "fastlm/runtime/": 5,
    "docs": 3,
    "build": 1,
}
DOCS = ("docs/kernels.md", "docs/training.md", "README.md")
BUILD_CHANGES = ("raise the minimum numpy to 2.1", "pin ml_dtypes 0.7", "add a pytest marker for slow tests")


def test_id(model: Model, check: str) -> str:
    return f"tests/models/test_{model.name.replace('-', '_')}.py::test_{check}"


def node_name(index: int) -> str:
    return f"node-{index:02d}"


def _frame(unit: str) -> str:
    """A folded stack frame, ``QUALNAME (PATH:LINE)``, at a line of its own for the unit."""
    path, qualname = unit.split("::")
    line = int(hashlib.sha256(unit.encode()).hexdigest()[:4], 16) % 400 + 1
    return f"{qualname} ({path}:{line})"


def _rng(*parts: object) -> np.random.Generator:
    digest = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


@dataclass(frozen=True)
class Test:
    id: str
    model: Model
    check: str

    @property
    def dtype(self) -> str:
        return "fp8_e4m3" if self.check == "forward[fp8]" else "bf16"

    @property
    def full_minutes(self) -> float:
        return CHECK_MINUTES[self.check] * self.model.scale

    def stacks(self) -> list[tuple[str, ...]]:
        """What the test executes, root first, as its evidence records it."""
        model, check = self.model, self.check
        gemm = GEMM["fp8"] if check == "forward[fp8]" else GEMM["bf16"]

        def forward(*callers: str) -> list[tuple[str, ...]]:
            top = (*callers, f"{model.path}::{model.forward}")
            block = (*top, f"{model.path}::{model.block}")
            kernels = [gemm if k == GEMM["bf16"] else k for k in model.kernels]
            return [(*top, f"{model.path}::{model.extra}"), *((*block, k, LAUNCH) for k in kernels)]

        compile_ = [(ENGINE_COMPILE, *COMPILER), (ENGINE_COMPILE, COMPILER[0], TILE)]
        backward_kernels = (GEMM["bf16"], ATTENTION_BACKWARD) if ATTENTION in model.kernels else (GEMM["bf16"],)
        backward = [(BACKWARD, k, LAUNCH) for k in backward_kernels]
        if check.startswith("forward"):
            stacks = [*compile_, *forward(ENGINE_RUN), (ENGINE_RUN, ALLOCATE)]
        elif check == "backward[bf16]":
            stacks = [*compile_, *forward(ENGINE_RUN), *backward]
        elif check == "train_loss_curve":
            step = (FIT, TRAIN_STEP)
            stacks = [
                (FIT, LOADER),
                *forward(*step),
                *((*step, *s) for s in backward),
                (*step, OPTIMIZER),
                (FIT, SAVE),
                (FIT, ALLOCATE),
            ]
        elif check == "eval_score":
            stacks = [(SCORE, LOAD), (SCORE, LOADER), *forward(SCORE), (SCORE, ACCURACY)]
        else:
            stacks = [*((MEASURE, *s) for s in compile_), *forward(MEASURE, ENGINE_RUN), (MEASURE, SYNCHRONIZE)]
        test_frame = f"{self.id.split('::')[0]}::{self.id.split('::')[1].split('[')[0]}"
        return [(test_frame, *stack) for stack in stacks]


@dataclass
class World:
    """The history and the runner of one demo: ``commits`` commits, deterministic for ``seed``."""

    commits: int = 300
    seed: int = 7
    tests: list[Test] = field(init=False)

    def __post_init__(self) -> None:
        self.tests = [Test(test_id(m, c), m, c) for m in MODELS for c in CHECKS]
        rng = random.Random(self.seed)
        candidates = sorted(t.id for t in self.tests if t.check in FLAKY_CANDIDATES)
        self.flaky = frozenset(rng.sample(candidates, 4))
        self.shas = [f"{rng.getrandbits(160):040x}" for _ in range(self.commits + 1)]  # [0]: the base
        nights = self.commits // NIGHTLY_EVERY
        # planted late enough for a baseline of nights before it and two bad nights after it
        self.culprit = NIGHTLY_EVERY * (nights - 4) + 5 if nights >= REGRESSION_NIGHTS else None
        day = max(nights // 3, 1)
        self.sick_from = NIGHTLY_EVERY * day + 2 if nights >= 2 else None  # between two nightlies
        self.sick_node = node_name(NODES // 2)

    # ----- the repository

    @property
    def base(self) -> str:
        """The commit the demo's history starts from (its evidence was taken there)."""
        return self.shas[0]

    def sha(self, index: int) -> str:
        return self.shas[index + 1]

    def commit_time(self, index: int) -> datetime:
        return START + COMMIT_EVERY * index

    @cached_property
    def index_of(self) -> dict[str, int]:
        return {sha: index - 1 for index, sha in enumerate(self.shas)}

    @cached_property
    def files(self) -> dict[str, list[str]]:
        """Each source file the tests run, with the qualnames in it that they run."""
        found: dict[str, set[str]] = {}
        for test in self.tests:
            for stack in test.stacks():
                for unit in stack[1:]:
                    path, qualname = unit.split("::")
                    found.setdefault(path, set()).add(qualname)
        return {path: sorted(names) for path, names in sorted(found.items())}

    def owner_map(self) -> OwnerMap:
        return parse_owner_file(OWNERS, repo=REPO, source="OWNERS")

    def evidence(self) -> list[EvidenceEvent]:
        taken = START - timedelta(hours=1)
        return [
            EvidenceEvent(
                test_id=test.id,
                run_id="evidence-base",
                repo=REPO,
                commit=self.base,
                method="tracing",
                stacks=tuple(FoldedStack(stack=";".join(_frame(u) for u in s), count=1) for s in test.stacks()),
                time=taken,
            )
            for test in self.tests
        ]

    def commit(self, index: int) -> CommitEvent:
        rng = random.Random(f"{self.seed}/commit/{index}")
        parent = self.shas[index]
        common = {"repo": REPO, "sha": self.sha(index), "parents": (parent,), "time": self.commit_time(index)}
        if index == self.culprit:
            return self._code_commit(common, CULPRIT_UNITS, CULPRIT_AUTHOR, CULPRIT_TITLE)
        area = rng.choices(list(CHANGE_WEIGHTS), weights=list(CHANGE_WEIGHTS.values()))[0]
        author = rng.choice(AUTHORS)
        if area == "docs":
            path = rng.choice(DOCS)
            return CommitEvent(
                **common,
                author=author,
                title=f"docs: {rng.choice(('clarify', 'update', 'fix typos in'))} {path}",
                changed_files=({"path": path, "change": "modified"},),
            )
        if area == "build":
            return CommitEvent(
                **common,
                author=author,
                title=f"build: {rng.choice(BUILD_CHANGES)}",
                changed_files=({"path": "pyproject.toml", "change": "modified"},),
            )
        path = rng.choice([p for p in self.files if p.startswith(area)])
        names = self.files[path]
        chosen = rng.sample(names, min(len(names), rng.choice((1, 1, 1, 2, 3))))
        units = tuple(f"{path}::{name}" for name in sorted(chosen))
        return self._code_commit(common, units, author, f"{area.split('/')[1]}: {rng.choice(VERBS)} {chosen[0]}")

    @staticmethod
    def _code_commit(common: dict, units: tuple[str, ...], author: str, title: str) -> CommitEvent:
        path = units[0].split("::")[0]
        layer = path.split("/")[1]
        return CommitEvent(
            **common,
            author=author,
            title=title,
            changed_files=({"path": path, "change": "modified"},),
            changed_functions=tuple(
                ChangedFunction(path=path, qualname=u.split("::")[1], change="modified") for u in units
            ),
            layers=(layer,),
            hardware_path=layer in ("compiler", "kernels", "runtime"),
        )

    def goldens(self) -> list[GoldenReference]:
        references = []
        for test in self.tests:
            if test.check not in GATED:
                continue
            model = test.model
            fields: dict = {}
            if test.check.startswith("forward"):
                fields["outputs"] = {"logits": tuple(self._reference_logits(model).tolist())}
            elif test.check == "train_loss_curve":
                fields["loss_curves"] = tuple(self._loss_curve(model, f"reference/{s}", FULL_STEPS) for s in range(4))
                fields["seeds"] = (0, 1, 2, 3)
            else:
                fields["eval_score"] = model.eval_score
            references.append(
                GoldenReference(
                    test_id=test.id,
                    version=1,
                    repo=REPO,
                    commit=self.base,
                    bundle=BUNDLE,
                    hardware_revision="cpu-fp32-reference",
                    **fields,
                )
            )
        return references

    # ----- the fleet

    def node_up(self, node: str, index: int) -> bool:
        """Whether a node can run work at commit ``index``: the sick one falls off the bus."""
        return node != self.sick_node or self.sick_from is None or index < self.sick_from + SICK_HOURS

    def sick(self, node: str, index: int) -> bool:
        return node == self.sick_node and self.sick_from is not None and self.sick_from <= index

    def node_health(self, index: int) -> list[NodeHealthEvent]:
        time = self.commit_time(index)
        signals = []
        for n in range(NODES):
            node = node_name(n)
            if not self.node_up(node, index):
                continue
            # one heartbeat an hour stands for the node's regular ones (value: seconds since the last)
            signals.append(NodeHealthEvent(node_id=node, kind="heartbeat", value=30.0, time=time))
            if index % 6 == n % 6:
                temperature = 55.0 + random.Random(f"{self.seed}/temp/{node}/{index}").randrange(15)
                signals.append(NodeHealthEvent(node_id=node, kind="temperature", value=temperature, time=time))
        if self.sick_from is not None:
            if index == self.sick_from + SICK_HOURS - 4:
                signals.append(
                    NodeHealthEvent(
                        node_id=self.sick_node, kind="xid", value=31.0, time=time, detail="MMU fault (GPU memory)"
                    )
                )
            if index == self.sick_from + SICK_HOURS - 1:
                signals.append(
                    NodeHealthEvent(
                        node_id=self.sick_node,
                        kind="xid",
                        value=79.0,
                        time=time + timedelta(minutes=30),
                        detail="GPU has fallen off the bus",
                    )
                )
        return signals

    # ----- the runner

    def presubmit(self, selection: Selection) -> list[ResultEvent]:
        """The presubmit job of a commit: the tests its selection kept (every test when it says run all)."""
        index = self.index_of[selection.sha]
        kept = {k.test_id for k in selection.kept}
        tests = self.tests if selection.run_all else [t for t in self.tests if t.id in kept]
        return self._run(tests, index, f"presubmit-{index:04d}", "presubmit", self.commit_time(index) + QUEUE)

    def nightly(self, index: int) -> list[ResultEvent]:
        start = self.commit_time(index) + NIGHTLY_START
        return self._run(self.tests, index, f"nightly-{start:%Y-%m-%d}", "nightly", start)

    def _run(self, tests: list[Test], index: int, run_id: str, trigger: str, start: datetime) -> list[ResultEvent]:
        """One job's results: its tests placed longest first on the node free first (the nodes that are up,
        in an order that turns with the commit, so every node gets work)."""
        full = trigger == "nightly"
        nodes = [node_name((index + n) % NODES) for n in range(NODES)]
        free = [(0.0, rank, node) for rank, node in enumerate(nodes) if self.node_up(node, index)]
        heapq.heapify(free)
        durations = {t.id: self._duration(t, run_id, full) for t in tests}
        results = []
        for test in sorted(tests, key=lambda t: (-durations[t.id], t.id)):
            at, rank, node = heapq.heappop(free)
            finished = at + durations[test.id]
            heapq.heappush(free, (finished, rank, node))
            status = self._status(test, node, index, run_id)
            results.append(
                self._result(
                    test, run_id, trigger, self.sha(index), node, status, durations[test.id], full, index
                ).model_copy(update={"time": start + timedelta(seconds=round(finished))})
            )
        return sorted(results, key=lambda r: (r.time, r.test_id))

    def answer(self, request: RunRequested, requested_at: datetime) -> ResultEvent:
        """What the runner publishes for a run request: one run on a healthy node not to avoid."""
        healthy = [
            node_name(n)
            for n in range(NODES)
            if node_name(n) != self.sick_node and node_name(n) not in request.avoid_nodes
        ]
        node = healthy[int(request.id[:8], 16) % len(healthy)]
        test = next(t for t in self.tests if t.id == request.test_id)
        run_id = f"{request.work_class}-{request.id[:16]}"
        full = request.config.get("steps") == FULL_STEPS
        duration = self._duration(test, run_id, full)
        status = "flaky" if test.id in self.flaky and _rng(self.seed, run_id).random() < FLAKE_CHANCE else "passed"
        index = self.index_of.get(request.commit, -1)
        result = self._result(
            test, run_id, request.work_class, request.commit, node, status, duration, full, index, request.repeats
        )
        return result.model_copy(
            update={
                "bundle": request.bundle,
                "hardware_revision": HARDWARE if request.hardware_revision == "any" else request.hardware_revision,
                "seed": request.seed,
                "config": dict(request.config),
                "time": requested_at + QUEUE + timedelta(seconds=round(duration)),
            }
        )

    def _duration(self, test: Test, run_id: str, full: bool) -> float:
        minutes = test.full_minutes * (1.0 if full else SMOKE_SHARE)
        return round(
            60 * minutes * float(np.exp(0.08 * _rng(self.seed, "duration", run_id, test.id).standard_normal())), 1
        )

    def _status(self, test: Test, node: str, index: int, run_id: str) -> str:
        draw = _rng(self.seed, "status", run_id, test.id).random()
        if self.sick(node, index) and draw < SICK_FAILURE_CHANCE:
            return "error"
        if test.id in self.flaky and draw > 1 - FLAKE_CHANCE:
            return "flaky"
        return "passed"

    def _result(
        self,
        test: Test,
        run_id: str,
        trigger: str,
        commit: str,
        node: str,
        status: str,
        duration: float,
        full: bool,
        index: int,
        repeats: int = NIGHTLY_REPEATS,
    ) -> ResultEvent:
        config: dict = {"model": test.model.name, "steps": FULL_STEPS if full else SMOKE_STEPS}
        if test.check.startswith("forward"):
            config["dtype"] = test.dtype
        numbers = self._numbers(test, run_id, full, self._regressed(test, index, full), repeats)
        return ResultEvent(
            test_id=test.id,
            run_id=run_id,
            repo=REPO,
            commit=commit,
            bundle=BUNDLE,
            node_id=node,
            hardware_revision=HARDWARE,
            trigger=trigger,  # type: ignore[arg-type]
            status=status,  # type: ignore[arg-type]
            duration_s=duration,
            chips=CHIPS,
            seed=max(index, 0),
            config=config,
            **(numbers if status in ("passed", "flaky") else {}),
        )

    # ----- the numbers

    def _regressed(self, test: Test, index: int, full: bool) -> bool:
        return full and test.id in REGRESSED and self.culprit is not None and index >= self.culprit

    def _numbers(self, test: Test, run_id: str, full: bool, regressed: bool, repeats: int) -> dict:
        model, rng = test.model, _rng(self.seed, "numbers", run_id, test.id)
        if test.check.startswith("forward"):
            spread = 2e-2 if test.check == "forward[fp8]" else 2e-3  # fp8 rounds coarser than bf16
            logits = self._reference_logits(model) * (1 + spread * rng.standard_normal(64))
            return {"metrics": {"logits": tuple(logits.tolist())}}
        if test.check == "train_loss_curve":
            curve = self._loss_curve(model, run_id, FULL_STEPS if full else SMOKE_STEPS)
            if regressed:
                curve = tuple(v + 0.004 * max(0, t - LOSS_DRIFT_FROM) for t, v in enumerate(curve))
            return {"loss_curve": curve}
        if test.check == "eval_score":
            ratio = EVAL_RATIO if regressed else 1.0 - 0.002 * rng.random()
            return {"eval_score": model.eval_score * ratio}
        if test.check == "throughput" and full:  # a benchmark needs the full config
            level = model.throughput * (1 - THROUGHPUT_DROP if regressed else 1.0)
            samples = level * (1 + NOISE * rng.standard_normal(repeats))
            return {"metrics": {model.metric: tuple(samples.tolist())}}
        return {}

    def _reference_logits(self, model: Model) -> np.ndarray:
        return _rng(self.seed, "logits", model.name).standard_normal(64)

    def _loss_curve(self, model: Model, key: str, steps: int) -> tuple[float, ...]:
        amplitude, floor = model.loss
        t = np.arange(steps)
        noise = 0.01 * _rng(self.seed, "loss", model.name, key).standard_normal(steps)
        return tuple((amplitude * np.exp(-t / 50) + floor + noise).tolist())
