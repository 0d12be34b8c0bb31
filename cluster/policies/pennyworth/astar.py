"""The A* planner on the allocation graph of the Pennyworth paper (docs/pennyworth.md).

A vertex is (jobs left per task, the most recently rented VM: its type, the time its jobs
have run so far, whether it has a job), plus, for the batch-wide objectives (avg,
percentile), the response times so far (avg with a safety margin: also the variance of
their sum, which the margin pads, and the open VM's part of it). Edges: *new VM* of type
k (weight: its start-up cost), allowed when no VM is open or the open one has a job; *add
job* of task t to the open VM (weight: price x run time, plus the job's loss for max /
rtpt). Jobs of one task are interchangeable, so a vertex counts them. Avg and percentile
losses can shrink as jobs are added, so they are charged once, on the edge into a final
vertex. The heuristic, the cheapest way to run every job left (sum of min_k price_k x
e[t, k]), never overestimates, and no edge weight is negative, so the first final vertex
popped is optimal. A greedy plan prices an incumbent that prunes; equal vertices reached
twice keep the cheaper path.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import dataclass

import numpy as np

from clusteremu.cluster.policies.pennyworth.plan import Plan, plan_cost
from clusteremu.cluster.policies.pennyworth.problem import Problem, safe_response_s
from clusteremu.cluster.slo import percentile_rank

#: Rounding of times in vertex keys (s): sums of the same run times in another order.
KEY_DIGITS = 9


@dataclass(frozen=True)
class Solution:
    plan: Plan
    cost: float
    slo_loss: float
    expanded: int
    seconds: float


class SearchLimit(RuntimeError):
    """The search expanded more vertices than allowed. It carries what the search had:
    `best_plan` (the best complete plan found, None if none), its `best_cost` and
    `best_loss` ($), `lower_bound` ($): the least f among the open vertices (the
    heuristic never overestimates, so no plan is cheaper), at most `best_cost`, and the
    vertices `expanded`."""

    def __init__(
        self,
        message: str,
        best_plan: Plan | None = None,
        best_cost: float = math.inf,
        best_loss: float = 0.0,
        lower_bound: float = -math.inf,
        expanded: int = 0,
    ) -> None:
        super().__init__(message)
        self.expanded = expanded
        self.best_plan = best_plan
        self.best_cost = best_cost
        self.best_loss = best_loss
        self.lower_bound = lower_bound


def cheapest_types(problem: Problem) -> list[int]:
    """Each task's cheapest VM type to run on (least price x run time)."""
    p = problem
    cheap = np.where(np.isfinite(p.runtime_s), p.price_per_s[None, :] * p.runtime_s, np.inf)
    return [int(k) for k in np.argmin(cheap, axis=1)]


def greedy_plans(problem: Problem) -> list[Plan]:
    """Simple complete plans: one VM per job on its cheapest type; all jobs on one VM of
    each type (shortest first); jobs spread over VMs of the cheapest type by deadline."""
    p = problem
    cheapest = cheapest_types(p)
    plans: list[Plan] = []
    per_job = []
    for t, n in enumerate(p.counts):
        per_job += [(cheapest[t], (t,))] * n
    plans.append(Plan(tuple(per_job)))
    for k in range(len(p.type_names)):
        tasks = [t for t, n in enumerate(p.counts) for _ in range(n)]
        if all(np.isfinite(p.runtime_s[t, k]) for t in tasks):
            tasks.sort(key=lambda t: p.runtime_s[t, k])
            plans.append(Plan(((k, tuple(tasks)),)))
    return plans


@dataclass(frozen=True)
class PartialPlan:
    """A vertex to search from: the VMs rented so far (type, task of each job in order; the
    last one is open) and the jobs left per task. The search's plans extend it."""

    vms: tuple[tuple[int, tuple[int, ...]], ...]
    left: tuple[int, ...]


