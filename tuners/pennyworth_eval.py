"""Judging Pennyworth policies out of sample, under the paper's own protocol.

The Pennyworth paper (policy synthesis from optimal allocations; docs/pennyworth.md)
compares a policy applied with *estimates* (task means) against the optimum computed with
*perfect knowledge* of every job's actual run time, on batches of 32 jobs over 10 tasks.
This module draws such batches and prices plans on them:

- a batch of a split ("validation" or "test") is drawn from the evaluation protocol's
  per-instance stream (`clusteremu.tuners.protocol.instance_rng(seed, split, i)`): its jobs' tasks
  uniformly, and its actual run times as the engine draws them for the scenario run with
  those counts and seed `instance_seed(seed, split, i)` (common random numbers with
  `clusteremu run` and `clusteremu solve --knowledge actual`);
- a batch is *equivalent* to a training set when it has the same task counts (a policy
  plans on the means, so it is then the same input to it, whatever the run times; the
  looser test, counts and run times to a millisecond, is `ActualBatch.key`);
  `draw_batches` drops and redraws such batches, and reports how many it dropped;
- a policy plans a batch on the task means (a `Problem`); `actual_cost` prices the plan
  with the actual run times, as the emulator runs it (each VM its list in order:
  `tests/tuners/test_pennyworth_eval.py` checks it against `clusteremu run`'s
  `total_usd`); `optimum` is the exact plan with perfect knowledge
  (`exact.solve_jobs`), or its proven lower bound when the time limit stops it. The
  search starts from the plans of the policies it judges (`start`: the tree's and the
  rules'), so the best plan it returns is never dearer than theirs, whatever its limit.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.pennyworth.exact import (
    ExactSolution,
    JobPlan,
    engine_runtimes,
    job_plan_cost,
    job_problem,
    solve_jobs,
)
from clusteremu.cluster.policies.pennyworth.features import rules_plan
from clusteremu.cluster.policies.pennyworth.placers import (
    FfdCheapestPlacer,
    FixedPoolPlacer,
    VmPerJobPlacer,
)
from clusteremu.cluster.policies.pennyworth.plan import Plan, assign_ids
from clusteremu.cluster.policies.pennyworth.problem import Problem
from clusteremu.cluster.policies.pennyworth.tree import RadTree
from clusteremu.tuners.protocol import (
    Overlap,
    canonical_key,
    drop_equivalent,
    instance_rng,
    instance_seed,
)

FloatArray = npt.NDArray[np.float64]

#: A policy: the plan of a batch, given on its task means (the estimates).
PlanFn = Callable[[Problem], Plan]


def batch_spec(spec: SimulationSpec, counts: Sequence[int], seed: int) -> SimulationSpec:
    """`spec` running one batch of `counts[t]` jobs of class t, with seed `seed`."""
    classes = tuple(
        dataclasses.replace(c, arrival=dataclasses.replace(c.arrival, count=int(n)))
        for c, n in zip(spec.classes, counts, strict=True)
    )
    stop = dataclasses.replace(spec.stop, jobs=int(sum(counts)))
    return dataclasses.replace(spec, classes=classes, seed=int(seed), stop=stop)


def with_counts(base: Problem, counts: Sequence[int]) -> Problem:
    """`base` with `counts[t]` jobs of task t, numbered task by task (as the engine numbers
    a batch arriving at once)."""
    ids: list[tuple[int, ...]] = []
    start = 0
    for c in counts:
        ids.append(tuple(range(start, start + int(c))))
        start += int(c)
    return dataclasses.replace(base, counts=tuple(int(c) for c in counts), job_ids=tuple(ids))


@dataclass(frozen=True)
class ActualBatch:
    """One evaluation batch: `problem` (its task counts, planned on the means) and
    `runtime_s[j, k]`, the actual run time (s) of job j on VM type k, jobs numbered as in
    `problem`; drawn as instance `index` of `split` with engine seed `seed`."""

    split: str
    index: int
    seed: int
    problem: Problem
    runtime_s: FloatArray

    @property
    def key(self) -> Hashable:
        """The same task counts and the same run times (to 1 ms): the same instance."""
        return batch_key(self.problem.counts, self.runtime_s)

    @property
    def plan_key(self) -> Hashable:
        """The same task counts: what a policy planning on the means sees, so a batch with
        a training set's counts is the same input to it (the stricter check)."""
        return batch_key(self.problem.counts, None)


