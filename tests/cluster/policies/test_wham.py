"""WHAM, FW-CAM and GREEDY (the WHAM paper): conformance, independently derived test
vectors, the invariants of both WHAM modes, and the compiled price search against the
independent Speedup-object implementation of `relaxed_bound`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.policies import registry
from clusteremu.cluster.policies.base import Allocator, PoolView
from clusteremu.cluster.policies.relaxed_bound import (
    clear_market,
    f_inverse,
    f_value,
    marginal_inverse,
    scenario_bound,
)
from clusteremu.cluster.policies.wham import (
    FwCam,
    Greedy,
    Wham,
    class_arrays,
    clear_widths,
    widths_of,
    workspace,
)
from clusteremu.cluster.speedup import Speedup
from clusteremu.cluster.testing import AllocatorConformance, small_pool_scenario
from clusteremu.scenarios.loader import load_scenario, spec_from_dict

EPS = 1e-9


def appendix_h_dict(cores: int, jobs: int = 3000) -> dict[str, Any]:
    """The shipped Appendix H workload at `cores` cores, as a dict (small runs)."""
    spec_data: dict[str, Any] = {
        "name": "appendix-h-small",
        "seed": 3,
        "stop": {"jobs": jobs, "warmup_jobs": jobs // 10},
        "cluster": {"pools": [{"name": "cores", "cores": cores}]},
        "workload": {
            "classes": [
                {
                    "name": "class1",
                    "arrival": {"kind": "poisson", "rate_per_s_per_core": 7 / 6},
                    "size": {"kind": "exponential", "mean_s": 0.2},
                    "speedup": {"kind": "power", "exponent": 0.5},
                    "holding_cost": 2.0,
                    "pool": "cores",
                },
                {
                    "name": "class2",
                    "arrival": {"kind": "poisson", "rate_per_s_per_core": 0.42},
                    "size": {
                        "kind": "hyperexponential",
                        "probabilities": [0.5, 0.5],
                        "means_s": [1.0, 1 / 9],
                    },
                    "speedup": {"kind": "power", "exponent": 0.75},
                    "pool": "cores",
                },
                {
                    "name": "class3",
                    "arrival": {"kind": "poisson", "rate_per_s_per_core": 0.7},
                    "size": {"kind": "exponential", "mean_s": 1 / 3},
                    "speedup": {"kind": "amdahl", "parallel_fraction": 0.8},
                    "pool": "cores",
                },
            ]
        },
    }
    return spec_data


def spec_test_vector() -> tuple[Any, PoolView]:
    """The derived test vector: n = 10, jobs of classes (1, 1, 2, 3), c = (2, 1, 1)."""
    spec = spec_from_dict(appendix_h_dict(10))
    cls = np.array([0, 0, 1, 2])
    n = cls.size
    view = PoolView(
        0.0,
        "cores",
        10.0,
        np.arange(n),
        cls,
        np.zeros(n),
        np.ones(n),
        np.ones(n),
        np.array([2.0, 2.0, 1.0, 1.0]),
        np.zeros(n),
    )
    return spec, view


def _speedups(spec: Any) -> list[Speedup]:
    return [jc.speedup for jc in spec.classes]


def assert_no_fraction_below_one(cores: np.ndarray) -> None:
    assert np.all((cores == 0.0) | (cores >= 1.0 - EPS)), f"a job got between 0 and 1 core: {cores}"


def assert_wham_invariants(spec: Any, view: PoolView, cores: np.ndarray) -> None:
    """Both modes of Definition 6.9 on one decision."""
    assert_no_fraction_below_one(cores)
    slots = math.floor(view.cores + EPS)
    if view.job_ids.size > slots:
        # First mode: exactly `slots` jobs at one core, those with the largest c / x.
        assert np.all((cores == 0.0) | (cores == 1.0))
        assert int(cores.sum()) == slots
        key = view.holding_cost / view.remaining
        assert key[cores == 1.0].min() >= key[cores == 0.0].max()
        return
    # Second mode: every job runs; above one core all share one f value (the price), and a
    # job held at one core has f(1) <= that price.
    assert np.all(cores >= 1.0 - EPS)
    speedups = _speedups(spec)
    f = np.array(
        [
            float(f_value(speedups[c], spec.classes[c].holding_cost, k))
            for c, k in zip(view.class_index, cores, strict=True)
        ]
    )
    above = cores > 1.0 + 1e-7
    if above.any():
        price = f[above][0]
        assert np.allclose(f[above], price, rtol=1e-7), f"f values differ: {f[above]}"
        at_one = ~above
        assert np.all(f[at_one] <= price * (1 + 1e-7))


class TestWhamConformance(AllocatorConformance):
    """The lead's mixed pool (power, Amdahl, linear): the linear class takes what is left."""

    def make_allocator(self) -> Allocator:
        return Wham()

    def check_allocation(self, view: PoolView, cores: np.ndarray) -> None:
        assert_wham_invariants(self._spec(), view, cores)


