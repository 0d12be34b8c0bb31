"""Sweeps under bad input and interruption (issue 11): cut-short cell files run again, a
cut-short sweep.json is a clear error, a scenario named three ways is one sweep, bad
arguments are refused before Ray, Ctrl-C stops the workers without a second error."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pytest

from clusteremu.cluster.io import write_parquet
from clusteremu.scenarios.loader import SHIPPED_DIR
from clusteremu.tuners.sweep import (
    MANIFEST,
    RUNS,
    SweepError,
    cell_row,
    check_folder,
    check_manifest,
    done_cells,
    parse_grid,
    parse_seeds,
    plan_sweep,
    read_results,
    run_sweep,
)
from tests.clusteremu.badinput import refused

BASE = ["stop.jobs=3000", "stop.warmup_jobs=300"]
GRID = "workload.classes.0.arrival.rate_per_s=6,7"


def small_plan(scenario: str = "mm-c", seeds: str = "1-2"):  # type: ignore[no-untyped-def]
    return plan_sweep(scenario, [parse_grid(GRID)], parse_seeds(seeds), (), BASE)


def test_cut_short_cell_files_are_recomputed_not_counted(tmp_path: Path) -> None:
    plan = small_plan()
    check_manifest(tmp_path, plan)
    summary = {"mean_response_time_s": 1.0, "jobs_completed": 10}
    for cell in plan.cells[:3]:
        write_parquet(cell_row(plan, cell, summary), tmp_path / RUNS / cell.filename)
    cut = tmp_path / RUNS / plan.cells[1].filename
    cut.write_bytes(cut.read_bytes()[:40])  # a crash mid-write on a file system without rename
    empty = tmp_path / RUNS / plan.cells[2].filename
    empty.write_bytes(b"")
    assert done_cells(tmp_path, plan) == {0}
    assert not cut.exists() and not empty.exists()
    assert read_results(tmp_path).num_rows == 1


def test_read_results_skips_unreadable_files(tmp_path: Path) -> None:
    plan = small_plan()
    first = plan.cells[0]
    write_parquet(cell_row(plan, first, {"x": 1.0}), tmp_path / RUNS / first.filename)
    (tmp_path / RUNS / plan.cells[1].filename).write_bytes(b"PAR1 cut")
    assert read_results(tmp_path).column("cell").to_pylist() == [0]


def test_cut_short_sweep_json_is_a_clear_error(tmp_path: Path) -> None:
    plan = small_plan()
    (tmp_path / MANIFEST).write_text('{"scenario": "mm-c", "sce')
    with pytest.raises(SweepError, match="not valid JSON"):
        check_folder(tmp_path, plan)


def test_one_scenario_named_three_ways_is_one_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = [small_plan(name) for name in ("mm-c", "mm-c.yaml", str(SHIPPED_DIR / "mm-c.yaml"))]
    assert {p.scenario for p in shipped} == {"mm-c"}
    assert len({str(p.manifest()) for p in shipped}) == 1
    own = tmp_path / "x.yaml"
    shutil.copy(SHIPPED_DIR / "mm-c.yaml", own)
    monkeypatch.chdir(tmp_path)
    plans = [small_plan(name) for name in ("./x.yaml", "x.yaml", str(own))]
    assert len({str(p.manifest()) for p in plans}) == 1
    out = tmp_path / "sweep"
    check_manifest(out, plans[0])
    for plan in plans[1:] + shipped:  # the same content: the same sweep, by any name
        check_folder(out, plan)
    with pytest.raises(SweepError, match="holds a different sweep"):
        check_folder(out, small_plan(seeds="1-3"))


def test_seed_ranges_are_counted_before_they_are_expanded() -> None:
    with pytest.raises(SweepError, match="of memory"):
        parse_seeds("0-1000000000000")


def test_policy_parameters_are_checked_in_the_plan() -> None:
    with pytest.raises(SweepError, match="--policy 'placer=first-fit:foo=1'"):
        plan_sweep("mm-c", [], (1,), ("placer=first-fit:foo=1",), BASE)


@pytest.fixture
def no_ray_start(monkeypatch: pytest.MonkeyPatch) -> None:
    def ensure_ray(*args: object, **kwargs: object) -> bool:
        raise AssertionError("Ray was started for bad input")

    def stop_ray(*args: object, **kwargs: object) -> None:
        raise AssertionError("Ray was stopped for bad input")

    launch = types.SimpleNamespace(ensure_ray=ensure_ray, stop_ray=stop_ray)
    monkeypatch.setitem(sys.modules, "clusteremu.actors.launch", launch)


def test_cli_refuses_bad_sweep_folders_before_ray(tmp_path: Path, no_ray_start: None) -> None:
    out = tmp_path / "s"
    out.mkdir()
    (out / MANIFEST).write_text("{")
    refused(["sweep", "mm-c", "--out", str(out)], "sweep", "cut-short sweep.json", "not valid JSON")
    other = tmp_path / "other"
    check_manifest(other, small_plan())
    refused(
        ["sweep", "mm-c", "--seeds", "5", "--out", str(other)],
        "sweep",
        "a different sweep's folder",
        "holds a different sweep",
    )


@pytest.mark.ray
def test_ctrl_c_stops_the_workers_without_a_second_error(ray_local: None, tmp_path: Path) -> None:
    """Ctrl-C in the driver (here: from the progress callback) ends the sweep with
    KeyboardInterrupt, never `ValueError: force=True is not supported for actor tasks`;
    the next invocation runs only what is missing."""
    plan = small_plan(seeds="1-4")
    calls = []

    def interrupt(done: int, total: int) -> None:
        calls.append(done)
        if done >= 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(plan, tmp_path, workers=2, progress=interrupt, metrics=False)
    partial = done_cells(tmp_path, plan)
    assert 1 <= len(partial) < len(plan.cells)
    outcome = run_sweep(plan, tmp_path, workers=2, metrics=False)
    assert outcome.complete and outcome.skipped == len(partial)
    assert read_results(tmp_path).column("cell").to_pylist() == list(range(len(plan.cells)))