def _start_state(
    problem: Problem, partial: PartialPlan
) -> tuple[tuple[int, ...], int, float, float, bool, tuple[float, ...], tuple[float, float], float]:
    """(counts left, open type, open VM's elapsed time, its run-time variance, has a job,
    response times, (B, V), g); avg with a margin: V the variance of the sum of the
    response times, B that of the open VM's jobs each weighted by the jobs from it on."""
    p = problem
    sum_margin = p.slo.kind == "avg" and bool(p.safety_z)
    b = sv = 0.0
    delay = p.startup_delay_s if p.slo.count_startup_delay else np.zeros(len(p.type_names))
    variance = p.runtime_var_s2()
    bound = p.rtpt_mean_s()
    resp: list[float] = []
    money = 0.0
    job_loss = 0.0
    elapsed = 0.0
    var = 0.0
    for k, tasks in partial.vms:
        money += float(p.startup_usd[k])
        elapsed = float(delay[k])
        var = b = 0.0
        for t in tasks:
            e = float(p.runtime_s[t, k])
            elapsed += e
            sv += 2.0 * b + var + float(variance[t, k])
            var += float(variance[t, k])
            b += var
            r = elapsed if sum_margin else safe_response_s(elapsed, var, p.safety_z)
            money += float(p.price_per_s[k]) * e
            resp.append(r)
            if p.slo.per_job:
                job_loss += p.slo.job_loss(r, float(bound[t, k]))
    k_open = partial.vms[-1][0] if partial.vms else -1
    has_job = bool(partial.vms and partial.vms[-1][1])
    track = p.slo.kind in ("avg", "percentile")
    return (
        tuple(partial.left),
        k_open,
        elapsed if partial.vms else 0.0,
        var if partial.vms else 0.0,
        has_job,
        tuple(resp) if track else (),
        (b if partial.vms else 0.0, sv),
        money + job_loss,
    )


def _completion(problem: Problem, partial: PartialPlan) -> Plan:
    """A simple completion of `partial` (an incumbent): an empty open VM takes one job it
    can run, then every job left gets its own VM of its cheapest type."""
    p = problem
    vms = [(k, list(ts)) for k, ts in partial.vms]
    left = list(partial.left)
    if vms and not vms[-1][1]:
        k = vms[-1][0]
        runnable = [t for t in range(len(left)) if left[t] and math.isfinite(p.runtime_s[t, k])]
        if runnable:
            t = min(runnable, key=lambda t: p.runtime_s[t, k])
            vms[-1][1].append(t)
            left[t] -= 1
        else:
            vms.pop()
    cheapest = cheapest_types(p)
    for t, n in enumerate(left):
        vms += [(cheapest[t], [t]) for _ in range(n)]
    return Plan(tuple((k, tuple(ts)) for k, ts in vms))


