"""Pennyworth's policies on the engine: plan a batch, rent its VMs, run each VM's jobs in
order, release it (the Pennyworth paper).

A `PlanPlacer` is both the placer and the scaler of a run: one object at both extension
points, a pair (`provides = ("placer", "scaler")`, see `clusteremu.cluster.policies.points`). A
scenario names it as its placer; its scaler follows (left out, or `static`, it is the
planner too; another scaler is refused, naming `scheduler.scaler`). An `Engine` built in
Python takes the object at both points: `Engine(spec, placer=p, scaler=p)`. When jobs
arrive — a batch at once, or one by one online — it waits for the batch's last job
(`ScaleView.batch_pending`), builds the batch's `Problem` (task means per rentable VM type,
the scenario's `slo:`), asks its planner for a `Plan`, and rents one VM per planned VM
through the engine (ready after the type's start-up delay; start-up cost plus price from
ready to release). Each VM runs its ordered job list one job at a time, without
preemption: the placer starts a VM's next job when the VM is up and idle. A VM whose list
is done is released. Execution times are the engine's (drawn from the classes'
`runtime_by_node_type`); plans use their means.

Planners, registered as placers (and listed as scalers):

- `pennyworth`: a RAD-tree (`tree: FILE`, written by `clusteremu synthesize`), planning
  with the safety padding it was selected with (`safety_z` overrides it), or, without a
  tree, the A* optimum on the means (`time_limit_s`, then the best greedy plan);
- `pennyworth-rules`: the tree's feasibility rules alone (`safety_z`, default 3, and
  `slack`, default 0, or a tree's margins: `margins_from: FILE`), the ablation a tree must
  beat;
- `ffd-cheapest`: first-fit decreasing onto VMs of one type, a VM's capacity being what the
  SLO allows; the cheapest type whose plan meets the SLO, else the cheapest plan;
- `vm-per-job`: every job on its own VM, of the type cheapest for it alone;
- `fixed-pool`: `vms` VMs of one type (`type`, default the cheapest that runs every task),
  jobs dealt round robin in id order.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from clusteremu.cluster.layout import NodeStatus
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import (
    Placement,
    PlacementView,
    Placer,
    Release,
    Rent,
    Scaler,
    ScaleView,
)
from clusteremu.cluster.policies.pennyworth.astar import SearchLimit, greedy_plans, solve
from clusteremu.cluster.policies.pennyworth.chunks import CHUNK_JOBS
from clusteremu.cluster.policies.pennyworth.features import RULES_SAFETY_Z, rules_plan
from clusteremu.cluster.policies.pennyworth.plan import Plan, plan_cost
from clusteremu.cluster.policies.pennyworth.problem import Problem, problem_from_spec
from clusteremu.cluster.policies.registry import register
from clusteremu.cluster.slo import Slo

#: Cores and GB a VM must have free to count as idle (it runs one job at a time).
IDLE_EPS = 1e-9


class PlanPlacer(Placer, Scaler):
    """Plans batches and executes the plans on rented VMs (see the module doc)."""

    name: ClassVar[str] = "plan"
    #: One object decides for both points: it rents the VMs it places on.
    provides: ClassVar[tuple[str, ...]] = ("placer", "scaler")

    def __init__(self) -> None:
        self.spec: SimulationSpec | None = None
        self.slo: Slo | None = None
        self.planned: set[int] = set()
        #: Rents owed to the engine: (type name, job ids in run order).
        self.to_rent: list[tuple[str, list[int]]] = []
        #: Node index -> the job ids it still has to run, in order.
        self.lists: dict[int, list[int]] = {}
        self.plans = 0

    # -- set-up ------------------------------------------------------------------------

    def check_spec(self, spec: SimulationSpec) -> list[tuple[str, str]]:
        """Rentable node types, and every class with a run time on one of them."""
        rentable = [t.name for t in spec.node_types if t.rentable]
        if not rentable:
            return [
                (
                    "cluster.node_types",
                    f"expected node types with rentable: true (placer {self.name!r} rents VMs)",
                )
            ]
        return [
            (
                f"workload.classes.{i}.runtime_by_node_type",
                f"expected a run time on a rentable node type ({', '.join(rentable)}) for"
                f" class {c.name!r} (placer {self.name!r} plans with them)",
            )
            for i, c in enumerate(spec.classes)
            if not any(name in c.runtime_by_node_type for name in rentable)
        ]

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        problems = self.check_spec(spec)
        if problems:
            raise ValueError(f"{problems[0][0]}: {problems[0][1]}")
        self.spec = spec
        self.slo = spec.slo if spec.slo is not None else Slo("max", 0.0, deadline_s=math.inf)
        self.planned = set()
        self.to_rent = []
        self.lists = {}
        self.plans = 0
        problem_from_spec(spec, self.slo, {c.name: 0 for c in spec.classes})

    def make_plan(self, problem: Problem) -> Plan:
        """The plan of one batch (VM types and task indices of `problem`)."""
        raise NotImplementedError

    # -- scaling: plan new batches, rent, release -----------------------------------------

    def scale(self, view: ScaleView) -> list[Rent | Release]:
        assert self.spec is not None and self.slo is not None
        out: list[Rent | Release] = []
        new = [int(j) for j in view.queue if int(j) not in self.planned]
        if new and not view.batch_pending:
            classes = {int(j): int(c) for j, c in zip(view.queue, view.class_index, strict=True)}
            self._plan_batch(new, classes)
        # Nodes rented now get the next rows, in order.
        row = len(view.node_type)
        for type_name, jobs in self.to_rent:
            out.append(Rent(type_name))
            self.lists[row] = jobs
            row += 1
        self.to_rent = []
        for k, jobs in list(self.lists.items()):
            if (
                not jobs
                and k < len(view.node_status)
                and view.node_status[k] != NodeStatus.RELEASED
                and view.running_jobs[k] == 0
            ):
                out.append(Release(k))
                del self.lists[k]
        return out

    def _plan_batch(self, jobs: list[int], classes: dict[int, int]) -> None:
        assert self.spec is not None and self.slo is not None
        spec = self.spec
        by_class: dict[int, list[int]] = {}
        for j in sorted(jobs):
            by_class.setdefault(classes[j], []).append(j)
        counts = {c.name: len(by_class.get(i, [])) for i, c in enumerate(spec.classes)}
        problem = problem_from_spec(spec, self.slo, counts)
        plan = self.make_plan(problem)
        next_of = dict.fromkeys(range(len(spec.classes)), 0)
        for k, tasks in plan.vms:
            ids = []
            for t in tasks:
                ids.append(by_class[t][next_of[t]])
                next_of[t] += 1
            self.to_rent.append((problem.type_names[k], ids))
        if sum(next_of.values()) != len(jobs):
            raise ValueError(f"placer {self.name!r}: the plan does not run every job once")
        self.planned.update(jobs)
        self.plans += 1

    # -- placing: each idle VM takes its next job ----------------------------------------

    def place(self, view: PlacementView) -> list[Placement]:
        waiting = set(view.queue.tolist())
        out: list[Placement] = []
        for k, jobs in self.lists.items():
            if (
                jobs
                and k < view.active.size
                and view.active[k]
                and view.free_cpu[k] >= view.capacity_cpu[k] - IDLE_EPS
                and view.free_memory_gb[k] >= view.capacity_memory_gb[k] - IDLE_EPS
                and jobs[0] in waiting
            ):
                out.append(Placement(jobs.pop(0), k))
        return out

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "plans": self.plans}


_log = logging.getLogger(__name__)


@register("placer", "pennyworth")
class PennyworthPlacer(PlanPlacer):
    """A RAD-tree's plans (`tree`: a JSON file from `clusteremu synthesize`); without a
    tree, the A* optimum within `time_limit_s` seconds (then the best greedy plan).

    A batch of more than `chunk_jobs` jobs is planned in chunks (`chunks.chunked_plan`;
    0: never). With `guard` (the tail guard, default true) a smaller batch gets the plan
    of least expected cost under the run times' spread of the tree's and its rules' (with
    the tree's margins and with their own, `RadTree.plan`); `guard: false` runs the
    tree's own decisions."""

    name: ClassVar[str] = "pennyworth"

    def __init__(
        self,
        tree: str | None = None,
        time_limit_s: float = 60.0,
        safety_z: float | None = None,
        slack: float | None = None,
        chunk_jobs: int = CHUNK_JOBS,
        guard: bool = True,
    ) -> None:
        super().__init__()
        from clusteremu.cluster.policies.pennyworth.tree import RadTree

        if not isinstance(guard, bool):
            raise ValueError(f"guard must be true or false, got {guard!r}")
        self.guard = guard
        if isinstance(chunk_jobs, bool) or not isinstance(chunk_jobs, int) or chunk_jobs < 0:
            raise ValueError(f"chunk_jobs must be an integer >= 0, got {chunk_jobs!r}")
        self.chunk_jobs = chunk_jobs

        if not (isinstance(time_limit_s, int | float) and time_limit_s > 0):
            raise ValueError(f"time_limit_s must be a number > 0, got {time_limit_s!r}")
        self.time_limit_s = float(time_limit_s)
        self.tree_path = tree
        self.tree = None if tree is None else RadTree.load(Path(tree))
        self._told_mapping = False
        if safety_z is None:
            safety_z = self.tree.safety_z if self.tree is not None else 0.0
        self.safety_z = _checked_safety(safety_z)
        if slack is None:
            slack = self.tree.slack if self.tree is not None else 0.0
        self.slack = _checked_slack(slack)

    def check_spec(self, spec: SimulationSpec) -> list[tuple[str, str]]:
        """The plan placer's checks, and a tree that knows every rentable node type."""
        problems = super().check_spec(spec)
        if self.tree is None or problems:
            return problems
        unknown = [t.name for t in spec.node_types if t.rentable]
        unknown = [k for k in unknown if k not in self.tree.type_names]
        if unknown:
            problems.append(
                (
                    f"scheduler.placer.params.tree ({self.tree_path})",
                    f"expected a tree that knows node type(s) {', '.join(unknown)[:200]}; it was "
                    f"synthesised for {', '.join(self.tree.type_names)[:200]} (synthesise one "
                    "for this scenario)",
                )
            )
        return problems

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        super().setup(spec, rng)
        if self.tree is not None and not self._told_mapping:
            self._told_mapping = True
            mapped = [c.name for c in spec.classes if c.name not in self.tree.task_names]
            if mapped:
                _log.warning(
                    "tree %s: task(s) %s are not in the tree; each is mapped to the tree task "
                    "with the nearest run times",
                    self.tree_path,
                    ", ".join(mapped)[:200],
                )

    def make_plan(self, problem: Problem) -> Plan:
        problem = problem.with_slack(self.slack)
        if self.tree is not None:
            return self.tree.plan(
                problem.with_safety(self.safety_z), self.chunk_jobs, guard=self.guard
            )
        try:
            return solve(problem, time_limit_s=self.time_limit_s).plan
        except SearchLimit:
            return min(greedy_plans(problem), key=lambda plan: plan_cost(problem, plan)[0])

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "tree": self.tree_path,
            "safety_z": self.safety_z,
            "slack": self.slack,
            "chunk_jobs": self.chunk_jobs,
            "guard": self.guard,
        }


