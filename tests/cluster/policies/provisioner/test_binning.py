"""The thesis's metrics (Jialun Song's master's thesis; docs/provisioner.md) against hand
computation: optimal improvement, u-score,
u-rate, estimated improvement, the binning search, VPA's histogram percentile."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from clusteremu.cluster.policies.provisioner.binning import (
    bin_index,
    estimated_improvement,
    optimal_improvement,
    search_binning,
    u_rate,
    u_score,
)
from clusteremu.cluster.policies.provisioner.sizing import vpa_recommendation


def test_bin_index_takes_the_smallest_edge_at_or_above() -> None:
    assert bin_index(np.array([1.0, 10.0, 10.5, 60.0, 349.0]), (10, 60, 350)).tolist() == [
        0,
        0,
        1,
        1,
        2,
    ]


def test_optimal_improvement_by_hand() -> None:
    usage = np.array([1.0, 5.0, 20.0, 100.0])
    # Allocations 10, 10, 60, 350 of 4 x 350 GB: 1 - 430 / 1400.
    assert optimal_improvement(usage, (10, 60, 350)) == pytest.approx(1 - 430 / 1400)
    # Time-based, durations 1, 1, 1, 2: 1 - (10 + 10 + 60 + 700) / (350 x 5).
    durations = np.array([1.0, 1.0, 1.0, 2.0])
    assert optimal_improvement(usage, (10, 60, 350), durations) == pytest.approx(1 - 780 / 1750)
    assert optimal_improvement(usage, (350,)) == 0.0


def test_u_score_penalises_under_estimations() -> None:
    predicted = np.array([0, 1, 2, 0])
    actual = np.array([0, 0, 2, 1])
    # One over-, one under-estimation of four: (1 + 1 x 10) / 4 x 100.
    assert u_score(predicted, actual, 10.0) == pytest.approx(275.0)
    assert u_rate(predicted, actual) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="penalty must be > 1"):
        u_score(predicted, actual, 1.0)


def test_the_thesis_table_7_and_11_figures_are_consistent() -> None:
    # Heavy task 1, bins 10; 60; 350: accuracy 97.5 %, u-score 4.5 (penalty 10): with 1,000
    # test cases, O + U = 25 and O + 10 U = 45 give U = 2 (u-rate 0.2 %, Table 11), O = 23.
    predicted = np.array([1] * 23 + [0] * 2 + [0] * 975)
    actual = np.array([0] * 23 + [1] * 2 + [0] * 975)
    assert (predicted == actual).mean() == pytest.approx(0.975)
    assert u_rate(predicted, actual) == pytest.approx(0.002)
    assert u_score(predicted, actual) == pytest.approx(4.3)  # 4.5 with U = 2.2 of 1,000
    # Table 11's estimated improvements: optimal x accuracy - u-rate.
    assert estimated_improvement(88.1, 0.975, 0.2) == pytest.approx(85.7, abs=0.05)
    assert estimated_improvement(71.0, 0.989, 0.5) == pytest.approx(69.7, abs=0.05)
    assert estimated_improvement(89.0, 0.966, 1.1) == pytest.approx(84.9, abs=0.05)


def test_binning_search_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    usage = np.minimum(rng.lognormal(1.0, 1.2, 400), 99.0)
    durations = rng.uniform(1.0, 10.0, 400)
    for bins in (2, 3):
        found = search_binning(usage, 100.0, bins, 5.0, durations, min_samples=10)
        best = -1.0
        for inner in itertools.combinations(np.arange(5.0, 100.0, 5.0), bins - 1):
            edges = (*inner, 100.0)
            counts = np.bincount(bin_index(usage, edges), minlength=bins)
            if np.all(counts >= 10):
                best = max(best, optimal_improvement(usage, edges, durations))
        assert found.time_improvement == pytest.approx(best)
        assert len(found.edges) == bins and found.edges[-1] == 100.0


def test_binning_search_refuses_usage_above_static() -> None:
    with pytest.raises(ValueError, match="exceeds the static"):
        search_binning(np.array([1.0, 200.0]), 100.0, 2, 5.0)


def test_vpa_recommendation_is_the_bucket_end_of_the_percentile_times_the_margin() -> None:
    # Ten samples at one time: 1..10 GB; first bucket 1 GB, ratio 2: buckets [0,1), [1,3),
    # [3,7), [7,15). p90 falls in [7, 15): 15 x 1.15.
    values = np.arange(1.0, 11.0)
    got = vpa_recommendation(values, np.zeros(10), first_bucket=1.0, minimum=0.0, ratio=2.0)
    assert got == pytest.approx(15.0 * 1.15)
    # Old samples count less: one day earlier, half as much.
    times = np.array([0.0] * 9 + [86400.0])
    recent_small = np.array([20.0] * 9 + [1.0])
    low = vpa_recommendation(
        recent_small, times, first_bucket=1.0, minimum=0.0, ratio=2.0, percentile=0.5
    )
    assert low == pytest.approx(31.0 * 1.15)  # 9 x 0.5 of weight at 20 GB > half of 5.5
    assert vpa_recommendation(np.array([0.005]), np.zeros(1), 0.01, minimum=0.25) == 0.25
