"""Relative value iteration (the MDP paper, section 4, Algorithm 2) against independently
derived test vectors, the exact stationary law, the engine, and the EQUI result of Berg,
Dorsman and Harchol-Balter (2017; docs/mdp.md)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.model import StopRule
from clusteremu.cluster.policies.mdp.allocator import MdpAllocator
from clusteremu.cluster.policies.mdp.model import MdpModel, MdpModelError
from clusteremu.cluster.policies.mdp.solver import (
    check_truncation,
    equi_shares,
    equi_table,
    evaluate_policy,
    solve,
)
from clusteremu.scenarios.loader import spec_from_dict
from tests.cluster.policies.mdp.conftest import EXAMPLES, mdp_scenario


def model(example: int, truncation: int = 20, theta: tuple[float, float] | None = None) -> MdpModel:
    k, lam, mu, p, t1, t2 = EXAMPLES[example]
    return MdpModel.two_class(k, lam, p, mu, theta or (t1, t2), truncation)


# Independently derived, B = 20, M = 100: optimal E[N] and E[N] under EQUI across classes.
VECTORS = {1: (0.65029, 0.65500), 2: (0.68206, 0.68984), 3: (1.09173, 1.09563)}


@pytest.mark.parametrize("example", sorted(VECTORS))
def test_spec_test_vectors(example: int) -> None:
    m = model(example)
    sol = solve(m, actions=100)
    optimal, equi = VECTORS[example]
    assert sol.converged and sol.span < 1e-9
    assert sol.average_cost == pytest.approx(optimal, abs=5e-6)  # vectors have 5 decimals
    assert evaluate_policy(m, equi_table(20)).mean_jobs == pytest.approx(equi, abs=5e-6)


def test_example_1_policy_values() -> None:
    table = solve(model(1), actions=100).table
    assert table[1, 1] == pytest.approx(0.25)
    assert table[2, 1] == pytest.approx(0.40)
    assert table[1, 2] == pytest.approx(0.15)


@pytest.mark.parametrize("example", [1, 2, 3])
def test_average_cost_equals_the_stationary_mean_of_the_table(example: int) -> None:
    m = model(example)
    sol = solve(m, actions=50)
    exact = evaluate_policy(m, sol.table)
    # The uniformised chain has the CTMC's stationary law: g = E[N1 + N2].
    assert sol.average_cost == pytest.approx(exact.mean_jobs, abs=1e-7)
    assert exact.mean_jobs < evaluate_policy(m, equi_table(20)).mean_jobs


def test_linear_speedups_reduce_to_an_mm1_queue() -> None:
    # theta = 1: x s(K / x) = K, so any split that uses every core serves at rate mu k while
    # N > 0: N is M/M/1 with load rho = lambda / (mu k) (B = 60: truncation negligible).
    m = MdpModel.two_class(4, 3.0, 0.3, 1.0, (1.0, 1.0), truncation=60)
    rho = 3.0 / 4.0
    assert evaluate_policy(m, equi_table(60)).mean_jobs == pytest.approx(rho / (1 - rho), rel=1e-6)
    assert solve(m, actions=10).average_cost == pytest.approx(rho / (1 - rho), rel=1e-6)


def test_golden_section_refinement_never_worse_than_the_grid() -> None:
    m = model(2)
    grid, refined = solve(m, actions=20), solve(m, actions=20, refine=True)
    assert refined.average_cost <= grid.average_cost + 1e-9
    assert refined.average_cost == pytest.approx(solve(m, actions=100).average_cost, abs=1e-5)


@pytest.mark.parametrize("theta", [0.3, 0.6, 0.9])
def test_equal_speedups_give_the_equi_split(theta: float) -> None:
    # Berg, Dorsman, Harchol-Balter [7]: one common speed-up curve and exponential sizes ->
    # EQUI is optimal, i.e. class 1's share is x1 / (x1 + x2).
    m_actions = 100
    m = model(2, theta=(theta, theta))
    sol = solve(m, actions=m_actions)
    k = m.cores
    x1, x2 = np.meshgrid(np.arange(21), np.arange(21), indexing="ij")
    # Where every job gets at least one core the optimum is unique (strict concavity).
    strict = (x1 > 0) & (x2 > 0) & (x1 + x2 <= k) & (x1 < 15) & (x2 < 15)
    equi = equi_table(20)
    assert np.all(np.abs(sol.table - equi)[strict] <= 1.0 / m_actions + 1e-12)
    # Elsewhere several splits tie; EQUI is still optimal: its average cost is the grid
    # optimum or below it (x1 / (x1 + x2) is not always on the grid).
    equi_cost = evaluate_policy(m, equi).mean_jobs
    assert equi_cost <= sol.average_cost + 1e-9
    assert equi_cost == pytest.approx(sol.average_cost, rel=1e-5)


@pytest.mark.parametrize("example", [1, 2, 3])
def test_value_iteration_matches_the_engine_within_2_percent(example: int) -> None:
    spec = spec_from_dict(mdp_scenario(example, jobs=150_000, seed=3))
    spec = replace(spec, stop=StopRule(jobs=150_000, warmup_jobs=10_000))
    sol = solve(model(example), actions=100)
    result = Engine(spec, allocator=MdpAllocator(table=sol.table)).run()
    measured = result.summary["mean_jobs_in_system"]
    print(f"example {example}: value iteration {sol.average_cost:.5f}, engine {measured:.5f}")
    assert measured == pytest.approx(sol.average_cost, rel=0.02)


def test_a_truncation_that_blocks_too_much_is_rejected() -> None:
    m = MdpModel.two_class(4, 3.2, 0.5, 1.0, (0.5, 0.5), truncation=3)
    table = solve(m, actions=10).table
    with pytest.raises(MdpModelError, match="truncation: B = 3 blocks .* expected a larger"):
        check_truncation(m, table)
    big = MdpModel.two_class(4, 3.2, 0.5, 1.0, (0.5, 0.5), truncation=60)
    assert check_truncation(big, solve(big, actions=10).table) < 1e-3


def test_general_solver_agrees_with_the_two_class_path() -> None:
    from clusteremu.cluster.policies.mdp.solver import _solve_general

    m = model(2)
    two = solve(m, actions=20)
    general = _solve_general(m, 20, 1e-9, 1_000_000, None)
    assert general.average_cost == pytest.approx(two.average_cost, abs=1e-12)
    # Same policy everywhere but the empty state (where the share does not matter).
    diff = np.abs(general.shares - two.shares).max(axis=-1)
    diff[0, 0] = 0.0
    assert diff.max() < 1e-12


def test_three_classes() -> None:
    m = MdpModel(12, 3.0, (0.3, 0.3, 0.4), 1.0, (0.3, 0.6, 0.9), truncation=10)
    sol = solve(m, actions=10)
    assert sol.converged and sol.shares.shape == (11, 11, 11, 3)
    np.testing.assert_allclose(sol.shares[1:, 1:, 1:].sum(axis=-1), 1.0)
    assert sol.average_cost == pytest.approx(evaluate_policy(m, sol.shares).mean_jobs, abs=1e-7)
    assert sol.average_cost < evaluate_policy(m, equi_shares(3, 10)).mean_jobs
    # Equal speed-ups: EQUI is optimal ([7]); the grid optimum cannot beat it.
    same = m.with_theta((0.6, 0.6, 0.6))
    equi_cost = evaluate_policy(same, equi_shares(3, 10)).mean_jobs
    grid_cost = solve(same, actions=12).average_cost
    assert equi_cost <= grid_cost + 1e-9
    assert equi_cost == pytest.approx(grid_cost, rel=1e-3)
    with pytest.raises(MdpModelError, match="refine"):
        solve(m, actions=4, refine=True)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],  # no wall-clock verdict
)
@given(
    k=st.integers(2, 16),
    load=st.floats(0.05, 0.6),
    p=st.floats(0.05, 0.95),
    mu=st.floats(0.3, 3.0),
    th1=st.floats(0.01, 1.0),
    th2=st.floats(0.01, 1.0),
)
def test_value_iteration_invariants(
    k: int, load: float, p: float, mu: float, th1: float, th2: float
) -> None:
    # For any model: g is the exact stationary mean of the returned table, no policy on the
    # grid does better than the optimum (EQUI rounded to the grid and both static priorities
    # checked), and the table gives all cores to the only class present.
    m = MdpModel.two_class(k, load * mu * k, p, mu, (th1, th2), truncation=12)
    sol = solve(m, actions=20)
    assert sol.converged
    exact = evaluate_policy(m, sol.table).mean_jobs
    assert sol.average_cost == pytest.approx(exact, rel=1e-6, abs=1e-9)
    for other in (np.round(equi_table(12) * 20) / 20, np.ones((13, 13)), np.zeros((13, 13))):
        assert exact <= evaluate_policy(m, other).mean_jobs + 1e-7
    assert np.all(sol.table[0, :] == 0.0) and np.all(sol.table[1:, 0] == 1.0)
