"""Pennyworth examples on Ray: example sets over varying task mixes fixed by (seed, split
name, index), Parquet chunks identical whatever the workers, a resumed generation solving
only the missing chunks, a changed configuration refused, sets not proven optimal within
the time limit skipped and counted (not an error), and a tree scored on validation batches with the
actual run times (the mean equals `actual_cost` computed directly)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.pennyworth.exact import mean_job_problem, solve_jobs
from clusteremu.cluster.policies.pennyworth.features import examples_of_plan, feature_width
from clusteremu.cluster.policies.pennyworth.plan import plan_cost
from clusteremu.cluster.policies.pennyworth.problem import Problem
from clusteremu.cluster.policies.pennyworth.tree import RadTree
from clusteremu.scenarios.loader import load_scenario
from clusteremu.tuners.pennyworth import (
    MANIFEST,
    TEST,
    TRAIN,
    VALIDATION,
    ChunkResult,
    ExamplePlan,
    ExamplesError,
    batch_counts,
    batch_problem,
    check_folder,
    generate_examples,
    plan_examples,
    read_examples,
    run_chunks,
    scenario_jobs,
    scenario_problem,
    score_tree,
    solve_chunk,
    teacher_plan,
    training_keys,
    validation_set,
)
from clusteremu.tuners.pennyworth_eval import actual_cost, batch_key

SCENARIO = "pennyworth-max"
#: 50 sets of 4 jobs: 3 chunks (20, 20, 10 sets), about 1 s of planning in all.
BATCHES, JOBS = 50, 4
#: The planner's time limit per set where the tests expect every set proven: a safety net,
#: not what decides (a set of 4 jobs takes milliseconds; the default 20 s, which includes a
#: fresh Ray worker's first call, could run out on a heavily loaded machine).
TIME_LIMIT_S = 3600.0


@pytest.fixture(scope="module")
def base() -> Problem:
    return scenario_problem(SCENARIO)


@pytest.fixture(scope="module")
def spec() -> SimulationSpec:
    return load_scenario(SCENARIO)


def small_plan(base: Problem, batches: int = BATCHES, seed: int = 3) -> ExamplePlan:
    return plan_examples(
        SCENARIO, base, batches, JOBS, seed, chunk_batches=20, time_limit_s=TIME_LIMIT_S
    )


def chunk_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("chunk-*.parquet"))}


def test_a_set_depends_only_on_seed_split_and_index(base: Problem) -> None:
    a = batch_counts(8, JOBS, 3, TRAIN, 7)
    assert a == batch_counts(8, JOBS, 3, TRAIN, 7) and sum(a) == JOBS and len(a) == 8
    draws = [batch_counts(8, JOBS, 3, TRAIN, i) for i in range(40)]
    assert len(set(draws)) > 10  # not one set repeated
    for split in (VALIDATION, TEST):  # other splits are other streams
        assert [batch_counts(8, JOBS, 3, split, i) for i in range(40)] != draws
    assert [batch_counts(8, JOBS, 4, TRAIN, i) for i in range(40)] != draws  # another seed
    p = batch_problem(base, JOBS, 3, TRAIN, 7)
    assert p.counts == batch_counts(len(base.task_names), JOBS, 3, TRAIN, 7)
    assert [len(ids) for ids in p.job_ids] == list(p.counts) and p.jobs == JOBS


def test_task_mixes_vary_from_one_task_to_all() -> None:
    """Set i mixes m tasks, m uniform in 1..T: with many jobs per set, the number of
    tasks a set uses spans 1..T (a set never uses more tasks than its jobs)."""
    used = [
        sum(c > 0 for c in batch_counts(10, 40, 0, TRAIN, i)) for i in range(300)
    ]  # 40 jobs over at most 10 tasks: almost every task of the mix gets a job
    assert min(used) == 1 and max(used) == 10
    assert len(set(used)) == 10
    few = [batch_counts(10, 3, 0, TRAIN, i) for i in range(100)]
    assert all(sum(c) == 3 and sum(x > 0 for x in c) <= 3 for c in few)


def planned(base: Problem, plan: ExamplePlan, i: int) -> Problem:
    """Example set i as the teacher plans it: on the means, the SLO tightened by the slack."""
    return batch_problem(base, JOBS, plan.seed, TRAIN, i).with_slack(plan.slack)


def test_the_examples_are_optimal_plans_on_the_means_with_the_slack(base: Problem) -> None:
    plan = small_plan(base)
    assert plan.slack > 0
    result = solve_chunk(
        base, JOBS, plan.seed, TRAIN, 5, 9, time_limit_s=plan.time_limit_s, slack=plan.slack
    )
    assert result.skipped == 0 and sorted(set(result.batch.tolist())) == [5, 6, 7, 8]
    for i in range(5, 9):
        p = planned(base, plan, i)
        assert p.slo.deadline_s == pytest.approx(base.slo.deadline_s * (1 - plan.slack))
        found = solve_jobs(mean_job_problem(p), TIME_LIMIT_S)
        assert found.optimal
        x, y = examples_of_plan(p, teacher_plan(p, found.plan))
        mine = result.batch == i
        assert np.array_equal(result.x[mine], x) and np.array_equal(result.y[mine], y)
        assert np.array_equal(result.step[mine], np.arange(len(y)))
        assert result.optimal_usd[i - 5] == pytest.approx(found.cost, rel=1e-12)


def test_sets_past_the_time_limit_are_skipped_and_counted(base: Problem) -> None:
    result = solve_chunk(base, JOBS, 3, TRAIN, 0, 3, time_limit_s=0.0)
    assert result.skipped == 3
    assert (
        result.x.shape == (0, feature_width(len(base.task_names), len(base.type_names)))
        and result.y.size == 0
    )
    assert result.batch.size == result.step.size == result.optimal_usd.size == 0


@pytest.mark.ray
def test_run_chunks_skips_and_counts_sets_past_the_time_limit(
    ray_local: None, base: Problem
) -> None:
    got: dict[int, ChunkResult] = {}
    run_chunks(
        base,
        JOBS,
        3,
        TRAIN,
        [(0, 0, 2), (1, 2, 5)],
        2,
        lambda i, r: got.__setitem__(i, r),
        time_limit_s=0.0,
    )
    assert sorted(got) == [0, 1]
    assert (got[0].skipped, got[1].skipped) == (2, 3)
    assert got[0].y.size == got[1].y.size == 0


@pytest.mark.ray
def test_examples_are_identical_with_one_and_two_workers_and_resume(
    ray_local: None, base: Problem, tmp_path: Path
) -> None:
    plan = small_plan(base)
    one, two = tmp_path / "one", tmp_path / "two"
    first = generate_examples(base, plan, one, workers=1)
    assert (first.chunks, first.skipped, first.ran, first.unsolved) == (3, 0, 3, 0)
    seen: list[tuple[int, int]] = []
    generate_examples(base, plan, two, workers=2, progress=lambda d, t: seen.append((d, t)))
    assert seen[0] == (0, BATCHES) and seen[-1] == (BATCHES, BATCHES)
    files = chunk_bytes(one)
    assert len(files) == 3 and files == chunk_bytes(two)  # byte for byte
    assert (one / MANIFEST).read_bytes() == (two / MANIFEST).read_bytes()

    # The rows are the optimal plans' decisions (on the means, with the slack), set by set.
    rows = read_examples(one, plan)
    assert rows.x.shape[0] == first.rows == len(rows.y)
    assert np.array_equal(np.unique(rows.batch), np.arange(BATCHES))
    p = planned(base, plan, 17)
    x, y = examples_of_plan(p, teacher_plan(p, solve_jobs(mean_job_problem(p), TIME_LIMIT_S).plan))
    assert np.array_equal(rows.x[rows.batch == 17], x) and np.array_equal(
        rows.y[rows.batch == 17], y
    )

    # Resume: a deleted chunk (and a cut-short one) is solved again, the others are kept.
    names = sorted(files)
    (one / names[1]).unlink()
    (one / names[2]).write_bytes(files[names[2]][:100])
    again = generate_examples(base, plan, one, workers=2)
    assert (again.skipped, again.ran) == (1, 2)
    assert chunk_bytes(one) == files

    # More sets: the chunks that still match are kept, the last (now longer) is redone.
    more = small_plan(base, batches=60)
    grown = generate_examples(base, more, two, workers=2)
    assert (grown.chunks, grown.skipped, grown.ran) == (3, 2, 1)
    assert len(chunk_bytes(two)) == 3
    assert read_examples(two, more).batch.max() == 59


def test_a_folder_of_other_examples_is_refused(base: Problem, tmp_path: Path) -> None:
    from clusteremu.cluster.io import write_json

    folder = tmp_path / "examples"
    write_json(small_plan(base).manifest(), folder / MANIFEST)
    check_folder(folder, small_plan(base, batches=80))  # another --batches: resumable
    with pytest.raises(ExamplesError, match=r"another configuration: seed 3 \(now 4\)"):
        check_folder(folder, small_plan(base, seed=4))
    (folder / MANIFEST).write_text("{")
    with pytest.raises(ExamplesError, match="cannot be read"):
        check_folder(folder, small_plan(base))
    (folder / MANIFEST).unlink()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(ExamplesError, match="no _examples.json"):
        check_folder(folder, small_plan(base))
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_a_tree_is_scored_with_the_actual_run_times(base: Problem, spec: SimulationSpec) -> None:
    plan = small_plan(base)
    chunk = solve_chunk(
        base, JOBS, plan.seed, TRAIN, 0, BATCHES, time_limit_s=plan.time_limit_s, slack=plan.slack
    )
    full = RadTree.fit(chunk.x, chunk.y, base.task_names, base.type_names, base.profiles or {})
    stump = RadTree.fit(
        chunk.x, chunk.y, base.task_names, base.type_names, base.profiles or {}, max_depth=1
    )
    jobs = scenario_jobs(spec)
    assert jobs == 32
    validation = validation_set(spec, base, plan, 6, jobs, draws=1)
    batches = validation.batches
    assert len(batches) == 6 and all(b.split == VALIDATION for b in batches)
    assert [b.index for b in batches] == list(range(6))  # none equivalent to a training set
    assert all(b.problem.jobs == jobs and b.runtime_s.shape == (jobs, 3) for b in batches)
    assert validation.overlap.count == 0 and validation.overlap.total == 6
    assert validation.overlap.train == len(training_keys(plan)) > 0
    assert validation.overlap.split == VALIDATION
    again = validation_set(spec, base, plan, 6, jobs)  # a pure function of the plan
    assert [b.key for b in again.batches] == [b.key for b in batches]

    for tree in (full, stump):
        for slack in (0.0, 0.2):
            score = score_tree(tree, validation, slack)
            costs = [actual_cost(b, tree.plan(b.problem.with_slack(slack))) for b in batches]
            assert score.batches == 6
            assert score.mean_cost_usd == pytest.approx(float(np.mean(costs)), rel=1e-12)
            assert score.max_cost_usd == pytest.approx(max(costs), rel=1e-12)
    # Several draws: each batch's cost is its plan's mean over the replications of its run,
    # the first being the batch's own run times.
    drawn = validation_set(spec, base, plan, 6, jobs, draws=3)
    assert [b.key for b in drawn.batches] == [b.key for b in batches]
    for b, runs in zip(drawn.batches, drawn.runtimes, strict=True):
        assert len(runs) == 3 and np.array_equal(runs[0], b.runtime_s)
        assert not np.allclose(runs[1], runs[0]) and not np.allclose(runs[2], runs[1])
    score = score_tree(full, drawn, 0.1)
    means = [
        np.mean(
            [
                actual_cost(
                    dataclasses.replace(b, runtime_s=rt), full.plan(b.problem.with_slack(0.1))
                )
                for rt in runs
            ]
        )
        for b, runs in zip(drawn.batches, drawn.runtimes, strict=True)
    ]
    assert score.mean_cost_usd == pytest.approx(float(np.mean(means)), rel=1e-12)

    # Priced with the actual run times, not the means: the costs differ.
    plans = [full.plan(b.problem.with_slack(0.2)) for b in batches]
    on_means = [
        plan_cost(b.problem.with_safety(0.0), p)[0] for b, p in zip(batches, plans, strict=True)
    ]
    actual = [actual_cost(b, p) for b, p in zip(batches, plans, strict=True)]
    assert not np.allclose(on_means, actual, rtol=1e-9)


def test_training_keys_are_the_training_sets_counts(base: Problem) -> None:
    plan = small_plan(base, batches=20)
    n = len(base.task_names)
    expected = {batch_key(batch_counts(n, JOBS, plan.seed, TRAIN, i), None) for i in range(20)}
    assert training_keys(plan) == expected
