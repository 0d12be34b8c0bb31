"""Combining replication summaries: means, confidence intervals, family-specific keys."""

from __future__ import annotations

import json
import math

import pytest
from scipy import stats

from clusteremu.cluster.metrics import ci95_half_width, combine


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


# -- metrics without meaning for a run: NaN (null in JSON, n/a printed), never 0 ------------

#: The time-averages and the throughput: over the measurement window.
WINDOW_METRICS = ("mean_jobs_in_system", "holding_cost_rate", "utilization", "throughput_per_s")


def _batch(replications: int = 1) -> dict:  # type: ignore[type-arg]
    """Four jobs arriving together: a zero-length measurement window (as pennyworth-*)."""
    from tests.builders import batch_scenario

    data = batch_scenario()
    data["replications"] = replications
    return data


def test_a_zero_length_window_has_no_time_averages() -> None:
    from clusteremu.cluster.engine import Engine
    from clusteremu.cluster.io import to_json
    from clusteremu.scenarios.loader import spec_from_dict

    summary = Engine(spec_from_dict(_batch())).run().summary
    assert summary["measured_time_s"] == 0.0
    assert summary["mean_response_time_s"] == pytest.approx(1.5)  # this one has a meaning
    for key in WINDOW_METRICS:
        assert math.isnan(summary[key]), key
        assert math.isnan(summary["per_class"]["a"].get(key, math.nan)), key
    printed = json.loads(to_json(summary))
    assert all(printed[key] is None for key in WINDOW_METRICS)


def test_replications_of_a_batch_keep_them_nan_and_a_poisson_run_has_them() -> None:
    from clusteremu.cluster.runner import run_spec
    from clusteremu.scenarios.loader import spec_from_dict
    from tests.builders import node_scenario

    summary = run_spec(spec_from_dict(_batch(replications=2))).summary
    for key in WINDOW_METRICS:
        assert math.isnan(summary[key]) and math.isnan(summary["ci95"][key]), key
    steady = run_spec(spec_from_dict(node_scenario(nodes=4).jobs(400).build())).summary
    for key in WINDOW_METRICS:
        assert 0 < steady[key] < math.inf, key
    assert "ci95" not in steady  # one replication: no interval at all


def test_jobs_that_never_started_or_failed_have_no_set_up_time() -> None:
    """setup_s belongs to the attempt start_s reports: NaN where start_s is NaN (a job that
    timed out waiting, one killed out-of-memory for good), as end_s and response_time_s.
    A failed job is not `measured` (it has no response time) yet counts in `jobs_failed`
    when it arrived past the warm-up."""
    from clusteremu.cluster.engine import Engine
    from clusteremu.scenarios.loader import spec_from_dict

    def cls(name: str, **extra: object) -> dict:  # type: ignore[type-arg]
        return {
            "name": name,
            "arrival": {"kind": "batch", "count": 1, "at_s": 0.0},
            "size": {"kind": "deterministic", "value_s": 100.0},
            "request": {"cpu": 2, "memory_gb": 1},
            **extra,
        }

    data = {
        "name": "failures",
        "seed": 1,
        "stop": {"jobs": 3},
        "cluster": {
            "node_types": [{"name": "n", "cpu": 2, "memory_gb": 8}],
            "nodes": [{"type": "n", "count": 1}],
        },
        "workload": {
            "classes": [
                cls("done"),
                cls("impatient", timeout_s=10.0),  # waits behind "done", leaves at 10 s
                cls(
                    "oom",  # runs 50 s from 50 s on 2 cores, killed at its 20 GB peak
                    usage={"memory_gb": {"kind": "deterministic", "value_s": 20.0}},
                ),
            ]
        },
        "scheduler": {"provisioner": {"name": "static", "params": {"retry_limit": 0}}},
    }
    run = Engine(spec_from_dict(data)).run()
    done, impatient, oom = run.jobs.to_pylist()
    assert done["setup_s"] == 0.0 and done["measured"] and not done["failed"]
    for row in (impatient, oom):
        assert row["failed"] and not row["measured"]
        for key in ("start_s", "end_s", "setup_s"):
            assert math.isnan(row[key]), (row["class"], key)
    assert oom["wasted_core_s"] == pytest.approx(100.0)
    assert run.summary["jobs_failed"] == 2 and run.summary["jobs_completed"] == 1
