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

`solve_jobs(problem, time_limit_s)` returns an `ExactSolution`: the plan, its cost
computed from scratch, `optimal` (proven) and a proven `lower_bound_usd` (equal to the
cost when optimal); when the limit stops it, the best plan, `optimal=False` and the
least bound among the parts not yet searched (at least the least money of any plan).
Batches of 32 jobs over 10 tasks, one or three types: seconds to about a minute on one
core (`benchmarks/pennyworth_astar.py --knowledge actual`).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import multiprocessing as mp
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from clusteremu.cluster.jobs import generate_jobs, replication_seed, runtime_table
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.pennyworth.problem import Problem, ScenarioFieldError
from clusteremu.cluster.slo import Slo, percentile_rank
from numba import njit
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The most jobs one exact solve takes (a VM's job set is a 63-bit mask).
MAX_JOBS = 62
#: Money is scaled by this factor inside the LP and MIP (HiGHS' tolerances are absolute).
_SCALE = 1e5
#: The largest VM whose `rtpt` order is found by the DP over subsets (2^n states).
_MAX_DP_JOBS = 20
_MODES = {"max": 0, "rtpt": 1, "avg": 2, "percentile": 3}


# -- the problem, plans and their cost ------------------------------------------------


@dataclass(frozen=True)
class JobProblem:
    """Jobs x VM types, each job with its own run time.

    `runtime_s[j, k]`: run time of job j on type k (s; inf: it cannot run there);
    `task_mean_s[j, k]`: the task mean that sets its `rtpt` bound on k (s; the bound is
    factor x this: its task's mean on k, or on the SLO's reference type); `task_of[j]`:
    its task (index into `task_names`); `job_ids[j]`: its id in the scenario (the engine's
    numbering); `price_per_s[k]` ($/s), `startup_usd[k]` ($),
    `startup_delay_s[k]` (s, in response times only with `slo.count_startup_delay`).
    """

    task_names: tuple[str, ...]
    type_names: tuple[str, ...]
    runtime_s: FloatArray
    task_mean_s: FloatArray
    task_of: tuple[int, ...]
    job_ids: tuple[int, ...]
    price_per_s: FloatArray
    startup_usd: FloatArray
    startup_delay_s: FloatArray
    slo: Slo

    @property
    def jobs(self) -> int:
        return len(self.task_of)

    def counted_delay_s(self) -> FloatArray:
        """Each type's start-up delay as counted in response times (s; zeros unless
        `slo.count_startup_delay`)."""
        if self.slo.count_startup_delay:
            return np.asarray(self.startup_delay_s, dtype=np.float64)
        return np.zeros(len(self.type_names))

    def due_s(self) -> FloatArray:
        """Each job's per-job bound on each type (s): the deadline (`max`), factor x the
        task mean (`rtpt`), inf for the batch-wide kinds."""
        slo = self.slo
        if slo.kind == "max":
            return np.full(self.runtime_s.shape, slo.deadline_s)
        if slo.kind == "rtpt":
            return slo.factor * np.asarray(self.task_mean_s, dtype=np.float64)
        return np.full(self.runtime_s.shape, math.inf)

    def check(self) -> None:
        """ValueError naming the first inconsistency."""
        n, kk = len(self.task_of), len(self.type_names)
        for name in ("runtime_s", "task_mean_s"):
            shape = np.shape(getattr(self, name))
            if shape != (n, kk):
                raise ValueError(f"{name}: expected shape ({n}, {kk}), got {shape}")
        if len(self.job_ids) != n:
            raise ValueError(f"job_ids: expected {n} ids, got {len(self.job_ids)}")
        r = np.asarray(self.runtime_s)
        if np.isnan(r).any() or (r <= 0).any():
            raise ValueError("runtime_s: expected run times > 0 (inf: cannot run there)")
        for j in range(n):
            if not np.isfinite(r[j]).any():
                raise ValueError(f"job {self.job_ids[j]}: no run time on any VM type")


def job_problem(
    problem: Problem, runtime_s: npt.ArrayLike, job_ids: Sequence[int] | None = None
) -> JobProblem:
    """The job-level problem of `problem`'s batch with each job's own run time.

    `runtime_s[j, k]` (s): job j's run time on VM type k, jobs in `problem`'s order (task
    by task, each task's `job_ids` in order); inf where its task cannot run. The task
    means stay the `rtpt` bounds. Safety padding does not apply: the times are known.
    `job_ids`: the jobs' ids in that order (default: `problem.job_ids`).
    """
    p = problem
    table = np.array(runtime_s, dtype=np.float64)
    n = p.jobs
    if table.shape != (n, len(p.type_names)):
        raise ValueError(
            f"runtime_s: expected shape ({n}, {len(p.type_names)}) (jobs, VM types), "
            f"got {table.shape}"
        )
    task_of = tuple(t for t, c in enumerate(p.counts) for _ in range(c))
    estimates = np.array([p.runtime_s[t] for t in task_of], dtype=np.float64)
    estimates = estimates.reshape(table.shape)
    table = np.where(np.isfinite(estimates), table, math.inf)
    bound = p.rtpt_mean_s()
    means = np.array([bound[t] for t in task_of], dtype=np.float64).reshape(table.shape)
    means = np.where(np.isfinite(estimates), means, math.inf)
    jp = JobProblem(
        tuple(p.task_names),
        tuple(p.type_names),
        table,
        means,
        task_of,
        tuple(int(j) for j in job_ids)
        if job_ids is not None
        else tuple(j for ids in p.job_ids for j in ids),
        np.asarray(p.price_per_s, dtype=np.float64),
        np.asarray(p.startup_usd, dtype=np.float64),
        np.asarray(p.startup_delay_s, dtype=np.float64),
        p.slo,
    )
    jp.check()
    return jp


def engine_runtimes(
    spec: SimulationSpec, problem: Problem, replication: int = 0
) -> tuple[FloatArray, tuple[int, ...]]:
    """The run times the engine draws for `problem`'s batch in `spec`'s run (seed
    `spec.seed`, replication `replication`): common random numbers with `clusteremu run`.

    Returns (`runtime_s[j, k]` in `problem`'s job order, s; the engine's job ids of those
    jobs). The engine numbers a batch arriving at once class by class; this checks that
    each class's jobs are there, in the engine's draw order. ScenarioFieldError (field
    `stop.jobs`) when the run does not run exactly the batch's jobs of each class.
    """
    jobs = generate_jobs(spec, replication_seed(spec, replication))
    table = runtime_table(spec, jobs)  # (node types, engine jobs)
    cls = np.asarray(jobs.class_index)
    index = {c.name: i for i, c in enumerate(spec.classes)}
    type_index = {t.name: i for i, t in enumerate(spec.node_types)}
    rows: list[FloatArray] = []
    ids: list[int] = []
    for t, name in enumerate(problem.task_names):
        mine = np.flatnonzero(cls == index[name])
        if mine.size != problem.counts[t]:
            raise ScenarioFieldError(
                "stop.jobs",
                f"the run has {mine.size} jobs of class {name!r}, the batch "
                f"{problem.counts[t]}: plan with actual run times needs every batch job run",
            )
        for j in mine:
            row = np.full(len(problem.type_names), math.inf)
            for k, type_name in enumerate(problem.type_names):
                if math.isfinite(problem.runtime_s[t, k]) and table.shape[0]:
                    value = float(table[type_index[type_name], j])
                    if value > 0:
                        row[k] = value
            rows.append(row)
            ids.append(int(j))
    out = np.array(rows, dtype=np.float64).reshape(len(ids), len(problem.type_names))
    return out, tuple(ids)


def actual_job_problem(spec: SimulationSpec, problem: Problem, replication: int = 0) -> JobProblem:
    """`problem`'s batch with the run times and job ids of `spec`'s run (`engine_runtimes`:
    what `clusteremu run` with `spec.seed` draws for replication `replication`)."""
    runtime, ids = engine_runtimes(spec, problem, replication)
    return job_problem(problem, runtime, ids)


def mean_job_problem(problem: Problem) -> JobProblem:
    """`job_problem` with every job running exactly its task's mean."""
    task_of = [t for t, c in enumerate(problem.counts) for _ in range(c)]
    return job_problem(problem, problem.runtime_s[task_of].reshape(len(task_of), -1))


@dataclass(frozen=True)
class JobPlan:
    """VMs in renting order: (type index, job indices of `JobProblem` in run order)."""

    vms: tuple[tuple[int, tuple[int, ...]], ...]


def response_times(problem: JobProblem, plan: JobPlan) -> tuple[FloatArray, FloatArray]:
    """Every job's response time (s: the run times before it on its VM and its own, plus
    the VM's start-up delay when the SLO counts it) and the task mean that sets its rtpt
    bound on its VM's type (s), both indexed by job."""
    n = problem.jobs
    resp = np.full(n, math.nan)
    means = np.full(n, math.nan)
    delay = problem.counted_delay_s()
    for k, jobs in plan.vms:
        load = 0.0  # summed as the compiled search sums it: delay + (e1 + e2 + ...)
        for j in jobs:
            load += float(problem.runtime_s[j, k])
            resp[j] = float(delay[k]) + load
            means[j] = float(problem.task_mean_s[j, k])
    return resp, means


def check_plan(problem: JobProblem, plan: JobPlan) -> None:
    """ValueError unless every job runs exactly once, on a type it can run on."""
    seen: list[int] = []
    for k, jobs in plan.vms:
        if not 0 <= k < len(problem.type_names):
            raise ValueError(f"plan: no VM type {k}")
        if not jobs:
            raise ValueError("plan: a VM without jobs")
        for j in jobs:
            if not math.isfinite(problem.runtime_s[j, k]):
                raise ValueError(f"plan: job {j} cannot run on {problem.type_names[k]}")
        seen += list(jobs)
    if sorted(seen) != list(range(problem.jobs)):
        raise ValueError("plan: every job must run exactly once")


def job_plan_cost(problem: JobProblem, plan: JobPlan) -> tuple[float, float]:
    """(total cost, SLO loss) in dollars, eq. 1 from scratch: for every VM its start-up
    cost plus its price x the run times of its jobs, plus the SLO loss of the response
    times (the jobs' actual run times)."""
    check_plan(problem, plan)
    money = 0.0
    for k, jobs in plan.vms:
        money += float(problem.startup_usd[k])
        money += float(problem.price_per_s[k]) * float(sum(problem.runtime_s[j, k] for j in jobs))
    resp, means = response_times(problem, plan)
    loss = problem.slo.loss(resp, means)
    return money + loss, loss


def best_order(
    problem: JobProblem, k: int, jobs: Sequence[int], exact: bool = True
) -> tuple[int, ...]:
    """The run order of `jobs` on one VM of type k that minimises the SLO loss: shortest
    first (max, avg, percentile: least of every order statistic of completion times);
    for rtpt earliest due date when no job is late, else least total lateness (DP over
    subsets, up to 20 jobs; `exact=False`: earliest due date beyond that)."""
    jobs = list(jobs)
    e = problem.runtime_s[:, k]
    if problem.slo.kind != "rtpt":
        return tuple(sorted(jobs, key=lambda j: (e[j], j)))
    due = problem.due_s()[:, k]
    edd = sorted(jobs, key=lambda j: (due[j], e[j], j))
    delay = float(problem.counted_delay_s()[k])
    load = 0.0
    late = False
    for j in edd:
        load += e[j]
        late = late or delay + load > due[j]
    if not late:
        return tuple(edd)
    if len(edd) > _MAX_DP_JOBS:
        if not exact:
            return tuple(edd)
        raise ValueError(f"rtpt: a VM of {len(edd)} late jobs is too large to order exactly")
    _, order = _min_tardiness(np.array([e[j] for j in edd]), np.array([due[j] for j in edd]), delay)
    return tuple(edd[i] for i in order)


def ordered(
    problem: JobProblem, vms: Sequence[tuple[int, Sequence[int]]], exact: bool = True
) -> JobPlan:
    """A plan of (type, job set) VMs, each in its best order (`best_order`)."""
    return JobPlan(tuple((k, best_order(problem, k, js, exact)) for k, js in vms if len(js)))


# -- compiled kernels -------------------------------------------------------------------


@njit(cache=True)
def _min_tardiness(e: FloatArray, due: FloatArray, delay: float) -> tuple[float, IntArray]:
    """Least total tardiness (s) of jobs with run times `e` and due dates `due` on one
    machine that starts after `delay`, and an order achieving it (DP over subsets)."""
    n = e.size
    size = 1 << n
    best = np.full(size, np.inf)
    last = np.full(size, -1, dtype=np.int64)
    load = np.zeros(size)
    best[0] = 0.0
    for mask in range(1, size):
        low = mask & -mask
        i = 0
        while (1 << i) != low:
            i += 1
        load[mask] = load[mask ^ low] + e[i]
    for mask in range(1, size):
        finish = delay + load[mask]
        for i in range(n):
            bit = 1 << i
            if mask & bit:
                prev = best[mask ^ bit]
                if prev < np.inf:
                    t = prev + max(0.0, finish - due[i])
                    if t < best[mask]:
                        best[mask] = t
                        last[mask] = i
    order = np.empty(n, dtype=np.int64)
    mask = size - 1
    for pos in range(n - 1, -1, -1):
        i = last[mask]
        order[pos] = i
        mask ^= 1 << i
    return best[size - 1], order


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
    `load`, in run order) can add, SLO terms included (see `_search`). rtpt: `slack_s`
    is a proven lower bound L on the set's least total lateness (s), already charged:
    pen x max(L, V) = pen x L + pen x max over prefixes r of (load up to r - (due_r -
    delay - load + L))+, so the nested capacities rise by L."""
    m = e.size
    ub = 0.0
    if mode == 0:  # one deadline: fractional knapsack, overflow paid at pen per second
        cap = due[0] - delay - load
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
    if mode == 1:  # rtpt: nested capacities due[r] - delay - load over EDD prefixes
        if not nested:
            # an item worth more than pen per second: only the loosest prefix (the last
            # due date), overflow paid at pen per second (as for max)
            cap = due[m - 1] - delay - load + slack_s
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


@njit(cache=True)
def _search(
    e: FloatArray,
    w: FloatArray,
    c: FloatArray,
    due: FloatArray,
    gbit: IntArray,
    rorder: IntArray,
    mode: int,
    delay: float,
    startup: float,
    fixed: float,
    pen: float,
    mu: float,
    nu: float,
    theta: float,
    strict: bool,
    nested: bool,
    dynamic: bool,
    allowed: IntArray,
    conflict: IntArray,
    need: IntArray,
    below: IntArray,
    thr: FloatArray,
    st_next: IntArray,
    st_item: IntArray,
    st_f: FloatArray,
    st_mask: IntArray,
    st_req: IntArray,
    depth: IntArray,
    out_mask: IntArray,
    out_f: FloatArray,
    n_out: IntArray,
    budget: int,
) -> int:
    """Depth-first search over the job sets of one VM type (resumable).

    Items (the jobs the type can run) are in run order (shortest first; rtpt: earliest
    due date first), so an item added to a set runs last: its response time is delay +
    the set's run time + its own. The profit of a set S is sum_S w - fixed - its SLO
    terms (`fixed`: the start-up cost less the duals of the VM-count rows; `startup`:
    the start-up money written out): pen x its lateness (max, rtpt), mu x the sum of its
    response times (avg), nu x the jobs later than `theta` (percentile; `strict`: at or
    after it). Branching on job pairs: an item with `allowed` 0 is never taken, no set
    holds an item and a job of its `conflict` mask, and a set is written only when it
    holds every job of its items' `need` masks (`below[i]`: the jobs of items 0..i, so a
    set missing a needed job before its last item is dropped with its subtree). Every set
    whose profit is >= thr[0] is written to `out_*` (`dynamic`: thr[0] then rises to it,
    so the last one written is the most profitable). Subtrees whose bound (profit of
    the set's SLO terms so far + `_extension_bound`) is below thr[0] are skipped.

    State between calls: `depth[0]` (-1 when done), the per-depth arrays. Returns the
    nodes visited; it stops early after `budget` nodes or when `out_*` is full.
    Per-depth floats st_f[d]: 0 load, 1 sum w, 2 money, 3 lateness (s, max/rtpt: the
    order's total), 4 max lateness (rtpt), 5 exact least lateness (rtpt; -1 unknown),
    6 sum of responses, 7 late count. out_f[row]: 0 money, 1 lateness (s), 2 sum of
    responses, 3 late count, 4 profit.
    """
    m = e.size
    cap_out = out_mask.size
    rem = np.empty(m)
    items = np.empty(m, dtype=np.int64)
    sub_e = np.empty(m)
    sub_d = np.empty(m)
    nodes = 0
    d = depth[0]
    while d >= 0:
        if nodes >= budget or n_out[0] >= cap_out:
            break
        i = st_next[d]
        if i >= m:
            d -= 1
            continue
        st_next[d] = i + 1
        nodes += 1
        if allowed[i] == 0 or st_mask[d] & conflict[i]:
            continue
        req = st_req[d] | need[i]
        if req & below[i] & ~(st_mask[d] | gbit[i]):
            continue  # a job it needs was passed over: no superset has it
        load = st_f[d, 0] + e[i]
        comp = delay + load
        sw = st_f[d, 1] + w[i]
        money = st_f[d, 2] + c[i]
        late_s = st_f[d, 3]
        lmax = st_f[d, 4]
        tex = st_f[d, 5]
        sc = st_f[d, 6]
        late = st_f[d, 7]
        if mode <= 1:
            over = comp - due[i]
            if over > 0.0:
                late_s += over
            if over > lmax:
                lmax = over
        elif mode == 2:
            sc += comp
        else:
            if comp > theta or (strict and comp >= theta):
                late += 1.0
        # a lower bound on this set's SLO terms, valid for every superset
        q = 0
        lb_s = 0.0
        if mode == 0:
            slo_lb = pen * late_s
        elif mode == 1:
            if late_s <= 0.0:
                slo_lb = 0.0
                tex = 0.0
            else:
                # least total lateness >= the EDD's max lateness, the parent's least, and
                # sum_i (i-th least completion (shortest first) - i-th least due date)+
                for t in range(1, d + 1):
                    items[q] = st_item[t]
                    q += 1
                items[q] = i
                q += 1
                for t in range(q):
                    sub_e[t] = e[items[t]]
                    sub_d[t] = due[items[t]]  # ascending: items are in EDD order
                srt = np.sort(sub_e[:q])
                acc = 0.0
                matched = 0.0
                for t in range(q):
                    acc += srt[t]
                    over = delay + acc - sub_d[t]
                    if over > 0.0:
                        matched += over
                lb = lmax if lmax > 0.0 else 0.0
                if tex > lb:
                    lb = tex
                if matched > lb:
                    lb = matched
                tex = -1.0
                lb_s = lb
                slo_lb = pen * lb
        elif mode == 2:
            slo_lb = mu * sc
        else:
            slo_lb = nu * late
        base = sw - fixed - slo_lb
        ext = _extension_bound(
            i + 1, load, e, w, due, rorder, mode, delay, pen, mu, nu, theta, nested, rem, lb_s
        )
        if base + ext < thr[0]:
            continue
        # the exact SLO terms of this set
        if mode == 1 and late_s > 0.0:
            if late_s <= lb_s + 1e-9:
                tex = late_s  # the EDD order meets the lower bound: it is optimal
            else:
                if q > 20:
                    return -1  # too many late jobs on one VM to order exactly
                best_t, _ = _min_tardiness(sub_e[:q], sub_d[:q], delay)
                tex = best_t
            if tex > lb_s:
                lb_s = tex
                ext = _extension_bound(
                    i + 1,
                    load,
                    e,
                    w,
                    due,
                    rorder,
                    mode,
                    delay,
                    pen,
                    mu,
                    nu,
                    theta,
                    nested,
                    rem,
                    lb_s,
                )
            base = sw - fixed - pen * lb_s
            exact = sw - fixed - pen * tex
            lat_exact = tex
        elif mode <= 1:
            exact = base
            lat_exact = late_s
        else:
            exact = base
            lat_exact = 0.0
        mask = st_mask[d] | gbit[i]
        if exact >= thr[0] and (req & ~mask) == 0:
            row = n_out[0]
            out_mask[row] = mask
            out_f[row, 0] = startup + money
            out_f[row, 1] = lat_exact
            out_f[row, 2] = sc
            out_f[row, 3] = late
            out_f[row, 4] = exact
            n_out[0] = row + 1
            if dynamic and exact > thr[0]:
                thr[0] = exact
        if base + ext < thr[0]:
            continue
        d += 1
        st_next[d] = i + 1
        st_item[d] = i
        st_mask[d] = mask
        st_req[d] = req
        st_f[d, 0] = load
        st_f[d, 1] = sw
        st_f[d, 2] = money
        st_f[d, 3] = late_s
        st_f[d, 4] = lmax
        st_f[d, 5] = tex
        st_f[d, 6] = sc
        st_f[d, 7] = late
    depth[0] = d
    return nodes


@njit(cache=True)
def _cover_search(
    masks: IntArray,
    rc: FloatArray,
    ks: IntArray,
    cost: FloatArray,
    link: FloatArray,
    starts: IntArray,
    cols: IntArray,
    job_order: IntArray,
    lo: IntArray,
    hi: IntArray,
    pen_lo: FloatArray,
    link_mode: int,
    link_rhs: float,
    link_price: float,
    dual: float,
    best_value: float,
    stop_value: float,
    node_limit: int,
    quantum: float,
    colf: FloatArray,
    need0: float,
    step: float,
    best_cols: IntArray,
) -> tuple[float, int, int, bool]:
    """Depth-first exact cover over columns: the partition of the jobs of least value
    inside a count box, below `best_value` ($).

    A partition's value is sum cost (+ avg: link_price x (sum link - link_rhs)+;
    percentile: infeasible when sum link > link_rhs) and at least dual + sum rc + the
    lower count rows' slack terms pen_lo x (count - lo) (index K: all VMs), which
    prunes. The next job to cover is the first uncovered in `job_order`; its
    columns (`cols[starts[j]:starts[j+1]]`, by reduced cost rounded down to `quantum`,
    ties in any order) are tried in turn. Stops at
    a partition of value <= `stop_value` (the node's bound: optimal) or after
    `node_limit` nodes. Returns (best value, columns in `best_cols`, nodes, exhausted).

    Bin-packing bound: `colf[c]` is the share of a VM its jobs need at least (each job
    f_j = min over types of its run time / the type's largest VM load; `need0`: sum over
    all jobs), so the jobs left need ceil(their share) more VMs; each VM over the lower
    total count adds at least `step` to the bound (its dual + the least reduced cost).
    """
    n = job_order.size
    kinds = lo.size - 1
    full = 0
    for j in range(n):
        full |= 1 << job_order[j]
    chosen = np.zeros(n + 1, dtype=np.int64)
    pos = np.zeros(n + 1, dtype=np.int64)
    job_at = np.zeros(n + 1, dtype=np.int64)
    cov = np.zeros(n + 2, dtype=np.int64)
    rcs = np.zeros(n + 2)
    share = np.zeros(n + 2)
    share[0] = need0
    cnt = np.zeros(kinds + 1, dtype=np.int64)
    n_best = -1
    nodes = 0
    d = 0
    cov[0] = 0
    rcs[0] = 0.0
    job_at[0] = job_order[0]
    pos[0] = starts[job_order[0]]
    exhausted = True
    while d >= 0:
        if nodes >= node_limit:
            exhausted = False
            break
        j = job_at[d]
        end = starts[j + 1]
        placed = False
        while pos[d] < end:
            c = cols[pos[d]]
            pos[d] += 1
            nodes += 1
            if masks[c] & cov[d]:
                continue
            r = rcs[d] + rc[c]
            if dual + r >= best_value:
                if dual + r - quantum >= best_value:
                    pos[d] = end  # by reduced cost: none after it fits either
                    break
                continue
            k = ks[c]
            if cnt[k] + 1 > hi[k] or cnt[kinds] + 1 > hi[kinds]:
                continue
            add = 0.0
            if cnt[k] + 1 > lo[k]:
                add += pen_lo[k]
            if cnt[kinds] + 1 > lo[kinds]:
                add += pen_lo[kinds]
            if dual + r + add >= best_value:
                continue
            new_cov = cov[d] | masks[c]
            # VMs still owed to the lower counts need a job each
            left = 0
            rest = full & ~new_cov
            tmp = rest
            while tmp:
                tmp &= tmp - 1
                left += 1
            owed = 0
            for kk in range(kinds):
                need = lo[kk] - cnt[kk] - (1 if kk == k else 0)
                if need > 0:
                    owed += need
            need_all = lo[kinds] - cnt[kinds] - 1
            if need_all > owed:
                owed = need_all
            if owed > left:
                continue
            if rest != 0 and step > 0.0:
                more = math.ceil(share[d] - colf[c] - 1e-9)
                total_now = cnt[kinds] + 1
                base_count = lo[kinds] if lo[kinds] > total_now else total_now
                # VMs up to the lower count may still add reduced costs down to
                # step - pen_lo (<= 0): budget them back
                owed_low = lo[kinds] - total_now if lo[kinds] > total_now else 0
                room = best_value - dual - r - add + owed_low * (pen_lo[kinds] - step)
                allowed = base_count + math.floor(room / step + 1e-9)
                if total_now + more > allowed:
                    continue
            chosen[d] = c
            cnt[k] += 1
            cnt[kinds] += 1
            cov[d + 1] = new_cov
            rcs[d + 1] = r + add
            share[d + 1] = share[d] - colf[c]
            if rest == 0:
                # a partition: its value
                value = 0.0
                total = 0.0
                for t in range(d + 1):
                    value += cost[chosen[t]]
                    total += link[chosen[t]]
                ok = True
                if link_mode == 2:
                    if total > link_rhs:
                        value += link_price * (total - link_rhs)
                elif link_mode == 3 and total > link_rhs + 0.5:
                    ok = False
                if ok and value < best_value:
                    best_value = value
                    n_best = d + 1
                    for t in range(d + 1):
                        best_cols[t] = chosen[t]
                    if value <= stop_value:
                        return best_value, n_best, nodes, True
                cnt[k] -= 1
                cnt[kinds] -= 1
                continue
            # descend: the next uncovered job in order
            nxt = 0
            while (rest >> job_order[nxt]) & 1 == 0:
                nxt += 1
            job_at[d + 1] = job_order[nxt]
            pos[d + 1] = starts[job_order[nxt]]
            d += 1
            placed = True
            break
        if placed:
            continue
        # backtrack
        d -= 1
        if d >= 0:
            c = chosen[d]
            cnt[ks[c]] -= 1
            cnt[kinds] -= 1
    return best_value, n_best, nodes, exhausted


# -- HiGHS with a hard time limit ------------------------------------------------------

#: MIPs with more variables than this run in a child process killed at the time limit.
_GUARD_VARIABLES = 4000


@contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Silence file descriptor 1 (HiGHS' C++ code prints some messages there itself,
    which would corrupt `--json` output)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _milp_child(conn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
        conn.send(milp(*args, **kwargs))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(exc)
    finally:
        conn.close()


def _milp(wall_s: float, *args: Any, **kwargs: Any) -> Any:
    """`scipy.optimize.milp` stopped after `wall_s` seconds of wall clock (None when it
    was stopped before HiGHS returned). HiGHS checks its own `time_limit` only between
    its phases (on 60,000 columns a 5 s limit took 60 s), so a large model runs in a
    forked child process, killed at the limit; small ones run here."""
    options = dict(kwargs.pop("options", {}))
    options["time_limit"] = max(float(wall_s), 0.05)
    kwargs["options"] = options
    n_vars = int(np.size(args[0]))
    if (
        n_vars <= _GUARD_VARIABLES
        or "fork" not in mp.get_all_start_methods()
        or threading.active_count() > 1  # forking a threaded process (a Ray worker) can hang
    ):
        with _quiet_stdout():
            return milp(*args, **kwargs)
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    try:
        proc = ctx.Process(target=_milp_child, args=(child, args, kwargs), daemon=True)
        proc.start()
    except (AssertionError, OSError):  # e.g. inside a daemonic worker: no children
        parent.close()
        child.close()
        with _quiet_stdout():
            return milp(*args, **kwargs)
    child.close()
    result: Any = None
    try:
        if parent.poll(max(float(wall_s), 0.05) + 0.5):
            result = parent.recv()
    except EOFError:
        result = None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        parent.close()
    if isinstance(result, BaseException):
        raise result
    return result


# -- one exact solve: a variant of the problem --------------------------------------


@dataclass(frozen=True)
class _Variant:
    """What one exact solve minimises. max, rtpt, avg: the true cost. percentile: the
    money alone, with at most `allowed` jobs finishing after `theta` (at or after it
    when `strict`)."""

    mode: int
    theta: float = math.inf
    strict: bool = False
    allowed: int = 0

    @property
    def on_time_s(self) -> float:
        """percentile: the latest on-time response (s): theta, or the float just below it
        when `strict` (late means at or after theta)."""
        return float(np.nextafter(self.theta, -np.inf)) if self.strict else self.theta


@dataclass
class _Stats:
    nodes: int = 0
    lp: int = 0
    enumerated: int = 0


class _Stop(Exception):
    """The time limit stopped the search (args: the bound proven so far at the node)."""


class _Columns:
    """The VMs (columns) of one variant: type, job mask, money, SLO loss ($: max/rtpt),
    sum of responses (s), late count."""

    def __init__(self, jp: JobProblem, v: _Variant) -> None:
        self.jp, self.v = jp, v
        self.k: list[int] = []
        self.mask: list[int] = []
        self.f: list[tuple[float, float, float, float]] = []
        self.index: dict[tuple[int, int], int] = {}

    def __len__(self) -> int:
        return len(self.k)

    def add(self, k: int, mask: int, f: tuple[float, float, float, float]) -> bool:
        key = (k, mask)
        if key in self.index:
            return False
        self.index[key] = len(self.k)
        self.k.append(k)
        self.mask.append(mask)
        self.f.append(f)
        return True

    def add_set(self, k: int, jobs: Sequence[int]) -> None:
        """Add the VM (type k, `jobs`); percentile: its on-time part (shortest first, the
        jobs done by `on_time_s`), its late jobs being separate variables."""
        if self.v.mode == 3:
            e = self.jp.runtime_s[:, k]
            delay = float(self.jp.counted_delay_s()[k])
            load = 0.0
            prefix = []
            for j in sorted(jobs, key=lambda j: (e[j], j)):
                load += float(e[j])
                if delay + load > self.v.on_time_s:
                    break
                prefix.append(j)
            jobs = prefix
            if not jobs:
                return
        mask = 0
        for j in jobs:
            mask |= 1 << j
        if (k, mask) not in self.index:
            self.add(k, mask, _vm_terms(self.jp, self.v, k, jobs))

    def objective(self) -> FloatArray:
        """Each column's cost in the variant's objective ($)."""
        f = np.array(self.f, dtype=np.float64).reshape(-1, 4)
        return f[:, 0] + f[:, 1]


def _jobs_of(mask: int) -> list[int]:
    out = []
    j = 0
    while mask:
        if mask & 1:
            out.append(j)
        mask >>= 1
        j += 1
    return out


def _vm_terms(
    jp: JobProblem, v: _Variant, k: int, jobs: Sequence[int]
) -> tuple[float, float, float, float]:
    """(money $, SLO loss $ for max/rtpt, sum of responses s, late count) of a VM."""
    order = best_order(jp, k, jobs, exact=False)
    e = jp.runtime_s[:, k]
    money = float(jp.startup_usd[k]) + float(jp.price_per_s[k]) * float(sum(e[j] for j in order))
    delay = float(jp.counted_delay_s()[k])
    due = jp.due_s()[:, k]
    late_s = sc = late = load = 0.0
    for j in order:
        load += float(e[j])
        t_s = delay + load
        sc += t_s
        if v.mode <= 1:
            late_s += max(0.0, t_s - float(due[j]))
        elif v.mode == 3 and (t_s > v.theta or (v.strict and t_s >= v.theta)):
            late += 1.0
    loss = jp.slo.penalty_per_s * late_s if v.mode <= 1 else 0.0
    return money, loss, sc, late


def _variant_value(jp: JobProblem, v: _Variant, plan: JobPlan) -> float:
    """The plan's value in the variant's objective ($; inf when it breaks the
    percentile variant's constraint)."""
    if v.mode in (0, 1, 2):
        return job_plan_cost(jp, plan)[0]
    cost, loss = job_plan_cost(jp, plan)
    resp, _ = response_times(jp, plan)
    late = int(np.sum(resp >= v.theta)) if v.strict else int(np.sum(resp > v.theta))
    return cost - loss if late <= v.allowed else math.inf


@dataclass
class _TypeItems:
    """One type's items: the jobs it can run, in run order."""

    jobs: IntArray
    e: FloatArray
    c: FloatArray
    due: FloatArray
    gbit: IntArray


def _type_items(jp: JobProblem, k: int) -> _TypeItems:
    e_all = jp.runtime_s[:, k]
    due_all = jp.due_s()[:, k]
    jobs = [j for j in range(jp.jobs) if math.isfinite(e_all[j])]
    if jp.slo.kind == "rtpt":
        jobs.sort(key=lambda j: (due_all[j], e_all[j], j))
    else:
        jobs.sort(key=lambda j: (e_all[j], j))
    idx = np.array(jobs, dtype=np.int64)
    e = e_all[idx].astype(np.float64)
    return _TypeItems(
        idx,
        e,
        float(jp.price_per_s[k]) * e,
        due_all[idx].astype(np.float64),
        np.array([1 << int(j) for j in jobs], dtype=np.int64),
    )


@dataclass
class _NodeLP:
    """The master LP of one node: its duals as multipliers and their dual value ($).
    `y[j]` covering duals (>= 0), `mu` (avg) / `nu` (percentile) the linking row's,
    `fixed[k]` each type's start-up cost less its VM-count duals ($), `counts[i]` the
    LP's VM count of type i (i = types: all), `pen_lo[i]` the dual of its lower count
    row ($ per VM over it)."""

    y: FloatArray
    mu: float
    nu: float
    fixed: FloatArray
    dual: float
    counts: FloatArray
    pen_lo: FloatArray
    #: the pool's columns in the LP (indices) and their values
    columns: IntArray
    x: FloatArray
    #: percentile: the LP's late variables and late-only VMs, and the least the plan's
    #: late variables can add to the bound through reduced costs < 0 ($, <= 0)
    z: FloatArray = field(default_factory=lambda: np.zeros(0))
    yv: FloatArray = field(default_factory=lambda: np.zeros(0))
    extra_neg: float = 0.0


@dataclass
class _Node:
    """A box on the VM counts: lo[i] <= count of type i <= hi[i] (i = types: all VMs),
    and job pairs that share a VM (`together`) or do not (`apart`)."""

    lo: tuple[int, ...]
    hi: tuple[float, ...]
    together: tuple[tuple[int, int], ...] = ()
    apart: tuple[tuple[int, int], ...] = ()
    #: (job, type, on it or not)
    placed: tuple[tuple[int, int, bool], ...] = ()
    #: percentile: bounds on late variables ("z", index into late_vars, lo, hi) and on
    #: late-only VMs ("y", type, lo, hi)
    fixed: tuple[tuple[str, int, float, float], ...] = ()


class _TooMany(Exception):
    """An enumeration passed its column cap (or a leaf's MIP its time): branch."""


class _Infeasible(Exception):
    """A node's constraints admit no plan."""


#: percentile: the most time (s) kept back from the no-loss search for the bound on the
#: plans with a loss, should that search not finish (a tenth of the time left at most).
_LOSSY_BOUND_S = 20.0
#: Lateness price ($/s) that keeps the percentile's on-time columns on time.
_FORBID_PER_S = 1e12
#: A leaf is solved by enumeration and the MIP when it takes at most this many columns
#: and this long in the MIP (s); else its node branches on job pairs.
_LEAF_COLUMNS = 20_000
_LEAF_MIP_S = 10.0


@dataclass(frozen=True)
class _Pairs:
    """A node's pair constraints as job masks: `group[j]` the jobs that share j's VM (j
    included), `conflict[j]` the jobs that may not; `feasible` False when they
    contradict each other."""

    group: IntArray
    conflict: IntArray
    feasible: bool
    #: per type: the jobs that may not run on it
    forbid: tuple[int, ...] = ()

    @staticmethod
    def of(n: int, node: _Node, kinds: int = 0) -> _Pairs:
        parent = list(range(n))

        def root(j: int) -> int:
            while parent[j] != j:
                parent[j] = parent[parent[j]]
                j = parent[j]
            return j

        for a, b in node.together:
            parent[root(a)] = root(b)
        group = np.zeros(n, dtype=np.int64)
        for j in range(n):
            group[root(j)] |= np.int64(1) << j
        group = np.array([group[root(j)] for j in range(n)], dtype=np.int64)
        conflict = np.zeros(n, dtype=np.int64)
        feasible = True
        for a, b in node.apart:
            if group[a] == group[b]:
                feasible = False
            for j in _jobs_of(int(group[a])):
                conflict[j] |= group[b]
            for j in _jobs_of(int(group[b])):
                conflict[j] |= group[a]
        forbid = [0] * kinds
        for j, k, on in node.placed:
            for kk in range(kinds):
                if (kk != k) == on:  # on k: no other type; not on k: not k
                    forbid[kk] |= int(group[j])
        return _Pairs(group, conflict, feasible, tuple(forbid))

    def valid(self, masks: IntArray, ks: IntArray) -> npt.NDArray[np.bool_]:
        """Which columns (job masks, types) keep every constraint."""
        ok = np.ones(masks.size, dtype=bool)
        for k, bad in enumerate(self.forbid):
            if bad:
                ok &= ~((ks == k) & ((masks & bad) != 0))
        for g in np.unique(self.group):
            if g & (g - 1):  # a group of two or more jobs: all of it or none
                part = masks & g
                ok &= (part == 0) | (part == g)
        for j in np.flatnonzero(self.conflict):
            ok &= ~(((masks >> j) & 1).astype(bool) & ((masks & self.conflict[j]) != 0))
        return ok


class _Solver:
    """Branch-and-price on VM counts, then enumeration and the MIP, for one variant.

    Each node of the search bounds the number of VMs per type and in all (a box); its
    bound is the master LP with those count rows, solved by column generation. A node
    whose LP counts are fractional branches on the most fractional count (total first);
    one whose counts are integral enumerates every VM with reduced cost within the gap
    and solves the MIP over them inside its box."""

    def __init__(self, jp: JobProblem, v: _Variant, deadline: float, stats: _Stats) -> None:
        self.jp, self.v, self.deadline, self.stats = jp, v, deadline, stats
        self.n = jp.jobs
        self.kinds = len(jp.type_names)
        self.items = [_type_items(jp, k) for k in range(self.kinds)]
        self.delay = jp.counted_delay_s()
        self.pen = float(jp.slo.penalty_per_s)
        self.cols = _Columns(jp, v)
        self.big_m = 1.0
        # percentile: columns are on-time VMs (the max kernel with theta as deadline and
        # any lateness forbidden); the late jobs are variables z[j, k] (late on a VM of
        # type k, paying its run money), with y[k] VMs of type k holding late jobs only
        self.late_mode = v.mode == 3
        self.kmode = 0 if self.late_mode else v.mode
        self.kpen = _FORBID_PER_S if self.late_mode else self.pen
        self.late_vars: list[tuple[int, int]] = []
        if self.late_mode:
            for it in self.items:
                it.due = np.full(it.e.size, v.on_time_s)
            self.late_vars = [
                (j, k)
                for j in range(self.n)
                for k in range(self.kinds)
                if math.isfinite(jp.runtime_s[j, k])
            ]

    # -- the search kernel ---------------------------------------------------------

    def _weights(self, k: int, y: FloatArray, mu: float, nu: float) -> tuple[FloatArray, IntArray]:
        it = self.items[k]
        w = y[it.jobs] - it.c
        if self.kmode == 3:
            key = np.clip(w, 0.0, nu) / it.e
        elif self.kmode == 2:
            key = w - mu * it.e
        else:
            key = w / it.e
        rorder = np.argsort(-key, kind="stable").astype(np.int64)
        return w, rorder

    def run_search(
        self,
        k: int,
        lp: _NodeLP,
        threshold: float,
        dynamic: bool,
        pairs: _Pairs | None = None,
        max_total: int = 1 << 62,
        capacity: int = 4096,
    ) -> tuple[IntArray, FloatArray, float]:
        """Every set of type k with profit (minus reduced cost, $) >= threshold
        (dynamic: an improving chain) that keeps `pairs`. Returns (masks, rows of
        out_f, the highest profit written or -inf); _TooMany past `max_total` sets."""
        it = self.items[k]
        m = it.e.size
        if m == 0:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 5)), -math.inf
        if pairs is None:
            pairs = _Pairs.of(self.n, _Node((), ()), self.kinds)
        group = pairs.group[it.jobs]
        runnable = np.bitwise_or.reduce(it.gbit)
        if pairs.forbid:
            runnable &= ~np.int64(pairs.forbid[k])
        allowed = ((group & ~runnable) == 0).astype(np.int64)
        need = group & ~it.gbit
        conflict = pairs.conflict[it.jobs]
        below = np.bitwise_or.accumulate(it.gbit)
        w, rorder = self._weights(k, lp.y, lp.mu, lp.nu)
        if np.any(need != 0) or not allowed.all():
            # Every set written holds whole groups, so each member may carry its group's
            # mean weight: the sums of written sets stay exact, and the bounds see that a
            # job comes with its partners. An item never taken lifts no bound.
            for g in np.unique(group[need != 0]):
                members = np.flatnonzero(group == g)
                w[members] = w[members].mean()
            w = np.where(allowed == 1, w, -1e30)
            key = w - lp.mu * it.e if self.kmode == 2 else w / it.e
            if self.kmode == 3:
                key = np.clip(w, 0.0, lp.nu) / it.e
            rorder = np.argsort(-key, kind="stable").astype(np.int64)
        nested = True
        if self.kmode == 1:
            nested = bool(np.all(w / it.e <= self.pen))
        thr = np.array([threshold])
        st_next = np.zeros(m + 1, dtype=np.int64)
        st_item = np.zeros(m + 1, dtype=np.int64)
        st_f = np.zeros((m + 1, 8))
        st_mask = np.zeros(m + 1, dtype=np.int64)
        st_req = np.zeros(m + 1, dtype=np.int64)
        depth = np.zeros(1, dtype=np.int64)
        masks: list[IntArray] = []
        rows: list[FloatArray] = []
        best = -math.inf
        total = 0
        while depth[0] >= 0:
            out_mask = np.zeros(capacity, dtype=np.int64)
            out_f = np.zeros((capacity, 5))
            n_out = np.zeros(1, dtype=np.int64)
            visited = _search(
                it.e,
                w,
                it.c,
                it.due,
                it.gbit,
                rorder,
                self.kmode,
                float(self.delay[k]),
                float(self.jp.startup_usd[k]),
                float(lp.fixed[k]),
                self.kpen,
                lp.mu,
                lp.nu,
                self.v.theta,
                self.v.strict,
                nested,
                dynamic,
                allowed,
                conflict,
                need,
                below,
                thr,
                st_next,
                st_item,
                st_f,
                st_mask,
                st_req,
                depth,
                out_mask,
                out_f,
                n_out,
                2_000_000,
            )
            if visited < 0:
                raise ValueError(
                    "rtpt: more than 20 late jobs on one VM; too many to order exactly"
                )
            self.stats.nodes += visited
            got = int(n_out[0])
            if got:
                masks.append(out_mask[:got].copy())
                rows.append(out_f[:got].copy())
                best = max(best, float(out_f[:got, 4].max()))
                total += got
                if total > max_total:
                    raise _TooMany
                if not dynamic and total > 1000 and capacity < 1 << 20:
                    capacity *= 4
            if time.perf_counter() > self.deadline:
                raise _Stop
        if not masks:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 5)), best
        return np.concatenate(masks), np.vstack(rows), best

    def _terms(self, row: FloatArray) -> tuple[float, float, float, float]:
        money = float(row[0])
        loss = self.pen * float(row[1]) if self.v.mode <= 1 else 0.0
        return money, loss, float(row[2]), float(row[3])

    # -- the master problems -------------------------------------------------------

    def _matrix(self, masks: Sequence[int] | IntArray) -> sparse.csc_matrix:
        """Job x column incidence of the masks."""
        m = np.asarray(masks, dtype=np.int64)
        bits = (m[None, :] >> np.arange(self.n, dtype=np.int64)[:, None]) & 1
        rows, cols = np.nonzero(bits)
        return sparse.csc_matrix((np.ones(rows.size), (rows, cols)), shape=(self.n, m.size))

    def _link(self, f: FloatArray) -> tuple[FloatArray | None, float, float]:
        """The linking row (coefficients per column), its right-hand side and the cost
        of a unit of slack (avg: penalty / N per second; 0: no slack)."""
        if self.v.mode == 2:
            return f[:, 2], self.n * self.jp.slo.target_s, self.pen / self.n
        if self.v.mode == 3:
            return f[:, 3], float(self.v.allowed), 0.0
        return None, 0.0, 0.0

    def master_lp(self, node: _Node) -> _NodeLP:
        """The master LP of `node` (covering rows, the linking row, the count rows; an
        artificial column with cost `big_m` per VM over each upper count), its duals
        clipped to valid multipliers and their dual value ($)."""
        self.stats.lp += 1
        if self.late_mode:
            return self._master_late(node)
        pairs = _Pairs.of(self.n, node, self.kinds)
        # each group of jobs that share a VM is a column (on every type that runs it)
        for g in np.unique(pairs.group):
            members = _jobs_of(int(g))
            for k in range(self.kinds):
                if pairs.forbid[k] & int(g):
                    continue
                if all(math.isfinite(self.jp.runtime_s[j, k]) for j in members):
                    self.cols.add_set(k, members)
        all_masks = np.array(self.cols.mask, dtype=np.int64)
        keep = np.flatnonzero(pairs.valid(all_masks, np.array(self.cols.k, dtype=np.int64)))
        f = np.array(self.cols.f, dtype=np.float64)[keep]
        ks = np.array(self.cols.k, dtype=np.int64)[keep]
        ncol = keep.size
        a = self._matrix(all_masks[keep])
        link, rhs, slack_cost = self._link(f)
        extra = 1 if (link is not None and slack_cost > 0) else 0
        count_rows: list[tuple[int, float, int]] = []  # (count index, rhs, sign)
        for i in range(self.kinds + 1):
            if node.lo[i] > 0:
                count_rows.append((i, float(node.lo[i]), -1))
            if math.isfinite(node.hi[i]):
                count_rows.append((i, float(node.hi[i]), 1))
        n_art = sum(1 for _, _, sign in count_rows if sign > 0)
        nvar = ncol + extra + n_art
        c = np.zeros(nvar)
        c[:ncol] = (f[:, 0] + f[:, 1]) * _SCALE
        if extra:
            c[ncol] = slack_cost * _SCALE
        c[ncol + extra :] = self.big_m * _SCALE
        blocks = [sparse.hstack([-a, sparse.csc_matrix((self.n, nvar - ncol))])]
        b = [-np.ones(self.n)]
        if link is not None:
            row = np.zeros((1, nvar))
            row[0, :ncol] = link
            if extra:
                row[0, ncol] = -1.0
            blocks.append(sparse.csc_matrix(row))
            b.append(np.array([rhs]))
        art = ncol + extra
        for i, value, sign in count_rows:
            row = np.zeros((1, nvar))
            row[0, :ncol] = sign * (ks == i if i < self.kinds else np.ones(ncol))
            if sign > 0:
                row[0, art] = -1.0
                art += 1
            blocks.append(sparse.csc_matrix(row))
            b.append(np.array([sign * value]))
        res = linprog(
            c,
            A_ub=sparse.vstack(blocks).tocsc(),
            b_ub=np.concatenate(b),
            bounds=(0, None),
            method="highs",
        )
        if res.status == 2:
            raise _Infeasible
        if res.status != 0:
            raise RuntimeError(f"exact: the master LP failed ({res.message})")
        lam = np.minimum(np.asarray(res.ineqlin.marginals) / _SCALE, 0.0)
        # Shaved by 1e-11 $ each (any multipliers >= 0 are valid; the dual value drops
        # by at most N x 1e-11 $): at a degenerate LP the profit weights y - c are 0 up
        # to the LP's noise, which the pricing bound would sum instead of pruning.
        y = np.maximum(-lam[: self.n] - 1e-11, 0.0)
        at = self.n
        mu = nu = 0.0
        dual = float(y.sum())
        if link is not None:
            if self.v.mode == 2:
                mu = float(min(-lam[at], slack_cost))
            else:
                nu = float(-lam[at])
            dual -= (mu + nu) * rhs
            at += 1
        fixed = np.array(self.jp.startup_usd, dtype=np.float64)
        pen_lo = np.zeros(self.kinds + 1)
        for t, (i, value, sign) in enumerate(count_rows):
            lam_i = float(lam[at + t])  # <= 0
            dual += sign * value * lam_i
            if sign < 0:
                pen_lo[i] = -lam_i
            # a column of type i has coefficient `sign` in this row: its reduced cost
            # (c - A'lam) loses sign x lam_i
            if i < self.kinds:
                fixed[i] -= sign * lam_i
            else:
                fixed -= sign * lam_i
        x = np.asarray(res.x[:ncol])
        counts = np.array(
            [x[ks == k].sum() for k in range(self.kinds)] + [x.sum()], dtype=np.float64
        )
        return _NodeLP(y, mu, nu, fixed, dual, counts, pen_lo, keep, x)

    def mip(
        self,
        masks: Sequence[int] | IntArray,
        ks: Sequence[int] | IntArray,
        f: FloatArray,
        time_limit: float,
        node: _Node | None = None,
    ) -> tuple[list[tuple[int, list[int]]] | None, float, bool]:
        """Set partitioning over the given columns inside `node`'s box: (VMs or None,
        dual bound $, solved). Besides a 0/1 variable per column it has an integer count
        of VMs per type and in all: branching on them closes the gap of bin-packing-like
        batches far faster than branching on columns."""
        if self.late_mode:
            return self._mip_late(masks, ks, f, time_limit, node)
        ncol = len(masks)
        if ncol == 0:
            return None, math.inf, True
        ks = np.asarray(ks, dtype=np.int64)
        a = self._matrix(masks)
        link, rhs, slack_cost = self._link(f)
        extra = 1 if (link is not None and slack_cost > 0) else 0
        kinds = self.kinds
        # variables: columns | slack (avg) | count per type | total count
        nvar = ncol + extra + kinds + 1
        cost = np.zeros(nvar)
        cost[:ncol] = (f[:, 0] + f[:, 1]) * _SCALE
        if extra:
            cost[ncol] = slack_cost * _SCALE
        integrality = np.ones(nvar)
        lb = np.zeros(nvar)
        ub = np.ones(nvar)
        if extra:
            integrality[ncol] = 0
            ub[ncol] = np.inf
        ub[ncol + extra :] = np.inf
        if node is not None:
            lb[ncol + extra :] = node.lo
            ub[ncol + extra :] = node.hi
        rows = [sparse.hstack([a, sparse.csc_matrix((self.n, nvar - ncol))]).tocsc()]
        lo = [np.ones(self.n)]
        hi = [np.ones(self.n)]
        count = sparse.lil_matrix((kinds + 1, nvar))
        for k in range(kinds):
            count[k, np.flatnonzero(ks == k)] = 1.0
            count[k, ncol + extra + k] = -1.0
            count[kinds, ncol + extra + k] = 1.0
        count[kinds, nvar - 1] = -1.0
        rows.append(count.tocsc())
        lo.append(np.zeros(kinds + 1))
        hi.append(np.zeros(kinds + 1))
        if link is not None:
            row = np.zeros((1, nvar))
            row[0, :ncol] = link
            if extra:
                row[0, ncol] = -1.0
            rows.append(sparse.csc_matrix(row))
            lo.append(np.array([-np.inf]))
            hi.append(np.array([rhs]))
        res = _milp(
            time_limit,
            cost,
            integrality=integrality,
            bounds=Bounds(lb, ub),
            constraints=[
                LinearConstraint(
                    sparse.vstack(rows).tocsc(), np.concatenate(lo), np.concatenate(hi)
                )
            ],
            options={"mip_rel_gap": 0.0, "disp": False},
        )
        if res is None:  # stopped by the time limit before HiGHS returned
            return None, -math.inf, False
        self.stats.nodes += int(getattr(res, "mip_node_count", 0) or 0)
        bound = getattr(res, "mip_dual_bound", None)
        bound = -math.inf if bound is None or not np.isfinite(bound) else float(bound) / _SCALE
        if res.status == 2:  # infeasible: no plan among these columns
            return None, math.inf, True
        solved = res.status == 0
        if res.x is None:
            return None, bound, solved
        chosen = np.flatnonzero(res.x[:ncol] > 0.5)
        vms = [(int(ks[c]), _jobs_of(int(masks[c]))) for c in chosen]
        if solved:
            bound = max(bound, float(res.fun) / _SCALE)
        return vms, bound, solved

    # -- percentile: on-time columns and late variables ------------------------------

    def _late_bounds(self, node: _Node | None) -> tuple[FloatArray, FloatArray]:
        """Bounds of the late variables z then the late-only VM counts y."""
        nz = len(self.late_vars)
        lo = np.zeros(nz + self.kinds)
        hi = np.concatenate([np.ones(nz), np.full(self.kinds, float(self.n))])
        for name, index, a, b in node.fixed if node is not None else ():
            at = index if name == "z" else nz + index
            lo[at], hi[at] = max(lo[at], a), min(hi[at], b)
        return lo, hi

    def _late_rows(
        self, a_x: sparse.csc_matrix, ks: IntArray, nvar: int
    ) -> tuple[sparse.csc_matrix, sparse.csc_matrix, sparse.csc_matrix]:
        """Rows over [x (columns of types ks) | z | y | ...]: each job's coverage, the late
        count, and per late variable z[j, k] - (VMs of type k) <= 0."""
        nz = len(self.late_vars)
        n_x = a_x.shape[1]
        zj = np.array([j for j, _ in self.late_vars], dtype=np.int64)
        zk = np.array([k for _, k in self.late_vars], dtype=np.int64)
        cover = sparse.hstack(
            [
                a_x,
                sparse.csc_matrix((np.ones(nz), (zj, np.arange(nz))), shape=(self.n, nz)),
                sparse.csc_matrix((self.n, nvar - n_x - nz)),
            ]
        ).tocsc()
        late = sparse.csc_matrix(
            (np.ones(nz), (np.zeros(nz, dtype=np.int64), n_x + np.arange(nz))), shape=(1, nvar)
        )
        # exist: for row t, -1 on every column of type zk[t], +1 on z_t, -1 on y_zk[t]
        rows, cols, vals = [], [], []
        for k in range(self.kinds):
            ts = np.flatnonzero(zk == k)
            cs = np.flatnonzero(ks == k)
            if ts.size and cs.size:
                rr, cc = np.meshgrid(ts, cs, indexing="ij")
                rows.append(rr.ravel())
                cols.append(cc.ravel())
                vals.append(-np.ones(rr.size))
        rows.append(np.arange(nz))
        cols.append(n_x + np.arange(nz))
        vals.append(np.ones(nz))
        rows.append(np.arange(nz))
        cols.append(n_x + nz + zk)
        vals.append(-np.ones(nz))
        exist = sparse.csc_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
            shape=(nz, nvar),
        )
        return cover, late, exist

    def _master_late(self, node: _Node) -> _NodeLP:
        """The percentile master LP: on-time columns x, late variables z, late-only VMs
        y; rows: coverage >= 1, late count <= allowed, z[j, k] <= VMs of type k, counts
        (of x and y); duals as `master_lp`'s."""
        pairs = _Pairs.of(self.n, node, self.kinds)
        all_masks = np.array(self.cols.mask, dtype=np.int64)
        all_k = np.array(self.cols.k, dtype=np.int64)
        keep = np.flatnonzero(pairs.valid(all_masks, all_k))
        f = np.array(self.cols.f, dtype=np.float64)[keep]
        ks = all_k[keep]
        n_x = keep.size
        nz = len(self.late_vars)
        count_rows: list[tuple[int, float, int]] = []
        for i in range(self.kinds + 1):
            if node.lo[i] > 0:
                count_rows.append((i, float(node.lo[i]), -1))
            if math.isfinite(node.hi[i]):
                count_rows.append((i, float(node.hi[i]), 1))
        n_art = sum(1 for _, _, sign in count_rows if sign > 0)
        nvar = n_x + nz + self.kinds + n_art
        c = np.zeros(nvar)
        c[:n_x] = (f[:, 0] + f[:, 1]) * _SCALE
        zc = np.array([self.jp.price_per_s[k] * self.jp.runtime_s[j, k] for j, k in self.late_vars])
        c[n_x : n_x + nz] = zc * _SCALE
        c[n_x + nz : n_x + nz + self.kinds] = self.jp.startup_usd * _SCALE
        c[n_x + nz + self.kinds :] = self.big_m * _SCALE
        cover, late, exist = self._late_rows(self._matrix(all_masks[keep]), ks, nvar)
        blocks = [-cover, late, exist]
        b = [-np.ones(self.n), np.array([float(self.v.allowed)]), np.zeros(nz)]
        art = n_x + nz + self.kinds
        for i, value, sign in count_rows:
            row = np.zeros((1, nvar))
            row[0, :n_x] = sign * (ks == i if i < self.kinds else np.ones(n_x))
            ycols = n_x + nz + (np.array([i]) if i < self.kinds else np.arange(self.kinds))
            row[0, ycols] = sign
            if sign > 0:
                row[0, art] = -1.0
                art += 1
            blocks.append(sparse.csc_matrix(row))
            b.append(np.array([sign * value]))
        a_ub = sparse.vstack(blocks).tocsc()
        b_ub = np.concatenate(b)
        zlo, zhi = self._late_bounds(node)
        bounds = (
            [(0.0, None)] * n_x
            + list(zip(zlo, np.where(np.isfinite(zhi), zhi, None), strict=True))
            + [(0.0, None)] * n_art
        )
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
        if res.status == 2:
            raise _Infeasible
        if res.status != 0:
            raise RuntimeError(f"exact: the master LP failed ({res.message})")
        lam = np.minimum(np.asarray(res.ineqlin.marginals) / _SCALE, 0.0)
        y = np.maximum(-lam[: self.n] - 1e-11, 0.0)  # shaved: see master_lp
        lam[: self.n] = -y
        nu = float(-lam[self.n])
        pi = -lam[self.n + 1 : self.n + 1 + nz]
        dual = float(y.sum()) - nu * float(self.v.allowed)
        fixed = np.array(self.jp.startup_usd, dtype=np.float64)
        for k in range(self.kinds):
            fixed[k] -= float(pi[[t for t, (_, kk) in enumerate(self.late_vars) if kk == k]].sum())
        pen_lo = np.zeros(self.kinds + 1)
        at = self.n + 1 + nz
        for t, (i, value, sign) in enumerate(count_rows):
            lam_i = float(lam[at + t])
            dual += sign * value * lam_i
            if sign < 0:
                pen_lo[i] = -lam_i
            if i < self.kinds:
                fixed[i] -= sign * lam_i
            else:
                fixed -= sign * lam_i
        # reduced costs of z and y under these multipliers: what a plan's late variables
        # can take off the bound (z <= 1, y <= the count's upper bound)
        rc = c / _SCALE - a_ub.T @ lam
        rc_z = rc[n_x : n_x + nz]
        rc_y = rc[n_x + nz : n_x + nz + self.kinds]
        y_hi = np.array(
            [
                min(float(self.n), node.hi[k], node.hi[self.kinds], zhi[nz + k])
                for k in range(self.kinds)
            ]
        )
        extra_neg = float(np.minimum(rc_z, 0.0) @ np.minimum(zhi[:nz], 1.0))
        extra_neg += float(np.minimum(rc_y, 0.0) @ y_hi)
        x = np.asarray(res.x[:n_x])
        zv = np.asarray(res.x[n_x : n_x + nz])
        yv = np.asarray(res.x[n_x + nz : n_x + nz + self.kinds])
        counts = np.array(
            [x[ks == k].sum() + yv[k] for k in range(self.kinds)] + [x.sum() + yv.sum()],
            dtype=np.float64,
        )
        return _NodeLP(y, 0.0, nu, fixed, dual, counts, pen_lo, keep, x, zv, yv, extra_neg)

    def _late_plan(
        self, vms: list[tuple[int, list[int]]], late: list[tuple[int, int]]
    ) -> list[tuple[int, list[int]]]:
        """On-time VMs plus late jobs (job, type): each late job after the jobs of a VM of
        its type, or on a VM of late jobs of that type when there is none."""
        out = [(k, list(js)) for k, js in vms]
        for j, k in late:
            host = next((vm for vm in out if vm[0] == k), None)
            if host is None:
                out.append((k, [j]))
            else:
                host[1].append(j)
        return out

    def _mip_late(
        self,
        masks: Sequence[int] | IntArray,
        ks: Sequence[int] | IntArray,
        f: FloatArray,
        time_limit: float,
        node: _Node | None,
    ) -> tuple[list[tuple[int, list[int]]] | None, float, bool]:
        """`mip` for percentile: on-time columns, late variables and late-only VMs."""
        masks = np.asarray(masks, dtype=np.int64)
        ks = np.asarray(ks, dtype=np.int64)
        n_x = masks.size
        nz = len(self.late_vars)
        kinds = self.kinds
        nvar = n_x + nz + kinds + kinds + 1
        cost = np.zeros(nvar)
        cost[:n_x] = (f[:, 0] + f[:, 1]) * _SCALE
        cost[n_x : n_x + nz] = (
            np.array([self.jp.price_per_s[k] * self.jp.runtime_s[j, k] for j, k in self.late_vars])
            * _SCALE
        )
        cost[n_x + nz : n_x + nz + kinds] = self.jp.startup_usd * _SCALE
        cover, late, exist = self._late_rows(self._matrix(masks), ks, nvar)
        count = sparse.lil_matrix((kinds + 1, nvar))
        for k in range(kinds):
            count[k, np.flatnonzero(ks == k)] = 1.0
            count[k, n_x + nz + k] = 1.0
            count[k, n_x + nz + kinds + k] = -1.0
            count[kinds, n_x + nz + kinds + k] = 1.0
        count[kinds, nvar - 1] = -1.0
        matrix = sparse.vstack([cover, late, exist, count.tocsc()]).tocsc()
        row_lo = np.concatenate(
            [np.ones(self.n), [-np.inf], np.full(nz, -np.inf), np.zeros(kinds + 1)]
        )
        row_hi = np.concatenate(
            [np.ones(self.n), [float(self.v.allowed)], np.zeros(nz), np.zeros(kinds + 1)]
        )
        lb = np.zeros(nvar)
        ub = np.ones(nvar)
        zlo, zhi = self._late_bounds(node)
        lb[n_x : n_x + nz + kinds] = zlo
        ub[n_x : n_x + nz + kinds] = zhi
        ub[n_x + nz + kinds :] = np.inf
        if node is not None:
            lb[n_x + nz + kinds :] = node.lo
            ub[n_x + nz + kinds :] = node.hi
        res = _milp(
            time_limit,
            cost,
            integrality=np.ones(nvar),
            bounds=Bounds(lb, ub),
            constraints=[LinearConstraint(matrix, row_lo, row_hi)],
            options={"mip_rel_gap": 0.0, "disp": False},
        )
        if res is None:
            return None, -math.inf, False
        self.stats.nodes += int(getattr(res, "mip_node_count", 0) or 0)
        bound = getattr(res, "mip_dual_bound", None)
        bound = -math.inf if bound is None or not np.isfinite(bound) else float(bound) / _SCALE
        if res.status == 2:
            return None, math.inf, True
        solved = res.status == 0
        if res.x is None:
            return None, bound, solved
        chosen = np.flatnonzero(res.x[:n_x] > 0.5)
        vms = [(int(ks[c]), _jobs_of(int(masks[c]))) for c in chosen]
        late_list = [self.late_vars[t] for t in np.flatnonzero(res.x[n_x : n_x + nz] > 0.5)]
        if solved:
            bound = max(bound, float(res.fun) / _SCALE)
        return self._late_plan(vms, late_list), bound, solved

    # -- the solve -----------------------------------------------------------------

    def _generate(
        self, node: _Node, best_val: float, tol: float
    ) -> tuple[_NodeLP, float, float, bool]:
        """Column generation at `node` until no column has a negative reduced cost, or
        its bound reaches `best_val`: (its last LP, the highest profit priced, the
        node's proven bound $, converged)."""
        eps = 1e-12
        lower = -math.inf
        # a plan in the box has at most this many VMs (the Lagrangian bound's factor)
        most = min(self.n, node.hi[self.kinds])
        pairs = _Pairs.of(self.n, node, self.kinds)
        while True:
            lp = self.master_lp(node)
            max_profit = 0.0
            added = 0
            for k in range(self.kinds):
                masks, rows, best = self.run_search(k, lp, eps, dynamic=True, pairs=pairs)
                max_profit = max(max_profit, best)
                for r in np.argsort(-rows[:, 4])[:8] if len(masks) else []:
                    if self.cols.add(k, int(masks[r]), self._terms(rows[r])):
                        added += 1
            # any plan in the box costs >= dual + its VMs' reduced costs (+ its late
            # variables', percentile)
            lower = max(lower, lp.dual + lp.extra_neg - most * max_profit)
            if added == 0 or lower >= best_val - tol:
                return lp, max_profit, lower, added == 0
            if time.perf_counter() > self.deadline:
                raise _Stop(lower)

    def _integral(self, lp: _NodeLP) -> bool:
        """Whether the LP's solution is a plan (0/1 columns covering each job once); if
        so it is considered as the incumbent."""
        x = lp.x
        values = np.concatenate([x, lp.z, lp.yv])
        if np.any(np.abs(values - np.round(values)) > 1e-9):
            return False
        chosen = lp.columns[x > 0.5]
        masks = np.array(self.cols.mask, dtype=np.int64)[chosen]
        late = [self.late_vars[t] for t in np.flatnonzero(lp.z > 0.5)]
        for j, _ in late:
            masks = np.append(masks, np.int64(1) << j)
        full = (1 << self.n) - 1
        if int(np.bitwise_or.reduce(masks)) != full if masks.size else True:
            return False
        if sum(bin(int(m)).count("1") for m in masks) != self.n:
            return False
        ks = np.array(self.cols.k, dtype=np.int64)[chosen]
        vms = [(int(k), _jobs_of(int(m))) for k, m in zip(ks, masks[: chosen.size], strict=True)]
        self.consider(self._late_plan(vms, late) if late else vms)
        return True

    def _split(self, node: _Node, lp: _NodeLP) -> list[_Node] | None:
        """Two children that split the LP's solution: the job pair whose share of a VM
        is the most fractional (together / apart, Ryan and Foster), else the job whose
        type is (on it / not); None when the solution is integral in both."""
        for name, values in (("z", lp.z), ("y", lp.yv)):
            frac = np.abs(values - np.round(values))
            if values.size and frac.max() > 1e-6:
                t = int(np.argmax(frac))
                v = float(values[t])
                return [
                    dataclasses.replace(
                        node, fixed=node.fixed + ((name, t, math.ceil(v), math.inf),)
                    ),
                    dataclasses.replace(node, fixed=node.fixed + ((name, t, 0.0, math.floor(v)),)),
                ]
        sel = lp.x > 1e-9
        cols = lp.columns[sel]
        x = lp.x[sel]
        masks = np.array(self.cols.mask, dtype=np.int64)[cols]
        ks = np.array(self.cols.k, dtype=np.int64)[cols]
        bits = ((masks[None, :] >> np.arange(self.n, dtype=np.int64)[:, None]) & 1).astype(
            np.float64
        )
        share = (bits * x[None, :]) @ bits.T
        upper = np.triu(np.ones_like(share, dtype=bool), 1)
        frac = upper & (share > 1e-6) & (share < 1 - 1e-6)
        if frac.any():
            score = np.where(frac, np.abs(share - 0.5), np.inf)
            a, b = np.unravel_index(int(np.argmin(score)), score.shape)
            pair = ((int(a), int(b)),)
            return [
                dataclasses.replace(node, together=node.together + pair),
                dataclasses.replace(node, apart=node.apart + pair),
            ]
        on = np.stack([(bits * (x * (ks == k))[None, :]).sum(axis=1) for k in range(self.kinds)])
        frac_on = (on > 1e-6) & (on < 1 - 1e-6)
        if frac_on.any():
            score = np.where(frac_on, np.abs(on - 0.5), np.inf)
            k, j = np.unravel_index(int(np.argmin(score)), score.shape)
            return [
                dataclasses.replace(node, placed=node.placed + ((int(j), int(k), True),)),
                dataclasses.replace(node, placed=node.placed + ((int(j), int(k), False),)),
            ]
        return None

    def consider(self, vms: list[tuple[int, list[int]]] | None) -> float:
        """Make `vms` the incumbent if it is better; its variant value ($)."""
        if vms is None:
            return math.inf
        plan = ordered(self.jp, vms)
        val = _variant_value(self.jp, self.v, plan)
        if val < self.best_val:
            self.best_plan, self.best_val = plan, val
        return val

    def _cover(
        self,
        node: _Node,
        lp: _NodeLP,
        masks: IntArray,
        ks: IntArray,
        f: FloatArray,
        rc: FloatArray,
        node_lb: float,
        tol: float,
    ) -> tuple[list[tuple[int, list[int]]] | None, float, bool]:
        """The least-value partition of the jobs among these columns inside the box, by
        `_cover_search`: (VMs or None, bound $, solved: the search was exhaustive or met
        the node's bound). Not for percentile (its late variables are not columns)."""
        if self.late_mode:
            return None, -math.inf, False
        n = self.n
        quantum = 1e-9
        # run time of each column: its jobs' run times on its type
        bits = ((masks[None, :] >> np.arange(n, dtype=np.int64)[:, None]) & 1).astype(bool)
        runtime = np.where(np.isfinite(self.jp.runtime_s), self.jp.runtime_s, 0.0)
        load = np.einsum("jc,jc->c", bits, runtime[:, ks])
        # each job's least share of a VM: run time / the type's largest VM load
        cap = np.array([load[ks == k].max() if np.any(ks == k) else 0.0 for k in range(self.kinds)])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(
                np.isfinite(self.jp.runtime_s) & (cap[None, :] > 0),
                self.jp.runtime_s / cap[None, :],
                np.inf,
            )
        f_job = ratio.min(axis=1)
        f_job = np.where(np.isfinite(f_job), f_job, 0.0) * (1.0 - 1e-12)
        colf = bits.T.astype(np.float64) @ f_job
        need0 = float(f_job.sum())
        step = float(lp.pen_lo[self.kinds] + min(0.0, float(rc.min())))
        big = np.iinfo(np.int64).max // 4
        lo = np.array(node.lo, dtype=np.int64)
        hi = np.array([big if math.isinf(h) else int(h) for h in node.hi], dtype=np.int64)
        link, rhs, price = self._link(f)
        mode = self.v.mode if link is not None else 0
        cost = f[:, 0] + f[:, 1]
        link_arr = np.zeros(len(masks)) if link is None else np.ascontiguousarray(link)
        best_cols = np.zeros(n + 1, dtype=np.int64)
        rng = np.random.default_rng(0)
        rounded = np.floor(rc / quantum)
        value, count, nodes, exhausted = self.best_val, -1, 0, False
        # Restarts (a heavy-tailed search): by reduced cost with the fullest VMs first
        # among near-ties; by fullest VM alone (no early break: any order is exact);
        # shuffled; the last one, by reduced cost, runs longest.
        # (a node is one column looked at: a few nanoseconds)
        attempts = [
            (quantum, 1.0, 10_000_000),
            (math.inf, 1.0, 20_000_000),
            (math.inf, 0.3, 10_000_000),
            (math.inf, 0.3, 10_000_000),
            (quantum, 1.0, 300_000_000),
        ]
        for q, spread, limit in attempts:
            tie = -load if spread == 1.0 else -load * rng.uniform(1 - spread, 1 + spread, load.size)
            key = rounded if math.isfinite(q) else np.zeros(load.size)
            order = np.lexsort((tie, key))
            bits_o = bits[:, order]
            jobs, pos = np.nonzero(bits_o)  # by job, then by (reduced cost, tie)
            cols = order[pos].astype(np.int64)
            starts = np.searchsorted(jobs, np.arange(n + 1)).astype(np.int64)
            job_order = np.argsort(np.diff(starts), kind="stable").astype(np.int64)
            found_value, found, used, exhausted = _cover_search(
                masks,
                rc,
                ks,
                cost,
                link_arr,
                starts,
                cols,
                job_order,
                lo,
                hi,
                lp.pen_lo,
                mode,
                rhs,
                price,
                lp.dual,
                value,
                node_lb + tol,
                limit,
                q,
                colf,
                need0,
                step,
                best_cols,
            )
            nodes += used
            if found > 0:
                value, count = found_value, found
                kept = best_cols[:count].copy()
            if exhausted or (count > 0 and value <= node_lb + tol):
                break
            if time.perf_counter() > self.deadline:
                break
        if count > 0:
            best_cols[:count] = kept
        self.stats.nodes += nodes
        vms = None
        if count > 0:
            vms = [(int(ks[c]), _jobs_of(int(masks[c]))) for c in best_cols[:count]]
        if count > 0 and value <= node_lb + tol:
            return vms, value, True
        if exhausted:
            return vms, min(value, self.best_val), True
        return vms, -math.inf, False

    def _leaf(
        self,
        node: _Node,
        lp: _NodeLP,
        max_profit: float,
        node_lb: float,
        tol: float,
        max_columns: int,
        mip_limit_s: float,
    ) -> tuple[float, bool]:
        """The cheapest plan in the node below the incumbent (made the incumbent): (the
        node's bound $, solved). _TooMany when it would take more than `max_columns`
        columns or its MIP more than `mip_limit_s` seconds: branch instead.

        A plan of value V has every VM's reduced cost <= V - dual + (N - 1) x the highest
        profit priced, so with E(g) the VMs of reduced cost <= g, the MIP over E(g) is
        exact once its optimum is at most dual + g - (N - 1) x that profit: the full gap
        (the incumbent's) when its columns are few, else a small one."""
        slack = (self.n - 1) * max(max_profit, 0.0) - lp.extra_neg
        pairs = _Pairs.of(self.n, node, self.kinds)
        full = self.best_val - lp.dual + slack + tol
        # the full gap when its columns are few; else from a small gap up, while they are
        try:
            return self._leaf_round(
                node, lp, node_lb, tol, pairs, full, full, max_columns, mip_limit_s
            )[:2]
        except _TooMany:
            pass
        # too many: a small gap may still hold the node's optimum (degenerate duals)
        g = max(0.05 * (self.best_val - lp.dual), 1e-9) + slack + tol
        full = self.best_val - lp.dual + slack + tol
        if g < full:
            bound, solved, exact = self._leaf_round(
                node, lp, node_lb, tol, pairs, g, full, max_columns, mip_limit_s
            )
            if solved and (exact or bound <= lp.dual + g - slack):
                return bound, True
            if not solved:
                return min(bound, lp.dual + g - slack), False
        raise _TooMany

    def _leaf_round(
        self,
        node: _Node,
        lp: _NodeLP,
        node_lb: float,
        tol: float,
        pairs: _Pairs,
        g: float,
        full: float,
        max_columns: int,
        mip_limit_s: float,
    ) -> tuple[float, bool, bool]:
        """Enumerate the VMs of reduced cost <= g and find the best partition among them
        (exact cover search, then the MIP): (bound over them $, solved, exact for the
        node: g is the full gap or the plan meets the node's bound)."""
        all_masks: list[IntArray] = []
        all_k: list[IntArray] = []
        all_f: list[FloatArray] = []
        all_rows: list[FloatArray] = []
        size = 0
        for k in range(self.kinds):
            masks, rows, _ = self.run_search(
                k, lp, -g, dynamic=False, pairs=pairs, max_total=max_columns - size
            )
            size += len(masks)
            if len(masks):
                all_rows.append(rows)
                all_masks.append(masks)
                all_k.append(np.full(len(masks), k, dtype=np.int64))
                loss = self.pen * rows[:, 1] if self.v.mode <= 1 else np.zeros(len(rows))
                all_f.append(np.column_stack([rows[:, 0], loss, rows[:, 2], rows[:, 3]]))
        self.stats.enumerated = max(self.stats.enumerated, size)
        if not all_masks:  # no plan among them below the incumbent
            return self.best_val, True, g >= full
        masks_e = np.concatenate(all_masks)
        ks_e = np.concatenate(all_k)
        f_e = np.vstack(all_f)
        rc_e = -np.concatenate([r[:, 4] for r in all_rows])
        vms, bound, solved = self._cover(node, lp, masks_e, ks_e, f_e, rc_e, node_lb, tol)
        if not solved:
            budget = self.deadline - time.perf_counter()
            if budget <= 0:
                raise _Stop(-math.inf)
            self.consider(vms)
            vms, bound, solved = self.mip(masks_e, ks_e, f_e, min(budget, mip_limit_s), node)
            if not solved and budget > mip_limit_s:
                self.consider(vms)
                raise _TooMany
        val = self.consider(vms)
        if solved and vms is not None and val > bound + tol:
            return -math.inf, False, False  # the columns and the plan disagree: no proof
        if solved and vms is not None and val <= node_lb + tol:
            return val, True, True  # meets the node's bound: optimal in the node
        if not solved:
            return bound, False, False
        return min(bound, self.best_val), True, g >= full

    def root_bound(self) -> float:
        """The LP bound of the variant (column generation at the root, $)."""
        for k in range(self.kinds):
            for j in self.items[k].jobs:
                self.cols.add_set(k, [int(j)])
        self.big_m = 1.0
        inf = math.inf
        root = _Node(tuple([0] * (self.kinds + 1)), tuple([inf] * (self.kinds + 1)))
        return self._generate(root, inf, 0.0)[2]

    def solve(
        self, incumbents: Sequence[JobPlan], cutoff: float
    ) -> tuple[JobPlan | None, float, float, bool]:
        """(best plan or None, its variant value, proven lower bound on the variant's
        optimum, proven). A plan is returned only when its value is below `cutoff`;
        without one, the bound says no plan is below min(cutoff, bound)."""
        self.best_plan: JobPlan | None = None
        self.best_val = cutoff
        for k in range(self.kinds):
            for j in self.items[k].jobs:
                self.cols.add_set(k, [int(j)])
        for plan in incumbents:
            val = _variant_value(self.jp, self.v, plan)
            if val < self.best_val:
                self.best_plan, self.best_val = plan, val
            for k, js in plan.vms:
                self.cols.add_set(k, js)
        if not math.isfinite(self.best_val):
            raise ValueError("exact: no incumbent plan and no cutoff")
        tol = 1e-9 * max(1.0, abs(self.best_val))
        # An artificial VM over an upper count (any cost keeps the LP a relaxation):
        # twice the incumbent, above the LP's marginal value of a VM, yet on the scale
        # of real costs so that the duals keep the pricing bounds tight.
        self.big_m = 2.0 * abs(self.best_val) + 1e-6
        inf = math.inf
        root = _Node(tuple([0] * (self.kinds + 1)), tuple([inf] * (self.kinds + 1)))
        heap: list[tuple[float, int, _Node]] = [(-inf, 0, root)]
        seq = 1
        first = True
        while heap:
            bound, _, node = heapq.heappop(heap)
            if bound >= self.best_val - tol:
                heap.clear()
                break
            if any(lo > hi for lo, hi in zip(node.lo, node.hi, strict=True)):
                continue  # an empty box
            if not _Pairs.of(self.n, node, self.kinds).feasible:
                continue  # contradicting pairs
            try:
                lp, max_profit, node_lb, converged = self._generate(node, self.best_val, tol)
                node_lb = max(node_lb, bound)
                if first:
                    first = False
                    # the MIP over the generated columns: a strong incumbent
                    f = np.array(self.cols.f, dtype=np.float64)
                    budget = max(0.0, self.deadline - time.perf_counter())
                    vms, _, _ = self.mip(self.cols.mask, self.cols.k, f, min(budget, 3.0))
                    self.consider(vms)
                if node_lb >= self.best_val - tol or not converged:
                    continue
                # branch on a fractional count strictly inside the box (with the
                # artificial in use the count can exceed its upper bound: no branch)
                frac = np.abs(lp.counts - np.round(lp.counts))
                order = [self.kinds] + list(np.argsort(-frac[: self.kinds]))
                branch = next(
                    (
                        int(i)
                        for i in order
                        if frac[i] > 1e-6
                        and node.lo[i] <= math.floor(lp.counts[i])
                        and math.ceil(lp.counts[i]) <= node.hi[i]
                    ),
                    None,
                )
                if branch is not None:
                    value = float(lp.counts[branch])
                    down_hi = list(node.hi)
                    down_hi[branch] = math.floor(value)
                    up_lo = list(node.lo)
                    up_lo[branch] = math.ceil(value)
                    # more VMs first: it is where the incumbents are
                    children = [
                        dataclasses.replace(node, lo=tuple(up_lo)),
                        dataclasses.replace(node, hi=tuple(down_hi)),
                    ]
                    for child in children:
                        heapq.heappush(heap, (node_lb, seq, child))
                        seq += 1
                    continue
                if self._integral(lp):  # the LP's optimum is a plan: the node is solved
                    continue
                try:
                    leaf_bound, solved = self._leaf(
                        node, lp, max_profit, node_lb, tol, _LEAF_COLUMNS, _LEAF_MIP_S
                    )
                    too_many = False
                except _TooMany:
                    solved, too_many, leaf_bound = False, True, node_lb
                if solved:
                    continue
                split = self._split(node, lp) if too_many else None
                if split is None and too_many:  # nothing left to branch on: all of it
                    leaf_bound, solved = self._leaf(
                        node, lp, max_profit, node_lb, tol, 1 << 62, math.inf
                    )
                    if solved:
                        continue
                if split is None:
                    rest = min((b for b, _, _ in heap), default=inf)
                    here = max(node_lb, leaf_bound)
                    return self.best_plan, self.best_val, min(here, rest, self.best_val), False
                for child in split:
                    heapq.heappush(heap, (node_lb, seq, child))
                    seq += 1
            except _Infeasible:
                continue
            except _Stop as stop:
                here = max(bound, stop.args[0] if stop.args else -inf)
                rest = min((b for b, _, _ in heap), default=inf)
                return self.best_plan, self.best_val, min(here, rest, self.best_val), False
        return self.best_plan, self.best_val, self.best_val, True


