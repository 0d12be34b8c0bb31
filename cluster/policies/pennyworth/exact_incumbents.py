"""The exact planner's first incumbents (`exact.py`): simple complete plans of a
`JobProblem` (`incumbent_plans`): every job alone on its cheapest type, first-fit
decreasing and round robin per type, a mixed greedy by least added cost ($).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from clusteremu.cluster.policies.pennyworth.exact_model import (
    _MODES,
    JobPlan,
    JobProblem,
    _Variant,
    _vm_terms,
    best_order,
    ordered,
)


def _vm_cost(jp: JobProblem, k: int, jobs: Sequence[int]) -> float:
    """A VM's own cost ($): start-up + run money + its per-job SLO loss (max, rtpt) in its
    best order."""
    money, loss, _, _ = _vm_terms(jp, _Variant(_MODES.get(jp.slo.kind, 2)), k, jobs)
    return money + (loss if jp.slo.kind in ("max", "rtpt") else 0.0)


def _capacity_ok(jp: JobProblem, k: int, jobs: Sequence[int], limit_s: float) -> bool:
    """Whether the VM keeps its jobs within the SLO's per-VM bound."""
    order = best_order(jp, k, jobs, exact=False)
    e = jp.runtime_s[:, k]
    delay = float(jp.counted_delay_s()[k])
    due = jp.due_s()[:, k]
    load = 0.0
    for j in order:
        load += float(e[j])
        t_s = delay + load
        if jp.slo.kind in ("max", "rtpt"):
            if t_s > due[j] + 1e-9:
                return False
        elif t_s > limit_s + 1e-9:
            return False
    return True


def incumbent_plans(problem: JobProblem) -> list[JobPlan]:
    """Simple complete plans: every job alone on its cheapest type; first-fit decreasing
    onto VMs of each type (a VM holds what keeps its jobs within the SLO's bound); a mixed
    first fit by least added cost; shortest-first round robin over v VMs of each type
    (the least sum of response times for v VMs)."""
    jp = problem
    n, kinds = jp.jobs, len(jp.type_names)
    plans: list[JobPlan] = []
    alone = []
    for j in range(n):
        k = min(
            (k for k in range(kinds) if math.isfinite(jp.runtime_s[j, k])),
            key=lambda k: _vm_cost(jp, k, [j]),
        )
        alone.append((k, (j,)))
    plans.append(JobPlan(tuple(alone)))
    slo = jp.slo
    limit = slo.target_s if slo.kind in ("avg", "percentile") else math.inf
    runnable = [[k for k in range(kinds) if math.isfinite(jp.runtime_s[j, k])] for j in range(n)]
    for k in range(kinds):
        if any(k not in r for r in runnable):
            continue
        jobs = sorted(range(n), key=lambda j: -jp.runtime_s[j, k])
        bins: list[list[int]] = []
        for j in jobs:
            for b in bins:
                if _capacity_ok(jp, k, b + [j], limit):
                    b.append(j)
                    break
            else:
                bins.append([j])
        plans.append(ordered(jp, [(k, b) for b in bins], exact=False))
        # round robin, shortest first, over v VMs: jobs from the longest, position by
        # position from the end of every VM
        for v in range(1, n + 1):
            rr: list[list[int]] = [[] for _ in range(v)]
            for i, j in enumerate(jobs):
                rr[i % v].append(j)
            plans.append(ordered(jp, [(k, b) for b in rr], exact=False))
    # mixed: longest first (least run time over types), into the VM where it adds least
    order = sorted(range(n), key=lambda j: -min(jp.runtime_s[j, k] for k in runnable[j]))
    vms: list[tuple[int, list[int]]] = []
    for j in order:
        best: tuple[float, int, int] | None = None
        for i, (k, b) in enumerate(vms):
            if k in runnable[j] and _capacity_ok(jp, k, b + [j], limit):
                add = _vm_cost(jp, k, b + [j]) - _vm_cost(jp, k, b)
                if best is None or add < best[0]:
                    best = (add, i, k)
        for k in runnable[j]:
            add = _vm_cost(jp, k, [j])
            if best is None or add < best[0]:
                best = (add, -1, k)
        assert best is not None
        if best[1] < 0:
            vms.append((best[2], [j]))
        else:
            vms[best[1]][1].append(j)
    plans.append(ordered(jp, vms, exact=False))
    return plans
