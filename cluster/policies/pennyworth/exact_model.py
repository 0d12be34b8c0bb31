"""The exact planner's problem model (`exact.py`): the problem, plans, their cost and
the variants one exact solve minimises.

A `JobProblem` gives every job its own run time on every VM type (`runtime_s[j, k]`,
seconds); a `JobPlan` rents VMs, each of one type, with an ordered job list; its cost
(dollars, eq. 1: `job_plan_cost`) is the start-up cost of each VM plus its price x the run
times of its jobs, plus the SLO loss of the response times. Here too: the builders of a
`JobProblem` from a `Problem` (task means, or the run times the engine draws), each VM's
best run order (`best_order`; for `rtpt` with late jobs the compiled DP over subsets,
`_min_tardiness`), and what one exact solve minimises (`_Variant`) with a VM's cost terms
in it (`_vm_terms`: money $, SLO loss $, sum of responses s, late count) and a plan's
value (`_variant_value`, $).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numba import njit

from clusteremu.cluster.jobs import generate_jobs, replication_seed, runtime_table
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.pennyworth.problem import Problem, ScenarioFieldError
from clusteremu.cluster.slo import Slo

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The most jobs one exact solve takes (a VM's job set is a 63-bit mask).
MAX_JOBS = 62
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

    @classmethod
    def of_tasks(cls, counts: Sequence[int], vms: Sequence[tuple[int, Sequence[int]]]) -> JobPlan:
        """A plan over tasks (each VM's task indices in run order, as `plan.Plan` holds
        them) as a plan over the jobs of a `JobProblem` built from the same `Problem`
        (task by task, `counts[t]` jobs of task t): each task's jobs taken in order."""
        first = np.concatenate([[0], np.cumsum(counts)]).astype(int).tolist()
        taken = [0] * len(counts)
        out = []
        for k, tasks in vms:
            jobs = []
            for t in tasks:
                jobs.append(first[t] + taken[t])
                taken[t] += 1
            out.append((int(k), tuple(jobs)))
        return cls(tuple(out))


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


# -- the rtpt order of late jobs: a compiled DP over subsets ---------------------------


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
