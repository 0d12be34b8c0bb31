"""The exact planner with perfect knowledge of every job's run time (Pennyworth, eq. 1).

The count-based A* (`astar.py`) plans with task means, so jobs of a task are
interchangeable. The paper's optimum knows each job's *actual* run time; this module
plans that problem exactly. A `JobProblem` gives every job its own run time on every VM
type (`runtime_s[j, k]`, seconds); a `JobPlan` rents VMs, each of one type, with an
ordered job list; its cost (dollars) is, as in `plan.py`, the start-up cost of each VM
plus its price x the run times of its jobs, plus the SLO loss of the response times.

Method (exact by construction; no assumption that lateness is avoidable or dear):

1. A plan is a set of VMs, a VM a (type, job set): within a VM the best order is known
   (shortest processing time first minimises every order statistic of the completion
   times, so it is optimal for `max`, `avg` and `percentile`; for `rtpt`, earliest due
   date when no job is late, else a DP over subsets for the least total lateness).
2. `avg`: a VM's sum of response times is sum_p p x (its p-th job from the end's run
   time), so a positional MIP (job j on type k at position p from the end; VMs of type k
   = the jobs at p = 1) is exact, without the symmetry of interchangeable VMs (HiGHS,
   gap 0).
3. `max`, `rtpt` (costs additive over VMs) and `percentile`: branch-and-price. The
   master LP (HiGHS) covers every job; a depth-first search per VM type (compiled; jobs
   in run order, fractional-knapsack bounds) prices the VM of least reduced cost. Any
   multipliers give a proven bound (Lagrangian: the dual value + at most N x the least
   reduced cost). Nodes bound the number of VMs per type and in all, and pair jobs on
   one VM or apart (Ryan and Foster) or a job to a type; a node whose LP counts are
   fractional branches on them. Otherwise a plan of value V has every VM's reduced cost
   <= V - dual, so all VMs within the gap to the incumbent are enumerated (the same
   search; a small gap first when the duals are degenerate) and the best partition
   among them found by an exact-cover search (jobs with fewest VMs first, a bin-packing
   bound) or, failing that, a set-partitioning MIP (HiGHS, gap 0). Too many VMs for
   that: the node branches on the job pair that shares a VM most fractionally.
   Incumbents: one VM per job, first-fit decreasing per type, round robin, a mixed
   greedy, and the MIP over the columns generated at the root.
4. `percentile`: with r_q the q-th smallest response time, loss = penalty x (r_q -
   target)+. For a threshold h, M(h) = least money with at most N - q jobs finishing
   after h is a step function; the optimum is min over h of penalty x (h - target)+ +
   M(h): first h = target (no loss), then from the largest h worth paying for, each
   exact solve's plan closes an interval down to its own r_q, until r_q <= target or no
   money is left below the incumbent. For one h, a VM run shortest first finishes its
   late jobs last: the columns are on-time VMs (as for `max`, deadline h) and the late
   jobs variables z[j, k] (run last on a VM of type k, money only) with y[k] VMs of late
   jobs only and z[j, k] <= (VMs of type k).
5. HiGHS's own time limit is checked only between its phases, so a large MIP runs in a
   forked child process, killed at the limit; its messages to stdout are silenced.

`solve_jobs(problem, time_limit_s, start)` returns an `ExactSolution`: the plan, its cost
computed from scratch, `optimal` (proven) and a proven `lower_bound_usd` (equal to the
cost when optimal); when the limit stops it, the best plan, `optimal=False` and the
least bound among the parts not yet searched (at least the least money of any plan).
`start` warm-starts the search from named plans (a policy's plans of the batch, such as
a RAD-tree's and its rules'): each, as given and with every VM in its best order, is an
incumbent from the first node, so the answer never costs more than any of them, whatever
the time limit, and a start plan as cheap as the bound is proven optimal at once;
`source` says which plan was returned ('search', 'incumbent' for the built-in simple
plans, or a start plan's name) and `gap` how far its cost may be above the optimum.
Batches of 32 jobs over 10 tasks, one or three types: seconds to about a minute on one
core (`benchmarks/pennyworth_astar.py --knowledge actual`).

Layout (each module imports only those above it in this list): `exact_model` (the
problem, plans, their cost, the variants), `exact_bounds` (the pricing's knapsack bounds,
the least money), `exact_highs` (HiGHS with a hard time limit), `exact_pricing` (the
column pool and the compiled pricing search), `exact_master` (the master LP and MIP),
`exact_search` (branch-and-price: `_Solver`), `exact_incumbents`, `exact_avg` (2.),
`exact_percentile` (4.); this module: `solve_jobs` and `ExactSolution`, and it re-exports
the names it held before the split.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

from clusteremu.cluster.policies.pennyworth.exact_avg import _positional_model, _solve_avg
from clusteremu.cluster.policies.pennyworth.exact_bounds import _extension_bound, _money_lower_bound
from clusteremu.cluster.policies.pennyworth.exact_highs import (
    _GUARD_VARIABLES,
    _SCALE,
    _milp,
    _milp_child,
    _quiet_stdout,
)
from clusteremu.cluster.policies.pennyworth.exact_incumbents import (
    _capacity_ok,
    _vm_cost,
    incumbent_plans,
)
from clusteremu.cluster.policies.pennyworth.exact_master import _Infeasible
from clusteremu.cluster.policies.pennyworth.exact_model import (
    _MAX_DP_JOBS,
    _MODES,
    MAX_JOBS,
    FloatArray,
    IntArray,
    JobPlan,
    JobProblem,
    _jobs_of,
    _min_tardiness,
    _Variant,
    _variant_value,
    _vm_terms,
    actual_job_problem,
    best_order,
    check_plan,
    engine_runtimes,
    job_plan_cost,
    job_problem,
    mean_job_problem,
    ordered,
    response_times,
)
from clusteremu.cluster.policies.pennyworth.exact_percentile import (
    _LOSSY_BOUND_S,
    _solve_percentile,
)
from clusteremu.cluster.policies.pennyworth.exact_pricing import (
    _FORBID_PER_S,
    _Columns,
    _Node,
    _NodeLP,
    _Pairs,
    _search,
    _Stats,
    _Stop,
    _TooMany,
    _type_items,
    _TypeItems,
)
from clusteremu.cluster.policies.pennyworth.exact_search import (
    _LEAF_COLUMNS,
    _LEAF_MIP_S,
    _cover_search,
    _Solver,
)

#: Every name this module held before it was split into the `exact_*` modules (tests
#: and benchmarks import some of the private ones): they stay importable from here.
__all__ = [
    "ExactSolution",
    "FloatArray",
    "IntArray",
    "JobPlan",
    "JobProblem",
    "MAX_JOBS",
    "_Columns",
    "_FORBID_PER_S",
    "_GUARD_VARIABLES",
    "_Infeasible",
    "_LEAF_COLUMNS",
    "_LEAF_MIP_S",
    "_LOSSY_BOUND_S",
    "_MAX_DP_JOBS",
    "_MODES",
    "_Node",
    "_NodeLP",
    "_Pairs",
    "_SCALE",
    "_Solver",
    "_Stats",
    "_Stop",
    "_TooMany",
    "_TypeItems",
    "_Variant",
    "_capacity_ok",
    "_cover_search",
    "_extension_bound",
    "_jobs_of",
    "_milp",
    "_milp_child",
    "_min_tardiness",
    "_money_lower_bound",
    "_positional_model",
    "_quiet_stdout",
    "_search",
    "_solve_avg",
    "_solve_percentile",
    "_type_items",
    "_variant_value",
    "_vm_cost",
    "_vm_terms",
    "actual_job_problem",
    "best_order",
    "check_plan",
    "engine_runtimes",
    "incumbent_plans",
    "job_plan_cost",
    "job_problem",
    "mean_job_problem",
    "ordered",
    "response_times",
    "solve_jobs",
    "start_plans",
]


# -- the solver -------------------------------------------------------------------------


@dataclass(frozen=True)
class ExactSolution:
    """`plan`'s `cost` and `slo_loss` ($, eq. 1 from scratch on the actual run times);
    `optimal`: proven optimal; `lower_bound_usd`: a proven lower bound on the optimum
    (== cost when optimal); `seconds`: wall clock; `nodes`: search nodes visited (the
    column searches), LPs solved and VMs enumerated are in `lps` and `columns`;
    `source`: where the returned plan came from ('search', 'incumbent': one of the
    built-in simple plans, or the name of a `start` plan of `solve_jobs`)."""

    plan: JobPlan
    cost: float
    slo_loss: float
    optimal: bool
    lower_bound_usd: float
    seconds: float
    nodes: int
    lps: int = 0
    columns: int = 0
    source: str = "search"

    @property
    def gap(self) -> float:
        """(cost - proven lower bound) / cost: at most this share of the cost is above the
        optimum (0 when proven optimal)."""
        return (self.cost - self.lower_bound_usd) / self.cost if self.cost > 0 else 0.0


def start_plans(problem: JobProblem, start: Mapping[str, JobPlan]) -> dict[str, list[JobPlan]]:
    """Each named plan as given and with every VM in its best order (`ordered`), checked
    to run every job of `problem` once (ValueError naming the plan if not)."""
    out: dict[str, list[JobPlan]] = {}
    for name, plan in start.items():
        try:
            check_plan(problem, plan)
        except ValueError as exc:
            raise ValueError(f"start plan {name!r}: {exc}") from None
        out[name] = [plan, ordered(problem, plan.vms)]
    return out


def solve_jobs(
    problem: JobProblem,
    time_limit_s: float = 120.0,
    start: Mapping[str, JobPlan] | None = None,
) -> ExactSolution:
    """The cheapest plan of `problem` (cost incl. the SLO loss, $), proven optimal unless
    `time_limit_s` (wall clock, s) stops the search first: then the best plan found,
    `optimal=False` and a proven lower bound. `start`: named plans the search starts
    from (incumbents; the answer costs no more than any of them)."""
    began = time.perf_counter()
    jp = problem
    jp.check()
    if jp.jobs > MAX_JOBS:
        raise ValueError(f"solve_jobs: at most {MAX_JOBS} jobs, got {jp.jobs}")
    if not time_limit_s > 0:
        raise ValueError(f"time_limit_s: expected > 0, got {time_limit_s}")
    deadline = began + time_limit_s
    stats = _Stats()
    given = start_plans(jp, start or {})
    source_of = {id(p): name for name, ps in given.items() for p in ps}
    plans = [p for ps in given.values() for p in ps] + incumbent_plans(jp)
    scored = [(job_plan_cost(jp, p)[0], i) for i, p in enumerate(plans)]
    ub, i_best = min(scored)  # the first of the cheapest: a start plan before the built-ins
    best = plans[i_best]
    source_of.update({id(p): "incumbent" for p in plans if id(p) not in source_of})
    kind = jp.slo.kind
    if kind == "avg":
        best, ub, lower, proven = _solve_avg(jp, best, ub, deadline, stats)
    elif kind != "percentile":
        v = _Variant(_MODES[kind])
        plan, _, lower, proven = _Solver(jp, v, deadline, stats).solve(plans, math.inf)
        if plan is not None:
            cost = job_plan_cost(jp, plan)[0]
            if cost < ub:
                best, ub = plan, cost
        lower = min(lower, ub)
    else:
        best, ub, lower, proven = _solve_percentile(jp, plans, best, ub, deadline, stats)
    cost, loss = job_plan_cost(jp, best)
    # every plan pays at least the least money (the SLO loss is >= 0)
    lower = max(lower, _money_lower_bound(jp))
    if proven:
        lower = cost
    return ExactSolution(
        best,
        cost,
        loss,
        proven,
        float(min(lower, cost)),
        time.perf_counter() - began,
        stats.nodes,
        stats.lp,
        stats.enumerated,
        source_of.get(id(best), "search"),
    )
