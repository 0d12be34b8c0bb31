"""Maximum likelihood estimation of Amdahl parameters from departures (the MDP paper,
section 3, eqs. 3.1-3.6; docs/mdp.md).

Between events (arrivals of either class, departures of the other class) the state and the
allocation are constant, so class j's departures form a Poisson process with piecewise-
constant rate r_j = mu x_j s(y_j; theta_j), y_j the per-job allocation (cores). The log-
likelihood of class j's departures over an observation window (eqs. 3.2-3.5) is

    log L(theta_j) = sum_{departures d} log r_j(just before d) - sum_{intervals I} r_j(I) |I|,

which, grouping by the per-job allocation y, equals (up to terms free of theta)

    l_j(theta) = sum_y [ D_y log s(y; theta) - mu E_y s(y; theta) ],

D_y = class-j departures while the allocation was y, E_y = integral of N_j(t) 1{y(t) = y} dt
(job-time exposure). Terms with y <= 1 do not depend on theta. With u = 1 - 1/y,
s = 1 / (1 - theta u), so

    l'(theta)  = sum D u / (1 - theta u)   - mu sum E u / (1 - theta u)^2,
    l''(theta) = sum D u^2 / (1 - theta u)^2 - 2 mu sum E u^2 / (1 - theta u)^3.

l is not necessarily concave, so the maximiser over [0, 1] is found by a grid and a bounded
Brent refinement; the standard error is 1 / sqrt(-l''(theta_hat)) (observed information).

The state path is rebuilt from the per-job arrival and end times the engine records anyway
and the policy tables in force (`path_from_jobs`): nothing extra is recorded during a run.
Everything here works for any number of classes (the likelihood separates by class).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize_scalar

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Grid points over [0, 1] before the Brent refinement.
GRID_POINTS = 101


@dataclass(frozen=True)
class StatePath:
    """A piecewise-constant path of the system over a window.

    Interval i is [start_s[i], start_s[i] + duration_s[i]) with counts[i, j] jobs of policy
    class j and shares[i, j] of the cores for class j; `departure_interval[d]` is the
    interval that ends with departure d and `departure_class[d]` its policy class (0-based).
    """

    start_s: FloatArray
    duration_s: FloatArray
    counts: IntArray
    shares: FloatArray
    departure_interval: IntArray
    departure_class: IntArray
    cores: float

    @property
    def x1(self) -> IntArray:
        return self.counts[:, 0]

    @property
    def x2(self) -> IntArray:
        return self.counts[:, 1]

    @property
    def a(self) -> FloatArray:
        """Class 1's share (the MDP paper's a(x1, x2) for two classes)."""
        return self.shares[:, 0]

    def per_job_allocation(self, cls: int) -> FloatArray:
        """y_j per interval (cores per job of class j; 0 where the class is absent)."""
        x = self.counts[:, cls]
        return np.divide(self.shares[:, cls] * self.cores, x, out=np.zeros(x.size), where=x > 0)


@dataclass(frozen=True)
class ClassExposure:
    """Sufficient statistics of one class: per distinct per-job allocation y > 1 (cores),
    the departures D_y and job-time exposure E_y (job-seconds); plus totals."""

    alloc: FloatArray
    departures: FloatArray
    exposure: FloatArray
    total_departures: int

    @staticmethod
    def empty() -> ClassExposure:
        return ClassExposure(np.zeros(0), np.zeros(0), np.zeros(0), 0)

    def combine(self, other: ClassExposure) -> ClassExposure:
        """Pool two data sets (Algorithm 1b: all data since time 0)."""
        return _aggregate(
            np.concatenate([self.alloc, other.alloc]),
            np.concatenate([self.departures, other.departures]),
            np.concatenate([self.exposure, other.exposure]),
            self.total_departures + other.total_departures,
        )


@dataclass(frozen=True)
class Estimate:
    """theta_hat with its standard error (observed information) and log-likelihood."""

    theta: float
    std_error: float
    log_likelihood: float
    departures: int
    informative: bool

    def interval(self, z: float = 1.959963984540054) -> tuple[float, float]:
        """The Wald interval theta_hat -/+ z SE (95% by default)."""
        return self.theta - z * self.std_error, self.theta + z * self.std_error


def _aggregate(y: FloatArray, d: FloatArray, e: FloatArray, total: int) -> ClassExposure:
    keep = y > 1.0
    y, d, e = y[keep], d[keep], e[keep]
    if y.size == 0:
        return ClassExposure(np.zeros(0), np.zeros(0), np.zeros(0), total)
    uniq, inv = np.unique(y, return_inverse=True)
    dep = np.bincount(inv, weights=d, minlength=uniq.size).astype(np.float64)
    exp = np.bincount(inv, weights=e, minlength=uniq.size).astype(np.float64)
    return ClassExposure(uniq, dep, exp, total)


def path_from_jobs(
    arrival_s: FloatArray,
    end_s: FloatArray,
    class_index: IntArray,
    classes: tuple[int, ...],
    cores: float,
    tables: Sequence[tuple[float, npt.ArrayLike]],
    window: tuple[float, float],
) -> StatePath:
    """Rebuild the state path over `window` = (t_start, t_end) from per-job times.

    Args:
        arrival_s, end_s, class_index: per job (end < 0 for unfinished jobs).
        classes: the engine class index of each policy class (two or more).
        cores: k, the pool's cores.
        tables: (time from which it is in force, table) in time order; a table is a two-class
            a-table a[x1, x2] or shares of shape (B+1,)*m + (m,); a table in force from T
            applies to intervals starting at T or later.
        window: the observation window in seconds.
    """
    t0, t1 = window
    m = len(classes)
    end = np.where(end_s < 0.0, math.inf, end_s)
    member = [class_index == c for c in classes]
    mine = np.logical_or.reduce(member)
    x0 = np.array(
        [np.count_nonzero(is_j & (arrival_s <= t0) & (end > t0)) for is_j in member], dtype=np.int64
    )
    arr = mine & (arrival_s > t0) & (arrival_s <= t1)
    dep = mine & (end > t0) & (end <= t1)
    times = np.concatenate([arrival_s[arr], end[dep]])
    delta = (
        np.stack(
            [
                np.concatenate([is_j[arr], -is_j[dep].astype(np.int64)]).astype(np.int64)
                for is_j in member
            ],
            axis=1,
        )
        if times.size
        else np.zeros((0, m), np.int64)
    )
    is_dep = np.concatenate([np.zeros(int(arr.sum()), bool), np.ones(int(dep.sum()), bool)])
    order = np.argsort(times, kind="stable")
    times, delta, is_dep = times[order], delta[order], is_dep[order]
    counts = np.vstack([x0[None, :], x0[None, :] + np.cumsum(delta, axis=0)]).astype(np.int64)
    start = np.concatenate([[t0], times])
    duration = np.diff(np.concatenate([start, [t1]]))
    shares = lookup_shares(tables, start, counts)
    events = np.flatnonzero(is_dep)
    dep_class = (
        np.argmin(delta[events], axis=1).astype(np.int64) if events.size else np.zeros(0, np.int64)
    )
    return StatePath(
        start, duration, counts, shares, events.astype(np.int64), dep_class, float(cores)
    )


def lookup_shares(
    tables: Sequence[tuple[float, npt.ArrayLike]], start_s: FloatArray, counts: IntArray
) -> FloatArray:
    """Shares of the table in force at each interval start, at the state clamped to B (as
    the allocator does); shape (intervals, m)."""
    froms = np.array([t for t, _ in tables], dtype=np.float64)
    which = np.clip(np.searchsorted(froms, start_s, side="right") - 1, 0, len(tables) - 1)
    m = counts.shape[1]
    out = np.zeros((start_s.size, m))
    for i, (_, table) in enumerate(tables):
        sel = which == i
        if np.any(sel):
            sh = np.asarray(table, dtype=np.float64)
            if m == 2 and sh.ndim == 2:
                sh = np.stack([sh, 1.0 - sh], axis=-1)
            b = sh.shape[0] - 1
            idx = tuple(np.minimum(counts[sel, j], b) for j in range(m))
            out[sel] = sh[idx]
    return out


def exposure(path: StatePath, cls: int) -> ClassExposure:
    """D_y and E_y of policy class `cls` (0-based) on a path, aggregated over distinct y > 1."""
    y = path.per_job_allocation(cls)
    x = path.counts[:, cls]
    e = x * path.duration_s
    dep = path.departure_interval[path.departure_class == cls]
    d = np.bincount(dep, minlength=y.size).astype(np.float64)
    return _aggregate(y, d, e, int(dep.size))


def log_likelihood(theta: npt.ArrayLike, data: ClassExposure, mu: float) -> FloatArray:
    """The compact l_j(theta) (terms with y > 1), vectorised over theta."""
    th = np.atleast_1d(np.asarray(theta, dtype=np.float64))[:, None]
    u = 1.0 - 1.0 / data.alloc[None, :]
    denom = 1.0 - th * u
    out = (-data.departures * np.log(denom) - mu * data.exposure / denom).sum(axis=1)
    return np.asarray(out, dtype=np.float64)


def _derivatives(theta: float, data: ClassExposure, mu: float) -> tuple[float, float]:
    u = 1.0 - 1.0 / data.alloc
    denom = 1.0 - theta * u
    d1 = float(np.sum(data.departures * u / denom) - mu * np.sum(data.exposure * u / denom**2))
    d2 = float(
        np.sum(data.departures * u**2 / denom**2)
        - 2.0 * mu * np.sum(data.exposure * u**2 / denom**3)
    )
    return d1, d2


def score_and_information(theta: float, data: ClassExposure, mu: float) -> tuple[float, float]:
    """l'(theta) and the observed information -l''(theta)."""
    d1, d2 = _derivatives(theta, data, mu)
    return d1, -d2