def batch_key(counts: Sequence[int], runtime_s: FloatArray | None) -> Hashable:
    """The key under which two batches are equivalent: task counts and run times (rounded
    to 1 ms; None for a training example set planned on the means)."""
    times = None if runtime_s is None else np.round(np.asarray(runtime_s, dtype=float), 3)
    return canonical_key((tuple(int(c) for c in counts), times), decimals=3)


def draw_counts(n_tasks: int, jobs: int, rng: np.random.Generator) -> tuple[int, ...]:
    """`jobs` jobs, each of a task drawn uniformly."""
    return tuple(int(c) for c in np.bincount(rng.integers(0, n_tasks, jobs), minlength=n_tasks))


def draw_batch(
    spec: SimulationSpec, base: Problem, seed: int, split: str, index: int, jobs: int
) -> ActualBatch:
    """Instance `index` of `split`: task counts from the protocol's instance stream, run
    times as the engine draws them with seed `instance_seed(seed, split, index)`."""
    rng = instance_rng(seed, split, index)
    counts = draw_counts(len(base.task_names), jobs, rng)
    engine_seed = instance_seed(seed, split, index)
    problem = with_counts(base, counts)
    runtime, _ = engine_runtimes(batch_spec(spec, counts, engine_seed), problem)
    return ActualBatch(split, index, engine_seed, problem, runtime)


def draw_batches(
    spec: SimulationSpec,
    base: Problem,
    seed: int,
    split: str,
    count: int,
    jobs: int,
    train_keys: Iterable[Hashable] = (),
) -> tuple[list[ActualBatch], Overlap]:
    """`count` batches of `split`, none with the task counts of a training set (or of an
    earlier split's batch: `train_keys` are `batch_key(counts, None)` keys): such a batch
    is dropped and the next index drawn; the overlap report says how many were dropped.
    Equal counts are the stricter check: policies plan on the means, so two batches with
    the same counts are the same input to them, whatever their run times."""
    result = drop_equivalent(
        list(train_keys),
        lambda i: draw_batch(spec, base, seed, split, i, jobs),
        lambda b: b.plan_key,
        count,
        split=split,
        unique=True,
    )
    return list(result.instances), result.overlap


def job_plan(problem: Problem, plan: Plan) -> JobPlan:
    """A plan over tasks as a plan over the batch's jobs (each task's jobs in id order)."""
    position = {j: i for i, j in enumerate(jid for ids in problem.job_ids for jid in ids)}
    return JobPlan(
        tuple(
            (k, tuple(position[j] for j in ids))
            for (k, _), ids in zip(plan.vms, assign_ids(problem, plan), strict=True)
        )
    )


def actual_cost(batch: ActualBatch, plan: Plan) -> float:
    """Dollars (eq. 1, SLO loss included) of running `plan` with the actual run times:
    each VM runs its jobs in the planned order."""
    jp = job_problem(batch.problem.with_safety(0.0), batch.runtime_s)
    return job_plan_cost(jp, job_plan(batch.problem, plan))[0]


def optimum(
    batch: ActualBatch,
    time_limit_s: float = 120.0,
    start: Mapping[str, PlanFn] | None = None,
) -> ExactSolution:
    """The optimum with perfect knowledge of the batch's run times (or, when the time limit
    stops the search, the best plan found and a proven lower bound), the search started
    from each `start` policy's plan of the batch (priced with the actual run times, as
    `actual_cost` prices it): the plan returned costs no more than any of them."""
    jp = job_problem(batch.problem.with_safety(0.0), batch.runtime_s)
    plans = {
        name: job_plan(batch.problem, policy(batch.problem))
        for name, policy in (start or {}).items()
    }
    return solve_jobs(jp, time_limit_s, plans)


# --- the policies ---------------------------------------------------------------------------


def tree_policy(
    tree: RadTree, safety_z: float | None = None, slack: float | None = None, guard: bool = False
) -> PlanFn:
    """A RAD-tree planning with its margins: its safety padding (or `safety_z`) and the
    share of the SLO's bound it keeps free (or `slack`); `guard`: with the tail guard, as
    the placer plans by default (`RadTree.plan`). Without it (the default here) the plans
    are the tree's own, what a learned-something check judges."""
    z = tree.safety_z if safety_z is None else safety_z
    f = tree.slack if slack is None else slack
    return lambda problem: tree.plan(problem.with_slack(f).with_safety(z), guard=guard)


