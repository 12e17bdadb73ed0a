"""The shared accelerator pool: its configuration, its clock, and the scheduler's decisions.

The pool scheduler (``fastci.scheduling.processor``) is partitioned by pool. It has no clock:
time arrives on ``clock`` ticks (the simulator ticks at every event time, a CI driver every few
seconds), and every decision is stamped with the latest tick the pool has seen.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from fastci.core.events import Config, Event, FiniteFloat, Name, Record, Sha, Text, Timestamp
from fastci.inputs import Bundle, Trigger

DEFAULT_POOL = "default"
ANY_REVISION = "any"  # a run request's hardware_revision that accepts every revision
WORK_CLASSES: tuple[str, ...] = Trigger.__args__  # type: ignore[attr-defined]
MAX_NODES = 1024
MAX_JOB_TESTS = 5000  # tests one job runs (a CPU shard of a plan); a selection keeps at most as many

ScheduleAction = Literal["queued", "placed", "preempted", "requeued", "completed", "refused"]


class ClockTick(Event):
    """The pool's time moved to ``time``. Key: pool. Older ticks than the pool's latest change nothing."""

    TOPIC: ClassVar[str] = "clock"
    KEY: ClassVar[str] = "pool"
    IDENTITY: ClassVar[tuple[str, ...]] = ("pool", "time")

    pool: Name = DEFAULT_POOL
    time: Timestamp


class PoolNode(Record):
    node_id: Name
    hardware_revision: Name
    chips: int = Field(ge=1, le=1024)


class ClassPolicy(Record):
    """How the pool treats one work class."""

    work_class: Trigger
    priority: int = Field(ge=0, le=100, description="0 is the highest; a class preempts only lower ones.")
    quota: FiniteFloat = Field(
        ge=0,
        le=1,
        description="Guaranteed share of the pool's healthy chips. Idle shares are lent to other classes and "
        "reclaimed by preempting the borrowers of lower priority.",
    )
    checkpoint_every_s: FiniteFloat | None = Field(
        default=None,
        gt=0,
        description="Work of this class checkpoints this often: a preempted run resumes from its last "
        "checkpoint. None: a preempted run starts over.",
    )


class PoolConfig(Event):
    """The nodes of a pool and the policy of each work class. Key: pool. The latest version applies."""

    TOPIC: ClassVar[str] = "pool-config"
    KEY: ClassVar[str] = "pool"
    IDENTITY: ClassVar[tuple[str, ...]] = ("pool", "version")

    pool: Name = DEFAULT_POOL
    version: Name
    nodes: tuple[PoolNode, ...] = Field(min_length=1, max_length=MAX_NODES)
    cpu_slots: int = Field(default=64, ge=0, le=100_000, description="Concurrent jobs on CPU/simulator capacity.")
    classes: tuple[ClassPolicy, ...] = Field(min_length=len(WORK_CLASSES), max_length=len(WORK_CLASSES))
    cpu_shard_s: FiniteFloat = Field(
        default=300.0, gt=0, description="A plan's CPU tests are placed in shards of about this many estimated seconds."
    )
    presubmit_max_chips: int | None = Field(
        default=None,
        ge=0,
        description="The biggest presubmit run placed on hardware (None: one node's chips). Bigger models (the ones "
        "that need many nodes) run per change in their CPU/simulator form; on hardware nightly and before a release.",
    )
    smoke_test: Name | None = Field(
        default=None,
        description="Run on hardware for a hardware-path change whose plan has no hardware test (the tier's floor).",
    )
    smoke_chips: int = Field(default=8, ge=1, le=1024)
    smoke_estimated_s: FiniteFloat = Field(default=300.0, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> PoolConfig:
        classes = [policy.work_class for policy in self.classes]
        if sorted(classes) != sorted(WORK_CLASSES):
            raise ValueError(f"classes must list each work class once ({', '.join(WORK_CLASSES)}), got {classes}")
        if sum(policy.quota for policy in self.classes) > 1 + 1e-9:
            raise ValueError("class quotas add up to more than the whole pool (1.0)")
        ids = [node.node_id for node in self.nodes]
        if len(set(ids)) != len(ids):
            raise ValueError("node ids must be unique")
        return self


class ScheduledTest(Record):
    test_id: Name
    config: Config = Field(default_factory=dict)
    estimated_s: FiniteFloat = Field(ge=0)


class ScheduleEvent(Event):
    """One decision of the pool scheduler about one job. Key: pool.

    Id: (cause_id, job_id, action), where cause_id is the input event (a tick, a plan, a run request, a
    result, a node state change) that caused it, so a replayed input re-emits the same ids.
    """

    TOPIC: ClassVar[str] = "schedule"
    KEY: ClassVar[str] = "pool"
    IDENTITY: ClassVar[tuple[str, ...]] = ("cause_id", "job_id", "action")

    cause_id: str = Field(max_length=64, description="Id of the input event that caused this decision.")
    pool: Name
    job_id: str = Field(max_length=64, description="Derived from the event that created the job.")
    action: ScheduleAction
    time: Timestamp = Field(description="The pool's clock (its latest tick) when it was decided.")
    request_id: str = Field(max_length=64, description="Id of the test-plan or run-requested that created the job.")
    work_class: Trigger
    repo: Name
    commit: Sha | None = None
    tests: tuple[ScheduledTest, ...] = Field(
        default=(), max_length=MAX_JOB_TESTS, description="What to run, in order (on queued and placed)."
    )
    chips: int = Field(ge=0, description="Chips held (0: CPU/simulator capacity).")
    nodes: tuple[Name, ...] = Field(default=(), max_length=MAX_NODES)
    hardware_revision: Name | None = None
    cpu: bool = False
    bundle: Bundle | None = None
    run_id: Name | None = Field(
        default=None, description="placed: the run id the runner publishes every result of this attempt with."
    )
    attempt: int = Field(default=0, ge=0, description="1 for the first placement, +1 per resumption.")
    queued_at: Timestamp = Field(description="When the job was first queued.")
    wait_s: FiniteFloat = Field(default=0.0, ge=0, description="Seconds queued so far, over every attempt.")
    run_s: FiniteFloat = Field(default=0.0, ge=0, description="Seconds run so far, over every attempt.")
    estimated_s: FiniteFloat = Field(default=0.0, ge=0, description="Expected seconds of the whole job.")
    resume_from_s: FiniteFloat = Field(
        default=0.0, ge=0, description="Seconds of work checkpointed before this attempt (the runner resumes there)."
    )
    lost_s: FiniteFloat = Field(
        default=0.0, ge=0, description="preempted: seconds run since the last checkpoint, lost."
    )
    preempted_by: str | None = Field(default=None, max_length=64, description="preempted: the job that took its chips.")
    reason: Text = ""
