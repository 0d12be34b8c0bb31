"""A complete allocation and its cost (the Pennyworth paper's eq. 1), computed from scratch."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from clusteremu.cluster.policies.pennyworth.problem import Problem, safe_response_s


@dataclass(frozen=True)
class Plan:
    """VMs in renting order: (type index, task index of each job in run order)."""

    vms: tuple[tuple[int, tuple[int, ...]], ...]


def response_times(problem: Problem, plan: Plan) -> tuple[list[float], list[float]]:
    """Every job's response time (s) and the task mean that sets its rtpt bound
    (`Problem.rtpt_mean_s`: its mean on its VM's type, or on the SLO's reference type).
    With `problem.safety_z` > 0 each response time is padded by that many standard
    deviations of the run times up to and including the job (`safe_response_s`), but for
    the avg SLO, whose margin is kept on the sum of the response times
    (`response_sum_var_s2`)."""
    resp: list[float] = []
    means: list[float] = []
    z = problem.safety_z if problem.slo.kind != "avg" else 0.0
    var = problem.runtime_var_s2() if z else None
    bound = problem.rtpt_mean_s()
    for k, tasks in plan.vms:
        t_s = float(problem.startup_delay_s[k]) if problem.slo.count_startup_delay else 0.0
        v_s2 = 0.0
        for t in tasks:
            e = float(problem.runtime_s[t, k])
            t_s += e
            if var is not None:
                v_s2 += float(var[t, k])
                resp.append(safe_response_s(t_s, v_s2, z))
            else:
                resp.append(t_s)
            means.append(float(bound[t, k]))
    return resp, means


def response_sum_var_s2(problem: Problem, plan: Plan) -> float:
    """The variance of the sum of the response times (s^2): on a VM of m jobs the run time
    of its i-th job (from 1) is in the response times of the m - i + 1 jobs from it on
    (independent run times: sum of (m - i + 1)^2 x its variance)."""
    var = problem.runtime_var_s2()
    return float(
        sum(
            (len(tasks) - i) ** 2 * float(var[t, k])
            for k, tasks in plan.vms
            for i, t in enumerate(tasks)
        )
    )


def padded_sum_s(sum_s: float, var_s2: float, safety_z: float) -> float:
    """The avg SLO's margin: a sum of response times plus `safety_z` standard deviations
    of it (the batch mean's spread, much smaller than each job's own)."""
    return sum_s + safety_z * math.sqrt(var_s2) if safety_z and var_s2 > 0 else sum_s


def plan_cost(problem: Problem, plan: Plan) -> tuple[float, float]:
    """(total cost, SLO loss) in dollars: sum over VMs of start-up cost + price x run times
    of its jobs, plus the SLO loss of the response times (padded when the problem has a
    safety padding: the cost a planner on estimates minimises; avg: the sum of the response
    times padded, `padded_sum_s`)."""
    money = 0.0
    for k, tasks in plan.vms:
        money += float(problem.startup_usd[k])
        money += float(problem.price_per_s[k]) * float(sum(problem.runtime_s[t, k] for t in tasks))
    resp, means = response_times(problem, plan)
    slo = problem.slo
    if slo.kind == "avg" and problem.safety_z and resp:
        total = padded_sum_s(sum(resp), response_sum_var_s2(problem, plan), problem.safety_z)
        loss = slo.penalty_per_s * max(0.0, total / len(resp) - slo.target_s)
    else:
        loss = slo.loss(np.asarray(resp), np.asarray(means))
    return money + loss, loss


def assign_ids(problem: Problem, plan: Plan) -> list[list[int]]:
    """Job ids per VM: each task's jobs in id order, as the plan uses them."""
    next_id = [0] * len(problem.task_names)
    out: list[list[int]] = []
    for _, tasks in plan.vms:
        ids = []
        for t in tasks:
            ids.append(problem.job_ids[t][next_id[t]])
            next_id[t] += 1
        out.append(ids)
    return out
