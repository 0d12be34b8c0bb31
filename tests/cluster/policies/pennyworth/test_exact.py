"""The exact planner with per-job run times (`exact.py`): its cost equals a brute-force
enumeration of every plan on random tiny batches (every SLO kind, one to three VM types,
lateness avoidable or not), its bound is a proven lower bound, and a time limit too short
gives `optimal=False` with a bound below the optimum (tests only)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from cluster.policies.pennyworth.exact import (
    JobPlan,
    JobProblem,
    best_order,
    job_plan_cost,
    job_problem,
    mean_job_problem,
    solve_jobs,
)
from cluster.policies.pennyworth.problem import Problem
from cluster.slo import Slo, percentile_rank


def brute_force(p: JobProblem) -> float:
    """The least cost over every plan: every order of the jobs cut into consecutive VMs,
    every type for each VM (each plan appears many times), priced from scratch without
    the solver's code (pure Python, the SLO's definition)."""
    n, kinds = p.jobs, len(p.type_names)
    e = p.runtime_s.tolist()
    means = p.task_mean_s.tolist()
    price = p.price_per_s.tolist()
    start = p.startup_usd.tolist()
    delay = p.counted_delay_s().tolist()
    slo = p.slo
    q = percentile_rank(slo.percentile, n) if slo.kind == "percentile" else 0
    best = math.inf
    for perm in itertools.permutations(range(n)):
        for cuts in itertools.product((False, True), repeat=n - 1):
            segments: list[list[int]] = [[perm[0]]]
            for j, cut in zip(perm[1:], cuts, strict=True):
                if cut:
                    segments.append([j])
                else:
                    segments[-1].append(j)
            for types in itertools.product(range(kinds), repeat=len(segments)):
                money = 0.0
                resp: list[float] = []
                loss = 0.0
                ok = True
                for k, seg in zip(types, segments, strict=True):
                    money += start[k]
                    t_s = delay[k]
                    for j in seg:
                        if not math.isfinite(e[j][k]):
                            ok = False
                            break
                        t_s += e[j][k]
                        money += price[k] * e[j][k]
                        resp.append(t_s)
                        if slo.kind == "max":
                            loss += slo.penalty_per_s * max(0.0, t_s - slo.deadline_s)
                        elif slo.kind == "rtpt":
                            loss += slo.penalty_per_s * max(0.0, t_s - slo.factor * means[j][k])
                    if not ok:
                        break
                if not ok:
                    continue
                if slo.kind == "avg":
                    loss = slo.penalty_per_s * max(0.0, sum(resp) / n - slo.target_s)
                elif slo.kind == "percentile":
                    loss = slo.penalty_per_s * max(0.0, sorted(resp)[q - 1] - slo.target_s)
                best = min(best, money + loss)
    return best


def random_job_problem(rng: np.random.Generator, kind: str, types: int, jobs: int) -> JobProblem:
    """A random batch: 1-3 tasks, per-job run times spread around the task means, a random
    SLO whose bound may be unreachable for some jobs (lateness unavoidable)."""
    n_tasks = int(rng.integers(1, 4))
    counts = [0] * n_tasks
    for _ in range(jobs):
        counts[int(rng.integers(n_tasks))] += 1
    runtime = rng.uniform(60.0, 400.0, (n_tasks, types))
    if types > 1 and rng.random() < 0.3:
        runtime[int(rng.integers(n_tasks)), int(rng.integers(types))] = math.inf
    for t in range(n_tasks):
        if not np.isfinite(runtime[t]).any():
            runtime[t, 0] = 100.0
    tight = rng.random() < 0.4  # bounds some jobs cannot meet even alone
    slo = {
        "max": Slo(
            "max", 0.01, deadline_s=float(rng.uniform(50, 250) if tight else rng.uniform(200, 900))
        ),
        "rtpt": Slo(
            "rtpt", 0.01, factor=float(rng.uniform(0.7, 1.2) if tight else rng.uniform(1.0, 3.0))
        ),
        "avg": Slo(
            "avg", 0.02, target_s=float(rng.uniform(30, 150) if tight else rng.uniform(100, 600))
        ),
        "percentile": Slo(
            "percentile",
            0.02,
            target_s=float(rng.uniform(30, 150) if tight else rng.uniform(100, 600)),
            percentile=float(rng.choice([50, 90, 95, 100])),
        ),
    }[kind]
    if rng.random() < 0.3:
        slo = Slo(**{**slo.__dict__, "count_startup_delay": True})
    if rng.random() < 0.3:  # penalties small enough that lateness may pay
        slo = Slo(**{**slo.__dict__, "penalty_per_s": float(rng.uniform(1e-6, 1e-4))})
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
    task_of = [t for t, c in enumerate(counts) for _ in range(c)]
    actual = runtime[task_of] * rng.lognormal(0.0, 0.3, (jobs, types))
    return job_problem(problem, actual)


@pytest.mark.parametrize("kind", ["max", "rtpt", "avg", "percentile"])
def test_exact_equals_brute_force(kind: str) -> None:
    rng = np.random.default_rng({"max": 21, "rtpt": 22, "avg": 23, "percentile": 24}[kind])
    late = 0
    for i in range(40):
        p = random_job_problem(rng, kind, types=1 + i % 3, jobs=1 + i % 5)
        found = solve_jobs(p, time_limit_s=60)
        truth = brute_force(p)
        assert found.optimal, (i, p)
        assert found.cost == pytest.approx(job_plan_cost(p, found.plan)[0], rel=1e-12)
        assert found.cost == pytest.approx(truth, rel=1e-9, abs=1e-12), (i, p)
        assert found.lower_bound_usd == found.cost
        late += found.slo_loss > 0
    assert late >= 3  # some optima pay a loss


def test_best_order_is_the_least_loss_order() -> None:
    rng = np.random.default_rng(5)
    for kind in ("max", "rtpt", "avg", "percentile"):
        for _ in range(20):
            p = random_job_problem(rng, kind, types=1, jobs=int(rng.integers(1, 6)))
            jobs = list(range(p.jobs))
            best = (
                min(
                    job_plan_cost(p, JobPlan(((0, perm),)))[0]
                    for perm in itertools.permutations(jobs)
                    if all(math.isfinite(p.runtime_s[j, 0]) for j in jobs)
                )
                if all(math.isfinite(p.runtime_s[j, 0]) for j in jobs)
                else None
            )
            if best is None:
                continue
            order = best_order(p, 0, jobs)
            assert job_plan_cost(p, JobPlan(((0, order),)))[0] == pytest.approx(best, rel=1e-12)


def test_means_as_run_times_agree_with_astar() -> None:
    """With every job at its task's mean the job-level optimum is A*'s."""
    from cluster.policies.pennyworth.astar import solve
    from tests.cluster.policies.pennyworth.test_astar import random_problem

    rng = np.random.default_rng(7)
    for kind in ("max", "rtpt", "avg", "percentile"):
        for i in range(6):
            problem = random_problem(rng, kind, types=1 + i % 3)
            found = solve_jobs(mean_job_problem(problem), time_limit_s=60)
            assert found.optimal
            assert found.cost == pytest.approx(solve(problem).cost, rel=1e-9, abs=1e-12)
