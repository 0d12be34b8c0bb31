"""Decision features of a vertex of the allocation graph (the Pennyworth paper, section
III-D; docs/pennyworth.md).

A plan is built one decision at a time: *rent* a VM of type k (allowed when no VM is open
or the open one has a job, and only of a type that runs some job left) or *add* a job of
task t to the most recently rented VM. At every vertex a policy sees:

- `wait_s`: the open VM's expected wait, the time a job added now starts (seconds: the
  run-time estimates already on it, plus its start-up delay when the SLO counts it);
- `open_type=k`: which type the open VM is (one-hot; all zero before the first rent);
- `share=t`: the proportion of the open VM's jobs that are of task t;
- `add_cost=t`: the cost of adding one job of task t to the open VM (dollars: price x run
  time plus the change of the SLO loss), `SENTINEL` when no job of t is left or t cannot
  run on the open VM's type;
- `add_loss=t`: the SLO-loss part of `add_cost=t` (dollars), `SENTINEL` likewise;
- `left=t`: 1 when jobs of task t are unassigned, else 0;
- `left_frac=t`: the fraction of the batch's jobs of task t still unassigned;
- `avg_budget_s` (avg SLO, else 0): the mean response time the jobs left may have with no
  loss, (target x N - the response times so far) / jobs left (seconds; with a safety
  margin, their sum padded, below);
- `late_budget` (percentile SLO, else 0): how many more jobs may end after the target with
  no loss, N - ceil(p/100 x N) - the jobs already late;
- `feasible_adds`: how many tasks' jobs can be added to the open VM feasibly (below).

The paper's features are the wait, the shares, the add costs and the unassigned indicators;
the rest are ours: a tree cannot otherwise tell an empty small VM from an empty large one,
a batch's start from its end, a cheap job from one that breaks the SLO, nor how much of a
batch-wide SLO is left to spend.
Decision labels: `k` for renting type k, `n_types + t` for adding a job of task t.

An *add* is infeasible when the vertex before it has a loss-free completion of a simple
kind and the vertex after it has none: every job left alone on a new VM of its *lone*
type (the cheapest on which a job alone meets the SLO's bound). So no add makes a job late
that a new VM would keep on time for less money (max, rtpt), makes more jobs late than the
percentile allows, or pushes the mean response time past the avg target. Under avg an add
must also keep the mean of the jobs placed so far within the target: with the lone
completion alone, the rules filled the first VM up to the whole batch's budget and left
every later job alone on a VM of its own (1.60 times the optimum on the paper-protocol
batches; 1.07 with it). Where no loss-free completion is left (max, rtpt, avg), a late add
is feasible only when it costs no more than the job alone on its lone type, its own share
of the loss included (under avg: penalty / N per second its response time exceeds its lone
one), so jobs never pile up on one VM once the target is lost. Except under the avg SLO, a
*rent* is infeasible while some add is feasible: no VM is closed while a job left still
fits on it; under avg a rent is feasible when some job left can start on the new VM
feasibly. (With one VM type, moving a job that fits on time to the end of an
earlier VM delays no other job and never costs more, so for max, rtpt and percentile some
optimal plan never closes a VM early; under avg the moved job's own response time can grow,
and a tree made to fill VMs did worse: 1.029 of the optimum against 1.010.) A tree that
predicts an infeasible decision takes its most probable feasible one instead
(`Walker.feasible`; ours, not the paper's): with penalties a hundred times the VM prices,
one late job costs more than the whole plan.

With a safety margin z, a response time is padded by z standard deviations of the run
times up to and including it; under avg, whose target is on the mean, the margin is z
standard deviations of the *sum* of the response times instead (a VM's i-th of m jobs is
in m - i + 1 response times: the variance of the sum is the sum of (m - i + 1)^2 x its
run time's variance), which is what the mean's spread is; padding each job's response by
its own z standard deviations would keep a margin several times the mean's.

A `Walker` keeps what the features need up to date as decisions are taken, and a tree
asks for the few features on its path (`Walker.view`): applying a tree costs a few
microseconds a decision whatever the number of tasks.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.policies.pennyworth.plan import Plan
from clusteremu.cluster.policies.pennyworth.problem import Problem, safe_response_s
from clusteremu.cluster.slo import Slo, percentile_rank

FloatArray = npt.NDArray[np.float64]

#: The add cost of a task that cannot be added (no job left, or no run time on the type).
SENTINEL = -1.0


class Features(Protocol):
    """A feature vector, or anything indexable like one (`FeatureView`)."""

    def __getitem__(self, i: int, /) -> float: ...


# Feature groups, in order (see `feature_names`).
_WAIT, _OPEN, _SHARE, _ADD, _LOSS, _LEFT, _FRAC, _AVG, _LATE, _FITS = range(10)


def feature_names(task_names: tuple[str, ...], type_names: tuple[str, ...]) -> list[str]:
    """Names of the feature vector's entries, in order (see the module doc)."""
    return (
        ["wait_s"]
        + [f"open_type={k}" for k in type_names]
        + [f"share={t}" for t in task_names]
        + [f"add_cost={t}" for t in task_names]
        + [f"add_loss={t}" for t in task_names]
        + [f"left={t}" for t in task_names]
        + [f"left_frac={t}" for t in task_names]
        + ["avg_budget_s", "late_budget", "feasible_adds"]
    )


