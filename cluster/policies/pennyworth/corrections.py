"""Examples where a tree goes wrong (ours, not the Pennyworth paper's: DAgger-style
corrections).

The paper trains on the vertices of optimal paths only, so a tree that makes one wrong
decision finds itself at vertices it never saw, where its next decisions are guesses; with
SLO penalties a hundred times the VM prices, one late job costs more than the whole plan.
`first_mistake` follows a tree's decisions on a batch and finds the first one after which
the cheapest completion costs more than before it (A* from a partial plan: the optimal
cost-to-go never decreases along any path, so a binary search over the vertices finds it);
`correction_examples` returns the features and the optimal decisions from that vertex on,
along the optimal completion. Fitting again on the examples plus the corrections, round
after round, teaches the tree to recover where it actually errs.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.policies.pennyworth.astar import PartialPlan, solve
from clusteremu.cluster.policies.pennyworth.features import decisions, examples_of_plan
from clusteremu.cluster.policies.pennyworth.plan import Plan, plan_cost
from clusteremu.cluster.policies.pennyworth.problem import Problem

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Relative cost difference below which two plans are equally good.
TOLERANCE = 1e-9


def partial_after(problem: Problem, actions: list[int]) -> PartialPlan:
    """The vertex reached by a sequence of decision labels (see `features`)."""
    n_types = len(problem.type_names)
    vms: list[tuple[int, list[int]]] = []
    left = list(problem.counts)
    for a in actions:
        if a < n_types:
            vms.append((a, []))
        else:
            vms[-1][1].append(a - n_types)
            left[a - n_types] -= 1
    return PartialPlan(tuple((k, tuple(ts)) for k, ts in vms), tuple(left))


def first_mistake(problem: Problem, plan: Plan, optimum: float) -> tuple[int, Plan] | None:
    """(index of the first decision of `plan` after which the optimal completion costs
    more than `optimum`, the optimal plan through the vertex before it), or None when
    `plan` is optimal."""
    if plan_cost(problem, plan)[0] <= optimum * (1 + TOLERANCE) + 1e-12:
        return None
    actions = decisions(plan, len(problem.type_names))
    lo, hi = 0, len(actions)  # vertex lo is on an optimal path; vertex hi is not
    best_lo: Plan | None = None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        found = solve(problem, partial=partial_after(problem, actions[:mid]))
        if found.cost <= optimum * (1 + TOLERANCE) + 1e-12:
            lo, best_lo = mid, found.plan
        else:
            hi = mid
    if best_lo is None:
        best_lo = solve(problem, partial=partial_after(problem, actions[:lo])).plan
    return lo, best_lo


def correction_examples(
    problem: Problem, plan: Plan, optimum: float
) -> tuple[FloatArray, IntArray] | None:
    """Features and optimal decisions from `plan`'s first mistake on (None: no mistake)."""
    found = first_mistake(problem, plan, optimum)
    if found is None:
        return None
    index, expert = found
    x, y = examples_of_plan(problem, expert)
    return x[index:], y[index:]
