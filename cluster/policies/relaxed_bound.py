"""The relaxed fixed-width problem (3) of "Mean field optimal Core Allocation across
Malleable jobs" (the WHAM paper), its KKT solution, the function f_i of Definition 6.6 and its
inverse, and the mean-field lower bound on the normalised time-average holding cost.

Notation (docs/wham.md): class i has arrival rate lambda_i (jobs/s), mean size E[X_i]
(core-seconds at speed 1), holding cost c_i (cost units per job-second) and speed-up s_i(k)
on k cores. Problem (3):

    minimise   (1/n) sum_i c_i lambda_i E[X_i] / s_i(k_i)
    subject to sum_i lambda_i E[X_i] k_i / s_i(k_i) <= n,  k_i >= 1.

It is convex after u_i = 1/s_i(k_i). With multiplier nu (cost units per core-second) every
class takes k_i(nu) = max(1, f_i^{-1}(nu)) where (Definition 6.6, Lemma G.1)

    f_i(k) = c_i s_i'(k) / (s_i(k) - k s_i'(k))

is strictly decreasing in k; nu is the smallest price at which the effective load
sum_i lambda_i E[X_i] k_i / s_i(k_i) fits in n cores (bisection on log nu). Curves whose f
is a step function (tabulated hulls, rooftops) leave the classes at a jump indifferent
between the two ends of a segment; the tight constraint is then met by moving them along
the segment (every point of it is optimal for the Lagrangian), so the KKT point stays exact.

Widths never exceed `max_cores` (the pool: no job can hold more cores than exist), which
keeps perfectly elastic curves (linear, rooftop below its cap) finite; this restriction is
also satisfied by every real policy, so the optimum stays a lower bound.

The same f_i, evaluated at one job's width, is what WHAM equalises across jobs
(`clusteremu.cluster.policies.wham`); `marginal_inverse` is GREEDY's s_i'^{-1}.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.speedup import (
    AmdahlSpeedup,
    LinearSpeedup,
    PowerSpeedup,
    RooftopSpeedup,
    SmoothRooftopSpeedup,
    Speedup,
    TableSpeedup,
)

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]

#: Bisection range of log(price) and the number of halvings (shared with the compiled path).
LOG_PRICE_LO, LOG_PRICE_HI, BISECTION_STEPS = -60.0, 60.0, 100


class BoundError(ValueError):
    """The relaxed problem has no solution (unstable load, bad class parameters).

    `field` names the offending scenario field (e.g. `workload.classes`), for the CLI.
    """

    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem
        super().__init__(f"{field}: {problem}")


@dataclass(frozen=True)
class ClassLoad:
    """One job class as the relaxed problem sees it."""

    name: str
    arrival_rate_per_s: float
    mean_size: float
    holding_cost: float
    speedup: Speedup

    @property
    def inherent_load(self) -> float:
        """lambda_i E[X_i]: busy cores the class needs at one core per job."""
        return self.arrival_rate_per_s * self.mean_size


@dataclass(frozen=True)
class RelaxedSolution:
    """Optimum of problem (3) for `cores` cores.

    `widths[i]` is k_i (cores per class-i job), `price` the multiplier nu (0 when the core
    budget is slack), `effective_load[i]` = lambda_i E[X_i] k_i / s_i(k_i) in cores, and
    `lower_bound` the normalised time-average holding cost (1/n) sum_i c_i lambda_i E[T_i].
    """

    names: tuple[str, ...]
    widths: FloatArray
    price: float
    effective_load: FloatArray
    lower_bound: float
    cores: float

    def widths_by_name(self) -> dict[str, float]:
        return {n: float(w) for n, w in zip(self.names, self.widths, strict=True)}


# --- f_i and its inverse -----------------------------------------------------------------


def f_value(speedup: Speedup, holding_cost: float, cores: npt.ArrayLike) -> FloatArray:
    """f_i(k) = c s'(k) / (s(k) - k s'(k)) for k >= 1 (right derivative at 1 and breakpoints).

    Units: cost per core-second. +inf where the curve is locally linear through the origin
    (perfectly elastic), 0 where it is flat.
    """
    k = np.maximum(np.asarray(cores, dtype=np.float64), 1.0)
    s = speedup.value(k)
    ds = speedup.derivative(k)
    denom = s - k * ds
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(denom > 1e-12 * s, holding_cost * ds / np.maximum(denom, 1e-300), np.inf)
    return np.where(ds <= 0.0, 0.0, out)


def _segments(speedup: TableSpeedup) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Breakpoints, slopes and intercepts of a tabulated hull's segments (k >= 1)."""
    hx = np.asarray(speedup.hull_cores)
    hy = np.asarray(speedup.hull_speedups)
    slopes = np.diff(hy) / np.diff(hx)
    intercepts = hy[:-1] - slopes * hx[:-1]
    return hx, slopes, intercepts


