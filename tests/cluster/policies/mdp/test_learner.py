"""Algorithms 1a / 1b and the change-point mode (the MDP paper, section 5)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from cluster import layout as L
from cluster.engine import Engine
from cluster.experiments.mdp_learner import (
    ChangePoint,
    LearnConfig,
    apply_change,
    learn,
    tracking_delays,
)
from cluster.policies.mdp.allocator import MdpAllocator
from cluster.policies.mdp.model import MdpModelError
from cluster.policies.mdp.solver import equi_table
from scenarios.loader import spec_from_dict
from tests.cluster.policies.mdp.conftest import mdp_scenario, three_class_scenario


def test_epoch_sizes() -> None:
    a = LearnConfig.from_dict({"algorithm": "1a", "iterations": 3})
    assert [a.departures(n) for n in (1, 2, 3)] == [51, 52, 53]  # d_n = 50 + n
    b = LearnConfig.from_dict({"algorithm": "1b", "iterations": 3})
    assert [b.departures(n) for n in (1, 2, 3)] == [100, 100, 100]
    assert b.total_departures() == 300


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"algorithm": "1c"}, "learn.algorithm"),
        ({"iterations": 0}, "learn.iterations"),
        ({"departures": {"first": 0}}, "learn.departures.first"),
        ({"initial_theta": [0.5, 0.0]}, "learn.initial_theta[1]"),
        (
            {
                "change_points": [
                    {"time_s": 5.0, "theta": {"a": 0.5}},
                    {"time_s": 4.0, "theta": {"a": 0.6}},
                ]
            },
            "learn.change_points.1.time_s",
        ),
        ({"bogus": 1}, "learn.bogus"),
    ],
)
def test_bad_learning_settings(data: dict, field: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(MdpModelError) as info:
        LearnConfig.from_dict(data)
    assert info.value.field == field


def test_algorithm_1a_epochs_and_determinism() -> None:
    spec = spec_from_dict(mdp_scenario(2, seed=11))
    config = LearnConfig(algorithm="1a", iterations=15)
    a, b = learn(spec, config), learn(spec, config)
    assert a.rows == b.rows
    deps = np.diff([0] + [r["departures"] for r in a.rows])
    np.testing.assert_array_equal(deps, [config.departures(n) for n in range(1, 16)])
    assert all(r["theta1_se"] > 0 for r in a.rows)


def test_algorithm_1b_converges_and_its_policy_is_near_optimal() -> None:
    spec = spec_from_dict(mdp_scenario(3, seed=12))
    result = learn(
        spec, LearnConfig(algorithm="1b", iterations=40, departures_first=100, departures_step=0)
    )
    last = result.rows[-1]
    assert abs(result.theta[0] - 0.4) < 4 * last["theta1_se"] + 1e-3
    assert abs(result.theta[1] - 0.7) < 4 * last["theta2_se"] + 1e-3
    # 1b pools all data: the standard error shrinks like 1 / sqrt(departures).
    assert last["theta2_se"] < 0.5 * result.rows[4]["theta2_se"]
    assert result.mean_jobs_learned == pytest.approx(result.mean_jobs_optimal, rel=0.02)
    assert result.mean_jobs_learned >= result.mean_jobs_optimal - 1e-9


def test_change_is_applied_exactly_at_its_time() -> None:
    spec = spec_from_dict(mdp_scenario(1, jobs=3000, seed=13))
    engine = Engine(spec, allocator=MdpAllocator(table=equi_table(20)))
    engine.step(until_s=100.0)
    before = engine.now
    apply_change(engine, ChangePoint(100.0, {1: 0.5}))
    assert engine.now == 100.0 and before <= 100.0
    assert engine.state.classes_f[L.CF.SP_PARAM, 1] == 0.5
    running = engine.jobs_i[L.JI.STATE] == L.JobState.RUNNING
    cores, cls = engine.jobs_f[L.JF.CORES], engine.jobs_i[L.JI.CLS]
    theta = np.where(cls == 1, 0.5, 0.3)
    s = np.where(cores <= 1, cores, 1 / ((1 - theta) + theta / np.maximum(cores, 1)))
    np.testing.assert_allclose(engine.jobs_f[L.JF.RATE][running], s[running])
    # The run goes on and finishes every job.
    while engine.step() != L.Status.FINISHED:
        pass
    assert int(engine.state.istate[L.IS.DONE_COUNT]) == 3000


def test_algorithm_1a_tracks_change_points() -> None:
    data = mdp_scenario(1, seed=14)
    spec = spec_from_dict(data)
    config = LearnConfig(
        algorithm="1a",
        iterations=130,
        change_points=(
            {"time_s": 1200.0, "theta": {"class2": 0.5}},
            {"time_s": 2400.0, "theta": {"class2": 0.9}},
        ),
    )
    result = learn(spec, config)
    assert result.change_times == [1200.0, 2400.0]
    assert result.true_theta == (0.3, 0.9)
    assert [r["theta2_true"] for r in result.rows][-1] == 0.9
    delays = tracking_delays(result, tolerance=0.1)
    assert all(d is not None and d <= 2 for d in delays), delays
    assert not math.isnan(result.simulated_mean_jobs)


def test_learning_refuses_a_truncation_that_blocks() -> None:
    data = mdp_scenario(2, seed=1)
    spec = spec_from_dict(data)
    with pytest.raises(MdpModelError, match="truncation"):
        learn(spec, replace(LearnConfig(iterations=2), max_blocking=1e-12), truncation=2)


def test_three_classes_learn() -> None:
    spec = spec_from_dict(three_class_scenario(seed=21))
    config = LearnConfig(algorithm="1b", iterations=12, departures_first=150, departures_step=0)
    result = learn(spec, config, truncation=8, actions=8)
    assert result.class_names == ("a", "b", "c")
    assert len(result.theta) == 3 and result.true_theta == (0.3, 0.6, 0.9)
    last = result.rows[-1]
    for c, truth in enumerate((0.3, 0.6, 0.9)):
        assert abs(last[f"theta{c + 1}_hat"] - truth) < 4 * last[f"theta{c + 1}_se"] + 1e-3
    assert result.mean_jobs_learned == pytest.approx(result.mean_jobs_optimal, rel=0.02)
    with pytest.raises(MdpModelError, match="learn.initial_theta"):
        learn(spec, LearnConfig(iterations=1, initial_theta=(0.5, 0.5)), truncation=8, actions=8)