def mle(data: ClassExposure, mu: float, fallback: float = math.nan) -> Estimate:
    """theta_hat = argmax over [0, 1] of l_j, with its standard error.

    Without informative data (no exposure above one core per job) the estimate is
    `fallback` with an infinite standard error.
    """
    if data.alloc.size == 0 or not np.any(data.exposure > 0):
        return Estimate(fallback, math.inf, 0.0, data.total_departures, False)
    grid = np.linspace(0.0, 1.0, GRID_POINTS)
    values = log_likelihood(grid, data, mu)
    i = int(np.argmax(values))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = minimize_scalar(
        lambda t: -float(log_likelihood(t, data, mu)[0]),
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-10},
    )
    theta, value = float(res.x), -float(res.fun)
    if values[i] > value:
        theta, value = float(grid[i]), float(values[i])
    _, info = score_and_information(theta, data, mu)
    se = 1.0 / math.sqrt(info) if info > 0 else math.inf
    return Estimate(theta, se, value, data.total_departures, True)


def direct_log_likelihood(path: StatePath, cls: int, theta: float, mu: float) -> float:
    """Eqs. 3.2-3.5 literally: sum of log-rates at departures minus the integrated rate."""
    x = path.counts[:, cls].astype(np.float64)
    y = path.per_job_allocation(cls)
    s = np.where(y <= 1.0, y, 1.0 / ((1.0 - theta) + theta / np.maximum(y, 1.0)))
    rate = mu * x * s
    dep = path.departure_interval[path.departure_class == cls]
    return float(np.sum(np.log(rate[dep])) - np.sum(rate * path.duration_s))