def _step_inverse(breaks: FloatArray, level: FloatArray, price: FloatArray) -> FloatArray:
    """Inverse of a non-increasing step function: level[j] on [breaks[j], breaks[j+1]).

    Returns the first breakpoint whose segment level is <= price (the last breakpoint,
    where the curve turns flat, when there is none).
    """
    price = np.asarray(price, dtype=np.float64)
    ok = level[None, :] <= price.reshape(-1, 1)
    first = np.where(ok.any(axis=1), ok.argmax(axis=1), level.size)
    return breaks[first].reshape(price.shape)


def _generic_inverse(
    func: Callable[[FloatArray], FloatArray], price: FloatArray, max_cores: float
) -> FloatArray:
    """Largest k in [1, max_cores] with func(k) >= price for a non-increasing func."""
    lo = np.zeros(price.shape)
    hi = np.full(price.shape, math.log(max_cores))
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        above = func(np.exp(mid)) >= price
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    return np.exp(lo)


def f_inverse(
    speedup: Speedup, holding_cost: float, price: npt.ArrayLike, max_cores: float = math.inf
) -> FloatArray:
    """Width k_i(nu) = max(1, f_i^{-1}(nu)), capped at `max_cores` (cores per job).

    Closed forms (docs/wham.md): power k^a -> c a / ((1 - a) nu);
    Amdahl -> sqrt(c p / ((1 - p) nu)); smooth rooftop (f = c m^q / k^(q+1)) ->
    (c m^q / nu)^(1/(q+1)).
    Rooftop: its cap; linear: `max_cores`; tabulated hull: the breakpoint where the step
    function f crosses nu; anything else: bisection on log k.
    """
    nu = np.asarray(price, dtype=np.float64)
    c = holding_cost
    cap = max_cores
    with np.errstate(divide="ignore", invalid="ignore"):
        if isinstance(speedup, PowerSpeedup):
            a = speedup.exponent
            raw = np.full(nu.shape, np.inf) if a >= 1.0 else c * a / ((1.0 - a) * nu)
        elif isinstance(speedup, AmdahlSpeedup):
            p = speedup.parallel_fraction
            raw = np.full(nu.shape, np.inf) if p >= 1.0 else np.sqrt(c * p / ((1.0 - p) * nu))
        elif isinstance(speedup, LinearSpeedup):
            raw = np.full(nu.shape, np.inf)
        elif isinstance(speedup, RooftopSpeedup):
            raw = np.full(nu.shape, speedup.max_cores)
        elif isinstance(speedup, SmoothRooftopSpeedup):
            m, q = speedup.max_cores, speedup.sharpness
            raw = (c * m**q / nu) ** (1.0 / (q + 1.0))
        elif isinstance(speedup, TableSpeedup):
            hx, slopes, intercepts = _segments(speedup)
            level = np.where(
                intercepts > 1e-12, c * slopes / np.maximum(intercepts, 1e-300), np.inf
            )
            level = np.where(slopes <= 0.0, 0.0, level)
            raw = _step_inverse(hx, level, nu)
        else:
            if not math.isfinite(cap):
                raise BoundError("speedup", "a generic speed-up curve needs a finite max_cores")
            raw = _generic_inverse(lambda k: f_value(speedup, c, k), nu, cap)
    return np.clip(np.nan_to_num(raw, nan=1.0, posinf=np.inf), 1.0, cap)


