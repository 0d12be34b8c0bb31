"""The exact planner's `percentile` SLO (`exact.py`, method 4): the threshold search.
With r_q the q-th smallest response time, loss = penalty x (r_q - target)+; for each
threshold h one exact solve (`exact_search._Solver`, the money alone with at most N - q
jobs finishing after h) finds the least money M(h) ($), and the optimum is min over h
of penalty x (h - target)+ + M(h). `_solve_percentile` returns (plan, cost $, proven
bound $, proven).
"""

from __future__ import annotations

import math
import time

import numpy as np

from clusteremu.cluster.policies.pennyworth.exact_bounds import _money_lower_bound
from clusteremu.cluster.policies.pennyworth.exact_model import (
    JobPlan,
    JobProblem,
    _Variant,
    job_plan_cost,
    response_times,
)
from clusteremu.cluster.policies.pennyworth.exact_pricing import _Stats, _Stop
from clusteremu.cluster.policies.pennyworth.exact_search import _Solver
from clusteremu.cluster.slo import percentile_rank

#: percentile: the most time (s) kept back from the no-loss search for the bound on the
#: plans with a loss, should that search not finish (a tenth of the time left at most).
_LOSSY_BOUND_S = 20.0


def _solve_percentile(
    jp: JobProblem,
    plans: list[JobPlan],
    best: JobPlan,
    ub: float,
    deadline: float,
    stats: _Stats,
) -> tuple[JobPlan, float, float, bool]:
    """The threshold search of `exact.py`'s module doc, 4. Returns (plan, cost, bound, proven)."""
    slo = jp.slo
    n = jp.jobs
    q = percentile_rank(slo.percentile, n)
    allowed = n - q
    target = slo.target_s
    pen = slo.penalty_per_s
    # The least response time of each job (alone on a VM of its fastest type); the q-th
    # least response time of any plan is at least the q-th least of these.
    delay = jp.counted_delay_s()
    least = np.min(np.where(np.isfinite(jp.runtime_s), jp.runtime_s + delay[None, :], np.inf), 1)
    floor = float(np.sort(least)[q - 1])
    money_lb = _money_lower_bound(jp)

    def reach() -> float:  # plans whose r_q lies beyond cost more than ub
        return target + max(0.0, ub - money_lb) / pen if pen > 0 else math.inf

    def r_q(plan: JobPlan) -> float:
        resp, _ = response_times(jp, plan)
        return float(np.sort(resp)[q - 1])

    def adopt(plan: JobPlan | None) -> None:
        nonlocal best, ub
        if plan is not None:
            cost = job_plan_cost(jp, plan)[0]
            if cost < ub:
                best, ub = plan, cost

    def lossy_bound() -> float:
        """The least a plan with r_q > target can cost ($): with r_q above `reach()` at
        least ub; with r_q up to it at least the root LP bound of the variant allowing
        that (its money alone), else the least money of all when time is up."""
        try:
            v = _Variant(3, reach(), False, allowed)
            return min(_Solver(jp, v, deadline, stats).root_bound(), ub)
        except _Stop:
            return min(money_lb, ub)

    # 1. No loss: the least money with r_q <= target (time kept back for the bound on the
    # plans with a loss, should this search not finish).
    if floor <= target:
        v = _Variant(3, target, False, allowed)
        reserve = min(0.1 * max(deadline - time.perf_counter(), 0.0), _LOSSY_BOUND_S)
        try:
            found = _Solver(jp, v, deadline - reserve, stats).solve(plans, ub)
        except _Stop:
            return best, ub, min(lossy_bound(), ub), False
        plan, _, bound, proven = found
        adopt(plan)
        if not proven:
            return best, ub, min(bound, lossy_bound(), ub), False
    # 2. Plans with a loss: r_q in (target, hi]; each costs its money + pen x (r_q -
    # target), its money at least the LP bound without the SLO.
    try:
        free = _Solver(jp, _Variant(3, math.inf, False, n), deadline, stats).root_bound()
    except _Stop:
        return best, ub, min(money_lb, ub), False
    money_lb = max(money_lb, free)
    hi = reach()
    strict = False
    while True:
        # Searched so far: every plan whose r_q is above hi (strict: at or above) costs
        # at least ub, and so does every plan with r_q <= target. Next: r_q up to hi.
        if hi <= target or hi < floor or (strict and hi <= floor):
            return best, ub, ub, True
        v = _Variant(3, hi, strict, allowed)
        plan, _, bound, proven = _Solver(jp, v, deadline, stats).solve(plans, ub)
        adopt(plan)
        if not proven:
            # the plans left cost at least their money, and that is at least `bound`
            return best, ub, min(bound, ub), False
        if plan is None:  # none of them has money below ub
            return best, ub, ub, True
        r = r_q(plan)
        if r <= target:  # the least money of them all, with no loss
            return best, ub, ub, True
        # plans with r_q in [r, hi] cost at least this plan's: search below r
        hi, strict = r, True
        limit = reach()
        if limit < hi:
            hi, strict = limit, False
