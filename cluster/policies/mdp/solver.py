"""Average-cost relative value iteration for the two-class core-allocation MDP (seed 001,
section 4, eqs. 4.1-4.7 and Algorithm 2; SPEC.md section 2).

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

from cluster.policies.mdp.model import MdpModel, MdpModelError

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]

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
    """

    table: FloatArray
    average_cost: float
    relative_values: FloatArray
    iterations: int
    span: float
    converged: bool


@dataclass(frozen=True)
class PolicyEvaluation:
    """Stationary performance of a policy table (exact, on the truncated chain).

    Attributes:
        mean_jobs: E[N1 + N2].
        mean_jobs_per_class: (E[N1], E[N2]).
        blocking_probability: share of arrivals that find their class at B and are lost.
        stationary: pi(x1, x2), shape (B + 1, B + 1).
    """

    mean_jobs: float
    mean_jobs_per_class: tuple[float, float]
    blocking_probability: float
    stationary: FloatArray


def action_grid(actions: int) -> FloatArray:
    """{0, 1/M, ..., 1} for M = `actions`."""
    if isinstance(actions, bool) or int(actions) != actions or actions < 1:
        raise MdpModelError("actions", f"expected an integer M >= 1, got {actions!r}")
    return np.linspace(0.0, 1.0, int(actions) + 1)


def _check_two_classes(model: MdpModel) -> None:
    if model.n_classes != 2:
        raise MdpModelError("class_probabilities", "the value-iteration solver handles two "
                            f"classes, got {model.n_classes}")


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
def _departure_part(a: float, x1: int, x2: int, k: float, th1: float, th2: float, mu: float,
                    d1: float, d2: float) -> float:
    return _rate(x1, a * k, th1, mu) * d1 + _rate(x2, (1.0 - a) * k, th2, mu) * d2


