"""Maximum likelihood estimation of theta (the MDP paper, section 3, eqs. 3.2-3.6):
the compact likelihood equals the literal one up to a constant, the score and information are
the derivatives, the estimates are consistent and the 95% intervals cover."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clusteremu.cluster import layout as L
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.policies.mdp import estimator as est
from clusteremu.cluster.policies.mdp.allocator import MdpAllocator
from clusteremu.cluster.policies.mdp.model import MdpModel
from clusteremu.cluster.policies.mdp.solver import equi_table, solve
from clusteremu.scenarios.loader import spec_from_dict
from tests.cluster.policies.mdp.conftest import EXAMPLES, mdp_scenario, three_class_scenario


def simulate(example: int, jobs: int, seed: int, table: np.ndarray) -> tuple[Engine, est.StatePath]:
    """Run the engine under a fixed table and rebuild the state path of the whole run."""
    spec = spec_from_dict(mdp_scenario(example, jobs=jobs, seed=seed))
    engine = Engine(spec, allocator=MdpAllocator(table=table))
    engine.run()
    k = EXAMPLES[example][0]
    path = est.path_from_jobs(
        engine.jobs_f[L.JF.ARRIVAL],
        engine.jobs_f[L.JF.END],
        engine.jobs_i[L.JI.CLS],
        (0, 1),
        k,
        [(0.0, table)],
        (0.0, engine.now),
    )
    return engine, path


def optimal_table(example: int) -> np.ndarray:
    k, lam, mu, p, t1, t2 = EXAMPLES[example]
    return solve(MdpModel.two_class(k, lam, p, mu, (t1, t2), 20), actions=100).table


def test_state_path_matches_the_engine() -> None:
    engine, path = simulate(2, 3000, 4, optimal_table(2))
    # Every departure is in the path, the time-average of N equals the engine's area.
    assert path.departure_interval.size == int(engine.state.istate[L.IS.DONE_COUNT])
    # The engine integrates N(t) over its measurement window (first to last arrival).
    window = (float(engine.state.fstate[L.FS.WIN_START]), float(engine.state.fstate[L.FS.WIN_END]))
    inside = est.path_from_jobs(
        engine.jobs_f[L.JF.ARRIVAL],
        engine.jobs_f[L.JF.END],
        engine.jobs_i[L.JI.CLS],
        (0, 1),
        10.0,
        [(0.0, equi_table(20))],
        window,
    )
    n_path = np.sum((inside.x1 + inside.x2) * inside.duration_s)
    assert n_path == pytest.approx(engine.state.area_class.sum(), rel=1e-9)
    assert path.duration_s.sum() == pytest.approx(engine.now)
    assert np.all(path.duration_s >= 0)
    # The allocations are the engine's: core-seconds per class agree with the per-job sums.
    for cls in (0, 1):
        x = path.x1 if cls == 0 else path.x2
        core_s = np.sum(path.per_job_allocation(cls) * x * path.duration_s)
        engine_core_s = engine.jobs_f[L.JF.CORE_SECONDS][engine.jobs_i[L.JI.CLS] == cls].sum()
        assert core_s == pytest.approx(engine_core_s, rel=1e-9)
    # The class of a departure: its state count drops by one across the event.
    d = path.departure_interval
    drop1 = path.x1[d] - path.x1[d + 1]
    np.testing.assert_array_equal(drop1, (path.departure_class == 0).astype(int))


def test_compact_likelihood_equals_eq_3_5_up_to_a_constant() -> None:
    _, path = simulate(2, 3000, 5, equi_table(20))
    mu = EXAMPLES[2][2]
    for cls in (0, 1):
        data = est.exposure(path, cls)
        diffs = [
            est.direct_log_likelihood(path, cls, t, mu) - est.log_likelihood(t, data, mu)[0]
            for t in (0.1, 0.4, 0.7, 1.0)
        ]
        np.testing.assert_allclose(diffs, diffs[0], rtol=0, atol=1e-7 * abs(diffs[0]))


def test_score_and_information_are_the_derivatives() -> None:
    data = est.ClassExposure(
        np.array([1.5, 3.0, 10.0]), np.array([40.0, 25.0, 9.0]), np.array([12.0, 6.0, 1.5]), 74
    )
    mu, t, h = 1.3, 0.45, 1e-5
    score, info = est.score_and_information(t, data, mu)
    ll = lambda v: float(est.log_likelihood(v, data, mu)[0])  # noqa: E731
    assert score == pytest.approx((ll(t + h) - ll(t - h)) / (2 * h), rel=1e-6)
    assert -info == pytest.approx((ll(t + h) - 2 * ll(t) + ll(t - h)) / h**2, rel=1e-4)


def test_mle_is_the_maximiser_and_sits_on_bounds_when_it_should() -> None:
    _, path = simulate(2, 4000, 6, optimal_table(2))
    mu = EXAMPLES[2][2]
    data = est.exposure(path, 1)
    e = est.mle(data, mu)
    grid = np.linspace(0, 1, 2001)
    assert e.log_likelihood >= est.log_likelihood(grid, data, mu).max() - 1e-9
    # Departures far above what any theta explains: the maximiser is theta = 1.
    fast = est.ClassExposure(data.alloc, data.departures * 50, data.exposure, 1)
    assert est.mle(fast, mu).theta == pytest.approx(1.0)
    # No exposure above one core per job: nothing to learn, the fallback is returned.
    empty = est.mle(est.ClassExposure.empty(), mu, fallback=0.5)
    assert not empty.informative and empty.theta == 0.5 and math.isinf(empty.std_error)


@pytest.mark.parametrize("example", [1, 2, 3, 4])
def test_consistency_with_20000_departures(example: int) -> None:
    _, path = simulate(example, 20_000, 100 + example, optimal_table(example))
    mu, truth = EXAMPLES[example][2], EXAMPLES[example][4:]
    assert path.departure_interval.size == 20_000
    for cls in (0, 1):
        e = est.mle(est.exposure(path, cls), mu)
        assert abs(e.theta - truth[cls]) < 0.03, (cls, e)


def test_95_percent_intervals_cover_in_at_least_90_of_100_runs() -> None:
    table = optimal_table(2)
    mu, truth = EXAMPLES[2][2], EXAMPLES[2][4:]
    covered = np.zeros(2, dtype=int)
    for seed in range(100):
        _, path = simulate(2, 1500, 1000 + seed, table)
        for cls in (0, 1):
            lo, hi = est.mle(est.exposure(path, cls), mu).interval()
            covered[cls] += int(lo <= truth[cls] <= hi)
    print("coverage of the 95% intervals (class 1, class 2):", covered)
    assert covered.min() >= 90, covered


def test_three_class_path_and_estimates() -> None:
    from clusteremu.cluster.policies.mdp.solver import equi_shares

    spec = spec_from_dict(three_class_scenario(jobs=20_000, seed=31))
    shares = equi_shares(3, 12)
    engine = Engine(spec, allocator=MdpAllocator(table=shares))
    engine.run()
    path = est.path_from_jobs(
        engine.jobs_f[L.JF.ARRIVAL],
        engine.jobs_f[L.JF.END],
        engine.jobs_i[L.JI.CLS],
        (0, 1, 2),
        12.0,
        [(0.0, shares)],
        (0.0, engine.now),
    )
    assert path.departure_interval.size == 20_000
    for cls, truth in enumerate((0.3, 0.6, 0.9)):
        core_s = np.sum(path.per_job_allocation(cls) * path.counts[:, cls] * path.duration_s)
        engine_core_s = engine.jobs_f[L.JF.CORE_SECONDS][engine.jobs_i[L.JI.CLS] == cls].sum()
        assert core_s == pytest.approx(engine_core_s, rel=1e-9)
        e = est.mle(est.exposure(path, cls), 1.0)
        assert abs(e.theta - truth) < 4 * e.std_error, (cls, e)
