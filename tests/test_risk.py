"""Risk math (fastci.planning.risk): a Bayesian, recency-weighted failure rate, raised by exposure to the
change, discounted for flakiness; and the order that finds failures soonest per unit of cost."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from fastci.planning import risk

statuses = st.lists(st.sampled_from(["passed", "failed", "error", "flaky", "skipped"]), max_size=40)
unit = st.floats(0, 1)


def test_a_new_test_starts_at_the_prior_not_at_zero():
    counts = risk.weighted_counts([])
    assert risk.history_risk(counts) == risk.PRIOR_FAILURE
    assert risk.history_risk(risk.weighted_counts(["skipped"] * 5)) == risk.PRIOR_FAILURE  # skips are no trials


def test_passes_lower_the_estimate_towards_zero_and_failures_raise_it():
    passing = risk.history_risk(risk.weighted_counts(["passed"] * 30))
    assert 0 < passing < risk.PRIOR_FAILURE / 4
    assert (
        risk.history_risk(risk.weighted_counts(["passed"] * 29 + ["failed"])) > risk.PRIOR_FAILURE
    )  # one fresh failure


def test_recent_runs_weigh_more_than_old_ones():
    old_failure = risk.history_risk(risk.weighted_counts(["failed"] + ["passed"] * 10))
    new_failure = risk.history_risk(risk.weighted_counts(["passed"] * 10 + ["failed"]))
    assert new_failure > old_failure


@given(statuses, st.integers(0, 39))
def test_turning_any_run_into_a_failure_never_lowers_the_risk(history, position):
    if position >= len(history) or history[position] in ("failed", "error", "skipped"):
        return
    worse = history[:position] + ["failed"] + history[position + 1 :]
    assert risk.history_risk(risk.weighted_counts(worse)) > risk.history_risk(risk.weighted_counts(history))


@given(statuses)
def test_rates_are_probabilities(history):
    counts = risk.weighted_counts(history)
    assert 0 < risk.history_risk(counts) < 1 and 0 < risk.flaky_rate(counts) < 1


@given(unit, unit, unit, unit)
def test_risk_rises_with_history_and_exposure_and_falls_with_flakiness(history, exposure, flaky, delta):
    base = risk.combined_risk(history, exposure, flaky)
    assert 0 <= base <= 1
    assert risk.combined_risk(min(1, history + delta), exposure, flaky) >= base
    assert risk.combined_risk(history, min(1, exposure + delta), flaky) >= base
    assert risk.combined_risk(history, exposure, min(1, flaky + delta)) <= base


@given(statuses)
def test_flaky_runs_discount_a_test_against_the_same_history_without_them(history):
    clean = [s for s in history if s != "flaky"]
    with_flakes = clean + ["flaky", "flaky"]
    flaky_counts, clean_counts = risk.weighted_counts(with_flakes), risk.weighted_counts(clean + ["passed", "passed"])
    assert risk.flaky_rate(flaky_counts) > risk.flaky_rate(clean_counts)
    assert risk.combined_risk(risk.history_risk(flaky_counts), 0.5, risk.flaky_rate(flaky_counts)) < risk.combined_risk(
        risk.history_risk(clean_counts), 0.5, risk.flaky_rate(clean_counts)
    )


def expected_cost_to_first_failure(order, p, c):
    total, survive = 0.0, 1.0
    for test in order:
        total += survive * c[test]
        survive *= 1 - p[test]
    return total


@given(st.lists(st.tuples(st.floats(0.01, 0.99), st.floats(0.1, 100)), min_size=1, max_size=6))
def test_the_order_minimises_the_expected_cost_until_the_first_failure(tests):
    p = {f"t{i}": prob for i, (prob, _) in enumerate(tests)}
    c = {f"t{i}": cost for i, (_, cost) in enumerate(tests)}
    chosen = expected_cost_to_first_failure(risk.order(p, c), p, c)
    best = min(expected_cost_to_first_failure(o, p, c) for o in itertools.permutations(p))
    assert chosen <= best * (1 + 1e-9)


def test_ties_are_broken_by_test_id_and_chips_make_a_test_costlier():
    assert risk.order({"b": 0.1, "a": 0.1}, {"b": 1.0, "a": 1.0}) == ["a", "b"]
    assert risk.cost(10.0, 8) == 80.0 and risk.cost(10.0, 0) == 10.0 and risk.cost(0.0, 0) > 0


def test_exposure_is_the_share_of_the_executed_changed_units():
    shares = risk.exposures({"a": ["x", "y"], "b": ["y"], "c": []})
    assert shares == {"a": 1.0, "b": 0.5, "c": 0.0}
    assert risk.exposures({"a": []}) == {"a": 0.0}
