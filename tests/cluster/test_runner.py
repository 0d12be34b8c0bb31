"""`run_spec` streams a run's results where it can (issue 39): below `KEEP_ROWS` jobs a
run is a plain run, to the byte; past it (or with `stream=True`) the rows of every
replication go to one Parquet table as they come, the summary is the plain run's (means
within ulps), and an interrupted run leaves no table."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clusteremu.cluster import runner
from clusteremu.cluster.engine.compaction import CompactionRefused
from clusteremu.cluster.io import write_parquet
from clusteremu.cluster.runner import run_spec
from clusteremu.scenarios.loader import load_scenario

SHORT = ["stop.jobs=3000", "stop.warmup_jobs=300", "replications=2"]
#: Means and sums over jobs, summed batch by batch when streamed (`stream_summary`).
SUMMED = {"mean_response_time_s", "mean_wait_s", "mean_bounded_slowdown", "wasted_core_s"}


@pytest.fixture
def often(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compact every 300 jobs, so that short runs stream."""
    monkeypatch.setattr(runner, "COMPACT_EVERY", 300)


def _close(want: Any, got: Any, key: str = "") -> None:
    if isinstance(want, dict):
        assert set(want) == set(got), key
        for k, v in want.items():
            _close(v, got[k], k)
    elif isinstance(want, list):
        for a, b in zip(want, got, strict=True):
            _close(a, b, key)
    elif isinstance(want, float) and math.isnan(want):
        assert math.isnan(got), key
    elif key in SUMMED:
        assert got == pytest.approx(want, rel=1e-12), key
    else:
        assert got == want, key


def _ipc(table: pa.Table) -> bytes:
    """The table's Arrow IPC stream: its schema and every column's bytes."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table.combine_chunks())
    return bytes(sink.getvalue().to_pybytes())


@pytest.mark.parametrize(
    ("name", "overrides"),
    [("mm-c", SHORT), ("hetero-placement", ["stop.time_s=900", "stop.warmup_s=100"])],
)
def test_a_run_below_the_bound_is_a_plain_run(
    name: str, overrides: list[str], tmp_path: Path
) -> None:
    spec = load_scenario(name, overrides)
    plain = run_spec(spec, stream=False)
    auto = run_spec(spec, out=tmp_path / "jobs.parquet")
    assert not auto.streamed and _ipc(auto.jobs) == _ipc(plain.jobs)  # NaN included
    assert auto.summary == plain.summary or str(auto.summary) == str(plain.summary)
    write_parquet(plain.jobs, tmp_path / "plain.parquet")
    assert (tmp_path / "jobs.parquet").read_bytes() == (tmp_path / "plain.parquet").read_bytes()


def test_replications_stream_to_one_table(often: None, tmp_path: Path) -> None:
    spec = load_scenario("mm-c", SHORT)
    plain = run_spec(spec, stream=False)
    out = tmp_path / "jobs.parquet"
    streamed = run_spec(spec, out=out, stream=True)
    assert streamed.streamed and streamed.jobs.num_rows == 0
    assert streamed.jobs.column_names == plain.jobs.column_names
    table = pq.read_table(out)
    assert pq.ParquetFile(out).num_row_groups > 2
    replication = table["replication"].to_numpy()
    assert np.all(np.diff(replication) >= 0)  # replication by replication
    keys = [("replication", "ascending"), ("job", "ascending")]
    table = table.sort_by(keys)
    want = plain.jobs.sort_by(keys)
    for column in want.column_names:
        assert [str(x) for x in want[column].to_pylist()] == [
            str(x) for x in table[column].to_pylist()
        ], column
    _close(plain.summary, streamed.summary)
    _close(plain.replications, streamed.replications)
    assert not list(tmp_path.glob(".*"))


def test_past_the_bound_a_run_streams_by_itself(
    often: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "KEEP_ROWS", 1000)
    result = run_spec(load_scenario("mm-c", SHORT))  # no `out`: the summary only
    assert result.streamed and result.jobs.num_rows == 0
    assert result.summary["jobs_completed"] == 2 * 2700


def test_an_interrupted_run_leaves_no_table(often: None, tmp_path: Path) -> None:
    out = tmp_path / "jobs.parquet"

    def interrupt(done: float) -> None:
        if done > 0.7:  # the second replication, its rows streaming
            assert list(tmp_path.glob(".jobs.parquet.*.tmp"))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_spec(load_scenario("mm-c", SHORT), interrupt, out=out, stream=True)
    assert not list(tmp_path.iterdir())


def test_a_run_that_cannot_stream_says_why() -> None:
    spec = load_scenario("mm-c", [*SHORT, "scheduler.placer.name=scoring"])
    with pytest.raises(CompactionRefused, match="the placer decides in Python"):
        run_spec(spec, stream=True)
    assert not run_spec(spec).streamed  # by itself: a plain run