def _checked_safety(safety_z: object) -> float:
    if (
        isinstance(safety_z, bool)
        or not isinstance(safety_z, int | float)
        or not (0 <= safety_z <= 10)
    ):
        raise ValueError(f"safety_z must be a number from 0 to 10, got {safety_z!r}")
    return float(safety_z)


def _checked_slack(slack: object) -> float:
    if isinstance(slack, bool) or not isinstance(slack, int | float) or not (0 <= slack < 0.9):
        raise ValueError(f"slack must be a fraction from 0 to below 0.9, got {slack!r}")
    return float(slack)


@register("placer", "pennyworth-rules")
class PennyworthRulesPlacer(PlanPlacer):
    """The RAD-tree's feasibility rules without a tree (the ablation of the learned part):
    the cheapest feasible add, else the rent of least mean cost per job left, planning
    with `safety_z` standard deviations of padding and `slack` (the share of the SLO's
    bound kept free), as a tree does.

    `margins_from: FILE` (a tree from `clusteremu synthesize`) takes that tree's margins,
    not its decisions: the ablation the benchmarks and `synthesize` score a tree against.
    A `safety_z` or `slack` given as well overrides the tree's; without a tree the defaults
    are 3 and 0."""

    name: ClassVar[str] = "pennyworth-rules"

    def __init__(
        self,
        safety_z: float | None = None,
        slack: float | None = None,
        margins_from: str | None = None,
    ) -> None:
        super().__init__()
        self.margins_from = margins_from
        if margins_from is not None:
            from clusteremu.cluster.policies.pennyworth.tree import RadTree

            tree = RadTree.load(Path(margins_from))
            safety_z = tree.safety_z if safety_z is None else safety_z
            slack = tree.slack if slack is None else slack
        self.safety_z = _checked_safety(RULES_SAFETY_Z if safety_z is None else safety_z)
        self.slack = _checked_slack(0.0 if slack is None else slack)

    def make_plan(self, problem: Problem) -> Plan:
        return rules_plan(problem.with_slack(self.slack).with_safety(self.safety_z))

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "margins_from": self.margins_from,
            "safety_z": self.safety_z,
            "slack": self.slack,
        }


