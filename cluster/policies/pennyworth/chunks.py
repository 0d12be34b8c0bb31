"""Planning a batch larger than a policy learned on, in chunks of about its training size.

A RAD-tree learns the decisions of optimal plans of small example sets (20 jobs) and its
margin is selected on batches of 32 jobs. On a batch of thousands of jobs its features
leave that range (the shares of each task left, the budget of a batch-wide SLO), and the
decisions it learned no longer fit: at 30,000 jobs a shipped tree rented one large VM and
then only t2.small. So a batch of more than `size` jobs is cut into chunks of about `size`
jobs, each planned alone (as a batch of its own), and the VMs of the chunks' plans
together are the plan. Two cuttings are tried, and the plan of the whole batch at once
and a fallback's (a RAD-tree's: its feasibility rules' plan of the whole batch, which
shares VMs across the whole batch where chunks cannot) too, and the plan of least
expected cost under the spread of the run times (`spread.expected_cost`, against the
scenario's own SLO) is kept; the cost on the means would prefer a plan packed up to its
tightened bound, which the spread makes late:

- `stratified`: every chunk the batch's task mix (each task's jobs dealt round robin
  over the chunks), the kind of batch the margin was selected on;
- `by_cheapest_type`: the tasks grouped by the VM type that runs them for the least
  money, each group cut stratified on its own, so that jobs whose cheapest type is a
  large one fill its VMs together (at scale the start-up costs of those VMs are shared
  by many jobs, which a chunk of the whole mix cannot do).

The SLO of a chunk is the batch's: a chunk that meets it (max, rtpt: per job; avg: the
chunk's mean response time; percentile: at most the chunk's share of late jobs) leaves
the batch meeting it, since the batch's mean is the chunks' weighted mean and the chunks'
allowances of late jobs add up to no more than the batch's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from clusteremu.cluster.policies.pennyworth.plan import Plan
from clusteremu.cluster.policies.pennyworth.problem import Problem
from clusteremu.cluster.policies.pennyworth.spread import expected_cost

#: Chunk size (jobs) of a RAD-tree's plans: the batch size its margin is selected on
#: (`clusteremu synthesize` validates on batches of the scenario's 32 jobs).
CHUNK_JOBS = 32

Counts = list[int]


def stratified(counts: Sequence[int], size: int) -> list[Counts]:
    """Job counts per task of each of round(N / size) chunks (at least one), each task's
    jobs dealt round robin over the chunks in task order (every chunk the same mix, to one
    job)."""
    n = sum(counts)
    m = max(1, round(n / size))
    out = [[0] * len(counts) for _ in range(m)]
    i = 0
    for t, c in enumerate(counts):
        q, r = divmod(c, m)
        for chunk in range(m):
            out[chunk][t] = q
        for j in range(r):
            out[(i + j) % m][t] += 1
        i = (i + r) % m
    return [c for c in out if sum(c)]


def by_cheapest_type(problem: Problem, size: int) -> list[Counts]:
    """Chunks of tasks that share their cheapest VM type (least mean run time x price),
    each such group cut `stratified`."""
    money = np.where(
        np.isfinite(problem.runtime_s), problem.runtime_s * problem.price_per_s[None, :], math.inf
    )
    cheapest = np.argmin(money, axis=1).tolist()
    out: list[Counts] = []
    for k in sorted(set(cheapest)):
        group = [c if cheapest[t] == k else 0 for t, c in enumerate(problem.counts)]
        if sum(group):
            out += stratified(group, size)
    return out


def sub_problem(problem: Problem, counts: Sequence[int], taken: list[int]) -> Problem:
    """`problem` with `counts[t]` jobs of task t, the next ids of each task (`taken[t]`
    already used; updated)."""
    ids = []
    for t, c in enumerate(counts):
        ids.append(problem.job_ids[t][taken[t] : taken[t] + c])
        taken[t] += c
    return replace(problem, counts=tuple(int(c) for c in counts), job_ids=tuple(ids))


def plan_in_chunks(
    planner: Callable[[Problem], Plan], problem: Problem, chunks: Sequence[Sequence[int]]
) -> Plan:
    """The VMs of `planner`'s plan of every chunk (job counts per task), in chunk order."""
    taken = [0] * len(problem.counts)
    vms: list[tuple[int, tuple[int, ...]]] = []
    for counts in chunks:
        vms += planner(sub_problem(problem, counts, taken)).vms
    return Plan(tuple(vms))


def candidates(
    planner: Callable[[Problem], Plan],
    problem: Problem,
    size: int = CHUNK_JOBS,
    fallback: Callable[[Problem], Plan] | None = None,
) -> dict[str, Plan]:
    """The plans `chunked_plan` chooses from, by name: `planner`'s of the whole batch
    (`whole`), of its `stratified` and `by_cheapest_type` chunks, and `fallback`'s of the
    whole batch (`fallback`) when given."""
    plans = {
        "whole": planner(problem),
        "stratified": plan_in_chunks(planner, problem, stratified(problem.counts, size)),
        "by_cheapest_type": plan_in_chunks(planner, problem, by_cheapest_type(problem, size)),
    }
    if fallback is not None:
        plans["fallback"] = fallback(problem)
    return plans


def choose(problem: Problem, plans: dict[str, Plan], draws: int | None = None) -> str:
    """The name of the plan of least `expected_cost` over `draws` draws of the run times
    (default: `expected_cost`'s; ties: the first)."""
    costs = {name: expected_cost(problem, plan, draws) for name, plan in plans.items()}
    return min(costs, key=costs.__getitem__)


def chunked_plan(
    planner: Callable[[Problem], Plan],
    problem: Problem,
    size: int = CHUNK_JOBS,
    fallback: Callable[[Problem], Plan] | None = None,
    chosen: list[str] | None = None,
) -> Plan:
    """`planner`'s plan of `problem`; with more than `size` jobs (`size` > 0), the plan
    of least `expected_cost` among `candidates`. `chosen`: a list the name of the plan
    taken is appended to ('planner' for a batch of at most `size` jobs)."""
    if size <= 0 or problem.jobs <= size:
        name, plan = "planner", planner(problem)
    else:
        plans = candidates(planner, problem, size, fallback)
        name = choose(problem, plans)
        plan = plans[name]
    if chosen is not None:
        chosen.append(name)
    return plan
