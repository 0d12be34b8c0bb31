"""Average-cost relative value iteration for the core-allocation MDP (the MDP paper,
section 4, eqs. 4.1-4.7 and Algorithm 2; docs/mdp.md).

States (x1, x2) in {0..B}^2; action a in [0, 1] is class 1's share of the k cores (EQUI
within a class). Transition rates (4.1-4.4): class-j arrival lambda * p_j while x_j < B (a
blocked arrival is a self-loop), class-j departure r_j = mu x_j s(K_j / x_j; theta_j) with
K_1 = a k, K_2 = (1 - a) k. Uniformised with Lambda = lambda + mu k, cost x1 + x2 per step:
the uniformised chain has the CTMC's stationary law, so the average cost g is E[N1 + N2].

Relative value iteration: h_{n+1} = T h_n - (T h_n)(0, 0), stopped when
span(T h_n - h_n) < epsilon; g lies between min and max of T h_n - h_n. Actions are a grid
{0, 1/M, ..., 1}; optionally each state's grid minimum is refined by golden-section search on
[a_{i-1}, a_{i+1}] (the departure part r_1(a) d_1 + r_2(a) d_2 is convex in a because s is
concave and the value differences d_j = h(x - e_j) - h(x) are <= 0).

With m > 2 classes (the paper's section 6) the state is (x_1, ..., x_m) in {0..B}^m and the
actions are the share vectors n / M (non-negative integers summing to M); a general compiled
relative value iteration (`_relative_vi_general`, no refinement) solves it, and gives the
same g and policy as the two-class path for m = 2.

`evaluate_policy` solves the stationary law of the CTMC under any table exactly (sparse
linear solve), which gives E[N] and the blocking probability of a policy under given theta.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sps
import scipy.sparse.linalg as spla
from numba import njit

from clusteremu.cluster.policies.mdp.model import MdpModel, MdpModelError

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Golden ratio conjugate used by the golden-section refinement.
_INV_PHI = (math.sqrt(5.0) - 1.0) / 2.0


@dataclass(frozen=True)
class MdpSolution:
    """The optimal policy table and its average cost.

    Attributes:
        table: a(x1, x2), class 1's share of the cores, shape (B + 1, B + 1).
        average_cost: g, the optimal long-run mean number of jobs in system.
        relative_values: h(x1, x2) with h(0, 0) = 0.
        iterations: value-iteration sweeps performed.
        span: span(T h - h) at the stop (below the tolerance when converged).
        converged: whether the span rule was met within the sweep limit.
        shares: every class's share per state, shape (B + 1,) * m + (m,) (for two classes
            the last axis is (a, 1 - a); for m > 2 `table` is this array too).
    """

    table: FloatArray
    average_cost: float
    relative_values: FloatArray
    iterations: int
    span: float
    converged: bool
    shares: FloatArray


@dataclass(frozen=True)
class PolicyEvaluation:
    """Stationary performance of a policy table (exact, on the truncated chain).

    Attributes:
        mean_jobs: E[N_1 + ... + N_m].
        mean_jobs_per_class: (E[N_1], ..., E[N_m]).
        blocking_probability: share of arrivals that find their class at B and are lost.
        stationary: pi(x_1, ..., x_m), shape (B + 1,) * m.
    """

    mean_jobs: float
    mean_jobs_per_class: tuple[float, ...]
    blocking_probability: float
    stationary: FloatArray


def action_grid(actions: int) -> FloatArray:
    """{0, 1/M, ..., 1} for M = `actions`."""
    if isinstance(actions, bool) or int(actions) != actions or actions < 1:
        raise MdpModelError("actions", f"expected an integer M >= 1, got {actions!r}")
    return np.linspace(0.0, 1.0, int(actions) + 1)


@njit(cache=True)
def _amdahl(x: float, theta: float) -> float:
    if x <= 1.0:
        return x
    return 1.0 / ((1.0 - theta) + theta / x)


@njit(cache=True)
def _rate(x: int, cores: float, theta: float, mu: float) -> float:
    if x == 0:
        return 0.0
    return mu * x * _amdahl(cores / x, theta)


@njit(cache=True)
def _departure_part(
    a: float, x1: int, x2: int, k: float, th1: float, th2: float, mu: float, d1: float, d2: float
) -> float:
    return _rate(x1, a * k, th1, mu) * d1 + _rate(x2, (1.0 - a) * k, th2, mu) * d2


@njit(cache=True)
def _golden(
    lo: float,
    hi: float,
    x1: int,
    x2: int,
    k: float,
    th1: float,
    th2: float,
    mu: float,
    d1: float,
    d2: float,
    tol: float,
) -> tuple[float, float]:
    """Minimise the (convex) departure part over [lo, hi]; returns (argmin, min)."""
    c = hi - _INV_PHI * (hi - lo)
    d = lo + _INV_PHI * (hi - lo)
    fc = _departure_part(c, x1, x2, k, th1, th2, mu, d1, d2)
    fd = _departure_part(d, x1, x2, k, th1, th2, mu, d1, d2)
    while hi - lo > tol:
        if fc <= fd:
            hi, d, fd = d, c, fc
            c = hi - _INV_PHI * (hi - lo)
            fc = _departure_part(c, x1, x2, k, th1, th2, mu, d1, d2)
        else:
            lo, c, fc = c, d, fd
            d = lo + _INV_PHI * (hi - lo)
            fd = _departure_part(d, x1, x2, k, th1, th2, mu, d1, d2)
    if fc <= fd:
        return c, fc
    return d, fd


@njit(cache=True)
def _bellman(
    h: np.ndarray,
    out: np.ndarray,
    act: np.ndarray,
    grid: np.ndarray,
    r1: np.ndarray,
    r2: np.ndarray,
    lam1: float,
    lam2: float,
    big_lambda: float,
    k: float,
    th1: float,
    th2: float,
    mu: float,
    refine: bool,
) -> None:
    """out = T h (undiscounted, uniformised); act = the minimising action per state."""
    b = h.shape[0] - 1
    n_act = grid.shape[0]
    for x1 in range(b + 1):
        for x2 in range(b + 1):
            v = h[x1, x2]
            arr = 0.0
            if x1 < b:
                arr += lam1 * (h[x1 + 1, x2] - v)
            if x2 < b:
                arr += lam2 * (h[x1, x2 + 1] - v)
            d1 = h[x1 - 1, x2] - v if x1 > 0 else 0.0
            d2 = h[x1, x2 - 1] - v if x2 > 0 else 0.0
            best = math.inf
            arg = 0
            for i in range(n_act):
                q = r1[i, x1] * d1 + r2[i, x2] * d2
                if q < best:
                    best = q
                    arg = i
            a = grid[arg]
            if refine and x1 > 0 and x2 > 0:
                lo = grid[arg - 1] if arg > 0 else grid[0]
                hi = grid[arg + 1] if arg < n_act - 1 else grid[n_act - 1]
                a_r, q_r = _golden(lo, hi, x1, x2, k, th1, th2, mu, d1, d2, 1e-10)
                if q_r < best:
                    best = q_r
                    a = a_r
            out[x1, x2] = (x1 + x2) + v + (arr + best) / big_lambda
            act[x1, x2] = a


@njit(cache=True)
def _relative_vi(
    h: np.ndarray,
    grid: np.ndarray,
    r1: np.ndarray,
    r2: np.ndarray,
    lam1: float,
    lam2: float,
    big_lambda: float,
    k: float,
    th1: float,
    th2: float,
    mu: float,
    refine: bool,
    tol: float,
    max_iter: int,
) -> tuple[int, float, float, np.ndarray]:
    """Relative value iteration in place on h; returns (sweeps, span, g, table)."""
    b1 = h.shape[0]
    out = np.empty_like(h)
    act = np.empty_like(h)
    span = math.inf
    g = 0.0
    it = 0
    while it < max_iter:
        it += 1
        _bellman(h, out, act, grid, r1, r2, lam1, lam2, big_lambda, k, th1, th2, mu, refine)
        lo = math.inf
        hi = -math.inf
        for x1 in range(b1):
            for x2 in range(b1):
                diff = out[x1, x2] - h[x1, x2]
                lo = min(lo, diff)
                hi = max(hi, diff)
        span = hi - lo
        g = 0.5 * (lo + hi)
        ref = out[0, 0]
        for x1 in range(b1):
            for x2 in range(b1):
                h[x1, x2] = out[x1, x2] - ref
        if span < tol:
            break
    return it, span, g, act


def solve(
    model: MdpModel,
    actions: int = 100,
    refine: bool = False,
    tol: float = 1e-9,
    max_iter: int = 1_000_000,
    initial_values: npt.ArrayLike | None = None,
) -> MdpSolution:
    """Optimal policy table and average cost by relative value iteration (Algorithm 2).

    Args:
        model: the model (theta = the believed parameters), two or more classes.
        actions: M; with two classes the action grid is {0, 1/M, ..., 1}; with m classes the
            share vectors are the compositions n / M (n_j >= 0 integers summing to M).
        refine: refine each state's grid minimum by golden-section search (continuous a;
            two classes only).
        tol: epsilon of the span stopping rule (in jobs per uniformised step).
        max_iter: most sweeps; a warning is logged if the span rule is not met.
        initial_values: a starting h (e.g. the previous solution's relative values, which
            speeds up re-solving after a small change of theta); zeros by default.
    """
    if model.n_classes != 2:
        if refine:
            raise MdpModelError("refine", "golden-section refinement needs two classes")
        return _solve_general(model, actions, tol, max_iter, initial_values)
    grid = action_grid(actions)
    b = model.truncation
    k, mu = float(model.cores), float(model.service_rate_per_s)
    th1, th2 = model.theta
    x = np.arange(b + 1, dtype=np.float64)
    safe = np.maximum(x, 1.0)
    # r1[i, x1] and r2[i, x2]: class departure rates under action grid[i].
    r1 = np.where(x > 0, mu * x * _amdahl_vec(np.outer(grid, k / safe), th1), 0.0)
    r2 = np.where(x > 0, mu * x * _amdahl_vec(np.outer(1.0 - grid, k / safe), th2), 0.0)
    lam1, lam2 = (float(v) for v in model.class_rates_per_s)
    h = _start_values(initial_values, (b + 1, b + 1))
    it, span, g, act = _relative_vi(
        h,
        grid,
        r1,
        r2,
        lam1,
        lam2,
        model.uniformisation_rate,
        k,
        th1,
        th2,
        mu,
        refine,
        tol,
        max_iter,
    )
    converged = _report(it, span, tol)
    table = normalise_table(act)
    return MdpSolution(
        table, float(g), h, int(it), float(span), converged, np.stack([table, 1.0 - table], axis=-1)
    )


def _start_values(initial: npt.ArrayLike | None, shape: tuple[int, ...]) -> FloatArray:
    h = np.zeros(shape)
    if initial is not None:
        start = np.asarray(initial, dtype=np.float64)
        if start.shape == shape and np.all(np.isfinite(start)):
            h = start - start.flat[0]
    return h


def _report(it: int, span: float, tol: float) -> bool:
    converged = bool(span < tol)
    if not converged:
        log.warning("value iteration stopped after %d sweeps with span %.3g > %.3g", it, span, tol)
    return converged


# --- m classes ------------------------------------------------------------------------------


def share_grid(n_classes: int, actions: int) -> FloatArray:
    """All share vectors n / M with n_j >= 0 integers summing to M, shape (count, m)."""
    action_grid(actions)
    m, big_m = n_classes, int(actions)
    out: list[list[int]] = []

    def rec(prefix: list[int], left: int) -> None:
        if len(prefix) == m - 1:
            out.append(prefix + [left])
            return
        for v in range(left + 1):
            rec(prefix + [v], left - v)

    rec([], big_m)
    return np.asarray(out, dtype=np.float64) / big_m


def state_space(n_classes: int, truncation: int) -> IntArray:
    """Every state (x_1, ..., x_m) in {0..B}^m in row-major order, shape ((B+1)^m, m)."""
    axes = [np.arange(truncation + 1)] * n_classes
    grids = np.meshgrid(*axes, indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1).astype(np.int64)


def _neighbours(states: IntArray, truncation: int) -> tuple[IntArray, IntArray]:
    """Flat index of s + e_j (or -1 at B) and of s - e_j (or -1 at 0), shape (S, m)."""
    m = states.shape[1]
    stride = (truncation + 1) ** np.arange(m - 1, -1, -1)
    idx = states @ stride
    up = np.where(states < truncation, idx[:, None] + stride[None, :], -1)
    down = np.where(states > 0, idx[:, None] - stride[None, :], -1)
    return up.astype(np.int64), down.astype(np.int64)


def _class_rates(model: MdpModel, states: IntArray, shares: FloatArray) -> FloatArray:
    """r_j = mu x_j s(share_j k / x_j; theta_j); shares (..., S, m) -> rates (..., S, m)."""
    x = states.astype(np.float64)
    per_job = shares * model.cores / np.maximum(x, 1.0)
    theta = np.asarray(model.theta)
    above = 1.0 / ((1.0 - theta) + theta / np.maximum(per_job, 1.0))
    s = np.where(per_job <= 1.0, per_job, above)
    return np.asarray(np.where(x > 0, model.service_rate_per_s * x * s, 0.0), dtype=np.float64)


@njit(cache=True)
def _relative_vi_general(
    h: np.ndarray,
    states: np.ndarray,
    up: np.ndarray,
    down: np.ndarray,
    rates: np.ndarray,
    lam: np.ndarray,
    big_lambda: float,
    tol: float,
    max_iter: int,
) -> tuple[int, float, float, np.ndarray]:
    """Relative value iteration over flat states for m classes; rates[a, s, j]."""
    n_states, m = states.shape
    n_act = rates.shape[0]
    out = np.empty(n_states)
    act = np.zeros(n_states, dtype=np.int64)
    d = np.empty(m)
    span = math.inf
    g = 0.0
    it = 0
    while it < max_iter:
        it += 1
        lo = math.inf
        hi = -math.inf
        for s in range(n_states):
            v = h[s]
            arr = 0.0
            for j in range(m):
                if up[s, j] >= 0:
                    arr += lam[j] * (h[up[s, j]] - v)
                d[j] = h[down[s, j]] - v if down[s, j] >= 0 else 0.0
            best = math.inf
            arg = 0
            for a in range(n_act):
                q = 0.0
                for j in range(m):
                    q += rates[a, s, j] * d[j]
                if q < best:
                    best = q
                    arg = a
            total = 0
            for j in range(m):
                total += states[s, j]
            out[s] = total + v + (arr + best) / big_lambda
            act[s] = arg
            diff = out[s] - v
            lo = min(lo, diff)
            hi = max(hi, diff)
        span = hi - lo
        g = 0.5 * (lo + hi)
        ref = out[0]
        for s in range(n_states):
            h[s] = out[s] - ref
        if span < tol:
            break
    return it, span, g, act


def _solve_general(
    model: MdpModel, actions: int, tol: float, max_iter: int, initial_values: npt.ArrayLike | None
) -> MdpSolution:
    m, b = model.n_classes, model.truncation
    grid = share_grid(m, actions)
    states = state_space(m, b)
    up, down = _neighbours(states, b)
    rates = _class_rates(model, states[None, :, :], grid[:, None, :])
    shape = (b + 1,) * m
    h = _start_values(initial_values, shape).ravel().copy()
    it, span, g, act = _relative_vi_general(
        h,
        states,
        up,
        down,
        rates,
        np.asarray(model.class_rates_per_s, dtype=np.float64),
        model.uniformisation_rate,
        tol,
        max_iter,
    )
    converged = _report(it, span, tol)
    shares = normalise_shares(grid[act].reshape(shape + (m,)))
    return MdpSolution(shares, float(g), h.reshape(shape), int(it), float(span), converged, shares)


def normalise_shares(shares: npt.ArrayLike) -> FloatArray:
    """No cores to absent classes: their shares go to the classes present, in proportion
    (equally if the present ones have none)."""
    sh = np.array(shares, dtype=np.float64)
    m = sh.shape[-1]
    states = state_space(m, sh.shape[0] - 1).reshape(sh.shape)
    present = states > 0
    sh = np.where(present, sh, 0.0)
    total = sh.sum(axis=-1, keepdims=True)
    n_present = present.sum(axis=-1, keepdims=True)
    equal = np.divide(present, n_present, out=np.zeros_like(sh), where=n_present > 0)
    return np.where(total > 0, np.divide(sh, total, out=np.zeros_like(sh), where=total > 0), equal)


def as_shares(model: MdpModel, table: npt.ArrayLike) -> FloatArray:
    """Shares of every class per state, shape (B+1,)*m + (m,): a two-class a-table
    (B+1, B+1) becomes (a, 1 - a); a shares array is checked and returned."""
    b, m = model.truncation, model.n_classes
    t = np.asarray(table, dtype=np.float64)
    if m == 2 and t.shape == (b + 1, b + 1):
        t = np.stack([t, 1.0 - t], axis=-1)
    if t.shape != (b + 1,) * m + (m,):
        raise MdpModelError(
            "table",
            f"expected shape {(b + 1,) * m + (m,)} (or {(b + 1, b + 1)} "
            f"for two classes), got {t.shape}",
        )
    if not np.all(np.isfinite(t)) or np.any(t < -1e-12) or np.any(t.sum(axis=-1) > 1 + 1e-9):
        raise MdpModelError("table", "expected non-negative shares summing to at most 1")
    return t


def _amdahl_vec(x: FloatArray, theta: float) -> FloatArray:
    above = 1.0 / ((1.0 - theta) + theta / np.maximum(x, 1.0))
    return np.asarray(np.where(x <= 1.0, x, above), dtype=np.float64)


def normalise_table(table: npt.ArrayLike) -> FloatArray:
    """Give every core to the only class present: a(0, x2) = 0, a(x1, 0) = 1 (a(0, 0) = 0)."""
    t = np.array(table, dtype=np.float64)
    t[0, :] = 0.0
    t[1:, 0] = 1.0
    return t


def equi_table(truncation: int) -> FloatArray:
    """EQUI across classes: a(x1, x2) = x1 / (x1 + x2), every job the same share."""
    x = np.arange(truncation + 1, dtype=np.float64)
    total = x[:, None] + x[None, :]
    return np.divide(
        x[:, None] * np.ones_like(total), total, out=np.zeros_like(total), where=total > 0
    )


def equi_shares(n_classes: int, truncation: int) -> FloatArray:
    """EQUI across m classes: share_j = x_j / sum(x), shape (B+1,)*m + (m,)."""
    states = state_space(n_classes, truncation).astype(np.float64)
    total = states.sum(axis=1, keepdims=True)
    sh = np.divide(states, total, out=np.zeros_like(states), where=total > 0)
    return sh.reshape((truncation + 1,) * n_classes + (n_classes,))


def generator(model: MdpModel, table: npt.ArrayLike) -> sps.csr_matrix:
    """The CTMC generator Q of the truncated chain under a policy (rows sum to 0); states in
    row-major order of (x_1, ..., x_m)."""
    b, m = model.truncation, model.n_classes
    shares = as_shares(model, table).reshape(-1, m)
    states = state_space(m, b)
    up, down = _neighbours(states, b)
    rates = _class_rates(model, states, shares)
    lam = np.asarray(model.class_rates_per_s)
    src = np.arange(states.shape[0])
    rows, cols, vals = [], [], []
    for j in range(m):
        ok = up[:, j] >= 0
        rows.append(src[ok])
        cols.append(up[ok, j])
        vals.append(np.full(int(ok.sum()), lam[j]))
        ok = down[:, j] >= 0
        rows.append(src[ok])
        cols.append(down[ok, j])
        vals.append(rates[ok, j])
    n = states.shape[0]
    q = sps.coo_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n)
    ).tocsr()
    out_rate = np.asarray(q.sum(axis=1)).ravel()
    return (q - sps.diags(out_rate)).tocsr()


def evaluate_policy(model: MdpModel, table: npt.ArrayLike) -> PolicyEvaluation:
    """Exact stationary E[N], per-class means and blocking probability of a policy."""
    b, m = model.truncation, model.n_classes
    q = generator(model, table).tocsc()
    n = q.shape[0]
    # Solve pi Q = 0 with sum(pi) = 1: replace one balance equation by the normalisation.
    a = q.T.tolil()
    a[0, :] = np.ones(n)
    rhs = np.zeros(n)
    rhs[0] = 1.0
    pi = np.maximum(np.asarray(spla.spsolve(a.tocsc(), rhs)), 0.0)
    pi /= pi.sum()
    states = state_space(m, b)
    per_class = tuple(float(v) for v in pi @ states)
    probs = np.asarray(model.class_probabilities)
    blocking = float(sum(probs[j] * pi[states[:, j] == b].sum() for j in range(m)))
    return PolicyEvaluation(float(sum(per_class)), per_class, blocking, pi.reshape((b + 1,) * m))


def check_truncation(model: MdpModel, table: npt.ArrayLike, max_blocking: float = 1e-3) -> float:
    """Blocking probability of `table`; MdpModelError if it exceeds `max_blocking`.

    The paper's truncation is a device for its consistency proof; the engine does not block.
    A B at which the optimal policy blocks a noticeable share of arrivals models a different
    (lossy) system, so the learner refuses it.
    """
    blocking = evaluate_policy(model, table).blocking_probability
    if blocking > max_blocking:
        raise MdpModelError(
            "truncation",
            f"B = {model.truncation} blocks {blocking:.3g} of arrivals at load "
            f"{model.load:.3g} (more than {max_blocking:g}); expected a larger truncation",
        )
    return blocking
