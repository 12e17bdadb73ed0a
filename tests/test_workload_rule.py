"""The shrink rule (fastci.planning.shrink) and the dimension points the tracing collector records."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from fastci.evidence import dimensions
from fastci.evidence.dimensions import POINT_LIMIT
from fastci.evidence.stacks import UnitsCache
from fastci.evidence.tracing import Tracer
from fastci.inputs import MAX_POINTS
from fastci.planning.shrink import Dimension, add_point, executes, scale_of, smallest_config

STEPS, LAYERS = Dimension("steps", 300, 20), Dimension("layers", 4, 1)


def test_each_unit_sets_how_far_its_dimension_must_reach():
    shrink = smallest_config(
        [STEPS, LAYERS],
        {
            "cosine_rate": [{"steps": 30}],
            "moe": [{"steps": 0, "layers": 1}],
            "checkpoint": [{"steps": 99}],
        },
    )
    assert shrink.values == {"steps": 100, "layers": 2}
    assert shrink.shrunk([STEPS, LAYERS]) == {"steps": 100, "layers": 2}
    assert shrink.scale == (100 / 300) * (2 / 4)


def test_nothing_needed_shrinks_to_the_minimums_and_a_late_unit_keeps_the_full_config():
    assert smallest_config([STEPS, LAYERS], {"f": []}).values == {"steps": 20, "layers": 1}
    full = smallest_config([STEPS, LAYERS], {"last_step": [{"steps": 299}], "last_layer": [{"layers": 3}]})
    assert full.values == {"steps": 300, "layers": 4} and full.scale == 1.0


def test_a_unit_reached_two_ways_takes_the_cheaper_way():
    # ran at step 200 in layer 0, and at step 10 in layer 3: 11 steps x 4 layers beats 201 x 1
    shrink = smallest_config([STEPS, LAYERS], {"f": [{"steps": 200, "layers": 0}, {"steps": 10, "layers": 3}]})
    assert shrink.values == {"steps": 20, "layers": 4}  # 20 is the minimum, above 11


points = st.lists(
    st.dictionaries(st.sampled_from(["steps", "layers", "width"]), st.integers(0, 9), max_size=3),
    min_size=1,
    max_size=3,
)
DIMS = [Dimension("steps", 10, 2), Dimension("layers", 10, 1, 0.5), Dimension("width", 10, 3, 2.0)]


@given(st.dictionaries(st.sampled_from("abcde"), points, max_size=5))
def test_the_chosen_config_is_feasible_and_no_feasible_config_is_cheaper(needed):
    shrink = smallest_config(DIMS, needed)
    assert all(executes(p, shrink.values) for p in needed.values())
    for values in itertools.product(*(range(d.minimum, d.full + 1) for d in DIMS)):
        config = dict(zip(("steps", "layers", "width"), values))
        if all(executes(p, config) for p in needed.values()):
            assert scale_of(DIMS, config) >= shrink.scale - 1e-12


@given(st.lists(st.dictionaries(st.sampled_from(["steps", "layers"]), st.integers(0, 5), max_size=2), max_size=12))
def test_the_kept_points_are_minimal_and_run_exactly_where_all_points_run(seen):
    kept: list[dict[str, int]] = []
    for point in seen:
        add_point(kept, point, limit=100)
    for a, b in itertools.permutations(kept, 2):
        assert not (all(k in b and v <= b[k] for k, v in a.items()))
    for values in itertools.product(range(1, 7), range(1, 7)):
        config = {"steps": values[0], "layers": values[1]}
        assert executes(kept, config) == executes(seen, config)


def test_the_collectors_point_limit_is_the_event_contracts():
    assert POINT_LIMIT == MAX_POINTS


def helper_early():
    return 1


def helper_late():
    return 2


def loop(steps: int, layers: int) -> None:
    helper_early()
    for step in range(steps):
        with dimensions.at("steps", step):
            for layer in range(layers):
                with dimensions.at("layers", layer):
                    if step >= 3 and layer >= 1:
                        helper_late()


def test_the_tracer_records_where_each_function_first_ran(tmp_path):
    root = __file__.rsplit("/", 2)[0]
    cache = UnitsCache()
    tracer = Tracer(lambda f: cache.relpath(f, root) is not None, dimensions=True)
    tracer.begin_test()
    tracer.run(lambda: loop(6, 3))
    tracer.end_test()
    first = dimensions.first_executions(tracer.points, root, cache)
    assert first == {"tests/test_workload_rule.py::helper_late": [{"layers": 1, "steps": 3}]}  # the rest run anywhere
    assert dimensions.POINT == ()  # left as found
    only_steps = dimensions.first_executions(tracer.points, root, cache, dimensions={"steps"})
    assert only_steps["tests/test_workload_rule.py::helper_late"] == [{"steps": 3}]


def test_the_share_no_dimension_shrinks_is_added_back_to_the_estimate_but_does_not_change_the_choice():
    plain = smallest_config([STEPS, LAYERS], {"f": [{"steps": 30}]})
    fixed = smallest_config([STEPS, LAYERS], {"f": [{"steps": 30}]}, fixed_share=0.1)
    assert plain.values == fixed.values == {"steps": 31, "layers": 1}
    assert fixed.scale == 0.1 + 0.9 * plain.scale