def solve(
    problem: Problem,
    max_expanded: int = 5_000_000,
    time_limit_s: float = math.inf,
    partial: PartialPlan | None = None,
) -> Solution:
    """The cheapest plan of `problem` (cost includes the SLO loss); with `partial`, the
    cheapest plan that extends it (the plan returned includes its VMs)."""
    start = time.perf_counter()
    p = problem
    slo = p.slo
    n_types = len(p.type_names)
    n_tasks = len(p.task_names)
    runtime = p.runtime_s.tolist()
    bound_mean = p.rtpt_mean_s().tolist()
    price = p.price_per_s.tolist()
    startup = p.startup_usd.tolist()
    delay = p.startup_delay_s.tolist() if slo.count_startup_delay else [0.0] * n_types
    per_job = slo.per_job
    track = slo.kind in ("avg", "percentile")
    # Safety padding: a response time is the means so far + z x the sd of their sum; avg:
    # the sum of the response times is padded by z x its own sd instead (the mean's).
    z = p.safety_z
    sum_margin = slo.kind == "avg" and bool(z)
    variance = p.runtime_var_s2().tolist()
    # h: the cheapest way to run each job left.
    unit = [
        min(
            (price[k] * runtime[t][k] for k in range(n_types) if math.isfinite(runtime[t][k])),
            default=math.inf,
        )
        for t in range(n_tasks)
    ]
    # The least run time of each task (a lower bound on the response time it adds).
    least = [min((runtime[t][k] for k in range(n_types)), default=math.inf) for t in range(n_tasks)]
    n_jobs = p.jobs
    q_rank = percentile_rank(slo.percentile, n_jobs) if slo.kind == "percentile" else 0

    def end_bound(counts: tuple[int, ...], resp: tuple[float, ...], sv: float = 0.0) -> float:
        """A lower bound on the end-charged loss (avg, percentile) of any completion:
        every job left adds at least its least run time (avg with a margin: and the
        variance of the sum, `sv`, only grows)."""
        if slo.kind == "avg":
            total = sum(resp) + sum(c * least[t] for t, c in enumerate(counts))
            if sum_margin and sv > 0:
                total += z * math.sqrt(sv)
            return slo.penalty_per_s * max(0.0, total / n_jobs - slo.target_s)
        if slo.kind == "percentile":
            values = sorted(list(resp) + [least[t] for t, c in enumerate(counts) for _ in range(c)])
            return slo.penalty_per_s * max(0.0, values[q_rank - 1] - slo.target_s)
        return 0.0

    def extra_key(resp: tuple[float, ...]) -> tuple[float, ...]:
        if slo.kind == "avg":  # only the sum matters
            return (round(sum(resp), KEY_DIGITS - 3),)
        if slo.kind == "percentile":  # only the q smallest can be the final q-th smallest
            return tuple(round(x, KEY_DIGITS) for x in sorted(resp)[:q_rank])
        return ()

    best_plan: Plan | None = None
    best_cost = math.inf
    best_loss = 0.0
    incumbents = greedy_plans(p) if partial is None else [_completion(p, partial)]
    if partial is None:
        partial = PartialPlan((), tuple(p.counts))
    prefix = partial.vms
    start_counts, k0, elapsed0, var0, has_job0, resp0, bv0, g0 = _start_state(p, partial)
    for plan in incumbents:
        cost, loss = plan_cost(p, plan)
        if cost < best_cost:
            best_plan, best_cost, best_loss = plan, cost, loss
    eps = 1e-9 * max(1.0, abs(best_cost)) if math.isfinite(best_cost) else 0.0

    counter = itertools.count()
    # Vertex: (counts, open type, elapsed, variance, has_job, extra); payload: g, parent
    # id, action.
    h0 = sum(c * u for c, u in zip(start_counts, unit, strict=True))
    if track:
        h0 += end_bound(start_counts, resp0, bv0[1])
    nodes: list[tuple[int, tuple[str, int]]] = [(-1, ("root", -1))]  # parent, action
    heap: list[
        tuple[
            float,
            int,
            float,
            tuple[int, ...],
            int,
            float,
            float,
            bool,
            tuple[float, ...],
            tuple[float, float],
            int,
        ]
    ] = []
    heapq.heappush(
        heap,
        (g0 + h0, next(counter), g0, start_counts, k0, elapsed0, var0, has_job0, resp0, bv0, 0),
    )
    seen: dict[tuple[object, ...], float] = {}
    expanded = 0
    while heap:
        f, _, g, counts, k, elapsed, var, has_job, resp, bv, node = heapq.heappop(heap)
        if f > best_cost + eps:
            break
        if k == -2:  # a final vertex: the optimum (consistent heuristic)
            if g < best_cost - eps or best_plan is None:
                best_plan, best_cost = _plan(nodes, node, prefix), g
                best_loss = _loss_of(p, best_plan)
            break
        key = (
            counts,
            k,
            round(elapsed, KEY_DIGITS),
            round(var, KEY_DIGITS - 3) if z else 0.0,
            has_job,
            extra_key(resp) if track else (),
            (round(bv[0], KEY_DIGITS - 3), round(bv[1], KEY_DIGITS - 3)) if sum_margin else (),
        )
        if key in seen and seen[key] <= g + 1e-12:
            continue
        seen[key] = g
        expanded += 1
        if expanded > max_expanded or time.perf_counter() - start > time_limit_s:
            raise SearchLimit(
                f"A* stopped after {expanded} vertices ({time.perf_counter() - start:.1f} s)",
                best_plan,
                best_cost,
                best_loss,
                min(f, best_cost),  # f: the least of the heap when popped
                expanded,
            )
        h = sum(c * u for c, u in zip(counts, unit, strict=True))
        if track:
            h += end_bound(counts, resp, bv[1])
        if has_job and not any(counts):
            if sum_margin:
                end_loss = end_bound(counts, resp, bv[1])  # nothing left: the loss itself
            else:
                end_loss = slo.loss(np.asarray(resp)) if track else 0.0
            total = g + end_loss
            if total < best_cost + eps:
                nodes.append((node, ("end", -1)))
                heapq.heappush(
                    heap,
                    (
                        total,
                        next(counter),
                        total,
                        counts,
                        -2,
                        0.0,
                        0.0,
                        True,
                        resp,
                        bv,
                        len(nodes) - 1,
                    ),
                )
            continue
        if k < 0 or has_job:
            for kk in range(n_types):
                g2 = g + startup[kk]
                if g2 + h > best_cost + eps:
                    continue
                nodes.append((node, ("new", kk)))
                heapq.heappush(
                    heap,
                    (
                        g2 + h,
                        next(counter),
                        g2,
                        counts,
                        kk,
                        delay[kk],
                        0.0,
                        False,
                        resp,
                        (0.0, bv[1]),
                        len(nodes) - 1,
                    ),
                )
        if k >= 0:
            for t in range(n_tasks):
                if counts[t] == 0 or not math.isfinite(runtime[t][k]):
                    continue
                e = runtime[t][k]
                mean_r = elapsed + e
                var2 = var + variance[t][k] if z else 0.0
                if sum_margin:
                    r = mean_r
                    bv2 = (bv[0] + var2, bv[1] + 2.0 * bv[0] + var2)
                else:
                    r = safe_response_s(mean_r, var2, z) if z else mean_r
                    bv2 = bv
                g2 = g + price[k] * e
                if per_job:
                    g2 += slo.job_loss(r, bound_mean[t][k])
                c2 = counts[:t] + (counts[t] - 1,) + counts[t + 1 :]
                f2 = g2 + h - unit[t]
                if f2 > best_cost + eps:
                    continue
                resp2 = resp + (r,) if track else resp
                if track:
                    f2 = (
                        g2
                        + h
                        - unit[t]
                        - end_bound(counts, resp, bv[1])
                        + end_bound(c2, resp2, bv2[1])
                    )
                    if f2 > best_cost + eps:
                        continue
                nodes.append((node, ("add", t)))
                heapq.heappush(
                    heap,
                    (f2, next(counter), g2, c2, k, mean_r, var2, True, resp2, bv2, len(nodes) - 1),
                )
    if best_plan is None:
        raise ValueError("no plan: some job cannot run on any VM type")
    return Solution(best_plan, best_cost, best_loss, expanded, time.perf_counter() - start)


