"""The relaxed problem (3) of the WHAM paper: KKT solution against closed forms, an
independently derived test vector and a general-purpose constrained optimiser (scipy SLSQP)
on random instances."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from clusteremu.cluster.policies.relaxed_bound import (
    BoundError,
    ClassLoad,
    f_inverse,
    f_value,
    marginal_inverse,
    scenario_bound,
    solve_relaxed,
)
from clusteremu.cluster.speedup import (
    AmdahlSpeedup,
    LinearSpeedup,
    PowerSpeedup,
    RooftopSpeedup,
    SmoothRooftopSpeedup,
    Speedup,
    TableSpeedup,
    check_speedup,
)
from clusteremu.scenarios.loader import load_scenario


def appendix_h(n: float) -> list[ClassLoad]:
    """Our reconstruction of Appendix H at n cores (per-core rates 7/6, 0.42, 0.7; docs/wham.md)."""
    return [
        ClassLoad("class1", 7 / 6 * n, 0.2, 2.0, PowerSpeedup(0.5)),
        ClassLoad("class2", 0.42 * n, 0.5 + 0.5 / 9, 1.0, PowerSpeedup(0.75)),
        ClassLoad("class3", 0.7 * n, 1 / 3, 1.0, AmdahlSpeedup(0.8)),
    ]


def test_spec_test_vector() -> None:
    sol = solve_relaxed(appendix_h(1000.0), 1000.0)
    assert sol.price == pytest.approx(0.762664, rel=2e-6)
    np.testing.assert_allclose(sol.widths, [2.62239, 3.93358, 2.29015], rtol=2e-6)
    assert sol.lower_bound == pytest.approx(0.499890, rel=2e-6)
    # The constraint is tight and the mean-field bound does not depend on n.
    assert sol.effective_load.sum() == pytest.approx(1000.0, rel=1e-10)
    assert solve_relaxed(appendix_h(8.0), 8.0).lower_bound == pytest.approx(
        sol.lower_bound, rel=1e-10
    )


def test_shipped_scenario_bound() -> None:
    bound = scenario_bound(load_scenario("appendix-h", ["cluster.pools.0.cores=1024"]))
    assert bound.lower_bound == pytest.approx(0.499890, rel=2e-6)
    assert bound.widths["class2"] == pytest.approx(3.93358, rel=2e-6)


@pytest.mark.parametrize("a", [0.3, 0.5, 0.8])
@pytest.mark.parametrize("rho", [0.2, 0.5, 0.9])
def test_single_class_power_closed_form(a: float, rho: float) -> None:
    # One class, s = k^a: the tight constraint lambda E[X] k^(1-a) = n gives
    # k = rho^(-1/(1-a)) and the cost (1/n) c lambda E[X] k^(-a) = c rho k^(-a) (n large
    # enough that k stays below the cap of n cores per job).
    n, c = 1e4, 3.0
    sol = solve_relaxed([ClassLoad("x", rho * n / 0.5, 0.5, c, PowerSpeedup(a))], n)
    k = rho ** (-1.0 / (1.0 - a))
    assert sol.widths[0] == pytest.approx(k, rel=1e-9)
    assert sol.lower_bound == pytest.approx(c * rho * k**-a, rel=1e-9)


def test_single_class_amdahl_closed_form() -> None:
    # k / s(k) = (1 - p) k + p for Amdahl: the tight constraint gives k = (1/rho - p)/(1 - p).
    n, p, rho = 32.0, 0.9, 0.4
    sol = solve_relaxed([ClassLoad("x", rho * n, 1.0, 1.0, AmdahlSpeedup(p))], n)
    k = (1.0 / rho - p) / (1.0 - p)
    assert sol.widths[0] == pytest.approx(k, rel=1e-9)
    assert sol.lower_bound == pytest.approx(rho * ((1 - p) + p / k), rel=1e-9)


def _random_speedup(rng: np.random.Generator) -> Speedup:
    kind = rng.integers(3)
    if kind == 0:
        return PowerSpeedup(float(rng.uniform(0.2, 0.95)))
    if kind == 1:
        return AmdahlSpeedup(float(rng.uniform(0.3, 0.98)))
    xs = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
    ys = np.cumsum(np.concatenate([[1.0], np.sort(rng.uniform(0.05, 1.0, 5))[::-1] * np.diff(xs)]))
    return TableSpeedup(tuple(xs), tuple(ys))


def _slsqp(classes: list[ClassLoad], n: float) -> tuple[np.ndarray, float]:
    """Problem (3) handed to a general-purpose solver, from several starting points."""
    load = np.array([cl.inherent_load for cl in classes])
    cost = np.array([cl.holding_cost for cl in classes])

    def speed(k: np.ndarray) -> np.ndarray:
        return np.array([float(cl.speedup.value(x)) for cl, x in zip(classes, k, strict=True)])

    def objective(k: np.ndarray) -> float:
        return float(np.sum(cost * load / speed(k)) / n)

    def slack(k: np.ndarray) -> float:
        return float(n - np.sum(load * k / speed(k)))

    best: tuple[np.ndarray, float] | None = None
    for start in (1.0, 1.5, 3.0):
        res = minimize(
            objective,
            np.full(len(classes), start),
            method="SLSQP",
            bounds=[(1.0, n)] * len(classes),
            constraints=[{"type": "ineq", "fun": slack}],
            options={"ftol": 1e-14, "maxiter": 500},
        )
        if slack(res.x) > -1e-7 and (best is None or res.fun < best[1]):
            best = (res.x, float(res.fun))
    assert best is not None
    return best


@pytest.mark.parametrize("seed", range(12))
def test_kkt_solution_matches_a_generic_optimiser(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 5))
    n = float(rng.choice([8.0, 64.0, 512.0]))
    shares = rng.dirichlet(np.ones(m)) * rng.uniform(0.2, 0.9)
    classes = []
    for i in range(m):
        mean = float(rng.uniform(0.1, 3.0))
        classes.append(
            ClassLoad(
                f"c{i}",
                shares[i] * n / mean,
                mean,
                float(rng.uniform(0.5, 4.0)),
                _random_speedup(rng),
            )
        )
    sol = solve_relaxed(classes, n)
    _, reference = _slsqp(classes, n)
    # KKT is exact for the convex problem; the generic solver can only be as good.
    assert sol.lower_bound <= reference * (1 + 1e-7)
    assert sol.lower_bound == pytest.approx(reference, rel=1e-5)
    assert sol.effective_load.sum() <= n * (1 + 1e-9)


@pytest.mark.parametrize(
    "speedup", [PowerSpeedup(0.6), AmdahlSpeedup(0.85), SmoothRooftopSpeedup(12.0, 3.0)]
)
def test_f_inverse_inverts_f(speedup: Speedup) -> None:
    k = np.geomspace(1.01, 200.0, 40)
    nu = f_value(speedup, 1.7, k)
    np.testing.assert_allclose(f_inverse(speedup, 1.7, nu, 1e6), k, rtol=1e-10)
    assert np.all(np.diff(nu) < 0), "f is strictly decreasing (Lemma E.2)"


def test_f_closed_forms_match_the_definition() -> None:
    k = np.linspace(1.0, 50.0, 99)
    assert np.allclose(f_value(PowerSpeedup(0.5), 2.0, k), 2.0 * 0.5 / (0.5 * k))
    assert np.allclose(f_value(AmdahlSpeedup(0.8), 1.0, k), 0.8 / (0.2 * k * k))


def test_generic_curve_uses_bisection() -> None:
    class Log(Speedup):
        """s(k) = 1 + log(k): concave, not perfectly elastic; no closed form registered."""

        def _above_one(self, k: np.ndarray) -> np.ndarray:
            return 1.0 + np.log(k)

        def _derivative_above_one(self, k: np.ndarray) -> np.ndarray:
            return 1.0 / k

    # f(k) = c (1/k) / (1 + log k - 1) = c / (k log k).
    k = np.array([1.5, 3.0, 10.0])
    nu = 2.0 / (k * np.log(k))
    np.testing.assert_allclose(f_inverse(Log(), 2.0, nu, 1000.0), k, rtol=1e-9)


def test_table_and_rooftop_inverses_are_steps() -> None:
    table = TableSpeedup((1.0, 2.0, 4.0), (1.0, 1.8, 2.6))
    # Segment levels: [1, 2): slope 0.8, intercept 0.2 -> f = 4c; [2, 4): 0.4, 1.0 -> 0.4c.
    assert float(f_inverse(table, 1.0, 5.0)) == 1.0
    assert float(f_inverse(table, 1.0, 1.0)) == 2.0
    assert float(f_inverse(table, 1.0, 0.1)) == 4.0
    assert float(f_inverse(RooftopSpeedup(6.0), 1.0, 3.0, 100.0)) == 6.0
    assert float(f_inverse(LinearSpeedup(), 1.0, 3.0, 100.0)) == 100.0
    assert float(marginal_inverse(table, 0.5)) == 2.0


def test_step_curves_still_meet_the_budget_exactly() -> None:
    table = TableSpeedup((1.0, 2.0, 4.0, 8.0), (1.0, 1.8, 2.6, 3.4))
    sol = solve_relaxed([ClassLoad("t", 6.0, 1.0, 1.0, table)], 10.0)
    assert sol.effective_load.sum() == pytest.approx(10.0, rel=1e-9)
    assert 4.0 < sol.widths[0] < 8.0  # inside a segment: k / s(k) = 10/6 there


def test_unstable_and_invalid_classes_are_rejected() -> None:
    with pytest.raises(BoundError, match="unstable under any allocation"):
        solve_relaxed([ClassLoad("x", 10.0, 1.0, 1.0, PowerSpeedup(0.5))], 10.0)
    with pytest.raises(BoundError, match="holding_cost"):
        solve_relaxed([ClassLoad("x", 1.0, 1.0, 0.0, PowerSpeedup(0.5))], 10.0)
    with pytest.raises(BoundError):
        solve_relaxed([], 10.0)


def test_slack_budget_gives_zero_price() -> None:
    # A rooftop class gains nothing beyond its cap: the budget stays slack, the price is 0.
    sol = solve_relaxed([ClassLoad("r", 1.0, 1.0, 1.0, RooftopSpeedup(4.0))], 100.0)
    assert sol.price == 0.0
    assert sol.widths[0] == 4.0
    assert math.isclose(sol.lower_bound, 1.0 / 4.0 / 100.0)


def test_smooth_rooftop_curve() -> None:
    curve = SmoothRooftopSpeedup(8.0, 4.0)
    check_speedup(curve, 4096.0)  # s(1) = 1, non-decreasing, concave, not super-linear
    k = np.geomspace(1.0, 500.0, 60)
    h = 1e-6 * k
    numeric = (curve.value(k + h) - curve.value(k - h)) / (2 * h)
    np.testing.assert_allclose(curve.derivative(k[1:]), numeric[1:], rtol=1e-6, atol=1e-9)
    # f = c m^q / k^(q+1); the marginal inverse undoes s'.
    np.testing.assert_allclose(f_value(curve, 2.0, k), 2.0 * 8.0**4 / k**5, rtol=1e-9)
    slopes = curve.derivative(np.array([1.5, 4.0, 20.0]))
    np.testing.assert_allclose(marginal_inverse(curve, slopes, 1e6), [1.5, 4.0, 20.0], rtol=1e-9)
    # A sharp knee approaches the rooftop min(k, m) (scaled so that s(1) = 1).
    sharp = SmoothRooftopSpeedup(8.0, 60.0)
    np.testing.assert_allclose(sharp.value([2.0, 4.0, 32.0]), [2.0, 4.0, 8.0], rtol=2e-2)
