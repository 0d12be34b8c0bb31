"""Algorithms 1a / 1b and the change-point mode (the MDP paper, section 5)."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from functools import cached_property

import numpy as np
import pytest

from clusteremu.cluster import layout as L
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.experiments.mdp_learner import (
    ChangePoint,
    LearnConfig,
    LearnResult,
    apply_change,
    learn,
    tracking_delays,
)
from clusteremu.cluster.policies.mdp.allocator import MdpAllocator
from clusteremu.cluster.policies.mdp.model import MdpModel, MdpModelError, model_from_spec
from clusteremu.cluster.policies.mdp.solver import equi_table, evaluate_policy, solve
from clusteremu.scenarios.loader import spec_from_dict
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


# --- Near-optimality of the learned policy, with a check that can fail -------------------
#
# The learner reports E[N] of its final policy under the TRUE parameters
# (`mean_jobs_learned`, `evaluate_policy`: the exact stationary law of the chain, no
# simulation noise) and the optimum g* (`mean_jobs_optimal`). Their relative gap
# G(theta_hat) = E[N | policy(theta_hat)] / g* - 1 is a deterministic function of the estimate;
# the only randomness is theta_hat itself. The gap surface is very flat at these loads: a
# policy from a wrong theta (even two swapped classes) is within 2% of g*, so the former
# check `rel=0.02` could not fail. The check below (`LearnedRun.near_optimal`) tolerates exactly
# the gap a policy solved for a theta inside the Z-standard-error box around the truth can have.

#: Half-width of the confidence box in standard errors (as in the theta checks).
Z = 4.0


class LearnedRun:
    """A learning run, the true model (the scenario's theta) and the near-optimality check."""

    def __init__(self, model: MdpModel, actions: int, result: LearnResult) -> None:
        self.model, self.actions, self.result = model, actions, result

    @cached_property
    def optimum(self) -> float:
        return solve(self.model, self.actions).average_cost

    def policy_gap(self, theta: tuple[float, ...]) -> float:
        """Relative excess E[N], under the true model, of the policy solved for `theta`: the
        evaluation the learner applies to its own policy (exact, no random numbers)."""
        table = solve(self.model.with_theta(theta), self.actions).table
        return evaluate_policy(self.model, table).mean_jobs / self.optimum - 1.0

    @property
    def learned_gap(self) -> float:
        return self.result.mean_jobs_learned / self.result.mean_jobs_optimal - 1.0

    @cached_property
    def tolerance(self) -> float:
        """The largest gap of a policy solved for a theta in the Z-SE box around the truth.

        Statistical justification: the MLE theta_hat_j is asymptotically normal with the
        reported standard error se_j, so it lies in the box |theta_j' - theta_j| <= Z se_j
        except with probability at most m * 2 * P(N(0,1) > 4) = m * 6.3e-5 (Bonferroni over
        the m classes). G is 0 at the truth and grows with the distance from it along every
        axis (scans of G on 5^m and 9^m grids over the box, for both runs below, find the
        same maximum as this 3^m grid: no interior maximum), so its maximum over the box is
        attained on the 3^m points {theta_j - Z se_j, theta_j, theta_j + Z se_j} evaluated
        here. No simulation noise enters (exact evaluation under the true parameters), so
        common random numbers are not needed. A learner that passes is as good as its data
        allow; a policy worse than every policy from an estimate consistent with the data
        fails (the wrong-theta test below shows it).
        """
        last = self.result.rows[-1]
        se = [last[f"theta{c + 1}_se"] for c in range(self.model.n_classes)]
        axes = [(t - Z * s, t, t + Z * s) for t, s in zip(self.model.theta, se, strict=True)]
        return max(
            self.policy_gap(tuple(float(np.clip(v, 1e-6, 1.0)) for v in point))
            for point in itertools.product(*axes)
        )

    def near_optimal(self, gap: float) -> bool:
        """The check the learned policy must pass (and a wrong theta's policy must fail)."""
        return -1e-9 <= gap <= self.tolerance


@pytest.fixture(scope="module")
def two_class_run() -> LearnedRun:
    """Algorithm 1b on Table 1's example 3 (theta = 0.4, 0.7; 40 epochs of 100 departures)."""
    spec = spec_from_dict(mdp_scenario(3, seed=12))
    config = LearnConfig(algorithm="1b", iterations=40, departures_first=100, departures_step=0)
    return LearnedRun(model_from_spec(spec, 20), 100, learn(spec, config))


@pytest.fixture(scope="module")
def three_class_run() -> LearnedRun:
    """Algorithm 1b on three Amdahl classes (theta = 0.3, 0.6, 0.9)."""
    spec = spec_from_dict(three_class_scenario(seed=21))
    config = LearnConfig(algorithm="1b", iterations=12, departures_first=150, departures_step=0)
    return LearnedRun(model_from_spec(spec, 8), 8, learn(spec, config, truncation=8, actions=8))


def test_algorithm_1b_converges_and_its_policy_is_near_optimal(two_class_run: LearnedRun) -> None:
    result = two_class_run.result
    last = result.rows[-1]
    assert abs(result.theta[0] - 0.4) < Z * last["theta1_se"] + 1e-3
    assert abs(result.theta[1] - 0.7) < Z * last["theta2_se"] + 1e-3
    # 1b pools all data: the standard error shrinks like 1 / sqrt(departures).
    assert last["theta2_se"] < 0.5 * result.rows[4]["theta2_se"]
    assert result.mean_jobs_learned >= result.mean_jobs_optimal - 1e-9
    gap = two_class_run.learned_gap
    assert two_class_run.near_optimal(gap), (gap, two_class_run.tolerance)
    # The learner's own figure is the same exact evaluation `policy_gap` applies to any theta.
    assert gap == pytest.approx(two_class_run.policy_gap(result.theta), abs=1e-6)


@pytest.mark.parametrize(
    ("run_name", "wrong_theta", "passed_rel_002"),
    [
        # The two classes swapped: serial fractions 0.3 / 0.6 instead of 0.6 / 0.3.
        ("two_class_run", (0.7, 0.4), True),
        # Both classes believed nearly serial (serial fraction 0.9; truth 0.6 / 0.3).
        ("two_class_run", (0.1, 0.1), True),
        # Class c believed to have serial fraction 0.4 (truth 0.1).
        ("three_class_run", (0.3, 0.6, 0.6), True),
        # All classes believed alike (serial fraction 0.4; truth 0.7 / 0.4 / 0.1).
        ("three_class_run", (0.6, 0.6, 0.6), False),
    ],
)
def test_near_optimality_check_rejects_a_wrong_theta(
    run_name: str,
    wrong_theta: tuple[float, ...],
    passed_rel_002: bool,
    request: pytest.FixtureRequest,
) -> None:
    """The check can fail: a policy solved for a wrong theta, evaluated exactly like the
    learned one, is rejected, while the learned policy of the same run passes."""
    run: LearnedRun = request.getfixturevalue(run_name)
    wrong = run.policy_gap(wrong_theta)
    assert run.near_optimal(run.learned_gap)
    assert not run.near_optimal(wrong), (wrong, run.tolerance)
    # The separation is wide, not a matter of the last digit.
    assert wrong > 2.0 * run.tolerance and run.learned_gap < 0.5 * run.tolerance
    # Whether the former check (`rel=0.02`) let this wrong theta through.
    assert (wrong <= 0.02) == passed_rel_002


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


def test_three_classes_learn(three_class_run: LearnedRun) -> None:
    result = three_class_run.result
    assert result.class_names == ("a", "b", "c")
    assert len(result.theta) == 3 and result.true_theta == (0.3, 0.6, 0.9)
    last = result.rows[-1]
    for c, truth in enumerate((0.3, 0.6, 0.9)):
        assert abs(last[f"theta{c + 1}_hat"] - truth) < Z * last[f"theta{c + 1}_se"] + 1e-3
    assert result.mean_jobs_learned >= result.mean_jobs_optimal - 1e-9
    gap = three_class_run.learned_gap
    assert three_class_run.near_optimal(gap), (gap, three_class_run.tolerance)
    spec = spec_from_dict(three_class_scenario(seed=21))
    with pytest.raises(MdpModelError, match="learn.initial_theta"):
        learn(spec, LearnConfig(iterations=1, initial_theta=(0.5, 0.5)), truncation=8, actions=8)