@dataclass(frozen=True)
class BoundedSolution:
    """`solve_bounded`'s answer: the best plan found, its cost and SLO loss ($),
    `optimal` (A* finished: the plan is optimal) and `lower_bound_usd` (a proven lower
    bound on the optimum: the cost when optimal, else the least f among the open
    vertices), vertices expanded and wall-clock seconds."""

    plan: Plan
    cost: float
    slo_loss: float
    optimal: bool
    lower_bound_usd: float
    expanded: int
    seconds: float


def solve_bounded(
    problem: Problem,
    time_limit_s: float = math.inf,
    max_expanded: int = 5_000_000,
) -> BoundedSolution:
    """`solve` that never gives up empty-handed: when the time limit (s, wall clock) or
    `max_expanded` stops A*, the best plan found so far (at worst the best greedy plan),
    `optimal=False` and the proven lower bound."""
    start = time.perf_counter()
    try:
        found = solve(problem, max_expanded=max_expanded, time_limit_s=time_limit_s)
    except SearchLimit as stop:
        plan, cost, loss = stop.best_plan, stop.best_cost, stop.best_loss
        if plan is None:
            raise
        return BoundedSolution(
            plan,
            cost,
            loss,
            False,
            min(stop.lower_bound, cost),
            stop.expanded,
            time.perf_counter() - start,
        )
    return BoundedSolution(
        found.plan, found.cost, found.slo_loss, True, found.cost, found.expanded, found.seconds
    )


def _loss_of(problem: Problem, plan: Plan) -> float:
    return plan_cost(problem, plan)[1]


def _plan(
    nodes: list[tuple[int, tuple[str, int]]],
    node: int,
    prefix: tuple[tuple[int, tuple[int, ...]], ...] = (),
) -> Plan:
    actions: list[tuple[str, int]] = []
    while node > 0:
        parent, action = nodes[node]
        actions.append(action)
        node = parent
    vms: list[tuple[int, list[int]]] = [(k, list(ts)) for k, ts in prefix]
    for kind, value in reversed(actions):
        if kind == "new":
            vms.append((value, []))
        elif kind == "add":
            vms[-1][1].append(value)
    return Plan(tuple((k, tuple(ts)) for k, ts in vms))