def feature_width(n_tasks: int, n_types: int) -> int:
    """Length of the feature vector."""
    return 1 + n_types + 5 * n_tasks + 3


def action_names(task_names: tuple[str, ...], type_names: tuple[str, ...]) -> list[str]:
    """Decision labels: rent each type, then add a job of each task."""
    return [f"rent {k}" for k in type_names] + [f"add {t}" for t in task_names]


@dataclass
class Vertex:
    """The state of a partial plan: jobs left per task, the open VM and what it runs, and
    the response times so far (for the batch-wide SLOs)."""

    left: list[int]
    open_type: int = -1
    wait_s: float = 0.0
    on_open: list[int] = field(default_factory=list)
    #: Jobs on the open VM.
    n_on_open: int = 0
    #: Variance of the run times on the open VM so far (s^2; the safety padding's).
    var_s2: float = 0.0
    #: Avg SLO: the variance of the sum of the response times so far (s^2; the margin is
    #: kept on that sum, the mean's), and on the open VM the sum over its jobs of each
    #: job's variance x the number of its VM's jobs from it on (s^2; see `Walker.step`).
    sum_var_s2: float = 0.0
    open_b_s2: float = 0.0
    #: Jobs left in all.
    jobs_left: int = 0
    #: Jobs left that can run on each type.
    left_on_type: list[int] = field(default_factory=list)
    response_sum_s: float = 0.0
    #: Response times so far, sorted (kept for the percentile SLO only).
    sorted_response_s: list[float] = field(default_factory=list)
    #: Jobs whose response time is over the percentile SLO's target.
    late: int = 0
    #: Sum of the lone response times of the jobs left (s), and how many of them are
    #: late even alone (percentile).
    lone_sum_s: float = 0.0
    lone_late: int = 0
    #: Sum of the run-time variances of the jobs left on their lone types (s^2; avg).
    lone_var_s2: float = 0.0
    #: The feasible adds at this vertex, once computed (`Walker.feasible_adds`).
    feasible_cache: list[int] | None = field(default=None, compare=False, repr=False)
    #: The avg / percentile loss of the response times so far, once computed.
    loss_cache: float | None = field(default=None, compare=False, repr=False)
    vms: list[tuple[int, list[int]]] = field(default_factory=list)

    @classmethod
    def start(cls, problem: Problem) -> Vertex:
        finite = np.isfinite(problem.runtime_s)
        counts = list(problem.counts)
        types = lone_types(problem)
        lone = lone_response_s(problem, types)
        target = problem.slo.target_s
        var = problem.runtime_var_s2()
        return cls(
            lone_sum_s=float(sum(c * lone[t] for t, c in enumerate(counts) if c)),
            lone_var_s2=float(
                sum(c * var[t, types[t]] for t, c in enumerate(counts) if c and types[t] >= 0)
            ),
            lone_late=int(sum(c for t, c in enumerate(counts) if c and lone[t] > target)),
            left=counts,
            on_open=[0] * len(problem.task_names),
            jobs_left=sum(counts),
            left_on_type=[
                int(sum(c for t, c in enumerate(counts) if finite[t, k]))
                for k in range(len(problem.type_names))
            ],
        )

    @property
    def done(self) -> bool:
        return self.jobs_left == 0

    def plan(self) -> Plan:
        return Plan(tuple((k, tuple(ts)) for k, ts in self.vms))