def _alone_cost(problem: Problem, t: int, k: int) -> float:
    """Dollars of running one job of task t alone on a fresh VM of type k."""
    if not math.isfinite(problem.runtime_s[t, k]):
        return math.inf
    return plan_cost(_single(problem, t), Plan(((k, (0,)),)))[0]


def _single(problem: Problem, t: int) -> Problem:
    """`problem` reduced to one job of task t (as task 0)."""
    return Problem(
        (problem.task_names[t],),
        problem.type_names,
        problem.runtime_s[t : t + 1],
        problem.price_per_s,
        problem.startup_usd,
        problem.startup_delay_s,
        (1,),
        ((0,),),
        problem.slo,
    )


@register("placer", "vm-per-job")
class VmPerJobPlacer(PlanPlacer):
    """Every job on its own VM, of the type cheapest for it alone (SLO loss included)."""

    name: ClassVar[str] = "vm-per-job"

    def make_plan(self, problem: Problem) -> Plan:
        vms: list[tuple[int, tuple[int, ...]]] = []
        for t, n in enumerate(problem.counts):
            if n:
                costs = [_alone_cost(problem, t, k) for k in range(len(problem.type_names))]
                vms += [(int(np.argmin(costs)), (t,))] * n
        return Plan(tuple(vms))


