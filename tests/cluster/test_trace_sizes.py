"""A trace arrival's `size_column` gives the class's job sizes (issue 10 item 9).

Before the rewrite (cd23f70) the column was checked by the loader and then ignored: the
sizes came from the class's size distribution.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.workload import TraceArrivals
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import spec_from_dict

#: Unsorted on purpose: sizes must follow their arrivals through the loader's sort.
TRACE = {"t": [3.0, 0.5, 1.0, 7.0, 2.0], "work": [30.0, 5.0, 10.0, 70.0, 20.0]}


def trace_scenario(path: Path, **arrival: Any) -> dict[str, Any]:
    return {
        "name": "trace-sizes",
        "seed": 4,
        "stop": {"jobs": 8},
        "cluster": {
            "node_types": [{"name": "n", "cpu": 4, "memory_gb": 8}],
            "nodes": [{"type": "n", "count": 2}],
        },
        "workload": {
            "classes": [
                {
                    "name": "traced",
                    "arrival": {"kind": "trace", "path": str(path), "column": "t", **arrival},
                    "size": {"kind": "exponential", "mean_s": 1000.0},
                },
                {
                    "name": "drawn",
                    "arrival": {"kind": "batch", "count": 3, "at_s": 1.5},
                    "size": {"kind": "deterministic", "value_s": 4.0},
                },
            ]
        },
    }


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_sizes_come_from_the_size_column(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"trace{suffix}"
    table = pa.table(TRACE)
    if suffix == ".csv":
        pacsv.write_csv(table, path)
    else:
        pq.write_table(table, path)
    spec = spec_from_dict(trace_scenario(path, size_column="work"))
    result = Engine(spec).run()
    jobs = result.jobs
    traced = np.array(jobs["class"].to_pylist()) == "traced"
    np.testing.assert_array_equal(jobs["arrival_s"].to_numpy()[traced], [0.5, 1.0, 2.0, 3.0, 7.0])
    np.testing.assert_array_equal(jobs["size"].to_numpy()[traced], [5.0, 10.0, 20.0, 30.0, 70.0])
    np.testing.assert_array_equal(jobs["size"].to_numpy()[~traced], [4.0, 4.0, 4.0])
    # One-core jobs at speed 1 on idle nodes run for their size.
    response = jobs["response_time_s"].to_numpy()[traced]
    np.testing.assert_allclose(response, [5.0, 10.0, 20.0, 30.0, 70.0])


def test_time_scale_applies_to_sizes_as_to_arrivals(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    pacsv.write_csv(pa.table(TRACE), path)
    spec = spec_from_dict(trace_scenario(path, size_column="work", time_scale=0.001))
    jobs = Engine(spec).jobs
    traced = jobs.class_index == 0
    np.testing.assert_allclose(jobs.arrival_s[traced], [0.0005, 0.001, 0.002, 0.003, 0.007])
    np.testing.assert_allclose(jobs.size[traced], [0.005, 0.01, 0.02, 0.03, 0.07])


def test_without_a_size_column_sizes_are_drawn(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    pacsv.write_csv(pa.table(TRACE), path)
    jobs = Engine(spec_from_dict(trace_scenario(path))).jobs
    sizes = jobs.size[jobs.class_index == 0]
    assert sizes.size == 5
    assert not np.isin(sizes, TRACE["work"]).any()


def test_bad_size_columns_are_scenario_errors(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    pacsv.write_csv(pa.table({**TRACE, "bad": [1.0, -2.0, 3.0, 4.0, 5.0]}), path)
    with pytest.raises(ScenarioError, match="size_column: expected finite, positive sizes"):
        spec_from_dict(trace_scenario(path, size_column="bad"))
    with pytest.raises(ScenarioError, match="expected a column of"):
        spec_from_dict(trace_scenario(path, size_column="missing"))


def test_trace_arrivals_check_their_sizes() -> None:
    with pytest.raises(ValueError, match="2 arrival times but 1 sizes"):
        TraceArrivals((0.0, 1.0), (1.0,))
    with pytest.raises(ValueError, match="finite and positive"):
        TraceArrivals((0.0,), (0.0,))
    assert TraceArrivals((0.0, 1.0)).job_sizes(2) is None
    np.testing.assert_array_equal(TraceArrivals((0.0, 1.0), (3.0, 4.0)).job_sizes(1), [3.0])
