"""Chart axes are labelled with round values inside the plotted range."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from fastci.report.svg import nice_ticks, tick_label


def test_an_axis_ending_at_120_is_not_labelled_past_it():
    assert nice_ticks(-9.6, 130.6) == [0, 50, 100]
    assert nice_ticks(0.98, 1.02) == [0.98, 0.99, 1.0, 1.01, 1.02]
    assert nice_ticks(1, 37, whole=True) == [10, 20, 30]


@given(st.floats(-1e6, 1e6), st.floats(1e-3, 1e6))
def test_ticks_are_round_ordered_and_inside_the_range(low, span):
    high = low + span
    ticks = nice_ticks(low, high)
    assert ticks == sorted(ticks) and 2 <= len(ticks) <= 10
    assert all(low - span * 1e-9 <= t <= high + span * 1e-9 for t in ticks)
    step = ticks[1] - ticks[0]
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(math.isclose(mantissa, m, rel_tol=1e-6) for m in (1, 2, 5, 10))


def test_tick_labels_fit_the_axis_margin():
    assert [tick_label(v) for v in (88_500.0, 87_750.0, 5_200.0, 0.985, -12_000.0, 2.5e6)] == [
        "88.5k",
        "87.75k",
        "5200",
        "0.985",
        "-12k",
        "2.5M",
    ]
