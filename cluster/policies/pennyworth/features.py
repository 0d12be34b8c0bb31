"""Decision features of a vertex of the allocation graph (seed 000, SPEC.md "Pennyworth").

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
- `left=t`: 1 when jobs of task t are unassigned, else 0;
- `left_frac=t`: the fraction of the batch's jobs of task t still unassigned.

The seed's features are the wait, the shares, the add costs and the unassigned indicators;
the open type and the fractions left are ours (a tree cannot otherwise tell an empty
small VM from an empty large one, nor a batch's start from its end).
Decision labels: `k` for renting type k, `n_types + t` for adding a job of task t.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from cluster.policies.pennyworth.plan import Plan
from cluster.policies.pennyworth.problem import Problem

FloatArray = npt.NDArray[np.float64]

#: The add cost of a task that cannot be added (no job left, or no run time on the type).
SENTINEL = -1.0


def feature_names(task_names: tuple[str, ...], type_names: tuple[str, ...]) -> list[str]:
    """Names of the feature vector's entries, in order (see the module doc)."""
    return (
        ["wait_s"]
        + [f"open_type={k}" for k in type_names]
        + [f"share={t}" for t in task_names]
        + [f"add_cost={t}" for t in task_names]
        + [f"left={t}" for t in task_names]
        + [f"left_frac={t}" for t in task_names]
    )


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
    response_sum_s: float = 0.0
    sorted_response_s: list[float] = field(default_factory=list)
    vms: list[tuple[int, list[int]]] = field(default_factory=list)

    @classmethod
    def start(cls, problem: Problem) -> Vertex:
        return cls(left=list(problem.counts), on_open=[0] * len(problem.task_names))

    @property
    def done(self) -> bool:
        return not any(self.left)

    def plan(self) -> Plan:
        return Plan(tuple((k, tuple(ts)) for k, ts in self.vms))


class Walker:
    """Feature vectors and legal decisions of the vertices of one problem."""

    def __init__(self, problem: Problem) -> None:
        self.p = problem
        self.n_tasks = len(problem.task_names)
        self.n_types = len(problem.type_names)
        self.total = max(1, problem.jobs)
        self.runtime = problem.runtime_s
        self.finite = np.isfinite(problem.runtime_s)
        self.delay = (
            problem.startup_delay_s
            if problem.slo.count_startup_delay
            else np.zeros(self.n_types, dtype=np.float64)
        )
        self.width = 1 + self.n_types + 4 * self.n_tasks

    def add_cost(self, v: Vertex, t: int) -> float:
        """Dollars of adding one job of task t to the open VM (price x run time plus the
        change of the SLO loss); `SENTINEL` when it cannot be added."""
        k = v.open_type
        if k < 0 or v.left[t] == 0 or not self.finite[t, k]:
            return SENTINEL
        e = float(self.runtime[t, k])
        r = v.wait_s + e
        slo = self.p.slo
        cost = float(self.p.price_per_s[k]) * e
        if slo.per_job:
            return cost + slo.job_loss(r, e)
        return cost + self._batch_loss(v, r) - self._batch_loss(v, None)

    def _batch_loss(self, v: Vertex, extra_s: float | None) -> float:
        """The avg / percentile loss of the response times so far (plus `extra_s`)."""
        slo = self.p.slo
        done = v.sorted_response_s
        n = len(done) + (extra_s is not None)
        if n == 0:
            return 0.0
        if slo.kind == "avg":
            total = v.response_sum_s + (extra_s or 0.0)
            return slo.penalty_per_s * max(0.0, total / n - slo.target_s)
        q = min(n, max(1, math.ceil(slo.percentile / 100.0 * n - 1e-12))) - 1
        if extra_s is None:
            value = done[q]
        else:
            i = bisect.bisect_left(done, extra_s)
            value = done[q] if q < i else (extra_s if q == i else done[q - 1])
        return slo.penalty_per_s * max(0.0, value - slo.target_s)

    def features(self, v: Vertex) -> FloatArray:
        x = np.zeros(self.width, dtype=np.float64)
        x[0] = v.wait_s
        T, K = self.n_tasks, self.n_types
        if v.open_type >= 0:
            x[1 + v.open_type] = 1.0
        on = sum(v.on_open)
        base = 1 + K
        for t in range(T):
            if on:
                x[base + t] = v.on_open[t] / on
            x[base + T + t] = self.add_cost(v, t)
            x[base + 2 * T + t] = 1.0 if v.left[t] else 0.0
            x[base + 3 * T + t] = v.left[t] / self.total
        return x

    def legal(self, v: Vertex) -> list[int]:
        """The decisions allowed at `v` (labels, see the module doc)."""
        out: list[int] = []
        has_job = any(v.on_open)
        if v.open_type < 0 or has_job:
            for k in range(self.n_types):
                if any(v.left[t] and self.finite[t, k] for t in range(self.n_tasks)):
                    out.append(k)
        if v.open_type >= 0:
            for t in range(self.n_tasks):
                if v.left[t] and self.finite[t, v.open_type]:
                    out.append(self.n_types + t)
        return out

    def step(self, v: Vertex, action: int) -> None:
        """Apply a legal decision to `v` in place."""
        if action < self.n_types:
            v.open_type = action
            v.wait_s = float(self.delay[action])
            v.on_open = [0] * self.n_tasks
            v.vms.append((action, []))
            return
        t = action - self.n_types
        k = v.open_type
        if k < 0 or not v.left[t] or not self.finite[t, k]:
            raise ValueError(f"add {self.p.task_names[t]}: not a legal decision here")
        e = float(self.runtime[t, k])
        v.wait_s += e
        v.left[t] -= 1
        v.on_open[t] += 1
        v.response_sum_s += v.wait_s
        bisect.insort(v.sorted_response_s, v.wait_s)
        v.vms[-1][1].append(t)


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
            float(walker.p.price_per_s[k] * walker.runtime[t, k])
            for t in left
            if walker.finite[t, k]
        ]
        return sum(costs) / len(costs) if costs else math.inf

    return min(legal, key=rent_cost)
