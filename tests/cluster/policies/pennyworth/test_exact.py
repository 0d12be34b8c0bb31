"""The exact planner with per-job run times (`exact.py`): its cost equals a brute-force
enumeration of every plan on random tiny batches (every SLO kind, one to three VM types,
lateness avoidable or not), its bound is a proven lower bound, and a time limit too short
gives `optimal=False` with a bound below the optimum (tests only)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from clusteremu.cluster.policies.pennyworth.exact import (
    JobPlan,
    JobProblem,
    best_order,
    job_plan_cost,
    job_problem,
    mean_job_problem,
    solve_jobs,
)
from clusteremu.cluster.policies.pennyworth.problem import Problem
from clusteremu.cluster.slo import Slo, percentile_rank

#: The time limit where a test expects a proof: a safety net, not what decides. Every
#: batch here is proven in well under a second (the first call's compilation included);
#: the former 60 s left little margin for that first call on a heavily loaded machine.
TIME_LIMIT_S = 3600.0


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
    SLO whose bound may be unreachable for some jobs (lateness unavoidable).
    `rtpt-reference`: rtpt with one bound per task whatever type runs it."""
    reference = kind == "rtpt-reference"
    kind = "rtpt" if reference else kind
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
    if reference:
        means = rng.uniform(60.0, 400.0, n_tasks)
        problem = dataclasses.replace(
            problem, slo=dataclasses.replace(slo, reference_type="vm0"), reference_mean_s=means
        )
    task_of = [t for t, c in enumerate(counts) for _ in range(c)]
    actual = runtime[task_of] * rng.lognormal(0.0, 0.3, (jobs, types))
    jp = job_problem(problem, actual)
    if reference:  # one bound per job, on every type it can run on
        finite = np.isfinite(jp.runtime_s)
        expected = np.repeat(means[task_of][:, None], types, axis=1)
        assert (jp.task_mean_s[finite] == expected[finite]).all()
    return jp


@pytest.mark.parametrize("kind", ["max", "rtpt", "rtpt-reference", "avg", "percentile"])
def test_exact_equals_brute_force(kind: str) -> None:
    seeds = {"max": 21, "rtpt": 22, "rtpt-reference": 25, "avg": 23, "percentile": 24}
    rng = np.random.default_rng(seeds[kind])
    late = 0
    for i in range(40):
        types = 1 + i % 3
        # up to 5 jobs (4 with three types: the enumeration grows as types^VMs)
        p = random_job_problem(rng, kind, types=types, jobs=1 + i % (5 if types < 3 else 4))
        found = solve_jobs(p, time_limit_s=TIME_LIMIT_S)
        truth = brute_force(p)
        assert found.optimal, (i, p)
        assert found.cost == pytest.approx(job_plan_cost(p, found.plan)[0], rel=1e-12)
        assert found.cost == pytest.approx(truth, rel=1e-9, abs=1e-12), (i, p)
        assert found.lower_bound_usd == found.cost
        late += found.slo_loss > 0
    assert late >= 3  # some optima pay a loss


@pytest.mark.parametrize("kind", ["max", "rtpt", "avg", "percentile"])
def test_a_warm_start_leaves_the_proven_optimum_unchanged(kind: str) -> None:
    """Start plans (a random plan, every job alone in reverse order) are incumbents only:
    the proven optimum is still the brute-force one, never dearer than a start plan, and
    `source` names where the returned plan came from."""
    rng = np.random.default_rng({"max": 31, "rtpt": 32, "avg": 33, "percentile": 34}[kind])
    for i in range(12):
        types = 1 + i % 3
        p = random_job_problem(rng, kind, types=types, jobs=1 + i % (5 if types < 3 else 4))
        jobs = [int(j) for j in rng.permutation(p.jobs)]
        cut = int(rng.integers(1, p.jobs + 1))
        start = {
            "random": JobPlan(
                ((int(rng.integers(types)), tuple(jobs[:cut])),)
                + (((int(rng.integers(types)), tuple(jobs[cut:])),) if cut < p.jobs else ())
            ),
            "alone": JobPlan(tuple((0, (j,)) for j in reversed(range(p.jobs)))),
        }
        start = {
            name: plan
            for name, plan in start.items()
            if all(math.isfinite(p.runtime_s[j, k]) for k, js in plan.vms for j in js)
        }
        found = solve_jobs(p, time_limit_s=TIME_LIMIT_S, start=start)
        assert found.optimal and found.gap == 0.0
        assert found.cost == pytest.approx(brute_force(p), rel=1e-9, abs=1e-12), (i, p)
        assert found.cost == pytest.approx(solve_jobs(p, TIME_LIMIT_S).cost, rel=1e-9, abs=1e-12)
        for plan in start.values():
            assert found.cost <= job_plan_cost(p, plan)[0] * (1 + 1e-12)
        assert found.source in {"search", "incumbent", *start}
    with pytest.raises(ValueError, match="start plan 'short'"):
        solve_jobs(p, TIME_LIMIT_S, {"short": JobPlan(((0, (0,)),) * 2)})


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
    from clusteremu.cluster.policies.pennyworth.astar import solve
    from tests.cluster.policies.pennyworth.test_astar import random_problem

    rng = np.random.default_rng(7)
    for kind in ("max", "rtpt", "avg", "percentile"):
        for i in range(6):
            problem = random_problem(rng, kind, types=1 + i % 3)
            found = solve_jobs(mean_job_problem(problem), time_limit_s=TIME_LIMIT_S)
            assert found.optimal
            assert found.cost == pytest.approx(solve(problem).cost, rel=1e-9, abs=1e-12)


