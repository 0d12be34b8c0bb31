"""The exact planner's `avg` SLO (`exact.py`, method 2): the positional MIP (job j on
type k at position p from the end of its VM; HiGHS, gap 0), exact without the symmetry
of interchangeable VMs. `_solve_avg` returns (plan, cost $, proven bound $, proven).
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, linprog

from clusteremu.cluster.policies.pennyworth.exact_highs import _SCALE, _milp
from clusteremu.cluster.policies.pennyworth.exact_model import (
    FloatArray,
    JobPlan,
    JobProblem,
    job_plan_cost,
    ordered,
)
from clusteremu.cluster.policies.pennyworth.exact_pricing import _Stats


def _positional_model(
    jp: JobProblem, positions: int
) -> tuple[FloatArray, FloatArray, FloatArray, sparse.csc_matrix, FloatArray, FloatArray, list]:
    """The positional MIP of the avg SLO (`exact.py`'s module doc): variables x[j, k, p] (job j on a
    VM of type k, p-th from the end: it and the p - 1 jobs after it wait for it), z[k,
    p] (jobs at that slot: non-increasing in p; z[k, 1] = VMs of type k) and the excess
    u (s) of the sum of responses over N x target. A VM's sum of responses is sum_p p x
    its p-th-from-end run time (+ its delay per job), whatever the order it is given, so
    the optimum puts each VM shortest first. Returns (cost, integrality, upper bounds,
    rows, row lows, row highs, the (j, k) of each x block), costs scaled by _SCALE."""
    n, kinds, big_p = jp.jobs, len(jp.type_names), positions
    e = jp.runtime_s
    delay = jp.counted_delay_s()
    pairs = [(j, k) for j in range(n) for k in range(kinds) if math.isfinite(e[j, k])]
    nx, nz = len(pairs) * big_p, kinds * big_p
    nv = nx + nz + 1
    cost = np.zeros(nv)
    resp = np.zeros(nv)
    pos = np.arange(1, big_p + 1, dtype=np.float64)
    for i, (j, k) in enumerate(pairs):
        cost[i * big_p : (i + 1) * big_p] = jp.price_per_s[k] * e[j, k] * _SCALE
        resp[i * big_p : (i + 1) * big_p] = pos * e[j, k] + delay[k]
    for k in range(kinds):
        cost[nx + k * big_p] = jp.startup_usd[k] * _SCALE
    cost[nv - 1] = jp.slo.penalty_per_s / n * _SCALE
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    lo: list[float] = []
    hi: list[float] = []
    r = 0
    x_of_job: list[list[int]] = [[] for _ in range(n)]
    x_of_type: list[list[int]] = [[] for _ in range(kinds)]
    for i, (j, k) in enumerate(pairs):
        x_of_job[j].append(i)
        x_of_type[k].append(i)
    for j in range(n):  # every job once
        for i in x_of_job[j]:
            rows += [r] * big_p
            cols += list(range(i * big_p, (i + 1) * big_p))
            vals += [1.0] * big_p
        lo.append(1.0)
        hi.append(1.0)
        r += 1
    for k in range(kinds):
        for p in range(big_p):  # z[k, p] = the jobs at the slot, non-increasing in p
            for i in x_of_type[k]:
                rows.append(r)
                cols.append(i * big_p + p)
                vals.append(1.0)
            rows.append(r)
            cols.append(nx + k * big_p + p)
            vals.append(-1.0)
            lo.append(0.0)
            hi.append(0.0)
            r += 1
            if p + 1 < big_p:
                rows += [r, r]
                cols += [nx + k * big_p + p + 1, nx + k * big_p + p]
                vals += [1.0, -1.0]
                lo.append(-np.inf)
                hi.append(0.0)
                r += 1
    rows += [r] * (nx + 1)  # sum of responses - u <= N x target
    cols += list(range(nx)) + [nv - 1]
    vals += list(resp[:nx]) + [-1.0]
    lo.append(-np.inf)
    hi.append(n * jp.slo.target_s)
    r += 1
    matrix = sparse.csc_matrix((vals, (rows, cols)), shape=(r, nv))
    integrality = np.ones(nv)
    integrality[nv - 1] = 0
    upper = np.ones(nv)
    upper[nx:] = np.inf
    return cost, integrality, upper, matrix, np.array(lo), np.array(hi), pairs


def _solve_avg(
    jp: JobProblem, best: JobPlan, ub: float, deadline: float, stats: _Stats
) -> tuple[JobPlan, float, float, bool]:
    """The avg SLO by the positional MIP (HiGHS, gap 0): (plan, cost, bound, proven)."""
    n, kinds = jp.jobs, len(jp.type_names)
    cost, integrality, upper, matrix, lo, hi, pairs = _positional_model(jp, n)
    constraint = LinearConstraint(matrix, lo, hi)
    bounds = Bounds(np.zeros(cost.size), upper)
    stats.lp += 1
    relaxed = linprog(
        cost,
        A_ub=sparse.vstack([matrix[np.isfinite(hi)], -matrix[np.isfinite(lo)]]).tocsc(),
        b_ub=np.concatenate([hi[np.isfinite(hi)], -lo[np.isfinite(lo)]]),
        bounds=list(zip(np.zeros(cost.size), upper, strict=True)),
        method="highs",
    )
    lower = float(relaxed.fun) / _SCALE if relaxed.status == 0 else -math.inf
    budget = deadline - time.perf_counter()
    if budget <= 0:
        return best, ub, min(lower, ub), False
    res = _milp(
        budget,
        cost,
        integrality=integrality,
        bounds=bounds,
        constraints=[constraint],
        options={"mip_rel_gap": 0.0, "disp": False},
    )
    if res is None:
        return best, ub, min(lower, ub), False
    stats.nodes += int(getattr(res, "mip_node_count", 0) or 0)
    if res.x is not None:
        x = res.x
        nx = len(pairs) * n
        vms: list[tuple[int, list[int]]] = []
        for k in range(kinds):
            count = int(round(x[nx + k * n]))
            bins: list[list[int]] = [[] for _ in range(count)]
            for p in range(n):
                at = [j for i, (j, kk) in enumerate(pairs) if kk == k and x[i * n + p] > 0.5]
                for b, j in enumerate(at):
                    bins[b].append(j)
            vms += [(k, b) for b in bins if b]
        plan = ordered(jp, vms)
        value = job_plan_cost(jp, plan)[0]
        if value < ub:
            best, ub = plan, value
    bound = getattr(res, "mip_dual_bound", None)
    if res.status == 0:
        return best, ub, ub, True
    if bound is not None and np.isfinite(bound):
        lower = max(lower, float(bound) / _SCALE)
    return best, ub, min(lower, ub), False