@njit(cache=True)
def _golden(lo: float, hi: float, x1: int, x2: int, k: float, th1: float, th2: float, mu: float,
            d1: float, d2: float, tol: float) -> tuple[float, float]:
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
def _bellman(h: np.ndarray, out: np.ndarray, act: np.ndarray, grid: np.ndarray,
             r1: np.ndarray, r2: np.ndarray, lam1: float, lam2: float, big_lambda: float,
             k: float, th1: float, th2: float, mu: float, refine: bool) -> None:
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
def _relative_vi(h: np.ndarray, grid: np.ndarray, r1: np.ndarray, r2: np.ndarray, lam1: float,
                 lam2: float, big_lambda: float, k: float, th1: float, th2: float, mu: float,
                 refine: bool, tol: float, max_iter: int) -> tuple[int, float, float, np.ndarray]:
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
        model: the two-class model (theta = the believed parameters).
        actions: M; the action grid is {0, 1/M, ..., 1}.
        refine: refine each state's grid minimum by golden-section search (continuous a).
        tol: epsilon of the span stopping rule (in jobs per uniformised step).
        max_iter: most sweeps; a warning is logged if the span rule is not met.
        initial_values: a starting h (e.g. the previous solution's relative values, which
            speeds up re-solving after a small change of theta); zeros by default.
    """
    _check_two_classes(model)
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
    h = np.zeros((b + 1, b + 1))
    if initial_values is not None:
        start = np.asarray(initial_values, dtype=np.float64)
        if start.shape == h.shape and np.all(np.isfinite(start)):
            h = start - start[0, 0]
    it, span, g, act = _relative_vi(h, grid, r1, r2, lam1, lam2, model.uniformisation_rate, k,
                                    th1, th2, mu, refine, tol, max_iter)
    converged = bool(span < tol)
    if not converged:
        log.warning("value iteration stopped after %d sweeps with span %.3g > %.3g", it, span, tol)
    table = normalise_table(act)
    return MdpSolution(table, float(g), h, int(it), float(span), converged)


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
    return np.divide(x[:, None] * np.ones_like(total), total, out=np.zeros_like(total),
                     where=total > 0)


def generator(model: MdpModel, table: npt.ArrayLike) -> sps.csr_matrix:
    """The CTMC generator Q of the truncated chain under a policy table (rows sum to 0)."""
    _check_two_classes(model)
    b = model.truncation
    t = np.asarray(table, dtype=np.float64)
    if t.shape != (b + 1, b + 1):
        raise MdpModelError("table", f"expected shape {(b + 1, b + 1)}, got {t.shape}")
    if not np.all(np.isfinite(t)) or np.any(t < 0.0) or np.any(t > 1.0):
        raise MdpModelError("table", "expected shares in [0, 1]")
    k, mu = float(model.cores), float(model.service_rate_per_s)
    lam1, lam2 = (float(v) for v in model.class_rates_per_s)
    x1, x2 = np.meshgrid(np.arange(b + 1), np.arange(b + 1), indexing="ij")
    idx = x1 * (b + 1) + x2
    r1 = mu * x1 * _amdahl_vec(t * k / np.maximum(x1, 1), model.theta[0])
    r2 = mu * x2 * _amdahl_vec((1.0 - t) * k / np.maximum(x2, 1), model.theta[1])
    rows, cols, vals = [], [], []
    for mask, dest, rate in (
        (x1 < b, idx + (b + 1), np.full(idx.shape, lam1)),
        (x2 < b, idx + 1, np.full(idx.shape, lam2)),
        (x1 > 0, idx - (b + 1), r1),
        (x2 > 0, idx - 1, r2),
    ):
        rows.append(idx[mask])
        cols.append(dest[mask])
        vals.append(rate[mask])
    r = np.concatenate(rows)
    c = np.concatenate(cols)
    v = np.concatenate(vals)
    n = (b + 1) ** 2
    q = sps.coo_matrix((v, (r, c)), shape=(n, n)).tocsr()
    out_rate = np.asarray(q.sum(axis=1)).ravel()
    return (q - sps.diags(out_rate)).tocsr()


def evaluate_policy(model: MdpModel, table: npt.ArrayLike) -> PolicyEvaluation:
    """Exact stationary E[N], per-class means and blocking probability of a table."""
    b = model.truncation
    q = generator(model, table).tocsc()
    n = q.shape[0]
    # Solve pi Q = 0 with sum(pi) = 1: replace one balance equation by the normalisation.
    a = q.T.tolil()
    a[0, :] = np.ones(n)
    rhs = np.zeros(n)
    rhs[0] = 1.0
    pi = np.asarray(spla.spsolve(a.tocsc(), rhs)).reshape(b + 1, b + 1)
    pi = np.maximum(pi, 0.0)
    pi /= pi.sum()
    x = np.arange(b + 1, dtype=np.float64)
    n1 = float((pi.sum(axis=1) * x).sum())
    n2 = float((pi.sum(axis=0) * x).sum())
    p1, p2 = model.class_probabilities
    blocking = float(p1 * pi[b, :].sum() + p2 * pi[:, b].sum())
    return PolicyEvaluation(n1 + n2, (n1, n2), blocking, pi)


def check_truncation(model: MdpModel, table: npt.ArrayLike, max_blocking: float = 1e-3) -> float:
    """Blocking probability of `table`; MdpModelError if it exceeds `max_blocking`.

    The seed's truncation is a device for its consistency proof; the engine does not block.
    A B at which the optimal policy blocks a noticeable share of arrivals models a different
    (lossy) system, so the learner refuses it.
    """
    blocking = evaluate_policy(model, table).blocking_probability
    if blocking > max_blocking:
        raise MdpModelError(
            "truncation",
            f"B = {model.truncation} blocks {blocking:.3g} of arrivals at load "
            f"{model.load:.3g} (more than {max_blocking:g}); expected a larger truncation")
    return blocking
