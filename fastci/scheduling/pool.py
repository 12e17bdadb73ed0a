"""The pool's placement policy, as one pure function over small in-memory views.

``schedule_pass`` is given the nodes, the running jobs and, per work class, the first queued jobs in
queue order, and decides which jobs start where and which running jobs are preempted to make room.
It reads no clock (``now`` is a number it is given) and keeps no state; the pool-scheduler processor
persists what it decides.

The rules, in the order a pass applies them:

- **Order.** Classes by priority (0 first), each class's queue in order (FIFO; a preempted job goes
  back to the front of its class).
- **CPU/simulator capacity.** A job of 0 chips takes one CPU slot; no quotas, no preemption.
- **Placement.** A job whose chips fit on one node goes to the node it fills best (least left
  free). A bigger job is a *gang*: whole free nodes of one hardware revision, all at once, or it
  waits. Nodes that are not healthy (suspect, quarantined, diagnosing) take no new work.
- **Quotas.** Each class is guaranteed a share of the healthy chips. A pass first places the jobs
  that keep their class within its share, in priority order, then the jobs that would take their
  class beyond it (*borrowing*), on whatever is still free: an idle class's share is lent out, but
  never what a class waiting within its share can use now.
- **Reclaim by preemption.** A job within its class's share that finds no free room may preempt
  running jobs of *lower-priority* classes that are borrowing (their class is over its share when
  the victim is chosen): lowest class first, newest first, on the node (or, for a gang, the nodes)
  where the fewest chips must be evicted. A class that lends to a higher-priority class is not
  repaid by preemption: chips that free up go to jobs within their share first, so the borrower
  drains as its jobs finish.
- **Reservation and backfill (EASY).** The first job of the pass that is allowed to start but finds
  no room, even by preemption, reserves the nodes that free up soonest (by the running jobs'
  expected ends) for itself. Later jobs of that pass may start on reserved nodes only if they are
  expected to finish before the reservation starts (backfill), so a gang is not starved by a
  stream of small jobs. The reservation is recomputed every pass (nothing stale is kept).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import floor

ANY_REVISION = "any"


@dataclass(frozen=True, slots=True)
class NodeView:
    node_id: str
    revision: str
    chips: int
    used: int = 0  # chips held by running jobs
    available: bool = True  # healthy: takes new work


@dataclass(frozen=True, slots=True)
class RunningView:
    job_id: str
    work_class: str
    chips: int  # chips charged to its class (0 on CPU capacity)
    placement: tuple[tuple[str, int], ...] = ()  # (node, chips) pairs; empty on CPU capacity
    started: float = 0.0
    expected_end: float = 0.0

    @property
    def cpu(self) -> bool:
        return not self.placement


@dataclass(frozen=True, slots=True)
class WaitingView:
    job_id: str
    work_class: str
    chips: int  # 0: CPU/simulator capacity
    revision: str = ANY_REVISION
    avoid: frozenset[str] = frozenset()
    remaining_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ClassRule:
    priority: int
    quota: float  # share of the healthy chips


@dataclass(frozen=True, slots=True)
class Placement:
    job_id: str
    placement: tuple[tuple[str, int], ...]  # () on CPU capacity
    revision: str | None
    victims: tuple[str, ...] = ()  # running jobs preempted to make room

    @property
    def chips(self) -> int:
        return sum(chips for _, chips in self.placement)


@dataclass(frozen=True, slots=True)
class Reservation:
    job_id: str
    nodes: frozenset[str]
    start: float  # when the reserved nodes are expected to be free


@dataclass
class PassResult:
    placements: list[Placement] = field(default_factory=list)
    preempted: dict[str, str] = field(default_factory=dict)  # victim job -> the job it made room for
    reservation: Reservation | None = None


def checkpointed(ran_s: float, every_s: float | None) -> float:
    """Seconds of a run that survive a preemption: up to its last checkpoint (nothing without one)."""
    if not every_s or ran_s <= 0:
        return 0.0
    return floor(ran_s / every_s) * every_s


class _Pool:
    """The mutable picture of the pool during one pass."""

    def __init__(
        self,
        nodes: Sequence[NodeView],
        running: Sequence[RunningView],
        rules: Mapping[str, ClassRule],
        cpu_slots: int,
        now: float,
    ) -> None:
        self.now = now
        self.nodes = {node.node_id: node for node in nodes}
        self.free = {node.node_id: node.chips - node.used for node in nodes}
        self.rules = rules
        healthy = sum(node.chips for node in nodes if node.available)
        self.quota = {name: rule.quota * healthy for name, rule in rules.items()}
        self.usage = dict.fromkeys(rules, 0)
        self.running = {job.job_id: job for job in running}
        self.on_node: dict[str, dict[str, int]] = {node.node_id: {} for node in nodes}
        self.cpu_free = cpu_slots
        self.fresh: set[str] = set()  # started by this pass
        self._candidates: dict[tuple, list[NodeView]] = {}  # node health does not change within a pass
        self.widest = max((node.chips for node in nodes if node.available), default=0)
        for job in running:
            self.usage[job.work_class] = self.usage.get(job.work_class, 0) + job.chips
            if job.cpu:
                self.cpu_free -= 1
            for node, chips in job.placement:
                self.on_node.setdefault(node, {})[job.job_id] = chips

    def borrowing(self, work_class: str) -> bool:
        return self.usage.get(work_class, 0) > self.quota.get(work_class, 0.0) + 1e-9

    def candidates(self, job: WaitingView) -> list[NodeView]:
        key = (job.revision, job.avoid)
        found = self._candidates.get(key)
        if found is None:
            found = self._candidates[key] = [
                node
                for node in self.nodes.values()
                if node.available and node.node_id not in job.avoid and job.revision in (ANY_REVISION, node.revision)
            ]
        return found

    def is_gang(self, job: WaitingView) -> bool:
        return job.chips > max((node.chips for node in self.candidates(job)), default=0)

    def most_free(self) -> int:
        """The most chips free on one healthy node: no single-node job needs more, no gang less."""
        return max((self.free[n.node_id] for n in self.nodes.values() if n.available), default=0)

    def reclaimable(self, work_class: str) -> bool:
        """Whether some running job of a lower-priority class is borrowing (so could be preempted)."""
        priority = self.rules[work_class].priority
        return any(
            self.rules[name].priority > priority and self.borrowing(name) for name in self.rules if self.usage.get(name)
        )

    def place(self, job: WaitingView, placement: tuple[tuple[str, int], ...]) -> None:
        for node, chips in placement:
            self.free[node] -= chips
            self.on_node[node][job.job_id] = chips
        charged = sum(chips for _, chips in placement)
        self.usage[job.work_class] = self.usage.get(job.work_class, 0) + charged
        self.fresh.add(job.job_id)
        self.running[job.job_id] = RunningView(
            job.job_id, job.work_class, charged, placement, self.now, self.now + job.remaining_s
        )

    def evict(self, job_id: str) -> None:
        job = self.running.pop(job_id)
        self.usage[job.work_class] -= job.chips
        if job.cpu:
            self.cpu_free += 1
        for node, chips in job.placement:
            self.free[node] += chips
            self.on_node[node].pop(job_id, None)


def schedule_pass(
    now: float,
    nodes: Sequence[NodeView],
    running: Sequence[RunningView],
    queues: Mapping[str, Sequence[WaitingView]],
    rules: Mapping[str, ClassRule],
    cpu_slots: int,
) -> PassResult:
    """What starts now and what is preempted for it. ``queues``: per class, its first jobs in order."""
    pool = _Pool(nodes, running, rules, cpu_slots, now)
    result = PassResult()
    placed: set[str] = set()
    order = sorted(queues, key=lambda name: (rules[name].priority, name))
    for _ in range(MAX_ROUNDS):  # a round that preempted may have freed room a job before it could use
        if not _round(pool, queues, order, placed, result):
            break
    return result


MAX_ROUNDS = 3


def _round(
    pool: _Pool, queues: Mapping[str, Sequence[WaitingView]], order: list[str], placed: set[str], result: PassResult
) -> bool:
    """One sweep over the queues: first every job that keeps its class within its share (placed on
    free chips or by reclaiming them), then the jobs that would borrow, on what is still free.
    True when it preempted anything (placements alone open no room for a job it passed over)."""
    progress = False
    for borrowing in (False, True):
        # job shape -> the shortest remaining time that found no room; 0: no job of that shape fits
        # (only a reservation makes room depend on the time a job needs, through backfill)
        failed: dict[tuple, float] = {}
        most_free = pool.most_free()
        for name in order:
            quota = pool.quota.get(name, 0.0) + 1e-9
            may_reclaim = not borrowing and pool.reclaimable(name)
            for job in queues[name]:
                if job.job_id in placed:
                    continue
                if job.chips == 0:
                    if not borrowing and pool.cpu_free > 0:
                        pool.cpu_free -= 1
                        result.placements.append(Placement(job.job_id, (), None))
                        placed.add(job.job_id)
                    continue
                if (pool.usage.get(name, 0) + job.chips <= quota) == borrowing:
                    continue  # not this phase's job
                if result.reservation is not None and not may_reclaim and most_free < job.chips <= pool.widest:
                    continue  # a single-node job no node has room for, that cannot make room (nor reserve)
                shape = (name, job.chips, job.revision, job.avoid)
                if failed.get(shape, float("inf")) <= job.remaining_s:
                    continue  # an identical job, no shorter, already found no room in this phase
                reservation = result.reservation
                placement = _fit(pool, job, reservation)
                victims: tuple[str, ...] = ()
                if placement is None and may_reclaim:
                    victims, placement = _reclaim(pool, job, reservation)
                if placement is None:
                    restricted = reservation is not None and reservation.job_id != job.job_id
                    failed[shape] = min(failed.get(shape, float("inf")), job.remaining_s if restricted else 0.0)
                    if result.reservation is None:
                        result.reservation = _reserve(pool, job)
                    continue
                for victim in victims:
                    pool.evict(victim)
                    result.preempted[victim] = job.job_id
                pool.place(job, placement)
                result.placements.append(
                    Placement(job.job_id, placement, pool.nodes[placement[0][0]].revision, victims)
                )
                placed.add(job.job_id)
                progress = progress or bool(victims)
                if result.reservation is not None and result.reservation.job_id == job.job_id:
                    result.reservation = None
                most_free = pool.most_free()
                if victims:
                    failed.clear()  # evictions may have opened room for shapes that failed before
                    may_reclaim = pool.reclaimable(name)
    return progress


def _allowed(pool: _Pool, job: WaitingView, node: str, reservation: Reservation | None) -> bool:
    """Not a reserved node, or a backfill: the job is expected to end before the reservation starts."""
    if reservation is None or node not in reservation.nodes or reservation.job_id == job.job_id:
        return True
    return pool.now + job.remaining_s <= reservation.start


def _fit(pool: _Pool, job: WaitingView, reservation: Reservation | None) -> tuple[tuple[str, int], ...] | None:
    """A placement on free chips, or None."""
    nodes = [node for node in pool.candidates(job) if _allowed(pool, job, node.node_id, reservation)]
    if pool.is_gang(job):
        return _gang_on_free(pool, job, nodes)
    fitting = [node for node in nodes if pool.free[node.node_id] >= job.chips]
    if not fitting:
        return None
    best = min(fitting, key=lambda node: (pool.free[node.node_id] - job.chips, node.node_id))
    return ((best.node_id, job.chips),)


def _gang_on_free(pool: _Pool, job: WaitingView, nodes: list[NodeView]) -> tuple[tuple[str, int], ...] | None:
    by_revision: dict[str, list[NodeView]] = {}
    for node in nodes:
        if pool.free[node.node_id] == node.chips:
            by_revision.setdefault(node.revision, []).append(node)
    for revision in sorted(by_revision):
        chosen = _enough(sorted(by_revision[revision], key=lambda n: (-n.chips, n.node_id)), job.chips)
        if chosen is not None:
            return tuple((node.node_id, node.chips) for node in chosen)
    return None


def _enough(nodes: list[NodeView], chips: int) -> list[NodeView] | None:
    chosen, total = [], 0
    for node in nodes:
        if total >= chips:
            break
        chosen.append(node)
        total += node.chips
    return chosen if total >= chips else None


def _victim_order(pool: _Pool, job_id: str) -> tuple:
    victim = pool.running[job_id]
    return (-pool.rules[victim.work_class].priority, -victim.started, job_id)


def _evictable(pool: _Pool, job: WaitingView, victim_id: str, usage: dict[str, float]) -> bool:
    victim = pool.running[victim_id]
    return (
        victim_id not in pool.fresh  # never a job this very pass started
        and pool.rules[victim.work_class].priority > pool.rules[job.work_class].priority
        and usage[victim.work_class] > pool.quota.get(victim.work_class, 0.0) + 1e-9
    )


def _clear(
    pool: _Pool, job: WaitingView, node: NodeView, need: int, usage: dict[str, float], chosen: list[str]
) -> bool:
    """Add to ``chosen`` the victims that leave ``need`` chips free on ``node`` (``usage`` updated);
    False when the node cannot be cleared that far."""
    free = pool.free[node.node_id] + sum(pool.running[v].chips for v in chosen if _on(pool, v, node.node_id))
    for victim in sorted(pool.on_node[node.node_id], key=lambda v: _victim_order(pool, v)):
        if free >= need:
            break
        if victim in chosen or not _evictable(pool, job, victim, usage):
            continue
        chosen.append(victim)
        usage[pool.running[victim].work_class] -= pool.running[victim].chips
        free += dict(pool.running[victim].placement)[node.node_id]
    return free >= need


def _on(pool: _Pool, job_id: str, node: str) -> bool:
    return any(n == node for n, _ in pool.running[job_id].placement)


def _reclaim(pool: _Pool, job: WaitingView, reservation: Reservation | None) -> tuple[tuple[str, ...], tuple | None]:
    """Victims (lower-priority borrowers) whose eviction makes room for the job, and the placement."""
    nodes = [node for node in pool.candidates(job) if _allowed(pool, job, node.node_id, reservation)]
    if pool.is_gang(job):
        return _reclaim_gang(pool, job, nodes)
    best: tuple | None = None
    for node in nodes:
        usage = dict(pool.usage)
        chosen: list[str] = []
        if not _clear(pool, job, node, job.chips, usage, chosen):
            continue
        cost = (
            sum(pool.running[v].chips for v in chosen),
            len(chosen),
            sorted(_victim_order(pool, v) for v in chosen),
            node.node_id,
        )
        if best is None or cost < best[0]:
            best = (cost, tuple(chosen), ((node.node_id, job.chips),))
    return ((), None) if best is None else (best[1], best[2])


def _reclaim_gang(pool: _Pool, job: WaitingView, nodes: list[NodeView]) -> tuple[tuple[str, ...], tuple | None]:
    by_revision: dict[str, list[NodeView]] = {}
    for node in nodes:
        by_revision.setdefault(node.revision, []).append(node)
    best: tuple | None = None
    for revision in sorted(by_revision):
        usage = dict(pool.usage)
        chosen: list[str] = []
        picked: list[NodeView] = []
        # Cheapest nodes first: free ones, then those holding the fewest chips.
        ranked = sorted(by_revision[revision], key=lambda n: (n.chips - pool.free[n.node_id], n.node_id))
        for node in ranked:
            if sum(n.chips for n in picked) >= job.chips:
                break
            trial_usage, trial = dict(usage), list(chosen)
            if _clear(pool, job, node, node.chips, trial_usage, trial):
                usage, chosen = trial_usage, trial
                picked.append(node)
        if sum(n.chips for n in picked) < job.chips:
            continue
        cost = (
            sum(pool.running[v].chips for v in chosen),
            len(chosen),
            sorted(_victim_order(pool, v) for v in chosen),
            revision,
        )
        if best is None or cost < best[0]:
            best = (cost, tuple(chosen), tuple((n.node_id, n.chips) for n in picked))
    return ((), None) if best is None else (best[1], best[2])


def _reserve(pool: _Pool, job: WaitingView) -> Reservation | None:
    """The nodes expected to free up soonest for the job, and when (running jobs' expected ends;
    an overrunning job is expected to end now)."""
    nodes = pool.candidates(job)
    if not nodes:
        return None
    ends = {
        node.node_id: sorted(
            (max(pool.now, pool.running[j].expected_end), chips) for j, chips in pool.on_node[node.node_id].items()
        )
        for node in nodes
    }
    if pool.is_gang(job):
        best: tuple | None = None
        by_revision: dict[str, list[NodeView]] = {}
        for node in nodes:
            by_revision.setdefault(node.revision, []).append(node)
        for revision, members in sorted(by_revision.items()):
            ready = sorted(members, key=lambda n: (max([pool.now, *(end for end, _ in ends[n.node_id])]), n.node_id))
            chosen = _enough(ready, job.chips)
            if chosen is None:
                continue
            start = max(max([pool.now, *(end for end, _ in ends[n.node_id])]) for n in chosen)
            if best is None or (start, revision) < best[0]:
                best = ((start, revision), frozenset(n.node_id for n in chosen))
        return None if best is None else Reservation(job.job_id, best[1], best[0][0])
    best_single: tuple[float, str] | None = None
    for node in nodes:
        free, start = pool.free[node.node_id], pool.now
        for end, chips in ends[node.node_id]:
            if free >= job.chips:
                break
            free, start = free + chips, end
        if free >= job.chips and (best_single is None or (start, node.node_id) < best_single):
            best_single = (start, node.node_id)
    return None if best_single is None else Reservation(job.job_id, frozenset({best_single[1]}), best_single[0])