def lone_types(problem: Problem) -> list[int]:
    """Each task's *lone* VM type: the cheapest (least price x run time) on which a job of
    it alone on a new VM meets the SLO's bound (deadline, factor x mean, or target; with
    the problem's safety padding), else its cheapest; -1 when it runs on no type."""
    slo = problem.slo
    bound_mean = problem.rtpt_mean_s()
    out: list[int] = []
    for t in range(len(problem.task_names)):
        ks = [k for k in range(len(problem.type_names)) if np.isfinite(problem.runtime_s[t, k])]
        ks.sort(key=lambda k: (float(problem.price_per_s[k] * problem.runtime_s[t, k]), k))
        if not ks:
            out.append(-1)
            continue
        ok = [k for k in ks if _alone_on_time(problem, slo, t, k, float(bound_mean[t, k]))]
        out.append(ok[0] if ok else ks[0])
    return out


def _alone_on_time(problem: Problem, slo: Slo, t: int, k: int, bound_mean_s: float) -> bool:
    """Whether a job of task t alone on a new VM of type k meets the SLO; `bound_mean_s`:
    the task mean that sets its rtpt bound there (`Problem.rtpt_mean_s`)."""
    r = _alone_response_s(problem, t, k)
    if slo.per_job:
        return slo.job_loss(r, bound_mean_s) == 0.0
    return r <= slo.target_s


def _alone_response_s(problem: Problem, t: int, k: int) -> float:
    """A job of task t alone on a new VM of type k: its (padded) response time (s; under
    the avg SLO the margin is kept on the sum of the response times, not job by job)."""
    e = float(problem.runtime_s[t, k])
    delay = float(problem.startup_delay_s[k]) if problem.slo.count_startup_delay else 0.0
    pad = problem.safety_z and problem.slo.kind != "avg"
    var = float(problem.runtime_var_s2()[t, k]) if pad else 0.0
    return delay + safe_response_s(e, var, problem.safety_z)


def lone_response_s(problem: Problem, types: list[int] | None = None) -> list[float]:
    """Each task's (padded) response time alone on a new VM of its lone type (s, inf: no
    type); `types`: the lone types, when known already."""
    return [
        _alone_response_s(problem, t, k) if k >= 0 else math.inf
        for t, k in enumerate(lone_types(problem) if types is None else types)
    ]