def marginal_inverse(
    speedup: Speedup, price: npt.ArrayLike, max_cores: float = math.inf
) -> FloatArray:
    """GREEDY's width max(1, s'^{-1}(nu)) capped at `max_cores`: cores where s'(k) = nu."""
    nu = np.asarray(price, dtype=np.float64)
    cap = max_cores
    with np.errstate(divide="ignore", invalid="ignore"):
        if isinstance(speedup, PowerSpeedup) and speedup.exponent < 1.0:
            a = speedup.exponent
            raw = (nu / a) ** (1.0 / (a - 1.0))
        elif isinstance(speedup, AmdahlSpeedup) and speedup.parallel_fraction < 1.0:
            p = speedup.parallel_fraction
            raw = (np.sqrt(p / nu) - p) / (1.0 - p)
        elif speedup.is_linear():
            raw = np.where(nu < 1.0, np.inf, 1.0)
        elif isinstance(speedup, RooftopSpeedup):
            raw = np.where(nu < 1.0, speedup.max_cores, 1.0)
        elif isinstance(speedup, SmoothRooftopSpeedup):
            m, q = speedup.max_cores, speedup.sharpness
            t = (nu * (1.0 + m**-q) ** (-1.0 / q)) ** (-q / (q + 1.0)) - 1.0
            raw = np.where(t > 0.0, m * np.maximum(t, 0.0) ** (1.0 / q), 1.0)
        elif isinstance(speedup, TableSpeedup):
            hx, slopes, _ = _segments(speedup)
            raw = _step_inverse(hx, slopes, nu)
        else:
            if not math.isfinite(cap):
                raise BoundError("speedup", "a generic speed-up curve needs a finite max_cores")
            raw = _generic_inverse(lambda k: speedup.derivative(k), nu, cap)
    return np.clip(np.nan_to_num(raw, nan=1.0, posinf=np.inf), 1.0, cap)


# --- market clearing ---------------------------------------------------------------------


def clear_market(
    width_at: Callable[[float], FloatArray],
    usage: Callable[[FloatArray], float],
    budget: float,
) -> tuple[FloatArray, float]:
    """Smallest price nu with usage(widths(nu)) <= budget, by bisection on log nu.

    `width_at(nu)` gives per-group widths (non-increasing in nu), `usage(widths)` the cores
    they use (non-decreasing in each width). Returns the widths and nu. Where usage jumps
    across the final bracket (step-function inverses), the widths are moved along the
    segment between the bracket's two width vectors until usage equals the budget, so the
    budget is used exactly whenever it can be. Returns nu = 0 when even the cheapest price
    leaves the budget slack.
    """
    lo, hi = LOG_PRICE_LO, LOG_PRICE_HI
    w_lo = width_at(math.exp(lo))
    if usage(w_lo) <= budget:
        return w_lo, 0.0
    w_hi = np.ones_like(w_lo)  # nu = +inf: one core each
    u_hi = usage(w_hi)
    if u_hi > budget:
        raise BoundError(
            "workload.classes",
            f"even one core per job needs {u_hi:.6g} cores, more than the {budget:.6g} available",
        )
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        w = width_at(math.exp(mid))
        if usage(w) <= budget:
            hi, w_hi = mid, w
        else:
            lo, w_lo = mid, w
        if hi - lo < 1e-13:
            break
    u_hi, u_lo = usage(w_hi), usage(w_lo)
    if u_lo - u_hi > 1e-12 * max(budget, 1.0) and budget - u_hi > 1e-12 * max(budget, 1.0):

        def gap(theta: float) -> float:
            return usage(w_hi + theta * (w_lo - w_hi)) - budget

        from scipy.optimize import brentq  # imported on use: it costs 0.3 s at start-up

        theta = brentq(gap, 0.0, 1.0, xtol=1e-15, rtol=4 * np.finfo(float).eps)
        w_hi = w_hi + theta * (w_lo - w_hi)
    return w_hi, math.exp(hi)