def _cheapest_full_type(problem: Problem) -> int:
    """The type that runs every task of the batch at the least price x run time."""
    runs = [t for t, n in enumerate(problem.counts) if n]
    best, best_cost = -1, math.inf
    for k in range(len(problem.type_names)):
        cost = sum(
            problem.counts[t] * problem.price_per_s[k] * problem.runtime_s[t, k] for t in runs
        )
        if cost < best_cost:
            best, best_cost = k, float(cost)
    if best < 0:
        raise ValueError("no VM type runs every task of the batch")
    return best


@register("placer", "fixed-pool")
class FixedPoolPlacer(PlanPlacer):
    """`vms` VMs of type `type` (default: the cheapest that runs every task), jobs dealt
    round robin in id order."""

    name: ClassVar[str] = "fixed-pool"

    def __init__(self, vms: int = 2, type: str | None = None) -> None:  # noqa: A002
        super().__init__()
        if isinstance(vms, bool) or not isinstance(vms, int) or vms < 1:
            raise ValueError(f"vms must be an integer >= 1, got {vms!r}")
        self.vms = vms
        self.type_name = type

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        super().setup(spec, rng)
        names = [t.name for t in spec.node_types if t.rentable]
        if self.type_name is not None and self.type_name not in names:
            raise ValueError(
                f"type {self.type_name!r} is not a rentable node type ({', '.join(names)})"
            )

    def make_plan(self, problem: Problem) -> Plan:
        if self.type_name is None:
            k = _cheapest_full_type(problem)
        else:
            k = problem.type_names.index(self.type_name)
        jobs = [t for t, n in enumerate(problem.counts) for _ in range(n)]
        if any(not math.isfinite(problem.runtime_s[t, k]) for t in jobs):
            raise ValueError(f"type {problem.type_names[k]!r} cannot run every task")
        lists: list[list[int]] = [[] for _ in range(min(self.vms, len(jobs)))]
        for i, t in enumerate(jobs):
            lists[i % len(lists)].append(t)
        return Plan(tuple((k, tuple(ts)) for ts in lists))


@register("placer", "ffd-cheapest")
class FfdCheapestPlacer(PlanPlacer):
    """First-fit decreasing onto VMs of one type; a VM's capacity is what the SLO allows
    (max: the deadline; rtpt: each job's factor x its mean; avg, percentile: the target).
    Of the types that run every task, the cheapest plan meeting the SLO, else the cheapest
    plan."""

    name: ClassVar[str] = "ffd-cheapest"

    def make_plan(self, problem: Problem) -> Plan:
        best: tuple[bool, float, Plan] | None = None
        jobs = [t for t, n in enumerate(problem.counts) for _ in range(n)]
        for k in range(len(problem.type_names)):
            if any(not math.isfinite(problem.runtime_s[t, k]) for t in jobs):
                continue
            plan = self._ffd(problem, k, jobs)
            cost, loss = plan_cost(problem, plan)
            key = (loss > 1e-12, cost, plan)
            if best is None or key[:2] < best[:2]:
                best = key
        if best is None:
            raise ValueError("no VM type runs every task of the batch")
        return best[2]

    @staticmethod
    def _ffd(problem: Problem, k: int, jobs: list[int]) -> Plan:
        slo = problem.slo
        delay = float(problem.startup_delay_s[k]) if slo.count_startup_delay else 0.0
        order = sorted(jobs, key=lambda t: -problem.runtime_s[t, k])
        bound_mean = problem.rtpt_mean_s()
        vms: list[list[int]] = []
        used: list[float] = []
        for t in order:
            e = float(problem.runtime_s[t, k])
            if slo.kind == "max":
                limit = slo.deadline_s
            elif slo.kind == "rtpt":
                limit = slo.factor * float(bound_mean[t, k])
            else:
                limit = slo.target_s
            for i in range(len(vms)):
                if used[i] + e <= limit:
                    vms[i].append(t)
                    used[i] += e
                    break
            else:
                vms.append([t])
                used.append(delay + e)
        return Plan(tuple((k, tuple(ts)) for ts in vms))