class Walker:
    """Feature vectors and legal decisions of the vertices of one problem."""

    def __init__(self, problem: Problem) -> None:
        self.p = problem
        self.n_tasks = T = len(problem.task_names)
        self.n_types = K = len(problem.type_names)
        self.total = max(1, problem.jobs)
        self.runtime_list: list[list[float]] = problem.runtime_s.tolist()
        #: The task mean (s) that sets a job's rtpt bound on each type (`rtpt_mean_s`).
        self.bound_mean_list: list[list[float]] = problem.rtpt_mean_s().tolist()
        self.finite_list: list[list[bool]] = np.isfinite(problem.runtime_s).tolist()
        self.price: list[float] = [float(v) for v in problem.price_per_s]
        #: Safety padding (standard deviations) and run-time variances (s^2) per task, type.
        self.z = float(problem.safety_z)
        self.var_list: list[list[float]] = problem.runtime_var_s2().tolist()
        self.delay: list[float] = (
            [float(v) for v in problem.startup_delay_s]
            if problem.slo.count_startup_delay
            else [0.0] * K
        )
        self.width = feature_width(T, K)
        slo = problem.slo
        self.kind = slo.kind
        #: Late jobs the percentile SLO allows in all (N - ceil(p/100 x N)).
        n = problem.jobs
        self.late_allowed = (
            n - percentile_rank(slo.percentile, n) if slo.kind == "percentile" else 0
        )
        lone_type = lone_types(problem)
        self.lone = lone_response_s(problem, lone_type)
        #: Avg: the margin is z standard deviations of the sum of the response times (the
        #: mean's spread), not of each job's own response time.
        self.sum_margin = slo.kind == "avg"
        #: Run-time variance of each task on its lone type (s^2).
        self.lone_var = [self.var_list[t][k] if k >= 0 else 0.0 for t, k in enumerate(lone_type)]
        #: Whether a job of task t alone on a new VM of its lone type meets a per-job SLO,
        #: and what that costs (dollars: start-up cost plus price x run time).
        self.lone_ok = [
            slo.per_job
            and k >= 0
            and _alone_on_time(problem, slo, t, k, self.bound_mean_list[t][k])
            for t, k in enumerate(lone_type)
        ]
        self.lone_usd = [
            float(problem.startup_usd[k] + problem.price_per_s[k] * problem.runtime_s[t, k])
            if k >= 0
            else math.inf
            for t, k in enumerate(lone_type)
        ]
        #: A job's own loss alone on its lone type (dollars; > 0 when late even alone).
        self.lone_loss = [
            slo.job_loss(self.lone[t], self.bound_mean_list[t][k])
            if slo.per_job and k >= 0
            else 0.0
            for t, k in enumerate(lone_type)
        ]
        #: Price x run time of each task on its lone type (dollars): a job "belongs" on an
        #: open VM of type k when it costs no more there.
        self.lone_money = [
            float(problem.price_per_s[k] * problem.runtime_s[t, k]) if k >= 0 else math.inf
            for t, k in enumerate(lone_type)
        ]
        self.per_job = slo.per_job
        #: The response time (s) up to which a job of task t on type k has no loss of its
        #: own (max: the deadline; rtpt: factor x its bound's task mean).
        self.job_bound_s: list[list[float]] = [
            [
                slo.deadline_s if slo.kind == "max" else slo.factor * self.bound_mean_list[t][k]
                for k in range(K)
            ]
            for t in range(T)
        ]
        # Feature index -> (group, task or type index).
        groups = (
            [(_WAIT, 0)]
            + [(_OPEN, k) for k in range(K)]
            + [(g, t) for g in (_SHARE, _ADD, _LOSS, _LEFT, _FRAC) for t in range(T)]
            + [(_AVG, 0), (_LATE, 0), (_FITS, 0)]
        )
        #: Feature index -> a function of the vertex computing it.
        self.getters: list[Callable[[Vertex], float]] = [self._getter(g, j) for g, j in groups]

    # -- features ----------------------------------------------------------------------

    def response(self, v: Vertex, t: int) -> float:
        """The (padded) response time of a job of task t added to the open VM now (s)."""
        k = v.open_type
        r = v.wait_s + self.runtime_list[t][k]
        if self.z and not self.sum_margin:
            r = safe_response_s(r, v.var_s2 + self.var_list[t][k], self.z)
        return r

    def _sum_var_after(self, v: Vertex, t: int, k: int, var_s2: float, open_b_s2: float) -> float:
        """Avg: the variance of the sum of the response times (s^2) after a job of task t
        is appended to a VM of type k whose jobs' variances sum to `var_s2` (and weighted
        by the jobs from each on, to `open_b_s2`): every job on it waits for the new one's
        predecessors, so each earlier job's run time counts once more in the sum."""
        return v.sum_var_s2 + 2.0 * open_b_s2 + var_s2 + self.var_list[t][k]

    def padded_sum(self, sum_s: float, var_s2: float) -> float:
        """Avg: a sum of response times padded by z standard deviations of it (s)."""
        return sum_s + self.z * math.sqrt(var_s2) if self.z and var_s2 > 0 else sum_s

    def add_loss(self, v: Vertex, t: int) -> float:
        """The change of the SLO loss (dollars) of adding a job of task t to the open VM,
        `SENTINEL` when it cannot be added."""
        k = v.open_type
        if k < 0 or v.left[t] == 0 or not self.finite_list[t][k]:
            return SENTINEL
        r = self.response(v, t)
        slo = self.p.slo
        if slo.per_job:
            return slo.job_loss(r, self.bound_mean_list[t][k])
        if v.loss_cache is None:
            v.loss_cache = self._batch_loss(v, None)
        var = self._sum_var_after(v, t, k, v.var_s2, v.open_b_s2) if self.sum_margin else 0.0
        return self._batch_loss(v, r, var) - v.loss_cache

    def add_cost(self, v: Vertex, t: int) -> float:
        """Dollars of adding one job of task t to the open VM (price x run time plus the
        change of the SLO loss); `SENTINEL` when it cannot be added."""
        loss = self.add_loss(v, t)
        if loss == SENTINEL:
            return SENTINEL
        k = v.open_type
        return self.price[k] * self.runtime_list[t][k] + loss

    def _batch_loss(self, v: Vertex, extra_s: float | None, sum_var_s2: float = 0.0) -> float:
        """The avg / percentile loss of the response times so far (plus `extra_s`; avg:
        their sum padded by z standard deviations of it, `sum_var_s2` after the extra
        job's add)."""
        slo = self.p.slo
        done = v.sorted_response_s
        n = self.total - v.jobs_left + (extra_s is not None)
        if n == 0:
            return 0.0
        if slo.kind == "avg":
            var = v.sum_var_s2 if extra_s is None else sum_var_s2
            total = self.padded_sum(v.response_sum_s + (extra_s or 0.0), var)
            return slo.penalty_per_s * max(0.0, total / n - slo.target_s)
        q = percentile_rank(slo.percentile, n) - 1
        if extra_s is None:
            value = done[q]
        else:
            i = bisect.bisect_left(done, extra_s)
            value = done[q] if q < i else (extra_s if q == i else done[q - 1])
        return slo.penalty_per_s * max(0.0, value - slo.target_s)

    def feature(self, v: Vertex, i: int) -> float:
        """Feature `i` of vertex `v` (see `feature_names`)."""
        return self.getters[i](v)

    def _getter(self, group: int, j: int) -> Callable[[Vertex], float]:
        total = self.total
        if group == _WAIT:
            return lambda v: v.wait_s
        if group == _OPEN:
            return lambda v: 1.0 if v.open_type == j else 0.0
        if group == _SHARE:
            return lambda v: v.on_open[j] / v.n_on_open if v.n_on_open else 0.0
        if group == _ADD:
            return lambda v: self.add_cost(v, j)
        if group == _LOSS:
            return lambda v: self.add_loss(v, j)
        if group == _LEFT:
            return lambda v: 1.0 if v.left[j] else 0.0
        if group == _FRAC:
            return lambda v: v.left[j] / total
        if group == _AVG:
            if self.kind != "avg":
                return lambda v: 0.0
            target = self.p.slo.target_s
            return lambda v: (
                (target * total - self.padded_sum(v.response_sum_s, v.sum_var_s2)) / v.jobs_left
                if v.jobs_left
                else 0.0
            )
        if group == _LATE:
            if self.kind != "percentile":
                return lambda v: 0.0
            return lambda v: float(self.late_allowed - v.late)
        return lambda v: float(len(self.feasible_adds(v)))

    def features(self, v: Vertex) -> FloatArray:
        """The whole feature vector of `v`."""
        return np.array([self.feature(v, i) for i in range(self.width)], dtype=np.float64)

    def view(self, v: Vertex) -> FeatureView:
        """The features of `v`, each computed when first read (for applying a tree)."""
        return FeatureView(self, v)

    # -- decisions ---------------------------------------------------------------------

    def is_legal(self, v: Vertex, action: int) -> bool:
        """Whether decision `action` is allowed at `v`."""
        if action < self.n_types:
            return (v.open_type < 0 or v.n_on_open > 0) and v.left_on_type[action] > 0
        k = v.open_type
        t = action - self.n_types
        return k >= 0 and v.left[t] > 0 and self.finite_list[t][k]

    def feasible(self, v: Vertex, action: int) -> bool:
        """Whether a legal decision is feasible (see the module doc): an add that keeps
        the loss-free completion when `v` has one; a rent when no add is feasible (any
        rent under the avg SLO)."""
        if action < self.n_types:
            # No VM is closed while a job left that belongs on its type can still be added
            # to it feasibly (but avg).
            if v.open_type < 0 and self.kind != "avg":
                return True
            if self.kind == "avg":
                # A VM some job left can start on feasibly.
                k = action
                wait = self.delay[k]
                return any(
                    v.left[t]
                    and self.finite_list[t][k]
                    and self._avg_add_ok(v, t, k, wait + self.runtime_list[t][k], 0.0, 0.0)
                    for t in range(self.n_tasks)
                )
            k = v.open_type
            return not any(
                self.price[k] * self.runtime_list[a - self.n_types][k]
                <= self.lone_money[a - self.n_types] * (1 + 1e-9)
                for a in self.feasible_adds(v)
            )
        return self._add_feasible(v, action - self.n_types)

    def feasible_adds(self, v: Vertex) -> list[int]:
        """The legal and feasible adds at `v` (decision labels; kept until `v` changes)."""
        if v.feasible_cache is None:
            k = v.open_type
            v.feasible_cache = (
                []
                if k < 0
                else [
                    self.n_types + t
                    for t in range(self.n_tasks)
                    if v.left[t] and self.finite_list[t][k] and self._add_feasible(v, t)
                ]
            )
        return v.feasible_cache

    def _add_feasible(self, v: Vertex, t: int) -> bool:
        e = self.runtime_list[t][v.open_type]
        r = self.response(v, t)
        slo = self.p.slo
        if self.per_job:
            # Late, where the job alone on a new VM would cost less (its own loss there
            # included: a job late even alone does not make every job after it late).
            if r <= self.job_bound_s[t][v.open_type]:
                return True
            loss = slo.job_loss(r, self.bound_mean_list[t][v.open_type])
            return (
                loss == 0.0
                or self.price[v.open_type] * e + loss <= self.lone_usd[t] + self.lone_loss[t]
            )
        if slo.kind == "avg":
            return self._avg_add_ok(v, t, v.open_type, r, v.var_s2, v.open_b_s2)
        # Late jobs then: v.late + v.lone_late, plus 1 if this one is late, less 1 if it was
        # late even alone. Fewer than allowed: room for one more; more: a loss is certain.
        if v.late + v.lone_late != self.late_allowed:
            return True
        return r <= slo.target_s or self.lone[t] > slo.target_s

    def _avg_add_ok(
        self, v: Vertex, t: int, k: int, r: float, var_s2: float, open_b_s2: float
    ) -> bool:
        """Avg: whether a job of task t, appended with response time r to a VM of type k
        (the open one, or a new one: `var_s2` = `open_b_s2` = 0), is feasible. With a
        loss-free completion before it (the response times so far, plus every job left
        alone on its lone type, padded sum within target x N): the add keeps one, and the
        jobs placed so far keep their padded mean within the target (no VM spends the
        budget of the jobs after it: filling the first VMs up to the whole batch's budget
        leaves every later job alone on its own VM). Without one: the job costs no more
        than alone on its lone type, its share of the loss it adds included (no pile-up
        of jobs on a VM once the target is lost)."""
        slo = self.p.slo
        target = slo.target_s
        z = self.z
        before = v.response_sum_s + v.lone_sum_s
        if z:
            before += z * math.sqrt(v.sum_var_s2 + v.lone_var_s2)
        budget = target * self.total * (1 + 1e-12)
        if before > budget:
            extra = max(0.0, r - self.lone[t]) * slo.penalty_per_s / self.total
            return self.price[k] * self.runtime_list[t][k] + extra <= self.lone_usd[t] * (1 + 1e-9)
        var = self._sum_var_after(v, t, k, var_s2, open_b_s2) if z else 0.0
        placed = v.response_sum_s + r
        after = placed + v.lone_sum_s - self.lone[t]
        if z:
            after += z * math.sqrt(max(0.0, var + v.lone_var_s2 - self.lone_var[t]))
        if after > budget:
            return False
        n = self.total - v.jobs_left + 1
        return self.padded_sum(placed, var) <= target * n * (1 + 1e-12)

    def legal(self, v: Vertex) -> list[int]:
        """The decisions allowed at `v` (labels, see the module doc)."""
        return [a for a in range(self.n_types + self.n_tasks) if self.is_legal(v, a)]

    def step(self, v: Vertex, action: int) -> None:
        """Apply a legal decision to `v` in place."""
        v.feasible_cache = v.loss_cache = None
        if action < self.n_types:
            if not self.is_legal(v, action):
                raise ValueError(f"rent {self.p.type_names[action]}: not a legal decision here")
            v.open_type = action
            v.wait_s = self.delay[action]
            v.var_s2 = v.open_b_s2 = 0.0
            v.on_open = [0] * self.n_tasks
            v.n_on_open = 0
            v.vms.append((action, []))
            return
        t = action - self.n_types
        if not self.is_legal(v, action):
            raise ValueError(f"add {self.p.task_names[t]}: not a legal decision here")
        r = self.response(v, t)
        k = v.open_type
        v.sum_var_s2 = self._sum_var_after(v, t, k, v.var_s2, v.open_b_s2)
        v.wait_s += self.runtime_list[t][k]
        v.var_s2 += self.var_list[t][k]
        v.open_b_s2 += v.var_s2
        v.lone_var_s2 -= self.lone_var[t]
        v.left[t] -= 1
        v.jobs_left -= 1
        for k in range(self.n_types):
            if self.finite_list[t][k]:
                v.left_on_type[k] -= 1
        v.on_open[t] += 1
        v.n_on_open += 1
        v.response_sum_s += r
        v.lone_sum_s -= self.lone[t]
        if self.lone[t] > self.p.slo.target_s:
            v.lone_late -= 1
        if self.kind == "percentile":
            bisect.insort(v.sorted_response_s, r)
            if r > self.p.slo.target_s:
                v.late += 1
        v.vms[-1][1].append(t)


