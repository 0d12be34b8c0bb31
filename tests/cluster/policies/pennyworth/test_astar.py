"""A* is optimal: on random batches of at most 7 jobs, every SLO kind, one to three VM
types, its cost equals a brute-force enumeration of every allocation (tests only)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from clusteremu.cluster.policies.pennyworth.astar import PartialPlan, solve
from clusteremu.cluster.policies.pennyworth.plan import Plan, plan_cost
from clusteremu.cluster.policies.pennyworth.problem import Problem
from clusteremu.cluster.slo import Slo


def brute_force(problem: Problem) -> float:
    """The cheapest of all allocations: VMs in any order of any types, each with any
    sequence of the jobs left (jobs of one task interchangeable), priced from scratch."""
    n_types = len(problem.type_names)
    best = math.inf

    def vm_sequences(counts: list[int], k: int, seq: list[int]):  # type: ignore[no-untyped-def]
        if seq:
            yield list(seq), list(counts)
        for t, c in enumerate(counts):
            if c and math.isfinite(problem.runtime_s[t, k]):
                counts[t] -= 1
                seq.append(t)
                yield from vm_sequences(counts, k, seq)
                seq.pop()
                counts[t] += 1

    def rec(counts: list[int], vms: list[tuple[int, tuple[int, ...]]]) -> None:
        nonlocal best
        if not any(counts):
            cost, _ = plan_cost(problem, Plan(tuple(vms)))
            best = min(best, cost)
            return
        for k in range(n_types):
            for seq, left in list(vm_sequences(list(counts), k, [])):
                # Canonical: VMs in non-increasing (type, sequence) order (their order is
                # irrelevant to the cost), to keep the enumeration finite and small.
                item = (k, tuple(seq))
                if vms and item > vms[-1]:
                    continue
                vms.append(item)
                rec(left, vms)
                vms.pop()

    rec(list(problem.counts), [])
    return best


def random_problem(rng: np.random.Generator, kind: str, types: int) -> Problem:
    """A random batch of at most 7 jobs over 1-3 tasks; `rtpt-reference`: the rtpt SLO
    with one bound per task whatever type runs it (a reference type's means)."""
    reference = kind == "rtpt-reference"
    kind = "rtpt" if reference else kind
    n_tasks = int(rng.integers(1, 4))
    counts = [0] * n_tasks
    for _ in range(int(rng.integers(1, 8))):
        counts[int(rng.integers(n_tasks))] += 1
    runtime = rng.uniform(60.0, 400.0, (n_tasks, types))
    if types > 1 and rng.random() < 0.3:
        runtime[int(rng.integers(n_tasks)), int(rng.integers(types))] = math.inf
    for t in range(n_tasks):  # every task runs somewhere
        if not np.isfinite(runtime[t]).any():
            runtime[t, 0] = 100.0
    slo = {
        "max": Slo("max", 0.01, deadline_s=float(rng.uniform(200, 900))),
        "rtpt": Slo("rtpt", 0.01, factor=float(rng.uniform(1.0, 3.0))),
        "avg": Slo("avg", 0.02, target_s=float(rng.uniform(100, 600))),
        "percentile": Slo(
            "percentile",
            0.02,
            target_s=float(rng.uniform(100, 600)),
            percentile=float(rng.choice([50, 90, 95])),
        ),
    }[kind]
    if rng.random() < 0.3:
        slo = Slo(**{**slo.__dict__, "count_startup_delay": True})
    price = rng.uniform(0.02, 0.1, types) / 3600.0
    problem = Problem(
        tuple(f"t{t}" for t in range(n_tasks)),
        tuple(f"vm{k}" for k in range(types)),
        runtime,
        price,
        rng.uniform(0.0005, 0.004, types),
        rng.uniform(60, 180, types),
        tuple(counts),
        tuple(tuple(range(sum(counts[:t]), sum(counts[: t + 1]))) for t in range(n_tasks)),
        slo,
    )
    if not reference:
        return problem
    means = rng.uniform(60.0, 400.0, n_tasks)
    return dataclasses.replace(
        problem,
        slo=dataclasses.replace(slo, reference_type="vm0"),
        reference_mean_s=means,
    )


@pytest.mark.parametrize("kind", ["max", "rtpt", "rtpt-reference", "avg", "percentile"])
def test_astar_equals_brute_force_on_75_batches_per_slo(kind: str) -> None:
    seeds = {"max": 1, "rtpt": 2, "rtpt-reference": 5, "avg": 3, "percentile": 4}
    rng = np.random.default_rng(seeds[kind])
    for i in range(75):
        problem = random_problem(rng, kind, types=1 + i % 3)
        found = solve(problem)
        assert found.cost == pytest.approx(plan_cost(problem, found.plan)[0], rel=1e-9, abs=1e-12)
        assert sum(len(ts) for _, ts in found.plan.vms) == problem.jobs
        assert found.cost == pytest.approx(brute_force(problem), rel=1e-9, abs=1e-12), (i, problem)


@pytest.mark.parametrize("kind", ["max", "rtpt", "avg", "percentile"])
def test_astar_from_a_partial_plan_finds_its_cheapest_completion(kind: str) -> None:
    """From any vertex on an optimal plan's path (a prefix of its decisions), the search
    returns a plan that extends the prefix and costs the optimum again."""
    rng = np.random.default_rng({"max": 11, "rtpt": 12, "avg": 13, "percentile": 14}[kind])
    for i in range(40):
        problem = random_problem(rng, kind, types=1 + i % 3)
        best = solve(problem)
        # Every vertex of the path: VMs before the open one, the open one's first j jobs.
        vertices = [
            (tuple(best.plan.vms[:n]) + ((k, ts[:j]),))
            for n, (k, ts) in enumerate(best.plan.vms)
            for j in range(len(ts) + 1)
        ]
        prefix = vertices[int(rng.integers(len(vertices)))]
        used = np.zeros(len(problem.counts), dtype=int)
        for _, tasks in prefix:
            for t in tasks:
                used[t] += 1
        left = tuple(int(c - u) for c, u in zip(problem.counts, used, strict=True))
        again = solve(problem, partial=PartialPlan(prefix, left))
        assert again.plan.vms[: len(prefix) - 1] == prefix[:-1]
        k_open, open_jobs = prefix[-1]
        assert again.plan.vms[len(prefix) - 1][0] == k_open
        assert again.plan.vms[len(prefix) - 1][1][: len(open_jobs)] == open_jobs
        assert again.cost == pytest.approx(plan_cost(problem, again.plan)[0], rel=1e-9, abs=1e-12)
        assert again.cost == pytest.approx(best.cost, rel=1e-9, abs=1e-12), (i, prefix)


@pytest.mark.parametrize("kind", ["max", "rtpt", "avg", "percentile"])
def test_solve_bounded_stopped_early_keeps_a_plan_and_a_lower_bound(kind: str) -> None:
    """Stopped after a few vertices, `solve_bounded` returns a complete plan (at worst a
    greedy one), optimal=False and a bound no higher than the optimum; unstopped it is
    `solve` with optimal=True and the bound equal to the cost."""
    from clusteremu.cluster.policies.pennyworth.astar import solve_bounded

    rng = np.random.default_rng({"max": 41, "rtpt": 42, "avg": 43, "percentile": 44}[kind])
    stopped_some = 0
    for i in range(20):
        problem = random_problem(rng, kind, types=1 + i % 3)
        best = solve(problem)
        full = solve_bounded(problem)
        assert full.optimal and full.cost == pytest.approx(best.cost, rel=1e-12)
        assert full.lower_bound_usd == full.cost
        cut = solve_bounded(problem, max_expanded=3)
        assert sum(len(ts) for _, ts in cut.plan.vms) == problem.jobs
        assert cut.cost == pytest.approx(plan_cost(problem, cut.plan)[0], rel=1e-9, abs=1e-12)
        assert cut.lower_bound_usd <= best.cost + 1e-12
        assert cut.lower_bound_usd <= cut.cost
        assert cut.cost >= best.cost - 1e-12
        if not cut.optimal:
            stopped_some += 1
            assert cut.expanded > 3
        else:
            assert cut.cost == pytest.approx(best.cost, rel=1e-12)
    assert stopped_some >= 10


def with_margin(problem: Problem, rng: np.random.Generator, z: float) -> Problem:
    """`problem` with run-time sds of 5-30% of the means and a margin of z sds."""
    sd = np.where(
        np.isfinite(problem.runtime_s),
        problem.runtime_s * rng.uniform(0.05, 0.3, problem.runtime_s.shape),
        np.inf,
    )
    return dataclasses.replace(problem, runtime_sd_s=sd, safety_z=z)


def test_astar_with_the_avg_margin_on_the_sum_equals_brute_force() -> None:
    """Avg with a safety margin: the loss reads the sum of the response times plus z sds
    of that sum (`plan_cost`), and A* (from the root and from a partial plan on its
    optimal path) finds the cheapest plan by that cost."""
    rng = np.random.default_rng(23)
    for i in range(40):
        problem = with_margin(random_problem(rng, "avg", types=1 + i % 3), rng, 3.0)
        found = solve(problem)
        assert found.cost == pytest.approx(plan_cost(problem, found.plan)[0], rel=1e-9, abs=1e-12)
        assert found.cost == pytest.approx(brute_force(problem), rel=1e-9, abs=1e-12), (i, problem)
        vertices = [
            (tuple(found.plan.vms[:n]) + ((k, ts[:j]),))
            for n, (k, ts) in enumerate(found.plan.vms)
            for j in range(len(ts) + 1)
        ]
        prefix = vertices[int(rng.integers(len(vertices)))]
        used = np.zeros(len(problem.counts), dtype=int)
        for _, tasks in prefix:
            for t in tasks:
                used[t] += 1
        left = tuple(int(c - u) for c, u in zip(problem.counts, used, strict=True))
        again = solve(problem, partial=PartialPlan(prefix, left))
        assert again.cost == pytest.approx(found.cost, rel=1e-9, abs=1e-12), (i, prefix)
