"""A streamed trace table (`clusteremu.cluster.traces.feed`): the run read a chunk at a time equals
the run read at once, whatever the chunk size, for every kind of placer, with ties at
chunk boundaries, idle gaps between chunks, a horizon and a job limit cutting the table."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clusteremu.cluster.runner import run_spec
from clusteremu.cluster.traces import feed
from clusteremu.cluster.traces.table import job_table
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import spec_from_dict

ONE_CHUNK = 10**9


def _bytes(table: pa.Table) -> bytes:
    """The table as Parquet bytes (NaN equal to NaN, as the files compare)."""
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _table(path: Path, n: int = 3000, seed: int = 5) -> None:
    rng = np.random.default_rng(seed)
    gaps = rng.choice([0.0, 0.0, 1.0, 2.0, 400.0], n)  # ties, and idle gaps
    arrival = np.cumsum(gaps)
    run = rng.integers(1, 60, n).astype(float)
    run[rng.random(n) < 0.002] = np.nan  # a few run until the end
    cpu = rng.integers(1, 9, n).astype(float)
    est = np.where(rng.random(n) < 0.5, run * 2, np.nan)
    cls = np.where(rng.random(n) < 0.5, "a", "b")
    table = job_table(
        [str(i) for i in range(n)], arrival, run, cpu, cpu, np.zeros(n), est, pa.array(cls)
    )
    pq.write_table(table, path, row_group_size=700)


def _scenario(placer: str, stop: dict) -> dict:
    return {
        "name": "feed",
        "seed": 3,
        "stop": stop,
        "cluster": {
            "node_types": [{"name": "m", "cpu": 16, "memory_gb": 16}],
            "nodes": [{"type": "m", "count": 8}],
        },
        "workload": {
            "jobs": {"path": "jobs.parquet"},
            "classes": [
                {"name": n, "arrival": {"kind": "table"}, "speedup": {"kind": "rigid"}}
                for n in ("a", "b")
            ],
        },
        "scheduler": {"placer": {"name": placer}},
    }


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int, placer: str, stop: dict):
    monkeypatch.setattr(feed, "CHUNK_ROWS", chunk)
    return run_spec(spec_from_dict(_scenario(placer, stop), "feed", tmp_path))


@pytest.mark.parametrize(
    ("placer", "stop"),
    [
        ("fcfs", {"jobs": 3000}),
        ("easy-backfill", {"jobs": 3000}),
        ("kube-default", {"jobs": 2500}),
        ("sjf", {"time_s": 20000.0}),
    ],
)
def test_chunks_change_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, placer: str, stop: dict
) -> None:
    _table(tmp_path / "jobs.parquet")
    whole = _run(tmp_path, monkeypatch, ONE_CHUNK, placer, stop)
    for chunk in (1, 97, 700):
        got = _run(tmp_path, monkeypatch, chunk, placer, stop)
        assert _bytes(got.jobs) == _bytes(whole.jobs), (placer, chunk)
        assert json.dumps(got.summary) == json.dumps(whole.summary)
    assert whole.summary["jobs_completed"] > 0.9 * whole.jobs.num_rows
    if "time_s" in stop:  # the horizon cut the table: only the jobs arriving by it
        arrival = pq.read_table(tmp_path / "jobs.parquet").column("arrival_s").to_numpy()
        assert whole.jobs.num_rows == int(np.sum(arrival <= stop["time_s"])) < arrival.size
    else:
        assert whole.jobs.num_rows == stop["jobs"]


def test_a_bad_row_in_a_later_chunk_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _table(tmp_path / "good.parquet")
    table = pq.read_table(tmp_path / "good.parquet")
    cpu = table.column("request_cpu").to_numpy().copy()
    cpu[2345] = -1.0
    bad = table.set_column(
        table.schema.get_field_index("request_cpu"), "request_cpu", pa.array(cpu)
    )
    pq.write_table(bad, tmp_path / "jobs.parquet", row_group_size=700)
    monkeypatch.setattr(feed, "CHUNK_ROWS", 500)
    with pytest.raises(ScenarioError, match="row 2346, column request_cpu"):
        spec_from_dict(_scenario("fcfs", {"jobs": 3000}), "feed", tmp_path)


@pytest.mark.parametrize("placer", ["fcfs", "easy-backfill"])
def test_streamed_equals_the_jobs_drawn_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, placer: str
) -> None:
    """The feed and `generate_jobs` (the table read whole, as Ray's arrival actors draw a
    replication's jobs) give the same run."""
    from clusteremu.cluster.engine import Engine
    from clusteremu.cluster.jobs import generate_jobs, replication_seed

    _table(tmp_path / "jobs.parquet")
    monkeypatch.setattr(feed, "CHUNK_ROWS", 333)
    spec = spec_from_dict(_scenario(placer, {"jobs": 3000}), "feed", tmp_path)
    streamed = Engine(spec).run()
    whole = Engine(spec, jobs=generate_jobs(spec, replication_seed(spec, 0))).run()
    assert _bytes(streamed.jobs) == _bytes(whole.jobs)
    assert json.dumps(streamed.summary) == json.dumps(whole.summary)
