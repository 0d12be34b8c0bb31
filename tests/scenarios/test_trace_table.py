"""The workload's trace table (`workload.jobs`, scenarios/trace_table.py): classes of arrival
kind `table` replay its rows, every value is checked (a bad one is a `ScenarioError` naming
the file, the row and the column), and each job's own requests, run time and estimate reach
the engine."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from clusteremu.cli import main
from clusteremu.cluster import workload as wl
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.model import replays_table
from clusteremu.cluster.policies.base import Placement, PlacementView, Placer
from clusteremu.cluster.runner import run_spec
from clusteremu.cluster.traces.feed import TableClassStream
from clusteremu.cluster.traces.table import JOB_SCHEMA, job_table
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import load_scenario

pytestmark = pytest.mark.timeout(120)


def _raw_table(**columns: Any) -> pa.Table:
    """A table of JOB_SCHEMA exactly as given: not sorted, not shifted (bad rows too)."""
    n = len(columns["arrival_s"])
    base: dict[str, Any] = {
        "trace_id": [f"j{i}" for i in range(n)],
        "run_s": [10.0] * n,
        "request_cpu": [1.0] * n,
        "request_memory_gb": [1.0] * n,
        "request_gpu": [0.0] * n,
        "estimate_s": [math.nan] * n,
        "class": ["trace"] * n,
        "user": [None] * n,
        "queue": [None] * n,
        "priority": [None] * n,
        "node": [None] * n,
    }
    base.update(columns)
    return pa.table({f.name: pa.array(base[f.name], f.type) for f in JOB_SCHEMA}, JOB_SCHEMA)


def _scenario(
    folder: Path,
    table: pa.Table | None,
    classes: list[dict[str, Any]] | None = None,
    node: dict[str, Any] | None = None,
    count: int = 1,
    placer: str = "fcfs",
    jobs: int | None = None,
    workload_jobs: Any = "jobs.parquet",
) -> Path:
    """A scenario replaying `table` (written as folder/jobs.parquet) on `count` nodes."""
    folder.mkdir(parents=True, exist_ok=True)
    if table is not None:
        pq.write_table(table, folder / "jobs.parquet")
    rows = table.num_rows if table is not None else 1
    workload: dict[str, Any] = {
        "classes": classes
        or [{"name": "trace", "arrival": {"kind": "table"}, "speedup": {"kind": "rigid"}}]
    }
    if workload_jobs is not None:
        workload["jobs"] = {"path": workload_jobs}
    data = {
        "name": "table",
        "seed": 3,
        "stop": {"jobs": jobs or max(rows, 1)},
        "cluster": {
            "node_types": [node or {"name": "n", "cpu": 4, "memory_gb": 16, "gpu": 2}],
            "nodes": [{"type": (node or {"name": "n"})["name"], "count": count}],
        },
        "workload": workload,
        "scheduler": {"placer": {"name": placer}},
    }
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _table_class(name: str) -> dict[str, Any]:
    return {"name": name, "arrival": {"kind": "table"}, "speedup": {"kind": "rigid"}}


def _rows(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    result = run_spec(load_scenario(path))
    return sorted(result.jobs.to_pylist(), key=lambda r: r["job"]), result.summary


def _refused(path: Path) -> str:
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    return str(info.value)


# --- a table class loads ------------------------------------------------------------------


def test_a_table_class_loads_its_rows(tmp_path: Path) -> None:
    table = job_table(
        ["a", "b", "c"],
        [0.0, 5.0, 7.5],
        [10.0, math.nan, 3.0],
        [1.0, 0.25, 2.0],
        [1.0, 0.5, 4.0],
        [0.0, 500.0, 2000.0],
        estimate_s=[20.0, math.nan, 3.0],
    )
    spec = load_scenario(_scenario(tmp_path, table))
    assert replays_table(spec)
    (cls,) = spec.classes
    assert isinstance(cls.arrival, TableClassStream)  # streamed: read whole on demand
    assert cls.arrival.count == 3
    arrivals = cls.arrival.load()
    assert isinstance(arrivals, wl.TableArrivals)
    assert arrivals.times_s.tolist() == [0.0, 5.0, 7.5]
    assert arrivals.sizes.tolist() == [10.0, math.inf, 3.0]  # NaN: until the end
    assert arrivals.request_cpu.tolist() == [1.0, 0.25, 2.0]
    assert arrivals.request_memory_gb.tolist() == [1.0, 0.5, 4.0]
    assert arrivals.request_gpu.tolist() == [0.0, 0.5, 2.0]  # milli-GPU to GPUs
    assert arrivals.estimate_s.tolist() == [20.0, 0.0, 3.0]  # NaN: none (0)
    assert arrivals.rows.tolist() == [0, 1, 2]
    assert not replays_table(load_scenario("mm-c"))


def test_a_table_class_without_rows_has_no_jobs(tmp_path: Path) -> None:
    table = job_table(["a"], [0.0], [10.0], [1.0], [1.0], 0.0, job_class="busy")
    path = _scenario(tmp_path, table, classes=[_table_class("busy"), _table_class("idle")])
    spec = load_scenario(path)
    idle = spec.classes[1].arrival
    assert isinstance(idle, TableClassStream) and idle.count == 0
    assert idle.load().times_s.size == 0
    rows, summary = _rows(path)
    assert [r["class"] for r in rows] == ["busy"] and summary["jobs_completed"] == 1


# --- every bad value: file, row and column --------------------------------------------------


def test_rows_of_an_undeclared_class_are_refused(tmp_path: Path) -> None:
    table = job_table(["a", "b"], [0.0, 1.0], 10.0, 1.0, 1.0, 0.0, job_class=["trace", "ghost"])
    message = _refused(_scenario(tmp_path, table))
    assert "jobs.parquet" in message
    assert "'ghost'" in message and "workload.classes" in message


def test_a_missing_column_is_refused(tmp_path: Path) -> None:
    table = job_table(["a"], [0.0], [10.0], [1.0], [1.0], 0.0).drop_columns(["estimate_s"])
    message = _refused(_scenario(tmp_path, table))
    assert "jobs.parquet" in message and "estimate_s" in message


def test_a_column_of_the_wrong_type_is_refused(tmp_path: Path) -> None:
    table = job_table(["a"], [0.0], [10.0], [1.0], [1.0], 0.0)
    table = table.set_column(1, "arrival_s", pa.array([0], pa.int64()))
    message = _refused(_scenario(tmp_path, table))
    assert "jobs.parquet" in message and "arrival_s" in message and "int64" in message
    numbers = job_table(["a"], [0.0], [10.0], [1.0], [1.0], 0.0)
    numbers = numbers.set_column(7, "class", pa.array([1], pa.int64()))
    assert "column class must be text" in _refused(_scenario(tmp_path / "c", numbers))


@pytest.mark.parametrize(
    ("columns", "row", "column"),
    [
        ({"arrival_s": [0.0, math.nan, 2.0]}, 2, "arrival_s"),
        ({"arrival_s": [0.0, math.inf, math.inf]}, 2, "arrival_s"),
        ({"arrival_s": [-1.0, 0.0, 2.0]}, 1, "arrival_s"),
        ({"arrival_s": [0.0, 5.0, 3.0]}, 3, "arrival_s"),  # not sorted
        ({"arrival_s": [0.0, 1.0, 2.0], "request_cpu": [1.0, -0.5, 1.0]}, 2, "request_cpu"),
        (
            {"arrival_s": [0.0, 1.0, 2.0], "request_memory_gb": [1.0, 1.0, -1.0]},
            3,
            "request_memory_gb",
        ),
        (
            {"arrival_s": [0.0, 1.0, 2.0], "request_memory_gb": [math.nan, 1.0, 1.0]},
            1,
            "request_memory_gb",
        ),
        ({"arrival_s": [0.0, 1.0, 2.0], "request_gpu": [0.0, 1500.0, 0.0]}, 2, "request_gpu"),
        ({"arrival_s": [0.0, 1.0, 2.0], "request_gpu": [-1.0, 0.0, 0.0]}, 1, "request_gpu"),
        ({"arrival_s": [0.0, 1.0, 2.0], "run_s": [10.0, 10.0, -5.0]}, 3, "run_s"),
        ({"arrival_s": [0.0, 1.0, 2.0], "run_s": [10.0, 0.0, 10.0]}, 2, "run_s"),
        ({"arrival_s": [0.0, 1.0, 2.0], "run_s": [math.inf, 10.0, 10.0]}, 1, "run_s"),
        ({"arrival_s": [0.0, 1.0, 2.0], "estimate_s": [1.0, -1.0, 1.0]}, 2, "estimate_s"),
    ],
)
def test_a_bad_value_names_file_row_and_column(
    tmp_path: Path, columns: dict[str, list[float]], row: int, column: str
) -> None:
    message = _refused(_scenario(tmp_path, _raw_table(**columns)))
    assert "jobs.parquet" in message
    assert f"row {row}, column {column}" in message


@pytest.mark.parametrize("gpu", [0.0, 250.0, 999.0, 1000.0, 2000.0, 3000.0])
def test_gpu_shares_and_whole_gpus_load(tmp_path: Path, gpu: float) -> None:
    spec = load_scenario(_scenario(tmp_path, _raw_table(arrival_s=[0.0], request_gpu=[gpu])))
    arrivals = spec.classes[0].arrival.load()
    assert isinstance(arrivals, wl.TableArrivals)
    assert arrivals.request_gpu.tolist() == [gpu / 1000.0]


def test_a_missing_or_unreadable_table_is_refused(tmp_path: Path) -> None:
    message = _refused(_scenario(tmp_path / "missing", None))
    assert "jobs.parquet" in message and "not found" in message
    folder = tmp_path / "text"
    folder.mkdir()
    (folder / "jobs.parquet").write_text("arrival_s,run_s\n0,1\n")
    message = _refused(_scenario(folder, None))
    assert "jobs.parquet" in message and "Parquet" in message


# --- the workload block's own rules ---------------------------------------------------------


def test_a_table_class_needs_workload_jobs(tmp_path: Path) -> None:
    table = job_table(["a"], [0.0], [10.0], [1.0], [1.0], 0.0)
    message = _refused(_scenario(tmp_path, table, workload_jobs=None))
    assert "'trace'" in message and "workload.jobs.path" in message


def test_a_table_class_takes_no_size(tmp_path: Path) -> None:
    table = job_table(["a"], [0.0], [10.0], [1.0], [1.0], 0.0)
    cls = {**_table_class("trace"), "size": {"kind": "exponential", "mean_s": 1.0}}
    message = _refused(_scenario(tmp_path, table, classes=[cls]))
    assert "remove size" in message and "workload.classes.0" in message


def test_workload_jobs_needs_a_table_class(tmp_path: Path) -> None:
    table = job_table(["a"], [0.0], [10.0], [1.0], [1.0], 0.0)
    cls = {
        "name": "trace",
        "arrival": {"kind": "batch", "count": 1},
        "size": {"kind": "deterministic", "value_s": 1.0},
    }
    message = _refused(_scenario(tmp_path, table, classes=[cls]))
    assert "workload.jobs is given but no class is of arrival kind table" in message


def test_a_class_of_another_kind_still_needs_a_size(tmp_path: Path) -> None:
    cls = {"name": "b", "arrival": {"kind": "batch", "count": 1}}
    table = job_table(["a"], [0.0], [10.0], [1.0], [1.0], 0.0)
    message = _refused(_scenario(tmp_path, table, classes=[_table_class("trace"), cls]))
    assert "size is required" in message and "workload.classes.1" in message


# --- what reaches the engine ----------------------------------------------------------------

#: Jobs arriving apart (each alone on the 4-core node with 2 GPUs): requests, run times
#: and estimates of their own.
OWN = {
    "arrival": [0.0, 100.0, 200.0, 300.0],
    "run": [10.0, 7.5, 42.0, 3.25],
    "cpu": [0.25, 1.0, 4.0, 2.5],
    "mem": [0.5, 2.0, 16.0, 0.0],
    "gpu": [0.0, 500.0, 2000.0, 1000.0],
    "estimate": [60.0, math.nan, 42.0, 9.0],
}


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> Path:
    table = job_table(
        ["a", "b", "c", "d"],
        OWN["arrival"],
        OWN["run"],
        OWN["cpu"],
        OWN["mem"],
        OWN["gpu"],
        estimate_s=OWN["estimate"],
    )
    return _scenario(tmp_path_factory.mktemp("own"), table)


def test_each_jobs_requests_and_run_time_reach_the_engine(own: Path) -> None:
    rows, summary = _rows(own)
    assert [r["request_cpu"] for r in rows] == OWN["cpu"]
    assert [r["request_memory_gb"] for r in rows] == OWN["mem"]
    assert [r["request_gpu"] for r in rows] == [g / 1000.0 for g in OWN["gpu"]]
    assert [r["start_s"] for r in rows] == OWN["arrival"]  # each alone: no wait
    # rigid: the logged run time whatever the cores held (a quarter of a core too)
    assert [r["end_s"] - r["start_s"] for r in rows] == OWN["run"]
    assert [r["size"] for r in rows] == OWN["run"]
    assert summary["jobs_completed"] == 4 and summary["unscheduled"] == 0


class EstimateSpy(Placer):
    """First fit, noting each waiting job's `estimate_s` and `size` columns."""

    def setup(self, spec: Any, rng: np.random.Generator) -> None:
        self.seen: dict[int, tuple[float, float]] = {}

    def place(self, view: PlacementView) -> list[Placement]:
        estimates = view.job_column("estimate_s")
        sizes = view.job_column("size")
        out = []
        for i, job in enumerate(view.queue.tolist()):
            self.seen[job] = (float(estimates[job]), float(sizes[job]))
            nodes = view.fitting_nodes(i)
            if nodes and not out:  # one at a time: the jobs arrive apart
                out.append(Placement(job, nodes[0]))
        return out


