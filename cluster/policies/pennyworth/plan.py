"""A complete allocation and its cost (the Pennyworth paper's eq. 1), computed from scratch."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cluster.policies.pennyworth.problem import Problem, safe_response_s


@dataclass(frozen=True)
class Plan:
    """VMs in renting order: (type index, task index of each job in run order)."""

    vms: tuple[tuple[int, tuple[int, ...]], ...]


def response_times(problem: Problem, plan: Plan) -> tuple[list[float], list[float]]:
    """Every job's response time (s) and its task's mean on its VM's type (for rtpt).
    With `problem.safety_z` > 0 each response time is padded by that many standard
    deviations of the run times up to and including the job (`safe_response_s`)."""
    resp: list[float] = []
    means: list[float] = []
    z = problem.safety_z
    var = problem.runtime_var_s2() if z else None
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
            means.append(e)
    return resp, means


def plan_cost(problem: Problem, plan: Plan) -> tuple[float, float]:
    """(total cost, SLO loss) in dollars: sum over VMs of start-up cost + price x run times
    of its jobs, plus the SLO loss of the response times (padded when the problem has a
    safety padding: the cost a planner on estimates minimises)."""
    money = 0.0
    for k, tasks in plan.vms:
        money += float(problem.startup_usd[k])
        money += float(problem.price_per_s[k]) * float(sum(problem.runtime_s[t, k] for t in tasks))
    resp, means = response_times(problem, plan)
    loss = problem.slo.loss(np.asarray(resp), np.asarray(means))
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