class TestWhamAppendixH(AllocatorConformance):
    """Appendix H at 8 cores: both modes occur; the closed-form price path is used."""

    def make_allocator(self) -> Allocator:
        return Wham()

    def pool_scenario(self) -> dict[str, Any]:
        return appendix_h_dict(8)

    def check_allocation(self, view: PoolView, cores: np.ndarray) -> None:
        assert_wham_invariants(self._spec(), view, cores)
        if view.job_ids.size <= view.cores:
            assert cores.sum() == pytest.approx(view.cores, rel=1e-9), "all cores used"


class TestGreedyConformance(AllocatorConformance):
    def make_allocator(self) -> Allocator:
        return Greedy()

    def check_allocation(self, view: PoolView, cores: np.ndarray) -> None:
        spec = self._spec()
        if view.job_ids.size > view.cores:
            expected = np.where(np.arange(view.job_ids.size) < math.floor(view.cores), 1.0, 0.0)
            np.testing.assert_array_equal(cores, expected)
            return
        speedups = _speedups(spec)
        slope = np.array(
            [float(speedups[c].derivative(k)) for c, k in zip(view.class_index, cores, strict=True)]
        )
        above = cores > 1.0 + 1e-7
        if above.sum() > 1:
            assert np.allclose(slope[above], slope[above][0], rtol=1e-6, atol=1e-12)


class TestFwCamConformance(AllocatorConformance):
    def make_allocator(self) -> Allocator:
        return FwCam()

    def check_allocation(self, view: PoolView, cores: np.ndarray) -> None:
        assert_no_fraction_below_one(cores)


class TestFwCamAppendixH(AllocatorConformance):
    """At 64 cores FW-CAM takes its relaxed widths (n' = 48 > inherent load 44.8)."""

    def make_allocator(self) -> Allocator:
        return FwCam()

    def pool_scenario(self) -> dict[str, Any]:
        return appendix_h_dict(64)

    def check_allocation(self, view: PoolView, cores: np.ndarray) -> None:
        assert_no_fraction_below_one(cores)


def test_spec_vector_wham() -> None:
    spec, view = spec_test_vector()
    wham = Wham()
    wham.setup(spec, np.random.default_rng(0))
    cores = wham.allocate(view).cores
    np.testing.assert_allclose(cores, [2.250927, 2.250927, 3.376390, 2.121757], rtol=2e-6)
    widths, price = wham.class_widths(view)
    assert price == pytest.approx(0.888523, rel=2e-6)
    assert cores.sum() == pytest.approx(10.0, rel=1e-12)
    assert_wham_invariants(spec, view, cores)


def test_spec_vector_greedy() -> None:
    spec, view = spec_test_vector()
    greedy = Greedy()
    greedy.setup(spec, np.random.default_rng(0))
    cores = greedy.allocate(view).cores
    np.testing.assert_allclose(cores, [1.044085, 1.044085, 5.518695, 2.393136], rtol=2e-6)


def test_wham_first_mode_serves_largest_cost_over_remaining() -> None:
    spec = spec_from_dict(appendix_h_dict(3))
    wham = Wham()
    wham.setup(spec, np.random.default_rng(0))
    cls = np.array([0, 1, 2, 1, 0])
    remaining = np.array([4.0, 0.5, 3.0, 0.2, 1.0])
    cost = np.array([2.0, 1.0, 1.0, 1.0, 2.0])  # c / x = 0.5, 2, 0.33, 5, 2
    view = PoolView(
        0.0, "cores", 3.0, np.arange(5), cls, np.zeros(5), remaining, remaining, cost, np.zeros(5)
    )
    cores = wham.allocate(view).cores
    # Jobs 3 (5.0), then 1 and 4 (2.0 each, the earlier arrival first).
    np.testing.assert_array_equal(cores, [0.0, 1.0, 0.0, 1.0, 1.0])


def test_wham_single_job_gets_the_whole_pool() -> None:
    spec = spec_from_dict(appendix_h_dict(16))
    wham = Wham()
    wham.setup(spec, np.random.default_rng(0))
    view = PoolView(
        0.0,
        "cores",
        16.0,
        np.array([7]),
        np.array([2]),
        np.zeros(1),
        np.ones(1),
        np.ones(1),
        np.ones(1),
        np.zeros(1),
    )
    assert wham.allocate(view).cores[0] == pytest.approx(16.0)