def solve_relaxed(
    classes: Sequence[ClassLoad], cores: float, max_width: float | None = None
) -> RelaxedSolution:
    """Solve problem (3) for `cores` cores by its KKT conditions.

    `max_width` caps every k_i (default: `cores`). Raises BoundError when the inherent load
    sum_i lambda_i E[X_i] reaches `cores` (no allocation is stable) or a parameter is invalid.
    """
    if not classes:
        raise BoundError("workload.classes", "expected at least one class")
    if not (cores > 0 and math.isfinite(cores)):
        raise BoundError("cluster.pools", f"expected a positive number of cores, got {cores}")
    for i, cl in enumerate(classes):
        where = f"workload.classes.{i}"
        if not cl.holding_cost > 0:
            raise BoundError(
                f"{where}.holding_cost", f"expected a positive holding cost, got {cl.holding_cost}"
            )
        if not (cl.arrival_rate_per_s > 0 and cl.mean_size > 0):
            raise BoundError(f"{where}.arrival", "expected a positive arrival rate and mean size")
    cap = float(cores if max_width is None else max_width)
    load = np.array([cl.inherent_load for cl in classes])
    if load.sum() >= cores:
        raise BoundError(
            "workload.classes",
            f"unstable under any allocation: the inherent load is {load.sum():.6g} "
            f"busy cores at one core per job (the most efficient width, s(k) <= k), "
            f"but there are {cores:g} cores",
        )

    def width_at(nu: float) -> FloatArray:
        return np.array([f_inverse(cl.speedup, cl.holding_cost, nu, cap) for cl in classes])

    def eff_load(widths: FloatArray) -> FloatArray:
        s = np.array([cl.speedup.value(w) for cl, w in zip(classes, widths, strict=True)])
        return load * widths / s

    widths, price = clear_market(width_at, lambda w: float(eff_load(w).sum()), cores)
    s = np.array([float(cl.speedup.value(w)) for cl, w in zip(classes, widths, strict=True)])
    cost = np.array([cl.holding_cost for cl in classes])
    bound = float(np.sum(cost * load / s) / cores)
    log.debug("relaxed problem: n=%g price=%g widths=%s bound=%g", cores, price, widths, bound)
    return RelaxedSolution(
        tuple(cl.name for cl in classes), widths, price, eff_load(widths), bound, float(cores)
    )


# --- from a scenario ---------------------------------------------------------------------


def class_loads(spec: SimulationSpec, pool: str) -> list[ClassLoad]:
    """The classes of `spec` that run in `pool`, with rates in jobs/s and sizes at speed 1.

    A pool of speed v serves work v times faster: sizes are divided by v.
    """
    speed = spec.pools[spec.pool_index(pool)].speed
    out = []
    for i, jc in enumerate(spec.classes):
        if jc.pool != pool:
            continue
        rate = jc.arrival.rate_per_s
        if rate is None:
            raise BoundError(
                f"workload.classes.{i}.arrival",
                "the lower bound needs an open arrival process with a rate "
                "(poisson or renewal), not a batch or a trace",
            )
        out.append(
            ClassLoad(jc.name, float(rate), jc.size.mean / speed, jc.holding_cost, jc.speedup)
        )
    return out


@dataclass(frozen=True)
class ScenarioBound:
    """The lower bound of a whole scenario: per-pool solutions, normalised by all pool cores."""

    lower_bound: float
    widths: dict[str, float]
    pools: dict[str, RelaxedSolution]


def scenario_bound(spec: SimulationSpec) -> ScenarioBound:
    """Lower bound on (1/n) sum_i c_i lambda_i E[T_i] over the malleable pools of `spec`.

    Pools are independent, so the bound is the sum of the pools' optima divided by the
    total pool cores. Classes placed on nodes are not covered (BoundError if all are).
    """
    pools: dict[str, RelaxedSolution] = {}
    for pool in spec.pools:
        loads = class_loads(spec, pool.name)
        if loads:
            pools[pool.name] = solve_relaxed(loads, pool.cores)
    if not pools:
        raise BoundError(
            "workload.classes", "the lower bound covers malleable pools; no class runs in a pool"
        )
    total = sum(p.cores for p in pools.values())
    bound = sum(p.lower_bound * p.cores for p in pools.values()) / total
    widths: dict[str, float] = {}
    for sol in pools.values():
        widths.update(sol.widths_by_name())
    return ScenarioBound(float(bound), widths, pools)