# -- incumbents -------------------------------------------------------------------------


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


# -- the solver -------------------------------------------------------------------------


@dataclass(frozen=True)
class ExactSolution:
    """`plan`'s `cost` and `slo_loss` ($, eq. 1 from scratch on the actual run times);
    `optimal`: proven optimal; `lower_bound_usd`: a proven lower bound on the optimum
    (== cost when optimal); `seconds`: wall clock; `nodes`: search nodes visited (the
    column searches), LPs solved and VMs enumerated are in `lps` and `columns`."""

    plan: JobPlan
    cost: float
    slo_loss: float
    optimal: bool
    lower_bound_usd: float
    seconds: float
    nodes: int
    lps: int = 0
    columns: int = 0


def _money_lower_bound(jp: JobProblem) -> float:
    """Least money of any plan ($): every job at its cheapest type's price, one VM."""
    c = np.where(np.isfinite(jp.runtime_s), jp.runtime_s * jp.price_per_s[None, :], np.inf)
    return float(c.min(axis=1).sum()) + float(np.min(jp.startup_usd))


def solve_jobs(problem: JobProblem, time_limit_s: float = 120.0) -> ExactSolution:
    """The cheapest plan of `problem` (cost incl. the SLO loss, $), proven optimal unless
    `time_limit_s` (wall clock, s) stops the search first: then the best plan found,
    `optimal=False` and a proven lower bound."""
    start = time.perf_counter()
    jp = problem
    jp.check()
    if jp.jobs > MAX_JOBS:
        raise ValueError(f"solve_jobs: at most {MAX_JOBS} jobs, got {jp.jobs}")
    if not time_limit_s > 0:
        raise ValueError(f"time_limit_s: expected > 0, got {time_limit_s}")
    deadline = start + time_limit_s
    stats = _Stats()
    plans = incumbent_plans(jp)
    scored = [(job_plan_cost(jp, p)[0], i) for i, p in enumerate(plans)]
    ub, i_best = min(scored)
    best = plans[i_best]
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
        time.perf_counter() - start,
        stats.nodes,
        stats.lp,
        stats.enumerated,
    )


def _positional_model(
    jp: JobProblem, positions: int
) -> tuple[FloatArray, FloatArray, FloatArray, sparse.csc_matrix, FloatArray, FloatArray, list]:
    """The positional MIP of the avg SLO (module doc): variables x[j, k, p] (job j on a
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


def _solve_percentile(
    jp: JobProblem,
    plans: list[JobPlan],
    best: JobPlan,
    ub: float,
    deadline: float,
    stats: _Stats,
) -> tuple[JobPlan, float, float, bool]:
    """The threshold search of the module doc, 4. Returns (plan, cost, bound, proven)."""
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