def _reference_widths(
    speedups: list[Speedup], costs: list[float], counts: np.ndarray, budget: float, greedy: bool
) -> np.ndarray:
    """The market clearing computed from Speedup objects (bisection + brentq, no numba)."""
    present = np.flatnonzero(counts > 0)

    def width_at(nu: float) -> np.ndarray:
        if greedy:
            return np.array([float(marginal_inverse(speedups[c], nu, budget)) for c in present])
        return np.array([float(f_inverse(speedups[c], costs[c], nu, budget)) for c in present])

    widths, _ = clear_market(width_at, lambda w: float(np.dot(counts[present], w)), budget)
    out = np.ones(counts.size)
    out[present] = widths
    return out


def _random_class(rng: np.random.Generator) -> dict[str, Any]:
    kind = int(rng.integers(6))
    if kind == 0:
        sp: dict[str, Any] = {"kind": "power", "exponent": float(rng.uniform(0.2, 0.95))}
    elif kind == 1:
        sp = {"kind": "amdahl", "parallel_fraction": float(rng.uniform(0.3, 0.97))}
    elif kind == 2:
        xs = [1.0, 2.0, 4.0, 8.0, 16.0]
        inc = np.sort(rng.uniform(0.1, 1.0, 4))[::-1] * np.diff(xs)
        sp = {
            "kind": "table",
            "points": [
                [x, float(y)]
                for x, y in zip(xs, np.cumsum(np.concatenate([[1.0], inc])), strict=True)
            ],
        }
    elif kind == 3:
        sp = {"kind": "rooftop", "max_cores": float(rng.uniform(1.5, 6.0))}
    elif kind == 4:
        sp = {
            "kind": "smooth-rooftop",
            "max_cores": float(rng.uniform(1.5, 12.0)),
            "sharpness": float(rng.uniform(0.5, 8.0)),
        }
    else:
        sp = {"kind": "linear"}
    return {"speedup": sp, "holding_cost": float(rng.uniform(0.5, 3.0))}


@pytest.mark.parametrize("greedy", [False, True])
@pytest.mark.parametrize("seed", range(10))
def test_compiled_price_search_matches_reference(seed: int, greedy: bool) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 5))
    classes = []
    for i in range(m):
        extra = _random_class(rng)
        classes.append(
            {
                "name": f"c{i}",
                "arrival": {"kind": "poisson", "rate_per_s": 0.1},
                "size": {"kind": "exponential", "mean_s": 1.0},
                "pool": "p",
                **extra,
            }
        )
    budget = float(rng.choice([4.0, 16.0, 50.0]))
    spec = spec_from_dict(
        {
            "name": "r",
            "stop": {"jobs": 10},
            "cluster": {"pools": [{"name": "p", "cores": budget}]},
            "workload": {"classes": classes},
        }
    )
    counts = rng.integers(0, 4, m).astype(np.float64)
    counts[0] = max(counts[0], 1.0)
    if counts.sum() > budget:
        counts[:] = 1.0
    classes_f, classes_i, tx, ty = class_arrays(spec)
    work = workspace(m)
    work[1 : 1 + m] = counts
    clear_widths(work, budget, greedy, classes_f, classes_i, tx, ty)
    got = widths_of(work)
    want = _reference_widths(
        _speedups(spec), [c.holding_cost for c in spec.classes], counts, budget, greedy
    )
    present = counts > 0
    np.testing.assert_allclose(got[present], want[present], rtol=1e-7)
    assert np.dot(counts, got) <= budget * (1 + 1e-12)


def test_closed_form_and_numeric_search_agree() -> None:
    spec = spec_from_dict(appendix_h_dict(32))
    wham = Wham()
    wham.setup(spec, np.random.default_rng(0))
    classes_f, classes_i, tx, ty = wham.arrays
    rng = np.random.default_rng(1)
    for _ in range(50):
        counts = rng.integers(0, 10, 3).astype(np.float64)
        if counts.sum() == 0 or counts.sum() > 32:
            continue
        view = PoolView(
            0.0,
            "cores",
            32.0,
            np.arange(int(counts.sum())),
            np.repeat(np.arange(3), counts.astype(int)),
            *([np.ones(int(counts.sum()))] * 5),
        )
        closed, _ = wham.class_widths(view)
        work = workspace(3)
        work[1:4] = counts
        clear_widths(work, 32.0, False, classes_f, classes_i, tx, ty)
        numeric = widths_of(work)
        np.testing.assert_allclose(closed[counts > 0], numeric[counts > 0], rtol=1e-9)


