"""Parquet files read back when a command resumes (issue 28): a sweep cell that is not its
cell's one row is run again and skipped by read_results; an examples chunk that is not one
of the plan's is a clear ExamplesError naming the file and column, not a KeyError."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clusteremu.cluster.io import write_parquet
from clusteremu.cluster.policies.pennyworth.features import feature_names
from clusteremu.tuners.pennyworth import (
    ExamplesError,
    plan_examples,
    read_examples,
    scenario_problem,
)
from clusteremu.tuners.sweep import RUNS, cell_row, done_cells, parse_grid, parse_seeds, plan_sweep
from clusteremu.tuners.sweep import read_results as read_sweep


def _sweep_plan():  # type: ignore[no-untyped-def]
    grid = parse_grid("workload.classes.0.arrival.rate_per_s=6,7")
    return plan_sweep(
        "mm-c", [grid], parse_seeds("1"), (), ["stop.jobs=3000", "stop.warmup_jobs=300"]
    )


def test_a_foreign_or_misplaced_cell_file_is_run_again_and_skipped(tmp_path: Path) -> None:
    plan = _sweep_plan()
    first, second = plan.cells[0], plan.cells[1]
    runs = tmp_path / RUNS
    write_parquet(cell_row(plan, first, {"x": 1.0}), runs / first.filename)
    # another cell's row under this cell's name, and a Parquet file of something else
    write_parquet(cell_row(plan, first, {"x": 2.0}), runs / second.filename)
    assert done_cells(tmp_path, plan) == {0}
    assert not (runs / second.filename).exists()  # removed: the cell runs again
    pq.write_table(pa.table({"name": ["a"], "value": [1]}), runs / second.filename)
    assert read_sweep(tmp_path).column("cell").to_pylist() == [0]
    assert done_cells(tmp_path, plan) == {0}


def test_a_cell_file_that_is_a_fifo_is_not_opened(tmp_path: Path) -> None:
    plan = _sweep_plan()
    runs = tmp_path / RUNS
    runs.mkdir()
    os.mkfifo(runs / plan.cells[0].filename)  # opening it would wait for a writer
    assert read_sweep(tmp_path).num_rows == 0
    assert done_cells(tmp_path, plan) == set()


@pytest.fixture(scope="module")
def plan():  # type: ignore[no-untyped-def]
    base = scenario_problem("pennyworth-max")
    return plan_examples("pennyworth-max", base, 20, 4, 3, chunk_batches=20)


def _chunk(plan, **change: list) -> pa.Table:  # type: ignore[no-untyped-def]
    names = feature_names(plan.task_names, plan.type_names)
    columns: dict[str, list] = {"batch": [0, 1], "step": [0, 0]}
    columns.update({n: [0.5, 0.5] for n in names})
    columns["label"] = [0, 1]
    columns.update(change)
    return pa.table(columns)


def test_a_whole_chunk_reads(tmp_path: Path, plan) -> None:  # type: ignore[no-untyped-def]
    write_parquet(_chunk(plan), tmp_path / plan.chunks[0].filename)
    assert read_examples(tmp_path, plan).x.shape[0] == 2


@pytest.mark.parametrize(
    ("table", "expect"),
    [
        (lambda plan: pa.table({"name": ["a"]}), "column 'batch': expected a column"),
        (lambda plan: _chunk(plan, batch=[0, 99]), "column 'batch': expected batches 0 to 19"),
        (lambda plan: _chunk(plan, label=[0, 10_000]), "column 'label': expected decisions"),
        (lambda plan: _chunk(plan, label=[0.5, 1.0]), "column 'label': expected whole numbers"),
        (
            lambda plan: _chunk(
                plan, **{feature_names(plan.task_names, plan.type_names)[0]: [math.nan, 0.0]}
            ),
            "expected finite feature values",
        ),
    ],
)
def test_a_foreign_chunk_is_a_clear_error(tmp_path: Path, plan, table, expect: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / plan.chunks[0].filename
    write_parquet(table(plan), path)
    with pytest.raises(ExamplesError, match=expect) as info:
        read_examples(tmp_path, plan)
    assert str(path) in str(info.value)


def test_a_damaged_chunk_is_a_clear_error(tmp_path: Path, plan) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / plan.chunks[0].filename
    path.write_bytes(b"PAR1 cut short")
    with pytest.raises(ExamplesError, match="not a readable Parquet file"):
        read_examples(tmp_path, plan)
