"""A plan's expected cost under the spread of the run times (`spread.py`): without a
spread it is the plan's cost on the means against the scenario's own SLO; with one, the
mean of the costs of the plan's run on the same lognormal draws, priced job by job."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from clusteremu.cluster.policies.pennyworth.features import rules_plan
from clusteremu.cluster.policies.pennyworth.plan import Plan, plan_cost
from clusteremu.cluster.policies.pennyworth.problem import Problem, problem_from_spec
from clusteremu.cluster.policies.pennyworth.spread import expected_cost
from clusteremu.scenarios.loader import load_scenario
from clusteremu.tuners.pennyworth import with_counts

KINDS = ["max", "rtpt", "avg", "percentile"]


def batch(kind: str, counts: list[int]) -> Problem:
    spec = load_scenario(f"pennyworth-{kind}")
    assert spec.slo is not None
    return with_counts(problem_from_spec(spec, spec.slo), counts)


def by_hand(problem: Problem, plan: Plan, draws: int, seed: int) -> float:
    """The same draws (one standard normal per job per draw, in plan order), priced VM
    by VM in plain Python."""
    z = np.random.default_rng(seed).standard_normal((draws, sum(len(t) for _, t in plan.vms)))
    slo = problem.base_slo or problem.slo
    assert problem.runtime_sd_s is not None
    costs = []
    for d in range(draws):
        money, resp, bound, i = 0.0, [], [], 0
        for k, tasks in plan.vms:
            money += float(problem.startup_usd[k])
            t_s = float(problem.startup_delay_s[k]) if slo.count_startup_delay else 0.0
            for t in tasks:
                m, s = float(problem.runtime_s[t, k]), float(problem.runtime_sd_s[t, k])
                s2 = math.log1p((s / m) ** 2)
                run = math.exp(math.log(m) - s2 / 2 + math.sqrt(s2) * z[d, i])
                i += 1
                t_s += run
                money += float(problem.price_per_s[k]) * run
                resp.append(t_s)
                bound.append(float(problem.rtpt_mean_s()[t, k]))
        costs.append(money + slo.loss(np.array(resp), np.array(bound)))
    return float(np.mean(costs))


@pytest.mark.parametrize("kind", KINDS)
def test_without_a_spread_it_is_the_cost_on_the_means(kind: str) -> None:
    problem = batch(kind, [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]).with_slack(0.2)
    plan = rules_plan(problem)
    exact = dataclasses.replace(problem, runtime_sd_s=None)
    own = dataclasses.replace(problem, slo=problem.base_slo, slack=0.0)
    assert expected_cost(exact, plan) == pytest.approx(plan_cost(own, plan)[0], rel=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_with_a_spread_it_is_the_mean_cost_over_the_draws(kind: str) -> None:
    problem = batch(kind, [2, 0, 3, 1, 0, 4, 2, 0, 1, 3]).with_slack(0.1)
    plan = rules_plan(problem)
    got = expected_cost(problem, plan, draws=40, seed=3)
    assert got == pytest.approx(by_hand(problem, plan, 40, 3), rel=1e-9)
    assert got == expected_cost(problem, plan, draws=40, seed=3)  # deterministic
