"""Combining replication summaries: means, confidence intervals, family-specific keys."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from cluster.metrics import ci95_half_width, combine


def _summary(mean: float, score: float, per_function: dict[str, float]) -> dict:  # type: ignore[type-arg]
    return {
        "scenario": "s",
        "seed": 1,
        "replication": 0,
        "jobs_completed": 10,
        "mean_response_time_s": mean,
        "mean_jobs_in_system": 2 * mean,
        "simulated_time_s": 100.0,
        "measured_time_s": 90.0,
        "events": 20,
        "decisions": 10,
        "jobs_unfinished": 0,
        "jobs_failed": 1,
        "per_class": {"a": {"jobs_completed": 10, "mean_response_time_s": mean}},
        "score": score,
        "per_function": {"f": per_function},
        "label": "family",
    }


def test_ci95_is_the_student_t_half_width() -> None:
    values = [1.0, 2.0, 4.0]
    sd = math.sqrt(sum((v - 7 / 3) ** 2 for v in values) / 2)
    assert ci95_half_width(values) == pytest.approx(stats.t.ppf(0.975, 2) * sd / math.sqrt(3))
    assert math.isnan(ci95_half_width([1.0]))


def test_combine_averages_known_and_family_keys() -> None:
    parts = [_summary(1.0, 0.5, {"mean_exec_s": 2.0}), _summary(3.0, 0.7, {"mean_exec_s": 4.0})]
    out = combine(parts)
    assert out["replications"] == 2
    assert out["jobs_completed"] == 20 and out["jobs_failed"] == 2
    assert out["mean_response_time_s"] == pytest.approx(2.0)
    assert out["per_class"]["a"]["mean_response_time_s"] == pytest.approx(2.0)
    assert out["score"] == pytest.approx(0.6)
    assert out["ci95"]["score"] == pytest.approx(ci95_half_width([0.5, 0.7]))
    assert out["per_function"] == {"f": {"mean_exec_s": pytest.approx(3.0)}}
    assert out["label"] == "family"
    assert "replication" not in out
