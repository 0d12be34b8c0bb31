"""Planning past a tree's training size (`chunks.py`): the cuttings keep every job once,
a batch of at most the chunk size is the planner's own plan, a larger one takes the
candidate of least expected cost, and on 1,000-job batches of every shipped SLO the
shipped tree's plan costs less in expectation than its plan of the whole batch at once
(what it did before) and no more than its rules'."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from clusteremu.cluster.policies.pennyworth.chunks import (
    CHUNK_JOBS,
    by_cheapest_type,
    candidates,
    choose,
    chunked_plan,
    stratified,
    sub_problem,
)
from clusteremu.cluster.policies.pennyworth.features import rules_plan
from clusteremu.cluster.policies.pennyworth.plan import Plan
from clusteremu.cluster.policies.pennyworth.problem import Problem, problem_from_spec
from clusteremu.cluster.policies.pennyworth.spread import expected_cost
from clusteremu.cluster.policies.pennyworth.tree import RadTree
from clusteremu.scenarios.loader import load_scenario
from clusteremu.tuners.pennyworth import with_counts

SHIPPED = Path(__file__).resolve().parents[4] / "scenarios"


def batch(kind: str, jobs: int, seed: int) -> Problem:
    """`jobs` jobs of the shipped pennyworth-<kind> scenario's tasks, uniform."""
    spec = load_scenario(f"pennyworth-{kind}")
    assert spec.slo is not None
    base = problem_from_spec(spec, spec.slo)
    tasks = np.random.default_rng(seed).integers(0, len(base.task_names), jobs)
    return with_counts(base, np.bincount(tasks, minlength=len(base.task_names)).tolist())


def placed(plan: Plan, tasks: int) -> list[int]:
    return np.bincount([t for _, ts in plan.vms for t in ts], minlength=tasks).tolist()


def test_the_cuttings_keep_every_job_once() -> None:
    counts = [7, 0, 31, 2, 100, 1, 0, 5, 9, 45]
    for size in (1, 20, 32, 200, 1000):
        chunks = stratified(counts, size)
        assert np.sum(chunks, axis=0).tolist() == counts
        assert len(chunks) == max(1, round(sum(counts) / size))
        # the same mix in every chunk, to one job a task
        spread = np.ptp(np.array(chunks), axis=0)
        assert (spread <= 1).all()
    problem = with_counts(batch("max", 0, 0), counts)
    grouped = by_cheapest_type(problem, 32)
    assert np.sum(grouped, axis=0).tolist() == counts
    money = problem.runtime_s * problem.price_per_s[None, :]
    cheapest = np.argmin(money, axis=1)
    for chunk in grouped:  # one cheapest type a chunk
        assert len({int(cheapest[t]) for t, c in enumerate(chunk) if c}) == 1
    taken = [0] * len(counts)
    sub = sub_problem(problem, grouped[0], taken)
    assert sub.counts == tuple(grouped[0]) and taken == list(grouped[0])
    assert all(
        ids == problem.job_ids[t][:c]
        for t, (ids, c) in enumerate(zip(sub.job_ids, grouped[0], strict=True))
    )


def test_a_batch_within_the_chunk_size_is_the_planners_own_plan() -> None:
    problem = batch("avg", CHUNK_JOBS, 1)
    chosen: list[str] = []
    assert chunked_plan(rules_plan, problem, chosen=chosen) == rules_plan(problem)
    assert chosen == ["planner"]
    big = batch("avg", 200, 1)
    assert chunked_plan(rules_plan, big, 0) == rules_plan(big)  # 0: never chunked


@pytest.mark.parametrize("kind", ["max", "rtpt", "avg", "percentile"])
def test_past_the_chunk_size_the_tree_takes_the_cheapest_candidate(kind: str) -> None:
    tree = RadTree.load(SHIPPED / "policies" / f"pennyworth-{kind}.json")
    problem = batch(kind, 1000, 2).with_slack(tree.slack).with_safety(tree.safety_z)
    chosen: list[str] = []
    plan = tree.plan(problem, chosen=chosen)
    assert placed(plan, len(problem.counts)) == list(problem.counts)
    plans = candidates(tree._plan, problem, CHUNK_JOBS, rules_plan)
    assert chosen == [choose(problem, plans)] and plan == plans[chosen[0]]
    cost = expected_cost(problem, plan)
    assert cost == min(expected_cost(problem, p) for p in plans.values())
    assert cost <= expected_cost(problem, rules_plan(problem))
    if kind != "rtpt":  # rtpt: the whole batch's plan may tie, see docs/pennyworth.md
        assert cost < expected_cost(problem, plans["whole"])
