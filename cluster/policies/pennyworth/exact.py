"""The exact planner with perfect knowledge of every job's run time (Pennyworth, eq. 1).

The count-based A* (`astar.py`) plans with task means, so jobs of a task are
interchangeable. The paper's optimum knows each job's *actual* run time; this module
plans that problem exactly. A `JobProblem` gives every job its own run time on every VM
type (`runtime_s[j, k]`, seconds); a `JobPlan` rents VMs, each of one type, with an
ordered job list; its cost (dollars) is, as in `plan.py`, the start-up cost of each VM
plus its price x the run times of its jobs, plus the SLO loss of the response times.

Method: column generation and enumeration, exact by construction.

1. A plan is a set of VMs, a VM a (type, job set): within a VM the best order is known
   (shortest processing time first minimises every order statistic of the completion
   times, so it is optimal for `max`, `avg` and `percentile`; for `rtpt`, earliest due
   date when no job is late, else a DP over subsets for the least total lateness).
   Costs are additive over VMs for `max` and `rtpt`; `avg` adds one row (the sum of all
   response times, the excess paid at penalty / N per second), `percentile` one row (at
   most N - q jobs later than a threshold, see 4.).
2. The linear relaxation over all VMs is solved by column generation: the master LP
   (HiGHS) over the VMs found so far gives duals, and a depth-first search per type
   (compiled; jobs in run order, a fractional-knapsack bound) finds the VM of least
   reduced cost. Any multipliers give a proven lower bound (Lagrangian: the dual value
   plus N x the least reduced cost); at convergence it is the LP optimum.
3. A plan costs its dual value plus the reduced costs of its VMs (each >= 0 at
   convergence), so every VM of a plan cheaper than the incumbent has a reduced cost of
   at most (incumbent - bound). All such VMs are enumerated (the same search) and a
   set-partitioning MIP over them (HiGHS, gap 0) gives the optimum: exact, with no
   assumption that lateness is avoidable. Incumbents: one VM per job, first-fit
   decreasing per type, a mixed greedy, and the MIP over the generated columns.
4. `percentile`: with r_q the q-th smallest response time, loss = penalty x (r_q -
   target)+. For a threshold h, M(h) = least money with at most N - q jobs finishing
   after h is a step function; the optimum is min over h of penalty x (h - target)+ +
   M(h). Starting at the largest h worth paying for, each exact solve yields a plan
   whose own r_q closes an interval; the next solve asks for r_q strictly below it,
   until r_q <= target or the money bound exceeds the incumbent.

`solve_jobs(problem, time_limit_s)` returns an `ExactSolution`: the plan, its cost
computed from scratch, `optimal` (proven) and a proven `lower_bound_usd` (equal to the
cost when optimal). 32 jobs over 10 tasks with three types: seconds to a minute on one
core (`benchmarks/pennyworth_astar.py --knowledge actual`).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numba import njit
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from cluster.jobs import generate_jobs, replication_seed, runtime_table
from cluster.model import SimulationSpec
from cluster.policies.pennyworth.problem import Problem, ScenarioFieldError
from cluster.slo import Slo, percentile_rank

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
    `task_mean_s[j, k]`: its task's mean run time on k (s; the `rtpt` bound is factor x
    this); `task_of[j]`: its task (index into `task_names`); `job_ids[j]`: its id in the
    scenario (the engine's numbering); `price_per_s[k]` ($/s), `startup_usd[k]` ($),
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


def job_problem(problem: Problem, runtime_s: npt.ArrayLike) -> JobProblem:
    """The job-level problem of `problem`'s batch with each job's own run time.

    `runtime_s[j, k]` (s): job j's run time on VM type k, jobs in `problem`'s order (task
    by task, each task's `job_ids` in order); inf where its task cannot run. The task
    means stay the `rtpt` bounds. Safety padding does not apply: the times are known.
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
    means = np.array([p.runtime_s[t] for t in task_of], dtype=np.float64).reshape(table.shape)
    table = np.where(np.isfinite(means), table, math.inf)
    jp = JobProblem(
        tuple(p.task_names),
        tuple(p.type_names),
        table,
        means,
        task_of,
        tuple(j for ids in p.job_ids for j in ids),
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
    the VM's start-up delay when the SLO counts it) and its task's mean on its VM's type
    (s), both indexed by job."""
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
    thr: FloatArray,
    st_next: IntArray,
    st_item: IntArray,
    st_f: FloatArray,
    st_mask: IntArray,
    depth: IntArray,
    out_mask: IntArray,
    out_f: FloatArray,
    n_out: IntArray,
    budget: int,
) -> int:
    """Depth-first search over the job sets of one VM type (resumable).

    Items (the jobs the type can run) are in run order (shortest first; rtpt: earliest
    due date first), so an item added to a set runs last: its response time is delay +
    the set's run time + its own. The profit of a set S is sum_S w - startup - its SLO
    terms: pen x its lateness (max, rtpt), mu x the sum of its response times (avg), nu
    x the jobs later than `theta` (percentile; `strict`: at or after it). Every set
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
        if exact >= thr[0]:
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
            chosen[d] = c
            cnt[k] += 1
            cnt[kinds] += 1
            cov[d + 1] = new_cov
            rcs[d + 1] = r + add
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


@dataclass
class _Node:
    """A box on the VM counts: lo[i] <= count of type i <= hi[i] (i = types: all VMs)."""

    lo: tuple[int, ...]
    hi: tuple[float, ...]


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

    # -- the search kernel ---------------------------------------------------------

    def _weights(self, k: int, y: FloatArray, mu: float, nu: float) -> tuple[FloatArray, IntArray]:
        it = self.items[k]
        w = y[it.jobs] - it.c
        if self.v.mode == 3:
            key = np.clip(w, 0.0, nu) / it.e
        elif self.v.mode == 2:
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
        capacity: int = 4096,
    ) -> tuple[IntArray, FloatArray, float]:
        """Every set of type k with profit (minus reduced cost, $) >= threshold
        (dynamic: an improving chain). Returns (masks, rows of out_f, the highest
        profit written or -inf)."""
        it = self.items[k]
        m = it.e.size
        if m == 0:
            return np.zeros(0, dtype=np.int64), np.zeros((0, 5)), -math.inf
        w, rorder = self._weights(k, lp.y, lp.mu, lp.nu)
        nested = True
        if self.v.mode == 1:
            nested = bool(np.all(w / it.e <= self.pen))
        thr = np.array([threshold])
        st_next = np.zeros(m + 1, dtype=np.int64)
        st_item = np.zeros(m + 1, dtype=np.int64)
        st_f = np.zeros((m + 1, 8))
        st_mask = np.zeros(m + 1, dtype=np.int64)
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
                self.v.mode,
                float(self.delay[k]),
                float(self.jp.startup_usd[k]),
                float(lp.fixed[k]),
                self.pen,
                lp.mu,
                lp.nu,
                self.v.theta,
                self.v.strict,
                nested,
                dynamic,
                thr,
                st_next,
                st_item,
                st_f,
                st_mask,
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
        f = np.array(self.cols.f, dtype=np.float64)
        ks = np.array(self.cols.k, dtype=np.int64)
        ncol = len(self.cols)
        a = self._matrix(self.cols.mask)
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
        if res.status != 0:
            raise RuntimeError(f"exact: the master LP failed ({res.message})")
        lam = np.minimum(np.asarray(res.ineqlin.marginals) / _SCALE, 0.0)
        y = -lam[: self.n]
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
        return _NodeLP(y, mu, nu, fixed, dual, counts, pen_lo)

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
        res = milp(
            cost,
            integrality=integrality,
            bounds=Bounds(lb, ub),
            constraints=[
                LinearConstraint(
                    sparse.vstack(rows).tocsc(), np.concatenate(lo), np.concatenate(hi)
                )
            ],
            options={"time_limit": max(time_limit, 0.1), "mip_rel_gap": 0.0, "disp": False},
        )
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
        while True:
            lp = self.master_lp(node)
            max_profit = 0.0
            added = 0
            for k in range(self.kinds):
                masks, rows, best = self.run_search(k, lp, eps, dynamic=True)
                max_profit = max(max_profit, best)
                for r in np.argsort(-rows[:, 4])[:8] if len(masks) else []:
                    if self.cols.add(k, int(masks[r]), self._terms(rows[r])):
                        added += 1
            # any plan in the box costs >= dual + its VMs' reduced costs
            lower = max(lower, lp.dual - most * max_profit)
            if added == 0 or lower >= best_val - tol:
                return lp, max_profit, lower, added == 0
            if time.perf_counter() > self.deadline:
                raise _Stop(lower)

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
        the node's bound)."""
        n = self.n
        quantum = 1e-9
        # run time of each column: its jobs' run times on its type
        bits = ((masks[None, :] >> np.arange(n, dtype=np.int64)[:, None]) & 1).astype(bool)
        runtime = np.where(np.isfinite(self.jp.runtime_s), self.jp.runtime_s, 0.0)
        load = np.einsum("jc,jc->c", bits, runtime[:, ks])
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
        # restarts: fullest VMs first, then shuffled ties; the last one runs longest
        limits = [100_000, 100_000, 100_000, 2_000_000]
        for attempt, limit in enumerate(limits):
            tie = (
                -load
                if attempt in (0, len(limits) - 1)
                else -load * rng.uniform(0.7, 1.3, load.size)
            )
            order = np.lexsort((tie, rounded))
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
                quantum,
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
        self, node: _Node, lp: _NodeLP, max_profit: float, node_lb: float, tol: float
    ) -> tuple[float, bool]:
        """The cheapest plan in the box below the incumbent (made the incumbent): (the
        node's bound $, solved).

        A plan of value V has every VM's reduced cost <= V - dual + (N - 1) x the highest
        profit priced, so with E(g) the VMs of reduced cost <= g, the MIP over E(g) is
        exact once its optimum is at most dual + g - (N - 1) x that profit; g grows from
        a small gap to the full one (the incumbent's)."""
        slack = (self.n - 1) * max(max_profit, 0.0)
        g = max(0.05 * (self.best_val - lp.dual), 1e-9) + slack + tol
        while True:
            full = self.best_val - lp.dual + slack + tol
            g = min(g, full)
            all_masks: list[IntArray] = []
            all_k: list[IntArray] = []
            all_f: list[FloatArray] = []
            all_rows: list[FloatArray] = []
            for k in range(self.kinds):
                masks, rows, _ = self.run_search(k, lp, -g, dynamic=False)
                if len(masks):
                    all_rows.append(rows)
                    all_masks.append(masks)
                    all_k.append(np.full(len(masks), k, dtype=np.int64))
                    loss = self.pen * rows[:, 1] if self.v.mode <= 1 else np.zeros(len(rows))
                    all_f.append(np.column_stack([rows[:, 0], loss, rows[:, 2], rows[:, 3]]))
            size = sum(len(x) for x in all_masks)
            self.stats.enumerated = max(self.stats.enumerated, size)
            if not all_masks:
                if g >= full:
                    return self.best_val, True
                g = 4.0 * g
                continue
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
                vms, bound, solved = self.mip(masks_e, ks_e, f_e, budget, node)
            val = self.consider(vms)
            if solved and vms is not None and val > bound + tol:
                return -math.inf, False  # the columns and the plan disagree: no proof
            if solved and vms is not None and val <= node_lb + tol:
                return val, True  # meets the node's bound: optimal in the box
            if not solved:  # stopped: plans outside E(g) cost more than dual + g - slack
                return (bound if g >= full else min(bound, lp.dual + g - slack)), False
            if g >= full:
                return min(bound, self.best_val), True
            if vms is not None and bound <= lp.dual + g - slack:
                return bound, True  # every cheaper plan in the box was among the columns
            g = 4.0 * g

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
                frac = np.abs(lp.counts - np.round(lp.counts))
                order = [self.kinds] + list(np.argsort(-frac[: self.kinds]))
                branch = next((int(i) for i in order if frac[i] > 1e-6), None)
                if branch is not None:
                    value = float(lp.counts[branch])
                    down_hi = list(node.hi)
                    down_hi[branch] = math.floor(value)
                    up_lo = list(node.lo)
                    up_lo[branch] = math.ceil(value)
                    # more VMs first: it is where the incumbents are
                    for child in (_Node(tuple(up_lo), node.hi), _Node(node.lo, tuple(down_hi))):
                        heapq.heappush(heap, (node_lb, seq, child))
                        seq += 1
                    continue
                leaf_bound, solved = self._leaf(node, lp, max_profit, node_lb, tol)
                if not solved:
                    rest = min((b for b, _, _ in heap), default=inf)
                    here = max(node_lb, leaf_bound)
                    return self.best_plan, self.best_val, min(here, rest, self.best_val), False
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
    if kind != "percentile":
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

    def r_q(plan: JobPlan) -> float:
        resp, _ = response_times(jp, plan)
        return float(np.sort(resp)[q - 1])

    def adopt(plan: JobPlan | None) -> None:
        nonlocal best, ub
        if plan is not None:
            cost = job_plan_cost(jp, plan)[0]
            if cost < ub:
                best, ub = plan, cost

    # 1. No loss: the least money with r_q <= target.
    if floor <= target:
        v = _Variant(3, target, False, allowed)
        try:
            plan, _, bound, proven = _Solver(jp, v, deadline, stats).solve(plans, ub)
        except _Stop:
            return best, ub, min(money_lb, ub), False
        adopt(plan)
        if not proven:
            # plans with a loss cost at least the least money of all
            return best, ub, min(bound, money_lb, ub), False
    # 2. Plans with a loss: r_q in (target, hi]; each costs its money + pen x (r_q -
    # target), its money at least the LP bound without the SLO.
    try:
        free = _Solver(jp, _Variant(3, math.inf, False, n), deadline, stats).root_bound()
    except _Stop:
        return best, ub, min(money_lb, ub), False
    money_lb = max(money_lb, free)

    def reach() -> float:  # plans whose r_q lies beyond cost more than ub
        return target + max(0.0, ub - money_lb) / pen if pen > 0 else math.inf

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
