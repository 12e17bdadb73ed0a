"""Input events: the facts CI appends (commits, evidence, results, node health), read by most capabilities."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, StringConstraints, model_validator
from pydantic_core import PydanticCustomError

from fastci.core.events import Config, Event, FiniteFloat, Name, Record, Sha, Text, Timestamp
from fastci.core.provenance import PROVENANCE_MISMATCH, Provenance, content_digest

Layer = Literal["model", "framework", "compiler", "kernels", "runtime", "driver", "firmware"]
LAYERS: tuple[str, ...] = Layer.__args__  # type: ignore[attr-defined]
Change = Literal["added", "modified", "deleted"]
Trigger = Literal["presubmit", "nightly", "release", "bisect", "dev", "rerun"]
Status = Literal["passed", "failed", "error", "skipped", "flaky"]
Digest = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
SignalKind = Literal["xid", "ecc", "temperature", "nccl_timeout", "heartbeat", "diagnostic", "diagnostic_started"]


MAX_DISTRIBUTIONS = 1_000


class ChangedFile(Record):
    path: Name
    change: Literal["added", "modified", "deleted", "renamed"]
    old_path: Name | None = Field(default=None, description="Previous path of a renamed file.")
    effect: Literal["code", "none", "readers", "dependencies", "extensions", "suite"] | None = Field(
        default=None,
        description="What the change can do to the tests, as change analysis judged it (a config or CI file "
        "read by section, dependency pins pin by pin): none, the tests that read the file, the tests that "
        "import the changed distributions, or the whole suite; None: not judged (selection then goes by the "
        "file's path, fastci.selection.files).",
    )
    detail: Text = Field(default="", description="Why, e.g. 'only [flake8] changed in setup.cfg'.")
    distributions: tuple[Name, ...] = Field(
        default=(), max_length=MAX_DISTRIBUTIONS, description="effect 'dependencies': the distributions re-pinned."
    )
    extensions: tuple[Name, ...] = Field(
        default=(),
        max_length=64,
        description="effect 'extensions': path patterns of the extension modules built from this native source "
        "([tool.fastci] build).",
    )


class ChangedFunction(Record):
    path: Name = Field(description="File the function lives in (the new path for a rename).")
    qualname: Name = Field(
        description="Qualified name inside the module, e.g. 'Trainer.step' or 'build.<locals>.inner'; "
        "'<module>' for module-level code, 'Class.<body>' for a class body."
    )
    change: Change


class CommitEvent(Event):
    """A merged (or proposed) change to a repository. Key: repo."""

    TOPIC: ClassVar[str] = "commits"
    KEY: ClassVar[str] = "repo"
    IDENTITY: ClassVar[tuple[str, ...]] = ("repo", "sha")

    repo: Name
    sha: Sha
    parents: tuple[Sha, ...] = ()
    author: Text
    time: Timestamp
    title: Text
    changed_files: tuple[ChangedFile, ...] = Field(default=(), max_length=100_000)
    changed_functions: tuple[ChangedFunction, ...] = Field(default=(), max_length=100_000)
    layers: tuple[Layer, ...] = Field(default=(), description="Stack layers the change touches.")
    hardware_path: bool = Field(
        default=False, description="True when the change can alter what runs on the accelerator."
    )


class FoldedStack(Record):
    """One line of py-spy ``--format raw`` output: frames root-first, joined by ';', and a count."""

    stack: Annotated[str, StringConstraints(min_length=1, max_length=65_536)]
    count: int = Field(ge=1)


MAX_UNITS = 100_000  # per evidence event: far above what one test runs
MAX_CALLS = 400_000
MAX_DIMENSIONS = 16
MAX_POINTS = 8  # minimal first-execution points kept per unit (dropping one only asks for more)


class WorkloadDimension(Record):
    """A dimension of a test's config that may shrink (steps, layers, hidden size, context...)."""

    name: Name
    full: int = Field(ge=1, description="Its value in the full config (the run this evidence is of).")
    minimum: int = Field(ge=1, description="The smallest value the test accepts.")
    cost_exponent: FiniteFloat = Field(
        default=1.0, ge=0, le=4, description="Duration grows as value ** cost_exponent (measured by the test's owner)."
    )

    @model_validator(mode="after")
    def _minimum_within_full(self) -> WorkloadDimension:
        if self.minimum > self.full:
            raise ValueError(f"minimum {self.minimum} of dimension {self.name!r} is above its full value {self.full}")
        return self


class FirstExecution(Record):
    """Where along the dimensions a unit first executed: the minimal points (0-based indices: step,
    layer...) of its executions. It runs in a config that reaches one of them (every index below
    the config's value). A dimension missing from a point: it ran outside that dimension's loop."""

    unit: Name = Field(description="'path::qualname', as in stacks and commits.")
    at: tuple[dict[Name, Annotated[int, Field(ge=0)]], ...] = Field(min_length=1, max_length=MAX_POINTS)


