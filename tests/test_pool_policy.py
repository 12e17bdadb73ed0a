"""The pool's placement policy (fastci.scheduling.pool): priorities, quotas, gangs, preemption, backfill."""

from __future__ import annotations

from fastci.scheduling.pool import ClassRule, NodeView, RunningView, WaitingView, checkpointed, schedule_pass

RULES = {
    "release": ClassRule(0, 0.25),
    "presubmit": ClassRule(1, 0.35),
    "bisect": ClassRule(2, 0.05),
    "rerun": ClassRule(3, 0.05),
    "nightly": ClassRule(4, 0.25),
    "dev": ClassRule(5, 0.05),
}


def nodes(count: int = 16, chips: int = 8, used: dict[str, int] | None = None, down: set[str] = frozenset()):
    used = used or {}
    return [
        NodeView(
            f"n{i:02d}",
            "rev-a" if i < count // 2 else "rev-b",
            chips,
            used.get(f"n{i:02d}", 0),
            f"n{i:02d}" not in down,
        )
        for i in range(count)
    ]


def busy(pool_nodes, running):
    """Nodes with the chips the running jobs hold marked used."""
    used: dict[str, int] = {}
    for job in running:
        for node, chips in job.placement:
            used[node] = used.get(node, 0) + chips
    return [NodeView(n.node_id, n.revision, n.chips, used.get(n.node_id, 0), n.available) for n in pool_nodes]


def run(job_id, work_class, *node_ids, chips=8, started=0.0, end=1000.0):
    return RunningView(job_id, work_class, chips * len(node_ids), tuple((n, chips) for n in node_ids), started, end)


def wait(job_id, work_class, chips=8, remaining=600.0, revision="any", avoid=()):
    return WaitingView(job_id, work_class, chips, revision, frozenset(avoid), remaining)


def test_higher_priority_class_gets_the_free_node_first():
    running = [run(f"d{i}", "presubmit", f"n{i:02d}") for i in range(15)]
    result = schedule_pass(
        10.0,
        busy(nodes(), running),
        running,
        {"nightly": [wait("night", "nightly")], "release": [wait("rel", "release")]},
        RULES,
        0,
    )
    assert [p.job_id for p in result.placements] == ["rel"]
    assert result.placements[0].placement == (("n15", 8),)


def test_an_idle_pool_is_lent_to_a_single_class_beyond_its_quota():
    queue = [wait(f"d{i}", "dev") for i in range(20)]
    result = schedule_pass(0.0, nodes(), [], {"dev": queue}, RULES, 0)
    # dev's share is 5% (6.4 chips, not even one node) yet it gets all 16 idle nodes: nobody else waits
    assert len(result.placements) == 16
    assert not result.preempted


def test_a_class_waiting_within_its_share_reclaims_it_from_lower_priority_borrowers_newest_first():
    running = [run(f"d{i}", "dev", f"n{i:02d}", started=float(i)) for i in range(16)]
    queue = [wait(f"night{i}", "nightly") for i in range(6)]
    result = schedule_pass(100.0, busy(nodes(), running), running, {"nightly": queue}, RULES, 0)
    # nightly's share is 25% of 128 chips = 32 chips: 4 of its jobs, each evicting the newest dev job
    assert [p.job_id for p in result.placements] == ["night0", "night1", "night2", "night3"]
    assert set(result.preempted) == {"d15", "d14", "d13", "d12"}
    assert set(result.preempted.values()) == {"night0", "night1", "night2", "night3"}


def test_a_lower_class_never_preempts_a_higher_one_but_gets_free_chips_before_it_can_borrow_them():
    # presubmit (share 35% = 44.8 chips) borrows 15 nodes; nightly waits within its share
    running = [run(f"p{i}", "presubmit", f"n{i:02d}") for i in range(15)]
    queues = {
        "nightly": [wait("night", "nightly"), wait("night2", "nightly")],
        "presubmit": [wait("p-more", "presubmit")],
    }
    result = schedule_pass(10.0, busy(nodes(), running), running, queues, RULES, 0)
    assert not result.preempted  # nightly does not evict the higher-priority borrower
    # the one free node goes to nightly (within its share), not to presubmit (which would borrow it)
    assert [p.job_id for p in result.placements] == ["night"]
    # with a node to spare, presubmit borrows it after nightly took what it could use
    running = running[:14]
    result = schedule_pass(10.0, busy(nodes(), running), running, queues, RULES, 0)
    assert [p.job_id for p in result.placements] == ["night", "night2"]
    queues["nightly"] = queues["nightly"][:1]
    result = schedule_pass(10.0, busy(nodes(), running), running, queues, RULES, 0)
    assert [p.job_id for p in result.placements] == ["night", "p-more"]


def test_within_its_share_a_class_is_placed_even_while_others_wait():
    running = [run(f"d{i}", "nightly", f"n{i:02d}") for i in range(4)]
    queues = {"nightly": [wait("night", "nightly")], "presubmit": [wait("p", "presubmit")]}
    result = schedule_pass(10.0, busy(nodes(), running), running, queues, RULES, 0)
    assert {p.job_id for p in result.placements} == {
        "p",
        "night",
    }  # nightly borrows: presubmit is placed, waits no more