def test_each_jobs_estimate_reaches_the_placer(own: Path) -> None:
    spy = EstimateSpy()
    Engine(load_scenario(own), placer=spy).run()
    assert spy.seen == {
        0: (60.0, 10.0),
        1: (0.0, 7.5),  # NaN in the table: no estimate (0)
        2: (42.0, 42.0),
        3: (9.0, 3.25),
    }


def test_shortest_job_first_orders_by_the_tables_estimates(tmp_path: Path) -> None:
    """One core. Job 0 holds it for 10 s; jobs 1 (runs 5 s, estimate 100 s) and 2 (runs
    50 s, estimate 1 s) wait. At 10 s sjf starts job 2 (the smaller estimate), then job 1
    at 60 s; by run time it would have been the other way round."""
    table = job_table(
        ["a", "b", "c"], [0.0, 1.0, 2.0], [10.0, 5.0, 50.0], 1.0, 0.0, 0.0, [10.0, 100.0, 1.0]
    )
    path = _scenario(tmp_path, table, node={"name": "n", "cpu": 1}, placer="sjf")
    rows, _ = _rows(path)
    assert [r["start_s"] for r in rows] == [0.0, 60.0, 10.0]


def test_ties_across_classes_keep_the_tables_row_order(tmp_path: Path) -> None:
    """Four jobs of two classes arrive at one instant on one core; FCFS starts them in the
    table's row order (not class by class: the classes are declared the other way round),
    each identified by its run time."""
    runs = [10.0, 20.0, 30.0, 40.0]
    classes = ["a", "b", "a", "b"]
    table = job_table(["w", "x", "y", "z"], [5.0] * 4, runs, 1.0, 0.0, 0.0, job_class=classes)
    path = _scenario(
        tmp_path,
        table,
        classes=[_table_class("b"), _table_class("a")],
        node={"name": "n", "cpu": 1},
    )
    rows, summary = _rows(path)
    by_start = sorted(rows, key=lambda r: r["start_s"])
    assert [r["size"] for r in by_start] == runs
    assert [r["class"] for r in by_start] == classes
    assert [r["start_s"] for r in by_start] == [0.0, 10.0, 30.0, 60.0]
    assert summary["jobs_completed"] == 4