def _vm_terms(p: JobProblem, k: int, jobs: list[int]) -> tuple[float, float, float]:
    """(money $, per-job loss $ for max / rtpt, sum of responses s) of one VM in its best
    order (the order itself is checked against every permutation above)."""
    if any(not math.isfinite(p.runtime_s[j, k]) for j in jobs):
        return math.inf, math.inf, math.inf
    money = float(p.startup_usd[k])
    t_s = float(p.counted_delay_s()[k])
    loss = resp = 0.0
    for j in best_order(p, k, jobs):
        e = float(p.runtime_s[j, k])
        money += float(p.price_per_s[k]) * e
        t_s += e
        resp += t_s
        if p.slo.kind == "max":
            loss += p.slo.penalty_per_s * max(0.0, t_s - p.slo.deadline_s)
        elif p.slo.kind == "rtpt":
            loss += p.slo.penalty_per_s * max(0.0, t_s - p.slo.factor * p.task_mean_s[j, k])
    return money, loss, resp


def subset_dp(p: JobProblem) -> float:
    """The optimum by dynamic programming over job subsets (tests only): max and rtpt
    cost the sum of their VMs' costs; avg keeps, per subset, the Pareto front of (money,
    sum of responses) and pays the loss at the end."""
    n, kinds = p.jobs, len(p.type_names)
    vm: list[list[tuple[float, float, float]]] = [[]] + [
        [_vm_terms(p, k, [j for j in range(n) if m >> j & 1]) for k in range(kinds)]
        for m in range(1, 1 << n)
    ]
    fronts: list[list[tuple[float, float]]] = [[(0.0, 0.0)]] + [[] for _ in range(1, 1 << n)]
    for m in range(1, 1 << n):
        low = m & -m
        rest = m ^ low
        sub = rest
        cands: list[tuple[float, float]] = []
        while True:
            s = sub | low
            for money, loss, resp in vm[s]:
                for f_money, f_resp in fronts[m ^ s]:
                    if p.slo.kind == "avg":
                        cands.append((f_money + money, f_resp + resp))
                    else:
                        cands.append((f_money + money + loss, 0.0))
            if sub == 0:
                break
            sub = (sub - 1) & rest
        cands.sort()
        front: list[tuple[float, float]] = []
        for money, resp in cands:  # keep the (money, responses) Pareto front
            if math.isfinite(money) and (not front or resp < front[-1][1] - 1e-9):
                front.append((money, resp))
        fronts[m] = front
    slo = p.slo
    if slo.kind != "avg":
        return fronts[(1 << n) - 1][0][0]
    return min(
        money + slo.penalty_per_s * max(0.0, resp / n - slo.target_s)
        for money, resp in fronts[(1 << n) - 1]
    )