def test_a_gang_gets_whole_free_nodes_of_one_revision_at_once_or_waits():
    # rev-a: n00-n07, rev-b: n08-n15. Three free nodes on each revision: a 4-node gang must wait.
    running = [run(f"p{i}", "presubmit", f"n{i:02d}") for i in (0, 1, 2, 3, 4, 8, 9, 10, 11, 12)]
    gang = wait("gang", "nightly", chips=32)  # within nightly's share; presubmit is above it: no preemption
    result = schedule_pass(10.0, busy(nodes(), running), running, {"release": [gang]}, RULES, 0)
    assert not result.placements  # 6 free nodes, but never 4 on one revision
    assert result.reservation is not None and result.reservation.job_id == "gang"
    assert len(result.reservation.nodes) == 4
    # one more rev-b node frees up: all four on rev-b
    running = [job for job in running if job.job_id != "p12"]
    result = schedule_pass(20.0, busy(nodes(), running), running, {"release": [gang]}, RULES, 0)
    (placed,) = result.placements
    assert placed.revision == "rev-b" and sorted(n for n, _ in placed.placement) == ["n12", "n13", "n14", "n15"]


def test_a_gang_reserves_the_nodes_freeing_soonest_and_only_short_jobs_backfill_them():
    # rev-a nodes busy until t=1000, except n00 (until 200) and n01 (until 300); rev-b busy until 5000
    running = [run("early0", "presubmit", "n00", end=200.0), run("early1", "presubmit", "n01", end=300.0)]
    running += [run(f"a{i}", "presubmit", f"n{i:02d}", end=1000.0) for i in range(2, 8)]
    running += [run(f"b{i}", "presubmit", f"n{i:02d}", end=5000.0) for i in range(8, 15)]
    free_node = "n15"  # rev-b, free now
    queues = {
        "nightly": [wait("gang", "nightly", chips=16)],  # two whole rev-a nodes, at t=300 at the earliest
        "dev": [wait("long", "dev", remaining=3600.0), wait("short", "dev", remaining=100.0)],
    }
    result = schedule_pass(100.0, busy(nodes(), running), running, queues, RULES, 0)
    assert result.reservation is not None
    # the gang is reserved on rev-b? no: two free rev-b nodes need n15 plus one freeing at 5000; rev-a frees at 300
    assert result.reservation.nodes == frozenset({"n00", "n01"}) and result.reservation.start == 300.0
    # the free rev-b node is not reserved: the long dev job takes it; the short one has no room left
    assert [(p.job_id, p.placement) for p in result.placements] == [("long", ((free_node, 8),))]


def test_backfill_onto_reserved_nodes_only_when_the_job_ends_before_the_reservation_starts():
    running = [run(f"x{i}", "presubmit", f"n{i:02d}", end=1000.0) for i in range(16) if i not in (0, 1)]
    running += [run("half", "presubmit", "n01", chips=4, end=400.0)]
    # n00 free, n01 half free until 400: a two-node rev-a gang reserves n00+n01 from t=400
    queues = {
        "nightly": [wait("gang", "nightly", chips=16)],
        "dev": [wait("too-long", "dev", chips=4, remaining=500.0), wait("fits", "dev", chips=4, remaining=250.0)],
    }
    result = schedule_pass(100.0, busy(nodes(), running), running, queues, RULES, 0)
    assert result.reservation is not None and result.reservation.nodes == {"n00", "n01"}
    assert result.reservation.start == 400.0
    # "fits" ends at 350 < 400: it may use the reserved half node; "too-long" (ends at 600) may not
    assert [p.job_id for p in result.placements] == ["fits"]


def test_unhealthy_nodes_get_no_work():
    down = {f"n{i:02d}" for i in range(15)}
    result = schedule_pass(
        0.0, nodes(down=down), [], {"presubmit": [wait("a", "presubmit"), wait("b", "presubmit")]}, RULES, 0
    )
    assert [(p.job_id, p.placement) for p in result.placements] == [("a", (("n15", 8),))]


def test_quotas_are_shares_of_the_healthy_chips():
    # 8 healthy nodes (64 chips): nightly's 25% is 16 chips, so a third nightly node is borrowing,
    # and a dev borrower on a node it needs is evicted only for the first two
    down = {f"n{i:02d}" for i in range(8, 16)}
    running = [run(f"d{i}", "dev", f"n{i:02d}", started=float(i)) for i in range(8)]
    queue = [wait(f"night{i}", "nightly") for i in range(3)]
    result = schedule_pass(10.0, busy(nodes(down=down), running), running, {"nightly": queue}, RULES, 0)
    assert [p.job_id for p in result.placements] == ["night0", "night1"]


def test_a_job_packs_onto_the_fullest_node_that_fits_and_respects_revision_and_avoid():
    running = [run("half", "presubmit", "n03", chips=4), run("six", "presubmit", "n09", chips=6)]
    queues = {
        "presubmit": [
            wait("small", "presubmit", chips=2),
            wait("rev-a-only", "presubmit", chips=4, revision="rev-a", avoid=("n03",)),
        ]
    }
    result = schedule_pass(0.0, busy(nodes(), running), running, queues, RULES, 0)
    assert [(p.job_id, p.placement) for p in result.placements] == [
        ("small", (("n09", 2),)),  # n09 had 2 chips left: packed full
        ("rev-a-only", (("n00", 4),)),  # n03 is avoided
    ]


def test_cpu_work_takes_slots_not_chips():
    running = [RunningView("c0", "presubmit", 0, (), 0.0, 10.0)]
    queue = [wait(f"cpu{i}", "presubmit", chips=0) for i in range(5)]
    result = schedule_pass(0.0, nodes(), running, {"presubmit": queue}, RULES, 3)
    assert [p.job_id for p in result.placements] == ["cpu0", "cpu1"]  # 3 slots, one taken
    assert all(p.placement == () for p in result.placements)


def test_a_preempted_run_keeps_the_work_up_to_its_last_checkpoint():
    assert checkpointed(1250.0, 600.0) == 1200.0
    assert checkpointed(599.0, 600.0) == 0.0
    assert checkpointed(1250.0, None) == 0.0