class WorkloadEvidence(Record):
    """A test's declared validation scope and shrinkable dimensions, and where its units first ran."""

    scope: Config = Field(
        default_factory=dict, description="Dimensions the test exists to check, with their values: never shrunk."
    )
    dimensions: tuple[WorkloadDimension, ...] = Field(max_length=MAX_DIMENSIONS)
    fixed_share: FiniteFloat = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Share of the full run's duration no dimension shrinks (setup, data, per-call overheads).",
    )
    first_executions: tuple[FirstExecution, ...] = Field(
        default=(),
        max_length=50_000,
        description="Units whose first execution lies past the first index of some dimension (the rest run "
        "in any config).",
    )

    @model_validator(mode="after")
    def _consistent(self) -> WorkloadEvidence:
        full = {d.name: d.full for d in self.dimensions}
        if len(full) != len(self.dimensions):
            raise ValueError("dimension names must be unique")
        if overlap := sorted(set(full) & set(self.scope)):
            raise ValueError(f"{', '.join(overlap)}: in the validation scope, so not shrinkable")
        for first in self.first_executions:
            for point in first.at:
                for name, index in point.items():
                    if name not in full:
                        raise ValueError(f"{first.unit}: dimension {name!r} is not declared")
                    if index >= full[name]:
                        raise ValueError(
                            f"{first.unit}: index {index} of {name!r} is not below its full value {full[name]}"
                        )
        return self


class Environment(Record):
    """The cell of a CI matrix a run is in: the interpreter and platform it ran on, and the name
    the job gives its cell (``--fastci-env``, ``$FASTCI_ENV``) for axes fastci cannot see (a CUDA
    version, a dependency set)."""

    python: Name = Field(description="The interpreter's version, e.g. '3.12.1'.")
    implementation: Name = Field(default="cpython", description="sys.implementation.name")
    platform: Name = Field(description="sysconfig.get_platform(), e.g. 'linux-x86_64'.")
    name: Name | None = Field(default=None, description="The job's own name for its cell.")

    @property
    def cell(self) -> str:
        """The matrix cell: the interpreter's feature version, the platform and the job's name (a new
        patch release of the same Python stays in its cell)."""
        minor = ".".join(self.python.split(".")[:2])
        return "/".join(part for part in (f"{self.implementation}{minor}", self.platform, self.name) if part)


class EvidenceEvent(Event):
    """What one test executed during one run (``kind`` "test"), or what one project module executed
    while it was imported (``kind`` "import": ``test_id`` is the module's path, ``importers`` the test
    files whose imports reach it, each of which depends on that code). Key: test_id."""

    TOPIC: ClassVar[str] = "evidence"
    KEY: ClassVar[str] = "test_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("test_id", "run_id")
    # A test's (or a module's import) evidence replaces its last in every processor that reads it.
    REPLACED_BY_SAME: ClassVar[tuple[str, ...]] = ("repo", "kind", "test_id")

    test_id: Name = Field(description="The test's node id, or the module's path for import evidence.")
    kind: Literal["test", "import"] = "test"
    importers: tuple[Name, ...] = Field(
        default=(),
        max_length=100_000,
        description="Import evidence: the test files (paths) whose import closure reaches the module.",
    )
    distributions: tuple[Name, ...] = Field(
        default=(),
        max_length=10_000,
        description="Import evidence of a test file: the third-party distributions its imports reach (normalized "
        "names, their requirements included), so a changed pin selects the tests that import it.",
    )
    fixtures: tuple[Name, ...] = Field(
        default=(),
        max_length=1_000,
        description="The project fixtures in the test's fixture closure, as 'path::qualname' of their functions: "
        "a session- or module-scoped one runs for the first of its tests only, yet every test using it depends on it.",
    )
    reads: tuple[Name, ...] | None = Field(
        default=None,
        max_length=10_000,
        description="Project files (not Python sources) it opened for reading, as paths; None when the "
        "collector did not record reads (then a changed data file cannot be traced to its readers).",
    )
    run_id: Name
    repo: Name = Field(description="Repository whose code the test exercised (joins with commits).")
    commit: Sha
    method: Literal["sampling", "tracing"] = Field(
        description="'sampling' for py-spy stacks, 'tracing' for exact function-level tracing."
    )
    sampling_rate_hz: FiniteFloat | None = Field(default=None, gt=0)
    stacks: tuple[FoldedStack, ...] = Field(
        default=(),
        max_length=200_000,
        description="Sampled (or, from collectors before units and calls, traced) stacks of project frames.",
    )
    units: tuple[Name, ...] = Field(
        default=(),
        max_length=MAX_UNITS,
        description="Exact evidence: every project code unit ('path::qualname') the test ran, or the module's "
        "import ran; a unit counts once, however often it ran.",
    )
    calls: tuple[tuple[Annotated[int, Field(ge=0)], ...], ...] = Field(
        default=(),
        max_length=MAX_CALLS,
        description="The calling contexts of units' first calls in the test, each as indexes into 'units': the "
        "callers root first (the innermost test-code unit, then up to 4 other innermost callers), the unit "
        "called last. A unit with no call here ran in a context the collector did not record.",
    )
    config: Config = Field(default_factory=dict)
    workload: WorkloadEvidence | None = Field(
        default=None, description="The test's shrinkable dimensions and where its units first ran (tracing only)."
    )
    time: Timestamp | None = Field(default=None, description="When the evidence was taken (at commit ``commit``).")
    environment: Environment | None = Field(
        default=None, description="The CI matrix cell it was taken in; absent when the producer does not know it."
    )

    @model_validator(mode="after")
    def _calls_name_units(self) -> EvidenceEvent:
        units = len(self.units)
        for number, call in enumerate(self.calls):
            if not call or max(call) >= units:
                raise PydanticCustomError(
                    "call_index",
                    "calls[{number}]: must name 1 or more of the {units} units by index (got {call})",
                    {"number": number, "units": units, "call": list(call)},
                )
        return self


