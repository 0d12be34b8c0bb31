"""`clusteremu sweep`'s output without Ray (issue 41, "truthful output"): a sweep whose
every cell already has a row does not start Ray; `--metric` chooses the table's metrics;
the stored `seed` is an integer. The cells are written here with the kernel (the rows a
sweep worker would write), so no test starts Ray."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clusteremu.cli import main
from clusteremu.cluster.io import write_parquet
from clusteremu.tuners.sweep import (
    RUNS,
    cell_row,
    check_manifest,
    parse_grid,
    plan_sweep,
    read_results,
    run_cell,
    summary_table,
)

GRID = "workload.classes.0.arrival.rate_per_s=6,7"
SEEDS = [1, 2]
SET = ["stop.jobs=300", "stop.warmup_jobs=30"]


def _argv(out: Path, *extra: str) -> list[str]:
    argv = ["sweep", "mm-c", "--grid", GRID, "--seeds", ",".join(map(str, SEEDS)), "--out"]
    argv.append(str(out))
    for item in SET:
        argv += ["--set", item]
    return [*argv, *extra]


@pytest.fixture
def done_sweep(tmp_path: Path) -> Path:
    """A sweep folder whose four cells all have their row, as a finished sweep leaves it."""
    out = tmp_path / "sweep"
    plan = plan_sweep("mm-c", [parse_grid(GRID)], SEEDS, [], SET)
    check_manifest(out, plan)
    for cell in plan.cells:
        write_parquet(cell_row(plan, cell, run_cell(plan.spec(cell))), out / RUNS / cell.filename)
    return out


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting or joining Ray fails the test."""
    import clusteremu.actors.launch

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Ray was started for a sweep with nothing left to run")

    monkeypatch.setattr(clusteremu.actors.launch, "ensure_ray", refuse)


@pytest.mark.usefixtures("no_ray")
def test_a_sweep_with_nothing_left_to_run_does_not_start_ray(
    done_sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv(done_sweep)) == 0
    out = capsys.readouterr().out
    assert "4 cells, 4 already done, nothing left to run (Ray not started)" in out
    assert "mean_response_time_s" in out.splitlines()[1]
    assert main(_argv(done_sweep, "--json")) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["cells"], report["already_done"], report["ran"]) == (4, 4, 0)
    assert report["missing"] == []


@pytest.mark.usefixtures("no_ray")
def test_sweep_metric_chooses_the_table_columns(
    done_sweep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _argv(done_sweep, "--metric", "p95_response_time_s,utilization", "--metric", "events")
    assert main(argv) == 0
    header = capsys.readouterr().out.splitlines()[1].split()
    assert header == [
        "workload.classes.0.arrival.rate_per_s",
        "policy",
        "p95_response_time_s",
        "ci95",
        "utilization",
        "ci95",
        "events",
        "ci95",
        "seeds",
    ]
    assert "mean_response_time_s" not in header


def test_sweep_refuses_an_unknown_metric_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_argv(tmp_path / "s", "--metric", "p95_response_time")) == 2
    err = capsys.readouterr().err
    assert "not a summary key; did you mean p95_response_time_s" in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "s").exists()


def test_the_stored_seed_is_an_integer(done_sweep: Path) -> None:
    table = pq.read_table(done_sweep / RUNS)
    assert str(table.schema.field("seed").type) == "int64"
    assert sorted(set(read_results(done_sweep)["seed"].to_pylist())) == SEEDS
    rows = summary_table(read_results(done_sweep), ["mean_response_time_s"]).splitlines()
    assert [r.split()[-1] for r in rows[1:]] == ["2", "2"]  # two seeds per grid point


def test_a_folder_with_rows_of_both_seed_types_reads_back(done_sweep: Path) -> None:
    """A sweep resumed across versions: older rows stored the seed as a float."""
    import pyarrow as pa

    first = sorted((done_sweep / RUNS).glob("cell-*.parquet"))[0]
    table = pq.read_table(first)
    i = table.schema.get_field_index("seed")
    pq.write_table(table.set_column(i, "seed", table["seed"].cast(pa.float64())), first)
    results = read_results(done_sweep)
    assert results.num_rows == 4 and str(results.schema.field("seed").type) == "int64"
