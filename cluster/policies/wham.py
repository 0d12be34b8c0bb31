"""Malleable core allocators of "Mean field optimal Core Allocation across Malleable jobs"
(the WHAM paper; docs/wham.md): WHAM (Definition 6.9), FW-CAM (Definition 5.1) and the
GREEDY baseline of Section 7 (EQUI lives in `clusteremu.cluster.policies.fifo`).

WHAM, at every event in a pool of n cores holding N jobs:
  * N > n (first mode): one core each to the n jobs with the largest c_i / (remaining
    size) (Theorem 6.8); the others wait. Sizes must be known to the policy here.
  * otherwise (second mode): the market-clearing price nu, the smallest at which
    sum_j max(1, f_{i(j)}^{-1}(nu)) <= n, with f_i of Definition 6.6 (eq. 10,
    `clusteremu.cluster.policies.relaxed_bound.f_value`); every class-i job gets max(1,
    f_i^{-1}(nu)).
    All jobs of a class get the same width, so the price is found by bisection on
    log nu over the classes present (their job counts as weights), never over jobs;
    all n cores are used whenever some job can use more (widths are capped at n).
FW-CAM: problem (3) solved with the budget n' = n - n^(1-delta) (sub-Halfin-Whitt back-off,
delta = 1/3 by default, our choice) for widths k_i; class i owns a pool n_i = rho_i n / n'
(rho_i its effective load in cores) and runs at most floor(n_i / k_i) jobs at k_i cores each,
FCFS within the class; idle pool cores are never lent to other classes.
GREEDY (Berg et al. 2017): maximise sum_j s_{i(j)}(k_j), i.e. equalise s_i'(k) across jobs
(k_j = max(1, s_i'^{-1}(nu)), sum = n); with N > n, one core each to the n earliest.

Each allocator has a compiled decision function (called inside the engine's loop through
`clusteremu.cluster.policies.compiled_table`) and a Python one; both follow the same arithmetic.
This module must not import `clusteremu.cluster.policies.compiled` (which imports it).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
from numba import njit

from clusteremu.cluster.layout import CF, CI, JF, JI
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import Allocation, Allocator, FloatArray, PoolView
from clusteremu.cluster.policies.compiled_table import AllocatorView, compiled_allocator
from clusteremu.cluster.policies.registry import register
from clusteremu.cluster.policies.relaxed_bound import (
    LOG_PRICE_HI,
    LOG_PRICE_LO,
    BoundError,
    class_loads,
    solve_relaxed,
)
from clusteremu.cluster.speedup import AMDAHL, LINEAR, POWER, ROOFTOP, SMOOTH_ROOFTOP, TABLE
from clusteremu.cluster.state import class_arrays

log = logging.getLogger(__name__)

#: Slack on "N > n" and on server counts (cores).
CORE_EPS = 1e-9
#: Stop bisecting once the log-price bracket is this narrow.
LOG_PRICE_TOL = 1e-13
#: Most false-position steps per price search (bisection alone would need about 50).
MAX_ROOT_STEPS = 200
#: Offset of the job counts per class in a `clear_widths` workspace (after m).
W_COUNTS = 1


# --- compiled decision functions -----------------------------------------------------------


@njit(cache=True)
def class_width(
    c: int,
    price: float,
    cap: float,
    greedy: bool,
    classes_f: np.ndarray,
    classes_i: np.ndarray,
    class_tx: np.ndarray,
    class_ty: np.ndarray,
) -> float:
    """Cores for one class-c job at price nu, in [1, cap].

    WHAM: max(1, f_c^{-1}(nu)) (Definition 6.6); GREEDY: max(1, s_c'^{-1}(nu)).
    Mirrors `relaxed_bound.f_inverse` / `marginal_inverse` operation for operation.
    """
    kind = classes_i[CI.SP_KIND, c]
    a = classes_f[CF.SP_PARAM, c]
    h = classes_f[CF.HOLDING_COST, c]
    w = math.inf
    if kind == POWER:
        if a < 1.0:
            w = (price / a) ** (1.0 / (a - 1.0)) if greedy else h * a / ((1.0 - a) * price)
        elif greedy and price >= 1.0:
            w = 1.0
    elif kind == AMDAHL:
        if a < 1.0:
            w = (
                (math.sqrt(a / price) - a) / (1.0 - a)
                if greedy
                else math.sqrt(h * a / ((1.0 - a) * price))
            )
        elif greedy and price >= 1.0:
            w = 1.0
    elif kind == LINEAR:
        if greedy and price >= 1.0:
            w = 1.0
    elif kind == ROOFTOP:
        w = 1.0 if (greedy and price >= 1.0) else a
    elif kind == SMOOTH_ROOFTOP:
        q = classes_f[CF.SP_PARAM2, c]
        if greedy:
            g1 = (1.0 + a**-q) ** (-1.0 / q)
            t = (price * g1) ** (-q / (q + 1.0)) - 1.0
            w = a * t ** (1.0 / q) if t > 0.0 else 1.0
        else:
            w = (h * a**q / price) ** (1.0 / (q + 1.0))
    elif kind == TABLE:
        npts = classes_i[CI.SP_NPTS, c]
        w = class_tx[c, npts - 1]
        for s in range(npts - 1):
            x0, x1 = class_tx[c, s], class_tx[c, s + 1]
            y0, y1 = class_ty[c, s], class_ty[c, s + 1]
            slope = (y1 - y0) / (x1 - x0)
            if greedy:
                level = slope
            else:
                intercept = y0 - slope * x0
                if slope <= 0.0:
                    level = 0.0
                elif intercept > 1e-12:
                    level = h * slope / max(intercept, 1e-300)
                else:
                    level = math.inf
            if level <= price:
                w = x0
                break
    if w != w:  # nan
        w = 1.0
    return min(max(w, 1.0), cap)


@njit(cache=True)
def _class_usage(
    work: np.ndarray,
    m: int,
    into: int,
    price: float,
    cap: float,
    greedy: bool,
    classes_f: np.ndarray,
    classes_i: np.ndarray,
    class_tx: np.ndarray,
    class_ty: np.ndarray,
) -> float:
    """Write the widths at `price` to work[into + c] and return sum_c counts_c * width_c."""
    total = 0.0
    for c in range(m):
        if work[W_COUNTS + c] > 0:
            w = class_width(c, price, cap, greedy, classes_f, classes_i, class_tx, class_ty)
            work[into + c] = w
            total += work[W_COUNTS + c] * w
    return total


@njit(cache=True)
def _copy_widths(work: np.ndarray, m: int, src: int, dst: int) -> None:
    for c in range(m):
        work[dst + c] = work[src + c]


@njit(cache=True)
def _closed_form_width(a_coef: float, amdahl: bool, x: float, cap: float) -> float:
    """WHAM width at x = nu^(-1/2): A x^2 (power) or sqrt(B) x (Amdahl), clipped to [1, cap]."""
    w = a_coef * x if amdahl else a_coef * x * x
    return min(max(w, 1.0), cap)


@njit(cache=True)
def _clear_closed_form(
    work: np.ndarray, budget: float, classes_f: np.ndarray, classes_i: np.ndarray
) -> float:
    """WHAM's price in closed form when every class present is power or Amdahl (a, p < 1).

    With x = nu^(-1/2), f^{-1} is A x^2 for power (A = c a / (1 - a)) and sqrt(B) x for
    Amdahl (B = c p / (1 - p)); clipped to [1, cap] the total is a continuous, increasing,
    piecewise quadratic in x with at most 2m breakpoints. The piece holding the budget is
    found without sorting (O(m^2)) and solved exactly. Returns the price, or -1 when some
    class present has another curve (the caller then searches numerically).
    """
    m = int(work[0])
    hi_at, mid_at = W_COUNTS + 2 * m, W_COUNTS + 3 * m
    # work[mid_at + c] holds the coefficient (A or sqrt(B)); its kind is read again below.
    for c in range(m):
        if work[W_COUNTS + c] > 0:
            kind = classes_i[CI.SP_KIND, c]
            a = classes_f[CF.SP_PARAM, c]
            h = classes_f[CF.HOLDING_COST, c]
            if kind == POWER and 0.0 < a < 1.0:
                work[mid_at + c] = h * a / (1.0 - a)
            elif kind == AMDAHL and 0.0 < a < 1.0:
                work[mid_at + c] = math.sqrt(h * a / (1.0 - a))
            else:
                return -1.0
    cap = budget
    # The smallest breakpoint at which the total reaches the budget.
    x_hi = math.inf
    x_top = 0.0
    for c in range(m):
        if work[W_COUNTS + c] <= 0:
            continue
        amdahl = classes_i[CI.SP_KIND, c] == AMDAHL
        coef = work[mid_at + c]
        for end in range(2):
            target = 1.0 if end == 0 else cap
            x = target / coef if amdahl else math.sqrt(target / coef)
            x_top = max(x_top, x)
            if x >= x_hi:
                continue
            total = 0.0
            for d in range(m):
                if work[W_COUNTS + d] > 0:
                    total += work[W_COUNTS + d] * _closed_form_width(
                        work[mid_at + d], classes_i[CI.SP_KIND, d] == AMDAHL, x, cap
                    )
            if total >= budget:
                x_hi = x
    if x_hi == math.inf:  # every class at the cap still leaves cores over: nu = 0
        for c in range(m):
            if work[W_COUNTS + c] > 0:
                work[hi_at + c] = cap
        return 0.0
    # The piece below x_hi: its lower end is the largest breakpoint under x_hi.
    x_lo = 0.0
    for c in range(m):
        if work[W_COUNTS + c] <= 0:
            continue
        amdahl = classes_i[CI.SP_KIND, c] == AMDAHL
        coef = work[mid_at + c]
        for end in range(2):
            target = 1.0 if end == 0 else cap
            x = target / coef if amdahl else math.sqrt(target / coef)
            if x_lo < x < x_hi:
                x_lo = x
    mid = 0.5 * (x_lo + x_hi)
    quad, lin, const = 0.0, 0.0, 0.0
    for c in range(m):
        n_c = work[W_COUNTS + c]
        if n_c <= 0:
            continue
        amdahl = classes_i[CI.SP_KIND, c] == AMDAHL
        coef = work[mid_at + c]
        raw = coef * mid if amdahl else coef * mid * mid
        if raw <= 1.0:
            const += n_c
        elif raw >= cap:
            const += n_c * cap
        elif amdahl:
            lin += n_c * coef
        else:
            quad += n_c * coef
    rest = budget - const
    if rest <= 0.0:
        x_star = x_lo
    elif quad > 0.0:
        x_star = 2.0 * rest / (lin + math.sqrt(lin * lin + 4.0 * quad * rest))
    elif lin > 0.0:
        x_star = rest / lin
    else:
        x_star = x_hi
    x_star = min(max(x_star, x_lo), x_hi)
    for c in range(m):
        if work[W_COUNTS + c] > 0:
            work[hi_at + c] = _closed_form_width(
                work[mid_at + c], classes_i[CI.SP_KIND, c] == AMDAHL, x_star, cap
            )
    return math.inf if x_star <= 0.0 else 1.0 / (x_star * x_star)


@njit(cache=True)
def clear_widths(
    work: np.ndarray,
    budget: float,
    greedy: bool,
    classes_f: np.ndarray,
    classes_i: np.ndarray,
    class_tx: np.ndarray,
    class_ty: np.ndarray,
) -> float:
    """Per-class widths at the smallest price whose total sum_c counts_c w_c fits `budget`.

    `work` is a workspace of 1 + 4m floats (`workspace(m)`): work[0] = m, then the job counts
    per class (input), and three width vectors; the answer is left in
    work[W_COUNTS + 2m : W_COUNTS + 3m] (`widths_of(work)`); returns the price nu. No array
    is allocated (the engine's loop runs without numba's reference-counting runtime).

    The total is non-increasing in u = log nu; its root is found by the Illinois variant of
    false position on [LOG_PRICE_LO, LOG_PRICE_HI] (superlinear on the smooth closed forms,
    a few iterations per event; bracketing, so it also converges on step functions). Above
    LOG_PRICE_HI every job holds one core (nu = +inf): perfectly elastic classes (linear,
    rooftop below its cap) want every core at any finite price, so they share what the
    others leave. Where the total jumps across the final bracket (step functions), widths
    move linearly between the bracket's two width vectors so the budget is used exactly; on
    smooth curves this last step moves widths by ~1e-12 at most.
    """
    m = int(work[0])
    lo_at, hi_at, mid_at = W_COUNTS + m, W_COUNTS + 2 * m, W_COUNTS + 3 * m
    n_jobs = 0.0
    for c in range(m):
        work[lo_at + c] = 1.0
        work[hi_at + c] = 1.0
        n_jobs += work[W_COUNTS + c]
    lo, hi = LOG_PRICE_LO, LOG_PRICE_HI
    s_lo = _class_usage(
        work, m, lo_at, math.exp(lo), budget, greedy, classes_f, classes_i, class_tx, class_ty
    )
    if s_lo <= budget:
        _copy_widths(work, m, lo_at, hi_at)
        return 0.0
    s_hi = _class_usage(
        work, m, hi_at, math.exp(hi), budget, greedy, classes_f, classes_i, class_tx, class_ty
    )
    price = math.exp(hi)
    tol = 1e-12 * max(budget, 1.0)
    if s_hi > budget:  # only nu = +inf (one core each) fits
        s_lo, s_hi, price = s_hi, n_jobs, math.inf
        _copy_widths(work, m, hi_at, lo_at)
        for c in range(m):
            work[hi_at + c] = 1.0
    else:
        g_lo, g_hi = s_lo - budget, s_hi - budget
        side = 0
        for _ in range(MAX_ROOT_STEPS):
            u = (lo * g_hi - hi * g_lo) / (g_hi - g_lo)
            if not (lo < u < hi):
                u = 0.5 * (lo + hi)
            s = _class_usage(
                work,
                m,
                mid_at,
                math.exp(u),
                budget,
                greedy,
                classes_f,
                classes_i,
                class_tx,
                class_ty,
            )
            if s <= budget:
                hi, s_hi, g_hi = u, s, s - budget
                _copy_widths(work, m, mid_at, hi_at)
                if side == -1:
                    g_lo *= 0.5
                side = -1
            else:
                lo, s_lo, g_lo = u, s, s - budget
                _copy_widths(work, m, mid_at, lo_at)
                if side == 1:
                    g_hi *= 0.5
                side = 1
            if hi - lo < LOG_PRICE_TOL or budget - s_hi <= tol:
                break
        price = math.exp(hi)
    if s_lo - s_hi > tol and budget - s_hi > tol:
        theta = (budget - s_hi) / (s_lo - s_hi)
        for c in range(m):
            w = work[hi_at + c]
            work[hi_at + c] = w + theta * (work[lo_at + c] - w)
    return price


@njit(cache=True)
def _count_classes(work: np.ndarray, members: np.ndarray, n: int, jobs_i: np.ndarray) -> None:
    m = int(work[0])
    for c in range(m):
        work[W_COUNTS + c] = 0.0
    for i in range(n):
        work[W_COUNTS + jobs_i[JI.CLS, members[i]]] += 1.0


@njit(cache=True)
def _before(a: int, b: int, jobs_f: np.ndarray, jobs_i: np.ndarray, classes_f: np.ndarray) -> bool:
    """WHAM's first-mode order: larger c / (remaining size) first, then earlier arrival."""
    ka = classes_f[CF.HOLDING_COST, jobs_i[JI.CLS, a]] / max(jobs_f[JF.REM, a], 1e-300)
    kb = classes_f[CF.HOLDING_COST, jobs_i[JI.CLS, b]] / max(jobs_f[JF.REM, b], 1e-300)
    return ka > kb or (ka == kb and a < b)


@njit(cache=True)
def _sift_down(
    members: np.ndarray,
    start: int,
    end: int,
    jobs_f: np.ndarray,
    jobs_i: np.ndarray,
    classes_f: np.ndarray,
) -> None:
    root = start
    while 2 * root + 1 < end:
        child = 2 * root + 1
        if child + 1 < end and _before(
            members[child], members[child + 1], jobs_f, jobs_i, classes_f
        ):
            child += 1
        if _before(members[root], members[child], jobs_f, jobs_i, classes_f):
            members[root], members[child] = members[child], members[root]
            root = child
        else:
            return


@njit(cache=True)
def _sort_by_index(
    members: np.ndarray, n: int, jobs_f: np.ndarray, jobs_i: np.ndarray, classes_f: np.ndarray
) -> None:
    """Heap sort of members[:n] in place, highest c / remaining first (job ids break ties)."""
    for start in range(n // 2 - 1, -1, -1):
        _sift_down(members, start, n, jobs_f, jobs_i, classes_f)
    for end in range(n - 1, 0, -1):
        members[0], members[end] = members[end], members[0]
        _sift_down(members, 0, end, jobs_f, jobs_i, classes_f)


@compiled_allocator
def allocate_wham(
    members: np.ndarray,
    n: int,
    pool_cores: float,
    now_s: float,
    view: AllocatorView,
    cores: np.ndarray,
) -> None:
    """WHAM (Definition 6.9) for the first n jobs of `members` (arrival order).

    `view.params` is the workspace of `clear_widths`. In the first mode members[:n] is
    reordered in place (the engine rebuilds it before every decision).
    """
    params, jobs_f, jobs_i = view.params, view.jobs_f, view.jobs_i
    classes_f, classes_i = view.classes_f, view.classes_i
    slots = int(math.floor(pool_cores + CORE_EPS))
    if n > slots:
        _sort_by_index(members, n, jobs_f, jobs_i, classes_f)
        for r in range(n):
            cores[members[r]] = 1.0 if r < slots else 0.0
        return
    _count_classes(params, members, n, jobs_i)
    if _clear_closed_form(params, pool_cores, classes_f, classes_i) < 0.0:
        clear_widths(params, pool_cores, False, classes_f, classes_i, view.class_tx, view.class_ty)
    at = W_COUNTS + 2 * int(params[0])
    for i in range(n):
        j = members[i]
        cores[j] = params[at + jobs_i[JI.CLS, j]]


@compiled_allocator
def allocate_greedy(
    members: np.ndarray,
    n: int,
    pool_cores: float,
    now_s: float,
    view: AllocatorView,
    cores: np.ndarray,
) -> None:
    """GREEDY: equalise s'(k) across jobs; with more jobs than cores, the earliest get one."""
    params, jobs_i = view.params, view.jobs_i
    slots = int(math.floor(pool_cores + CORE_EPS))
    if n > slots:
        for i in range(n):
            cores[members[i]] = 1.0 if i < slots else 0.0
        return
    _count_classes(params, members, n, jobs_i)
    clear_widths(
        params, pool_cores, True, view.classes_f, view.classes_i, view.class_tx, view.class_ty
    )
    at = W_COUNTS + 2 * int(params[0])
    for i in range(n):
        j = members[i]
        cores[j] = params[at + jobs_i[JI.CLS, j]]


@compiled_allocator
def allocate_fw_cam(
    members: np.ndarray,
    n: int,
    pool_cores: float,
    now_s: float,
    view: AllocatorView,
    cores: np.ndarray,
) -> None:
    """FW-CAM: per class, the earliest `servers[c]` jobs run at `width[c]` cores, FCFS.

    view.params = [m, servers_0 .. servers_{m-1}, width_0 .. width_{m-1}, m counters].
    """
    params = view.params
    m = int(params[0])
    run_at = 1 + 2 * m
    for c in range(m):
        params[run_at + c] = 0.0
    for i in range(n):
        j = members[i]
        c = view.job_class[j]
        if params[run_at + c] < params[1 + c]:
            cores[j] = params[1 + m + c]
            params[run_at + c] += 1.0
        else:
            cores[j] = 0.0


def workspace(m: int) -> FloatArray:
    """A `clear_widths` workspace for m classes: [m, counts, three width vectors]."""
    work = np.zeros(W_COUNTS + 4 * m)
    work[0] = m
    return work


def widths_of(work: FloatArray) -> FloatArray:
    """The widths per class left in a workspace by `clear_widths` (a copy)."""
    m = int(work[0])
    return np.array(work[W_COUNTS + 2 * m : W_COUNTS + 3 * m])


# --- Python decision functions ---------------------------------------------------------------


class _PriceClearing(Allocator):
    """Shared Python path of WHAM and GREEDY: the second mode clears a price per class.

    The price search is the compiled `clear_widths` (the same arithmetic as the compiled
    path, so both paths give identical runs); it is checked against the independent
    Speedup-object implementation in `relaxed_bound` by the tests.
    """

    greedy = False

    def __init__(self) -> None:
        self.arrays: tuple[np.ndarray, ...] = ()
        self.work = workspace(0)

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        self.arrays = class_arrays(spec)
        self.work = workspace(len(spec.classes))

    def kernel_params(self) -> FloatArray:
        return self.work.copy()

    def class_widths(self, view: PoolView) -> tuple[FloatArray, float]:
        """Second-mode widths per class index (all classes of the scenario) and the price."""
        classes_f, classes_i, tx, ty = self.arrays
        m = classes_f.shape[1]
        work = workspace(m)
        work[W_COUNTS : W_COUNTS + m] = np.bincount(view.class_index, minlength=m)
        price = (
            -1.0
            if self.greedy
            else _clear_closed_form(work, float(view.cores), classes_f, classes_i)
        )
        if price < 0.0:
            price = clear_widths(work, float(view.cores), self.greedy, classes_f, classes_i, tx, ty)
        return widths_of(work), float(price)

    def _mode_two(self, view: PoolView) -> FloatArray:
        widths, _ = self.class_widths(view)
        return np.asarray(widths[view.class_index], dtype=np.float64)


@register("allocator", "wham")
class Wham(_PriceClearing):
    """WHAM: Whittle allocation for malleable jobs (Definition 6.9); knows remaining sizes."""

    compiled = allocate_wham

    def allocate(self, view: PoolView) -> Allocation:
        n = view.job_ids.size
        if n == 0:
            return Allocation(np.zeros(0))
        slots = int(math.floor(view.cores + CORE_EPS))
        if n > slots:
            keys = -view.holding_cost / np.maximum(view.remaining, 1e-300)
            order = np.argsort(keys, kind="stable")
            cores = np.zeros(n)
            cores[order[:slots]] = 1.0
            return Allocation(cores)
        return Allocation(self._mode_two(view))


@register("allocator", "greedy")
class Greedy(_PriceClearing):
    """GREEDY: maximise the total rate of inherent work, sum_j s(k_j) (equal marginal s')."""

    compiled = allocate_greedy
    greedy = True

    def allocate(self, view: PoolView) -> Allocation:
        n = view.job_ids.size
        if n == 0:
            return Allocation(np.zeros(0))
        slots = int(math.floor(view.cores + CORE_EPS))
        if n > slots:
            return Allocation(np.where(np.arange(n) < slots, 1.0, 0.0))
        return Allocation(self._mode_two(view))


@register("allocator", "fw-cam")
class FwCam(Allocator):
    """FW-CAM (Definition 5.1): fixed widths from problem (3) with budget n - n^(1-delta).

    `delta` in (0, 1/2) sets the back-off; the paper's value was lost, 1/3 is our default.
    Server counts are floor(n_i / k_i); a class whose pool holds less than one width still
    runs one job (at its whole pool, at least one core), and if the servers then need more
    than n cores the class with the most servers gives one up until they fit.
    """

    compiled = allocate_fw_cam

    def __init__(self, delta: float = 1.0 / 3.0) -> None:
        if not 0.0 < float(delta) < 1.0:
            raise ValueError(f"fw-cam delta must lie in (0, 1), got {delta}")
        self.delta = float(delta)
        self.servers = np.zeros(0)
        self.widths = np.zeros(0)
        self.class_pools = np.zeros(0)

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        m = len(spec.classes)
        self.servers = np.zeros(m)
        self.widths = np.ones(m)
        self.class_pools = np.zeros(m)
        for pool in spec.pools:
            index = [i for i, jc in enumerate(spec.classes) if jc.pool == pool.name]
            if not index:
                continue
            servers, widths, shares = self.plan(spec, pool.name, pool.cores)
            self.servers[index], self.widths[index], self.class_pools[index] = (
                servers,
                widths,
                shares,
            )

    def plan(
        self, spec: SimulationSpec, pool: str, cores: float
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(servers, width, pool share n_i) per class of `pool` for a pool of `cores` cores."""
        loads = class_loads(spec, pool)
        inherent = np.array([cl.inherent_load for cl in loads])
        budget = cores - cores ** (1.0 - self.delta)
        if budget > inherent.sum():
            sol = solve_relaxed(loads, budget, max_width=cores)
            widths, rho = sol.widths.copy(), sol.effective_load
        else:
            log.info(
                "fw-cam: n' = %.4g <= inherent load %.4g on pool %s: widths of one core",
                budget,
                inherent.sum(),
                pool,
            )
            widths, rho = np.ones(len(loads)), inherent
        shares = rho * cores / rho.sum()
        servers = np.floor(shares / widths + CORE_EPS)
        small = servers < 1.0
        servers[small] = 1.0
        widths[small] = np.maximum(1.0, shares[small])
        while float(np.dot(servers, widths)) > cores + CORE_EPS and servers.max() > 1.0:
            servers[int(np.argmax(servers))] -= 1.0
        if float(np.dot(servers, widths)) > cores + CORE_EPS:
            raise BoundError(
                "cluster.pools",
                f"fw-cam cannot run one job of every class in pool {pool!r} of {cores:g} cores",
            )
        return servers, widths, shares

    def kernel_params(self) -> FloatArray:
        m = self.servers.size
        return np.concatenate([[float(m)], self.servers, self.widths, np.zeros(m)])

    def allocate(self, view: PoolView) -> Allocation:
        n = view.job_ids.size
        cores = np.zeros(n)
        if n == 0:
            return Allocation(cores)
        # Rank of each job among the jobs of its class, in arrival order (view order).
        order = np.argsort(view.class_index, kind="stable")
        sorted_cls = view.class_index[order]
        starts = np.searchsorted(sorted_cls, sorted_cls, side="left")
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n) - starts
        run = rank < self.servers[view.class_index]
        cores[run] = self.widths[view.class_index[run]]
        return Allocation(cores)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "delta": self.delta,
            "servers": self.servers.tolist(),
            "widths": self.widths.tolist(),
        }