class FeatureView:
    """A vertex's features as a sequence, each computed once, when first read."""

    __slots__ = ("_cache", "_v", "_walker")

    def __init__(self, walker: Walker, v: Vertex) -> None:
        self._walker = walker
        self._v = v
        self._cache: dict[int, float] = {}

    def __getitem__(self, i: int) -> float:
        value = self._cache.get(i)
        if value is None:
            value = self._cache[i] = self._walker.feature(self._v, i)
        return value

    def __len__(self) -> int:
        return self._walker.width


def decisions(plan: Plan, n_types: int) -> list[int]:
    """A complete plan as its decision sequence (rent, add, add, ..., rent, ...)."""
    out: list[int] = []
    for k, tasks in plan.vms:
        out.append(k)
        out.extend(n_types + t for t in tasks)
    return out


def examples_of_plan(problem: Problem, plan: Plan) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """(features, decision) at every vertex of a plan's path: one row per decision."""
    walker = Walker(problem)
    v = Vertex.start(problem)
    rows: list[FloatArray] = []
    labels: list[int] = []
    for action in decisions(plan, walker.n_types):
        rows.append(walker.features(v))
        labels.append(action)
        walker.step(v, action)
    if not v.done:
        raise ValueError("the plan leaves jobs unassigned")
    x = np.vstack(rows) if rows else np.zeros((0, walker.width))
    return x, np.asarray(labels, dtype=np.int64)


