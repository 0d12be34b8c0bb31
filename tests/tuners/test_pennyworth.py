"""Pennyworth examples on Ray: batches fixed by (seed, index), Parquet chunks identical
whatever the workers, a resumed generation solving only the missing chunks, a changed
configuration refused, and a tree scored against the A* optimum."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cluster.policies.pennyworth.astar import solve
from cluster.policies.pennyworth.features import examples_of_plan
from cluster.policies.pennyworth.plan import plan_cost
from cluster.policies.pennyworth.problem import Problem
from cluster.policies.pennyworth.tree import RadTree
from tuners.pennyworth import (
    MANIFEST,
    ExamplePlan,
    ExamplesError,
    batch_counts,
    batch_problem,
    check_folder,
    generate_examples,
    plan_examples,
    read_examples,
    run_chunks,
    scenario_problem,
    score_tree,
    validation_set,
)

SCENARIO = "pennyworth-max"
#: 50 batches of 4 jobs: 3 chunks (20, 20, 10 batches), about 1 s of A* in all.
BATCHES, JOBS = 50, 4


@pytest.fixture(scope="module")
def base() -> Problem:
    return scenario_problem(SCENARIO)


def small_plan(base: Problem, batches: int = BATCHES, seed: int = 3) -> ExamplePlan:
    return plan_examples(SCENARIO, base, batches, JOBS, seed, chunk_batches=20)


def chunk_bytes(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("chunk-*.parquet"))}


def test_a_batch_depends_only_on_seed_stream_and_index(base: Problem) -> None:
    a = batch_counts(8, JOBS, 3, 0, 7)
    assert a == batch_counts(8, JOBS, 3, 0, 7) and sum(a) == JOBS
    draws = {batch_counts(8, JOBS, 3, 0, i) for i in range(30)}
    assert len(draws) > 10  # not one batch repeated
    assert [batch_counts(8, JOBS, 3, 1, i) for i in range(30)] != [
        batch_counts(8, JOBS, 3, 0, i) for i in range(30)
    ]  # validation batches are another stream
    p = batch_problem(base, JOBS, 3, 0, 7)
    assert p.counts == a and [len(ids) for ids in p.job_ids] == list(a)


@pytest.mark.ray
def test_examples_are_identical_with_one_and_two_workers_and_resume(
    ray_local: None, base: Problem, tmp_path: Path
) -> None:
    plan = small_plan(base)
    one, two = tmp_path / "one", tmp_path / "two"
    first = generate_examples(base, plan, one, workers=1)
    assert (first.chunks, first.skipped, first.ran) == (3, 0, 3)
    seen: list[tuple[int, int]] = []
    generate_examples(base, plan, two, workers=2, progress=lambda d, t: seen.append((d, t)))
    assert seen[0] == (0, BATCHES) and seen[-1] == (BATCHES, BATCHES)
    files = chunk_bytes(one)
    assert len(files) == 3 and files == chunk_bytes(two)  # byte for byte
    assert (one / MANIFEST).read_bytes() == (two / MANIFEST).read_bytes()

    # The rows are the A* plans' decisions, batch by batch.
    rows = read_examples(one, plan)
    assert rows.x.shape[0] == first.rows == len(rows.y)
    assert np.array_equal(np.unique(rows.batch), np.arange(BATCHES))
    p = batch_problem(base, JOBS, plan.seed, 0, 17)
    x, y = examples_of_plan(p, solve(p).plan)
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

    # More batches: the chunks that still match are kept, the last (now longer) is redone.
    more = small_plan(base, batches=60)
    grown = generate_examples(base, more, two, workers=2)
    assert (grown.chunks, grown.skipped, grown.ran) == (3, 2, 1)
    assert len(chunk_bytes(two)) == 3
    assert read_examples(two, more).batch.max() == 59


def test_a_folder_of_other_examples_is_refused(base: Problem, tmp_path: Path) -> None:
    from cluster.io import write_json

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


@pytest.mark.ray
def test_a_tree_is_scored_against_the_optimum(
    ray_local: None, base: Problem, tmp_path: Path
) -> None:
    plan = small_plan(base)
    generate_examples(base, plan, tmp_path, workers=2)
    rows = read_examples(tmp_path, plan)
    validation = validation_set(base, JOBS, plan.seed, 25, workers=2)
    expected = [solve(p).cost for p in validation.problems]
    assert np.allclose(validation.optimal_usd, expected, rtol=1e-12)
    full = RadTree.fit(rows.x, rows.y, base.task_names, base.type_names, base.profiles or {})
    stump = RadTree.fit(
        rows.x, rows.y, base.task_names, base.type_names, base.profiles or {}, max_depth=1
    )
    good, bad = score_tree(full, validation), score_tree(stump, validation)
    assert good.batches == 25 and 1.0 - 1e-9 <= good.mean_ratio <= good.max_ratio
    for tree, score in ((full, good), (stump, bad)):
        ratios = [
            plan_cost(p, tree.plan(p))[0] / opt
            for p, opt in zip(validation.problems, expected, strict=True)
        ]
        assert score.mean_ratio == pytest.approx(float(np.mean(ratios)), rel=1e-12)
        assert score.max_ratio == pytest.approx(max(ratios), rel=1e-12)
    assert good.mean_optimal_usd == pytest.approx(float(np.mean(expected)))


@pytest.mark.ray
def test_a_batch_a_star_gives_up_on_is_bad_input(ray_local: None, base: Problem) -> None:
    got: list[int] = []
    with pytest.raises(ExamplesError, match=r"--jobs 4: A\* could not solve batch 0 of 4 jobs"):
        run_chunks(base, JOBS, 3, 0, [(0, 0, 2)], 1, lambda i, r: got.append(i), time_limit_s=0.0)
    assert got == []
