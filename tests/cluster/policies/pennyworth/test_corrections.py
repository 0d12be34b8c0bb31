"""Corrections: the first decision after which a plan can no longer be optimal, and the
optimal decisions from there on."""

from __future__ import annotations

import numpy as np
import pytest

from clusteremu.cluster.policies.pennyworth.astar import solve
from clusteremu.cluster.policies.pennyworth.corrections import (
    correction_examples,
    first_mistake,
    partial_after,
)
from clusteremu.cluster.policies.pennyworth.features import decisions
from clusteremu.cluster.policies.pennyworth.plan import Plan, plan_cost
from tests.cluster.policies.pennyworth.test_astar import random_problem


@pytest.mark.parametrize("kind", ["max", "rtpt", "avg", "percentile"])
def test_the_first_mistake_is_the_first_decision_off_every_optimal_path(kind: str) -> None:
    rng = np.random.default_rng({"max": 21, "rtpt": 22, "avg": 23, "percentile": 24}[kind])
    checked = 0
    for i in range(60):
        problem = random_problem(rng, kind, types=1 + i % 3)
        best = solve(problem)
        # A suboptimal plan: every job on its own VM of the first type that runs it.
        vms = []
        for t, n in enumerate(problem.counts):
            k = int(np.flatnonzero(np.isfinite(problem.runtime_s[t]))[0])
            vms += [(k, (t,))] * n
        plan = Plan(tuple(vms))
        found = first_mistake(problem, plan, best.cost)
        if plan_cost(problem, plan)[0] <= best.cost * (1 + 1e-9) + 1e-12:
            assert found is None
            continue
        assert found is not None
        index, expert = found
        actions = decisions(plan, len(problem.type_names))
        # Before the mistake an optimal completion exists; after it, none does.
        assert solve(problem, partial=partial_after(problem, actions[:index])).cost == (
            pytest.approx(best.cost, rel=1e-9, abs=1e-12)
        )
        after = solve(problem, partial=partial_after(problem, actions[: index + 1])).cost
        assert after > best.cost * (1 + 1e-9)
        assert plan_cost(problem, expert)[0] == pytest.approx(best.cost, rel=1e-9, abs=1e-12)
        assert decisions(expert, len(problem.type_names))[:index] == actions[:index]
        x, y = correction_examples(problem, plan, best.cost) or (None, None)
        assert y is not None and y.tolist() == decisions(expert, len(problem.type_names))[index:]
        assert x is not None and x.shape[0] == y.size
        checked += 1
    assert checked >= 20
