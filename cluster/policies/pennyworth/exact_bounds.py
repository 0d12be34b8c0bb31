"""The exact planner's bounds (`exact.py`): what the pricing search prunes with and the
least any plan costs.

`_extension_bound` (compiled): an upper bound on the profit ($) that the items after a
set can add to it in the pricing search (`exact_pricing._search`), SLO terms included: a
fractional knapsack under the SLO's capacity (`_knapsack_overflow`: one capacity, the
overflow paid at the penalty per second; nested capacities for `rtpt`; a positional
bound for `avg`; on-time and late items for `percentile`). `_money_lower_bound`: the
least money of any plan ($), a lower bound on every plan's cost. The root LP bound of a
variant is column generation, `exact_search._Solver.root_bound`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from clusteremu.cluster.policies.pennyworth.exact_model import FloatArray, IntArray, JobProblem


@njit(cache=True)
def _knapsack_overflow(
    i0: int, cap: float, e: FloatArray, w: FloatArray, rorder: IntArray, pen: float
) -> float:
    """An upper bound on the profit ($) of items i0.. under one capacity `cap` (s; below
    0: none): a fractional knapsack taken in `rorder` (best profit per second first, up
    to the first item of profit <= 0) whose overflow is paid at `pen` per second ($/s):
    an item past the capacity still adds its profit less pen x its run time beyond it,
    when that is positive. The bound of `max` (one deadline) and of `rtpt` when an item
    is worth more than pen per second (the loosest prefix alone)."""
    m = e.size
    ub = 0.0
    if cap < 0.0:
        cap = 0.0
    for t in range(m):
        r = rorder[t]
        if r < i0:
            continue
        if w[r] <= 0.0:
            break
        if cap >= e[r]:
            ub += w[r]
            cap -= e[r]
        elif cap > 0.0:
            frac = cap / e[r]
            ub += w[r] * frac
            rest = w[r] * (1.0 - frac) - pen * (e[r] - cap)
            if rest > 0.0:
                ub += rest
            cap = 0.0
        else:
            rest = w[r] - pen * e[r]
            if rest > 0.0:
                ub += rest
    return ub


@njit(cache=True)
def _extension_bound(
    i0: int,
    load: float,
    e: FloatArray,
    w: FloatArray,
    due: FloatArray,
    rorder: IntArray,
    mode: int,
    delay: float,
    pen: float,
    mu: float,
    nu: float,
    theta: float,
    nested: bool,
    rem: FloatArray,
    slack_s: float,
) -> float:
    """An upper bound on the profit that items i0.. (appended after a set of run time
    `load`, in run order) can add, SLO terms included (see `exact_pricing._search`).
    rtpt: `slack_s` is a proven lower bound L on the set's least total lateness (s),
    already charged: pen x max(L, V) = pen x L + pen x max over prefixes r of (load up
    to r - (due_r - delay - load + L))+, so the nested capacities rise by L."""
    m = e.size
    ub = 0.0
    if mode == 0:  # one deadline: fractional knapsack, overflow paid at pen per second
        return _knapsack_overflow(i0, due[0] - delay - load, e, w, rorder, pen)
    if mode == 1:  # rtpt: nested capacities due[r] - delay - load over EDD prefixes
        if not nested:
            # an item worth more than pen per second: only the loosest prefix (the last
            # due date), overflow paid at pen per second (as for max)
            return _knapsack_overflow(i0, due[m - 1] - delay - load + slack_s, e, w, rorder, pen)
        for r in range(i0, m):
            rem[r] = due[r] - delay - load + slack_s
        for t in range(m):
            j = rorder[t]
            if j < i0:
                continue
            if w[j] <= 0.0:
                break
            amount = e[j]
            for r in range(j, m):
                if rem[r] < amount:
                    amount = rem[r]
            if amount <= 0.0:
                continue
            ub += w[j] * amount / e[j]
            for r in range(j, m):
                rem[r] -= amount
        return ub
    if mode == 2:
        # avg: t items appended (shortest first) pay mu x their responses: delay + load +
        # their own run time each, plus the run times before them, at least sum_i (t - i)
        # x the i-th least candidate run time. `rorder`: by w - mu x e, best first.
        shift = mu * (delay + load)
        top = 0.0
        pairs = 0.0
        prefix = 0.0
        t = 0
        for idx in range(m):
            r = rorder[idx]
            if r < i0:
                continue
            val = w[r] - mu * e[r] - shift
            if val <= 0.0:
                break
            pairs += prefix
            prefix += e[i0 + t]
            t += 1
            top += val
            cand = top - mu * pairs
            if cand > ub:
                ub = cand
        return ub
    # percentile: late items pay nu; on-time ones fit into theta - delay - load
    cap = theta - delay - load
    for r in range(i0, m):
        v = w[r] - nu
        if v > 0.0:
            ub += v
    if cap <= 0.0:
        return ub
    for t in range(m):
        r = rorder[t]
        if r < i0:
            continue
        g = min(nu, w[r])
        if g <= 0.0:
            continue
        if cap >= e[r]:
            ub += g
            cap -= e[r]
        else:
            ub += g * cap / e[r]
            break
    return ub


def _money_lower_bound(jp: JobProblem) -> float:
    """Least money of any plan ($): every job at its cheapest type's price, one VM."""
    c = np.where(np.isfinite(jp.runtime_s), jp.runtime_s * jp.price_per_s[None, :], np.inf)
    return float(c.min(axis=1).sum()) + float(np.min(jp.startup_usd))