def test_a_job_without_run_time_runs_to_the_end_and_is_unfinished(tmp_path: Path) -> None:
    """Job 0 (run_s NaN) holds a core until the end; the run ends once the others have
    finished (no hang) and counts job 0 as unfinished (started: not unscheduled)."""
    table = job_table(["a", "b", "c"], [0.0, 1.0, 2.0], [math.nan, 10.0, 20.0], 1.0, 1.0, 0.0)
    rows, summary = _rows(_scenario(tmp_path, table))
    assert rows[0]["start_s"] == 0.0 and math.isnan(rows[0]["end_s"])
    assert [r["end_s"] for r in rows[1:]] == [11.0, 22.0]
    assert summary["jobs_completed"] == 2
    assert summary["jobs_unfinished"] == 1
    assert summary["unscheduled"] == 0
    assert summary["simulated_time_s"] == 22.0


def test_the_same_scenario_writes_byte_identical_jobs(tmp_path: Path) -> None:
    """kube-default on identical nodes (ties drawn with the seeded stream), twice through
    `clusteremu run --out`: the same per-job Parquet, byte for byte."""
    rng = np.random.default_rng(7)
    n = 40
    table = job_table(
        [f"p{i}" for i in range(n)],
        np.sort(rng.integers(0, 30, n)).astype(float),
        rng.integers(1, 20, n).astype(float),
        rng.choice([0.0, 0.25, 1.0, 2.0], n),
        rng.choice([0.0, 1.0, 3.0], n),
        0.0,
    )
    path = _scenario(
        tmp_path / "s",
        table,
        node={"name": "n", "cpu": 4, "memory_gb": 8},
        count=3,
        placer="kube-default",
    )
    outs = [tmp_path / "run1", tmp_path / "run2"]
    for out in outs:
        assert main(["run", str(path), "--out", str(out)]) == 0
    first, second = ((o / "jobs.parquet").read_bytes() for o in outs)
    assert first == second
    nodes = pq.read_table(outs[0] / "jobs.parquet").column("node").to_pylist()
    assert len(set(nodes)) == 3  # the ties did spread the pods