@pytest.mark.parametrize("kind", ["max", "rtpt", "avg"])
def test_exact_equals_a_subset_dp_on_mid_size_batches(kind: str) -> None:
    """Batches of 7-9 jobs of the shipped tasks (their run times spread as the engine
    draws them): large enough for the search's VM-count branching, enumeration and exact
    cover to run, small enough for a DP over subsets."""
    import dataclasses

    from clusteremu.cluster.policies.pennyworth.problem import problem_from_spec
    from clusteremu.scenarios.loader import load_scenario

    spec = load_scenario(f"pennyworth-{kind}")
    assert spec.slo is not None
    full = problem_from_spec(spec, spec.slo)
    rng = np.random.default_rng({"max": 31, "rtpt": 32, "avg": 33}[kind])
    for i in range(6):
        n = int(rng.integers(7, 10))
        keep = list(range(1 + i % 3))
        counts = np.bincount(rng.integers(0, len(full.task_names), n), minlength=10)
        ids, start = [], 0
        for c in counts:
            ids.append(tuple(range(start, start + int(c))))
            start += int(c)
        slo = full.slo
        if i % 2:  # bounds from a range, some tight
            slo = {
                "max": Slo("max", 0.01, deadline_s=float(rng.uniform(250, 700))),
                "rtpt": Slo("rtpt", 0.01, factor=float(rng.uniform(1.2, 3.0))),
                "avg": Slo("avg", 0.02, target_s=float(rng.uniform(150, 500))),
            }[kind]
        base = dataclasses.replace(
            full,
            type_names=tuple(full.type_names[k] for k in keep),
            runtime_s=full.runtime_s[:, keep],
            price_per_s=full.price_per_s[keep],
            startup_usd=full.startup_usd[keep],
            startup_delay_s=full.startup_delay_s[keep],
            counts=tuple(int(c) for c in counts),
            job_ids=tuple(ids),
            slo=slo,
            runtime_sd_s=None,
        )
        task_of = [t for t, c in enumerate(counts) for _ in range(int(c))]
        p = job_problem(base, base.runtime_s[task_of] * rng.lognormal(0.0, 0.15, (n, len(keep))))
        found = solve_jobs(p, time_limit_s=TIME_LIMIT_S)
        assert found.optimal
        truth = subset_dp(p)
        assert found.cost == pytest.approx(truth, rel=1e-9), (i, p)
        if kind == "avg":
            # solve_jobs plans avg by its positional MIP; the branch-and-price (its
            # linking row priced into the columns) is a second, independent method
            import time

            from clusteremu.cluster.policies.pennyworth.exact import (
                _Solver,
                _Stats,
                _Variant,
                incumbent_plans,
            )

            solver = _Solver(p, _Variant(2), time.perf_counter() + TIME_LIMIT_S, _Stats())
            _, value, _, proven = solver.solve(incumbent_plans(p), math.inf)
            assert proven and value == pytest.approx(truth, rel=1e-9), (i, p)


@pytest.mark.parametrize("kind", ["max", "rtpt", "avg", "percentile"])
def test_a_time_limit_too_short_gives_a_lower_bound_below_the_optimum(kind: str) -> None:
    """Stopped at once, the solver returns a complete plan, optimal=False and a proven
    bound: positive, at most the optimum (found without the limit), at most the cost."""
    import dataclasses

    from clusteremu.cluster.policies.pennyworth.exact import engine_runtimes
    from clusteremu.cluster.policies.pennyworth.problem import problem_from_spec
    from clusteremu.scenarios.loader import load_scenario

    counts = [2, 2, 2, 2, 2, 1, 1, 1, 1, 2]  # 16 jobs over the 10 tasks
    spec = load_scenario(
        f"pennyworth-{kind}",
        ["seed=5", "stop.jobs=16"]
        + [f"workload.classes.{i}.arrival.count={c}" for i, c in enumerate(counts)],
    )
    assert spec.slo is not None
    problem = problem_from_spec(spec, spec.slo)
    runtime, ids = engine_runtimes(spec, problem)
    keep = [0]  # t2.small
    one = dataclasses.replace(
        problem,
        type_names=problem.type_names[:1],
        runtime_s=problem.runtime_s[:, keep],
        price_per_s=problem.price_per_s[keep],
        startup_usd=problem.startup_usd[keep],
        startup_delay_s=problem.startup_delay_s[keep],
        runtime_sd_s=None,
    )
    p = job_problem(one, runtime[:, keep], ids)
    stopped = solve_jobs(p, time_limit_s=1e-3)
    assert not stopped.optimal
    assert stopped.cost == pytest.approx(job_plan_cost(p, stopped.plan)[0], rel=1e-12)
    best = solve_jobs(p, time_limit_s=TIME_LIMIT_S)
    assert best.optimal and best.lower_bound_usd == best.cost
    assert 0 < stopped.lower_bound_usd <= best.cost + 1e-12
    assert stopped.lower_bound_usd <= stopped.cost
    assert stopped.cost >= best.cost - 1e-12
