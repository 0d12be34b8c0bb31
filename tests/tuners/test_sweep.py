"""Sweeps: cells, resumable Parquet rows, identical whatever the workers; fault tolerance
(issue 3, "Sweeps" and the fault-tolerance acceptance line)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from clusteremu.cli import main
from clusteremu.tuners.sweep import (
    SweepError,
    done_cells,
    parse_grid,
    parse_seeds,
    plan_sweep,
    read_results,
    run_sweep,
)

#: Cells of about 0.3 s each: M/M/c with 1,000 one-core nodes, 100,000 jobs.
BASE = [
    "stop.jobs=100000",
    "stop.warmup_jobs=1000",
    "cluster.nodes.0.count=1000",
    "workload.classes.0.arrival.rate_per_s=800",
]
GRID = "workload.classes.0.arrival.rate_per_s=700,800"


def small_plan(seeds: str = "1-3", policies: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    return plan_sweep("mm-c", [parse_grid(GRID)], parse_seeds(seeds), policies, BASE)


def assert_same_rows(a: pa.Table, b: pa.Table) -> None:
    assert a.column_names == b.column_names
    assert a.num_rows == b.num_rows
    assert a.to_pylist() == b.to_pylist()  # no NaN in these summaries


def test_parsing_and_plan_errors() -> None:
    assert parse_seeds("1-3") == (1, 2, 3)
    assert parse_seeds("4,9") == (4, 9)
    assert parse_grid("a.b=1, 2").values == ("1", "2")
    for bad in ("3-1", "x", "1,1"):
        with pytest.raises(SweepError, match="--seeds"):
            parse_seeds(bad)
    for bad in ("a.b", "a.b=", "=1", "a=1,1"):
        with pytest.raises(SweepError, match="--grid"):
            parse_grid(bad)
    plan = small_plan("1-2", ("placer=first-fit", "placer=random-fit"))
    assert len(plan.cells) == 2 * 2 * 2
    assert [c.index for c in plan.cells] == list(range(8))
    assert len({c.key for c in plan.cells}) == 8


def test_bad_grid_value_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(
        [
            "sweep",
            "mm-c",
            "--grid",
            "workload.classes.0.arrival.rate_per_s=7,oops",
            "--out",
            str(tmp_path / "s"),
        ]
    )
    assert code == 2
    assert "rate_per_s" in capsys.readouterr().err
    assert main(["sweep", "mm-c", "--seeds", "9-1", "--out", str(tmp_path / "s")]) == 2


@pytest.mark.ray
@pytest.mark.usefixtures("ray_local")
class TestSweepOnRay:
    def test_results_do_not_depend_on_workers_and_resume_skips(self, tmp_path: Path) -> None:
        plan = small_plan("1-2", ("placer=first-fit", "placer=random-fit"))
        one = run_sweep(plan, tmp_path / "one", workers=1)
        two = run_sweep(plan, tmp_path / "two", workers=2)
        assert one.complete and two.complete and one.ran == two.ran == 8
        table = read_results(tmp_path / "one")
        assert_same_rows(table, read_results(tmp_path / "two"))
        assert table.column("cell").to_pylist() == list(range(8))
        assert "mean_response_time_s" in table.column_names
        assert "grid.workload.classes.0.arrival.rate_per_s" in table.column_names
        again = run_sweep(plan, tmp_path / "one", workers=2)
        assert (again.skipped, again.ran) == (8, 0)
        other = small_plan("5")
        with pytest.raises(SweepError, match="different sweep"):
            run_sweep(other, tmp_path / "one")

    def test_killed_worker_then_resume_equals_undisturbed(self, tmp_path: Path) -> None:
        """Kill a sweep worker actor mid-sweep: its cell is reported missing, the others
        finish; a resume runs only the missing cells; the Parquet content equals an
        undisturbed run, with no row missing or duplicated."""
        import ray

        plan = small_plan("1-6")
        reference = run_sweep(plan, tmp_path / "ref", workers=2)
        assert reference.complete
        out = tmp_path / "killed"
        result: dict[str, object] = {}
        thread = threading.Thread(
            target=lambda: result.update(outcome=run_sweep(plan, out, workers=2, name="kill"))
        )
        thread.start()
        deadline = time.monotonic() + 120
        while len(done_cells(out, plan)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        ray.kill(ray.get_actor("clusteremu/sweep-kill/worker-1"), no_restart=True)
        thread.join(timeout=300)
        first = result["outcome"]
        assert not first.complete and first.missing  # type: ignore[attr-defined]
        resumed = run_sweep(plan, out, workers=2)
        assert resumed.complete
        assert resumed.ran == len(first.missing)  # type: ignore[attr-defined]
        assert resumed.skipped == len(plan.cells) - len(first.missing)  # type: ignore[attr-defined]
        table = read_results(out)
        assert sorted(table.column("cell").to_pylist()) == list(range(len(plan.cells)))
        assert_same_rows(table, read_results(tmp_path / "ref"))

    def test_killed_driver_then_resume_equals_undisturbed(self, tmp_path: Path) -> None:
        """SIGKILL the `clusteremu sweep` process mid-sweep, then run the same command."""
        import ray

        plan = small_plan("1-6")
        reference = run_sweep(plan, tmp_path / "ref", workers=2)
        out = tmp_path / "driver"
        address = ray.get_runtime_context().gcs_address
        cmd = [
            sys.executable,
            "-m",
            "clusteremu",
            "sweep",
            "mm-c",
            "--grid",
            GRID,
            "--seeds",
            "1-6",
            "--workers",
            "2",
            "--address",
            address,
            "--out",
            str(out),
        ]
        for item in BASE:
            cmd += ["--set", item]
        env = dict(os.environ, RAY_AUTH_MODE="disabled")  # the fixture's cluster: no token
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while len(done_cells(out, plan)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        partial = len(done_cells(out, plan))
        assert 2 <= partial < len(plan.cells)
        done = subprocess.run(
            cmd + ["--json"], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        assert f'"already_done": {partial}' in done.stdout
        assert reference.complete
        assert_same_rows(read_results(out), read_results(tmp_path / "ref"))