def fallback(walker: Walker, v: Vertex, legal: list[int]) -> int:
    """A decision when a policy ranks none of the legal ones: add the job of least add
    cost to the open VM if any; else rent the type with the least mean cost per job left."""
    adds = [a for a in legal if a >= walker.n_types]
    if adds:
        return min(adds, key=lambda a: walker.add_cost(v, a - walker.n_types))
    left = [t for t in range(walker.n_tasks) if v.left[t]]

    def rent_cost(k: int) -> float:
        costs = [
            walker.price[k] * walker.runtime_list[t][k] for t in left if walker.finite_list[t][k]
        ]
        return sum(costs) / len(costs) if costs else math.inf

    return min(legal, key=rent_cost)


#: The feasibility rules' default padding when planned alone (`pennyworth-rules` without a
#: tree's margins), standard deviations of the run times.
RULES_SAFETY_Z = 3.0


def rules_plan(problem: Problem) -> Plan:
    """The plan of the feasibility rules alone (the RAD-tree without its learned part, the
    ablation a tree must beat): at every vertex the fallback's choice among the feasible
    decisions (the cheapest feasible add, else the rent of least mean cost per job left),
    or among the legal ones when none is feasible."""
    walker = Walker(problem)
    v = Vertex.start(problem)
    while not v.done:
        legal = walker.legal(v)
        if not legal:
            raise ValueError("no legal decision: a job left cannot run on any VM type")
        feasible = [a for a in legal if walker.feasible(v, a)]
        walker.step(v, fallback(walker, v, feasible or legal))
    return v.plan()