def test_fw_cam_plan_follows_the_relaxed_widths() -> None:
    fw = FwCam()
    spec = load_scenario("appendix-h", ["cluster.pools.0.cores=1024"])
    servers, widths, shares = fw.plan(spec, "cores", 1024.0)
    # Budget n' = 1024 - 1024^(2/3) = 922.4; the widths lie between 1 and the relaxed ones.
    assert np.all(widths >= 1.0) and np.all(widths <= [2.62239, 3.93358, 2.29015])
    assert shares.sum() == pytest.approx(1024.0)
    assert float(np.dot(servers, widths)) <= 1024.0 + 1e-9
    # Small pool: n' below the inherent load, so widths fall back to one core.
    servers, widths, _ = fw.plan(
        load_scenario("appendix-h", ["cluster.pools.0.cores=4"]), "cores", 4.0
    )
    np.testing.assert_array_equal(widths, [1.0, 1.0, 1.0])
    assert servers.sum() <= 4


def test_fw_cam_delta_is_validated() -> None:
    with pytest.raises(ValueError, match="delta"):
        FwCam(delta=0.0)
    assert registry.create("allocator", "fw-cam", delta=0.25).delta == 0.25  # type: ignore[attr-defined]


def test_rooftop_table_and_linear_pools_run_to_completion() -> None:
    data = small_pool_scenario(jobs=1500)
    data["workload"]["classes"][0]["speedup"] = {"kind": "rooftop", "max_cores": 3}
    data["workload"]["classes"][1]["speedup"] = {
        "kind": "table",
        "points": [[1, 1], [2, 1.7], [4, 2.5], [8, 3.0]],
    }
    spec = spec_from_dict(data)
    for name in ("wham", "greedy", "fw-cam"):
        fast = Engine(spec, allocator=registry.create("allocator", name)).run()  # type: ignore[arg-type]
        slow = Engine(
            spec,
            allocator=registry.create("allocator", name),  # type: ignore[arg-type]
            force_python_policies=True,
        ).run()
        assert fast.summary["jobs_unfinished"] == 0
        np.testing.assert_allclose(
            fast.jobs["end_s"].to_numpy(), slow.jobs["end_s"].to_numpy(), rtol=1e-9, atol=1e-9
        )


def test_renewal_arrivals_and_pool_speed() -> None:
    # General inter-arrival times (hyper-exponential gaps) and a pool twice as fast: the
    # bound uses the renewal rate 1 / E[gap] and sizes / speed, and WHAM runs on it.
    data = appendix_h_dict(16, jobs=4000)
    data["cluster"]["pools"][0]["speed"] = 2.0
    for i, mean_gap in enumerate((1 / 20.0, 1 / 8.0, 1 / 12.0)):
        data["workload"]["classes"][i]["arrival"] = {
            "kind": "renewal",
            "interarrival": {
                "kind": "hyperexponential",
                "probabilities": [0.5, 0.5],
                "means_s": [0.5 * mean_gap, 1.5 * mean_gap],
            },
        }
    spec = spec_from_dict(data)
    bound = scenario_bound(spec)
    load = 20 * 0.2 / 2 + 8 * (0.5 + 0.5 / 9) / 2 + 12 / 3 / 2
    assert sum(sol.effective_load.sum() for sol in bound.pools.values()) == pytest.approx(16.0)
    assert load < 16
    run = Engine(spec, allocator=Wham()).run()
    assert run.summary["jobs_unfinished"] == 0
    assert run.summary["holding_cost_rate"] / 16 > bound.lower_bound


def test_kernel_evaluates_the_smooth_rooftop_like_the_curve() -> None:
    # One job alone in a pool under EQUI runs at s(n): its response time is size / s(n).
    data = appendix_h_dict(6, jobs=1)
    data["workload"]["classes"] = [data["workload"]["classes"][0]]
    data["workload"]["classes"][0]["speedup"] = {
        "kind": "smooth-rooftop",
        "max_cores": 4,
        "sharpness": 3,
    }
    data["stop"] = {"jobs": 1}
    spec = spec_from_dict(data)
    run = Engine(spec, allocator=registry.create("allocator", "equi")).run()  # type: ignore[arg-type]
    size = run.jobs["size"].to_numpy()[0]
    expected = size / float(spec.classes[0].speedup.value(6.0))
    assert run.jobs["response_time_s"].to_numpy()[0] == pytest.approx(expected, rel=1e-12)
    for name in ("wham", "greedy"):
        alone = Engine(spec, allocator=registry.create("allocator", name)).run()  # type: ignore[arg-type]
        assert alone.jobs["response_time_s"].to_numpy()[0] == pytest.approx(expected, rel=1e-9)
