"""`StreamSink`: a run's rows streamed to a Parquet table and its summary from partial
aggregates: the same rows as a whole run, the same summary but for the last ulps of means
and sums over jobs; kept whole below its bound (byte-identical table); atomic table."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.engine.sinks import StreamSink
from clusteremu.cluster.io import write_parquet
from clusteremu.scenarios.loader import load_scenario

SHORT = ["stop.jobs=6000", "stop.warmup_jobs=600"]
SCENARIOS = {
    "appendix-h": SHORT,
    "faults-mm2": SHORT,
    "faults-rack": [],
    "hetero-placement": ["stop.time_s=1500", "stop.warmup_s=100"],
    "mm-c": SHORT,
    "ps-amdahl": SHORT,
}
#: Means and sums over jobs, summed batch by batch (`stream_summary`).
SUMMED = {
    "mean_response_time_s",
    "mean_wait_s",
    "mean_bounded_slowdown",
    "wasted_core_s",
    "lost_core_s",
}


def _ulps(a: float, b: float) -> int:
    return abs(int(np.float64(a).view(np.int64)) - int(np.float64(b).view(np.int64)))


def _check_summary(want: dict[str, Any], got: dict[str, Any]) -> None:
    assert set(want) == set(got)
    for key, value in want.items():
        if isinstance(value, dict):
            _check_summary(value, got[key])
        elif isinstance(value, float) and math.isnan(value):
            assert math.isnan(got[key]), key
        elif key in SUMMED:
            assert _ulps(value, got[key]) <= 8, (key, value, got[key])
        else:
            assert got[key] == value, (key, value, got[key])


def _cells(table: Any, name: str) -> list[Any]:
    return table[name].to_pylist()


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_streamed_rows_and_summary_match_a_whole_run(name: str, tmp_path: Path) -> None:
    spec = load_scenario(name, SCENARIOS[name])
    whole = Engine(spec).run()
    out = tmp_path / "jobs.parquet"
    sink = StreamSink(out, keep_rows=0, memory_values=64)  # spills response times too
    streamed = Engine(spec, sink=sink, compact_every=300).run()
    assert streamed.jobs.num_rows == 0 and sink.rows_streamed == whole.jobs.num_rows
    table = pq.read_table(out).sort_by("job")
    assert table.column_names == whole.jobs.column_names
    for column in whole.jobs.column_names:
        a, b = _cells(whole.jobs, column), _cells(table, column)
        assert [str(x) for x in a] == [str(x) for x in b], column
    _check_summary(whole.summary, streamed.summary)
    assert not list(tmp_path.glob(".*.tmp"))


def test_below_its_bound_the_table_is_byte_identical(tmp_path: Path) -> None:
    spec = load_scenario("hetero-placement", ["stop.time_s=900", "stop.warmup_s=100"])
    whole = Engine(spec).run()
    write_parquet(whole.jobs, tmp_path / "whole.parquet")
    sink = StreamSink(tmp_path / "kept.parquet")
    kept = Engine(spec, sink=sink, compact_every=300).run()
    assert (tmp_path / "whole.parquet").read_bytes() == (tmp_path / "kept.parquet").read_bytes()
    assert kept.summary == whole.summary or str(kept.summary) == str(whole.summary)


def test_a_run_that_fails_leaves_no_table(tmp_path: Path) -> None:
    spec = load_scenario("mm-c", SHORT)
    out = tmp_path / "jobs.parquet"
    sink = StreamSink(out, keep_rows=0)
    engine = Engine(spec, sink=sink, compact_every=300)
    engine.step(until_s=200.0)
    engine.compact()
    assert list(tmp_path.glob(".jobs.parquet.*.tmp"))
    engine.spec = None  # type: ignore[assignment]  # the result cannot be made
    with pytest.raises(AttributeError):
        engine.result()
    assert not out.exists() and not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("name", "why"),
    [("ml-workflow", "a usage model"), ("pennyworth-avg", "in Python")],
)
def test_metrics_that_need_the_whole_table_refuse_streaming(name: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        Engine(load_scenario(name), sink=StreamSink())