def empty_tree(tree: RadTree) -> RadTree:
    """`tree` with one leaf that ranks no decision: the feasibility rules decide everything
    (what a learned-something check must not accept)."""
    return dataclasses.replace(
        tree,
        feature=np.array([-2]),
        threshold=np.array([-2.0]),
        left=np.array([-1]),
        right=np.array([-1]),
        counts=np.zeros((1, tree.classes.size)),
    )


def shuffled_tree(tree: RadTree, seed: int = 7) -> RadTree:
    """`tree` with the decision labels of its classes shuffled (a tree fitted on shuffled
    labels: the same splits, meaningless decisions)."""
    rng = np.random.default_rng(seed)
    return dataclasses.replace(tree, classes=rng.permutation(tree.classes))


def rules_policy(safety_z: float, slack: float = 0.0) -> PlanFn:
    """The feasibility rules alone (the tree's ablation), with the same margins."""
    return lambda problem: rules_plan(problem.with_slack(slack).with_safety(safety_z))


def baseline_policies() -> dict[str, PlanFn]:
    """The baselines of the Pennyworth paper's comparison, planning on the means."""
    return {
        "ffd-cheapest": FfdCheapestPlacer().make_plan,
        "vm-per-job": VmPerJobPlacer().make_plan,
        "fixed-pool": FixedPoolPlacer().make_plan,
    }


def costs_of(
    policies: Mapping[str, PlanFn],
    batches: Sequence[ActualBatch],
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, FloatArray]:
    """Every policy's actual cost (dollars) on every batch."""
    out = {name: np.zeros(len(batches)) for name in policies}
    for i, batch in enumerate(batches):
        for name, policy in policies.items():
            out[name][i] = actual_cost(batch, policy(batch.problem))
        if progress is not None:
            progress(i + 1, len(batches))
    return out


@dataclass(frozen=True)
class Optima:
    """Per batch: the perfect-knowledge optimum's cost, its proven lower bound (dollars)
    and whether it is proven optimal."""

    cost: FloatArray
    lower_bound: FloatArray
    optimal: npt.NDArray[np.bool_]
    seconds: FloatArray
    #: where each batch's best plan came from: 'search', 'incumbent' or a start policy
    source: tuple[str, ...] = ()

    @property
    def reference(self) -> FloatArray:
        """What a policy is divided by: the optimum, or its lower bound where unproven."""
        return np.where(self.optimal, self.cost, self.lower_bound)

    @property
    def gap(self) -> FloatArray:
        """Per batch, (best plan - proven bound) / best plan: 0 where proven."""
        return (self.cost - self.lower_bound) / self.cost


def optima_of(
    batches: Sequence[ActualBatch],
    time_limit_s: float = 120.0,
    progress: Callable[[int, int], None] | None = None,
    start: Mapping[str, PlanFn] | None = None,
) -> Optima:
    """The perfect-knowledge optimum of every batch (one core, in order), each search
    started from the `start` policies' plans (`optimum`)."""
    cost, bound, proven, secs, source = [], [], [], [], []
    for i, batch in enumerate(batches):
        found = optimum(batch, time_limit_s, start)
        cost.append(found.cost)
        bound.append(found.lower_bound_usd)
        proven.append(found.optimal)
        secs.append(found.seconds)
        source.append(found.source)
        if progress is not None:
            progress(i + 1, len(batches))
    return Optima(
        np.asarray(cost),
        np.asarray(bound),
        np.asarray(proven, dtype=bool),
        np.asarray(secs),
        tuple(source),
    )


def finite_positive(values: FloatArray, what: str) -> FloatArray:
    """`values` checked finite and > 0 (a ratio's denominator)."""
    if not (np.isfinite(values).all() and (values > 0).all()):
        raise ValueError(f"{what}: expected finite costs > 0")
    return values


def ratio_to(reference: FloatArray, costs: Mapping[str, FloatArray]) -> dict[str, FloatArray]:
    """Each policy's cost / the reference, per batch."""
    ref = finite_positive(np.asarray(reference, dtype=float), "reference")
    return {name: np.asarray(v, dtype=float) / ref for name, v in costs.items()}


def mean_or_nan(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else math.nan
