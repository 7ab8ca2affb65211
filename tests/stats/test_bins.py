"""Bins of a property (half-open, the last closed, outside = -1) and the trend test against
scipy."""

import math

import numpy as np
import pytest
from scipy import stats

from medibench.stats import assign_bins, bin_labels, check_edges, trend_test

EDGES = (0.0, 0.01, 0.05, 0.2, 1.0)


def test_values_on_an_edge_go_to_the_bin_above_but_the_top_edge_to_the_last_bin():
    values = [0.0, 0.005, 0.01, 0.0499, 0.05, 0.2, 0.999, 1.0]
    assert assign_bins(values, EDGES).tolist() == [0, 0, 1, 1, 2, 3, 3, 3]


def test_values_outside_the_edges_and_nan_are_minus_one():
    assert assign_bins([-0.001, 1.0001, math.nan, 0.5], EDGES).tolist() == [-1, -1, -1, 3]


def test_infinite_end_edges_take_every_value():
    edges = check_edges([-math.inf, 0, math.inf])
    assert assign_bins([-1e300, 0.0, 5.0, math.inf], edges).tolist() == [0, 1, 1, 1]


def test_labels_are_half_open_but_the_last():
    assert bin_labels(EDGES) == ["[0, 0.01)", "[0.01, 0.05)", "[0.05, 0.2)", "[0.2, 1]"]


@pytest.mark.parametrize(
    ("edges", "message"),
    [
        ([0.5], "at least two edges"),
        ([0, 0.2, 0.2, 1], "edges must increase strictly, but 0.2 follows 0.2"),
        ([0, 0.5, 0.1], "but 0.1 follows 0.5"),
        ([0, math.nan], "an edge is NaN"),
    ],
)
def test_bad_edges_are_refused(edges, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        check_edges(edges, name="--by-bins 'x'")


def test_the_trend_test_is_scipys_spearman():
    rng = np.random.default_rng(3)
    x = rng.uniform(0, 1, 40)
    y = 1 - x + rng.normal(0, 0.3, 40)
    y[:5] = y[5]  # ties
    got = trend_test(x, y)
    ref = stats.spearmanr(x, y)
    assert got.method == "spearman" and got.n == 40 and got.pvalue_method == "t"
    assert abs(got.statistic - ref.statistic) < 1e-12
    assert abs(got.pvalue - ref.pvalue) < 1e-12


def test_the_trend_test_of_a_constant_property_is_refused():
    with pytest.raises(ValueError, match="x is constant"):
        trend_test([0.1, 0.1, 0.1], [1.0, 2.0, 3.0])