BUNDLE_LAYERS = ("compiler", "kernels", "runtime", "driver", "firmware")  # the pinned layers of a bundle


class Bundle(Record):
    """The exact stack a result ran on: every layer's version."""

    compiler: Name
    kernels: Name
    runtime: Name
    driver: Name
    firmware: Name


class ResultEvent(Event):
    """The outcome of one test in one run. Key: test_id.

    ``bundle`` and ``hardware_revision`` name the accelerator stack and hardware; a result without
    them (a plain repository's) feeds history, flakiness, selection and planning, and is not judged
    by the stack's correctness gates, regression detector or bisect."""

    TOPIC: ClassVar[str] = "results"
    KEY: ClassVar[str] = "test_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("test_id", "run_id")

    test_id: Name
    run_id: Name
    repo: Name = Field(description="Repository the tested commit belongs to (joins with commits).")
    commit: Sha
    bundle: Bundle | None = Field(
        default=None, description="The accelerator stack it ran on; absent for a plain (CPU-only) repository."
    )
    node_id: Name
    hardware_revision: Name | None = Field(
        default=None, description="The accelerator's hardware revision; absent for a plain repository."
    )
    trigger: Trigger
    status: Status = Field(description="'flaky' means it failed, then passed on retry.")
    duration_s: FiniteFloat = Field(ge=0)
    chips: int = Field(default=0, ge=0, description="Accelerator chips held by the run (0 for CPU).")
    metrics: dict[Name, tuple[FiniteFloat, ...]] = Field(
        default_factory=dict,
        max_length=256,
        description="Named metrics as lists of samples, e.g. throughput per repeat after warmup.",
    )
    loss_curve: tuple[FiniteFloat, ...] = Field(default=(), max_length=1_000_000)
    eval_score: FiniteFloat | None = None
    seed: int | None = None
    config: Config = Field(default_factory=dict)
    time: Timestamp | None = Field(default=None, description="When the run finished.")
    pool: Name = Field(
        default="default", description="The accelerator pool that ran it (the pool scheduler's partition)."
    )
    environment: Environment | None = Field(
        default=None, description="The CI matrix cell it ran in; absent when the producer does not know it."
    )
    selected: bool | None = Field(
        default=None,
        description="Whether fastci's selection kept this test for the run (set by pytest --fastci-select; "
        "False in shadow mode or subset-and-rest for a test it would have skipped). None: not asked.",
    )
    traced: bool = Field(
        default=False,
        description="Its duration was measured while the run recorded what the test executed (--fastci-evidence), "
        "so it is longer than the test's own: expected durations come from untraced runs where there are any.",
    )
    output_digest: Digest | None = Field(
        default=None,
        description="sha256 (hex) of the run's numeric outputs (e.g. its logits, or the weights a training run "
        "ended with), so a rerun can show it reproduced them bit for bit.",
    )
    provenance: Provenance | None = Field(
        default=None,
        description="Who produced it: the producing principal's signature over the result (fastci.core.provenance). "
        "Not part of the id. A result without one counts for no release gate.",
    )

    @model_validator(mode="after")
    def _signed_content(self) -> ResultEvent:
        # Checked by every reader: a result changed after it was signed is refused at the door.
        if self.provenance is not None and self.provenance.digest != content_digest(self):
            raise PydanticCustomError(
                PROVENANCE_MISMATCH,
                "does not match the result's content (sha256 {actual}): the result was changed after "
                "{principal} signed it",
                {"actual": content_digest(self), "principal": repr(self.provenance.principal)},
            )
        return self


class NodeHealthEvent(Event):
    """One health signal from an accelerator node. Key: node_id.

    ``value`` by kind: xid = the XID code; ecc = uncorrectable error count; temperature = degrees C;
    nccl_timeout = timeouts seen (reported for the node whose rank did not join the collective);
    heartbeat = seconds since the previous heartbeat; diagnostic_started = a diagnostic run began on
    the node (value: its expected length in seconds, or 0); diagnostic = 1.0 pass, 0.0 fail.
    """

    TOPIC: ClassVar[str] = "node-health"
    KEY: ClassVar[str] = "node_id"
    IDENTITY: ClassVar[tuple[str, ...]] = ("node_id", "kind", "time", "value")

    node_id: Name
    kind: SignalKind
    value: FiniteFloat
    time: Timestamp
    detail: Text = ""
