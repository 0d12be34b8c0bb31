"""Conservation: every format's import, replayed with a placer that never delays (a node of
the largest request per job), reproduces the input: the same job count, the same
requested core-seconds and the same arrival span as the trace's table, which accounts for
every row of the raw files (read = kept + dropped; the readers' own tests check the table
against sums worked out by hand from the raw fixtures).

The runs are real engine runs of the imported jobs (`workload.jobs`, classes of kind
table, rigid jobs) under FCFS: each job must start at its arrival and run its logged time.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from clusteremu.cluster.runner import run_spec
from clusteremu.cluster.traces.formats import reader
from clusteremu.scenarios.from_trace import scenario_for
from clusteremu.scenarios.loader import spec_from_dict

FIXTURES = Path(__file__).parent / "fixtures"
OPENB = Path(__file__).resolve().parents[4] / "shared" / "traces" / "alibaba-gpu-v2023"

NODES_2023 = """sn,cpu_milli,memory_mib,gpu,model
node-a,64000,262144,2,P100
node-b,96000,786432,8,V100M32
"""
POD_COLUMNS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
PODS_2023 = (
    POD_COLUMNS
    + """
pod-0,12000,16384,1,1000,,LS,Running,0,120,0
pod-1,6000,12288,1,460,P100,LS,Running,5,65,10
pod-2,4000,8192,0,0,,BE,Running,5,,5
pod-3,8000,16384,2,1000,V100M32,LS,Running,30,90,40
"""
)


def _files(fmt: str, tmp_path: Path) -> list[Path]:
    if fmt == "alibaba-gpu-2023":
        (tmp_path / "openb_node_list_gpu_node.csv").write_text(NODES_2023)
        (tmp_path / "openb_pod_list_default.csv").write_text(PODS_2023)
        return [tmp_path / "openb_node_list_gpu_node.csv", tmp_path / "openb_pod_list_default.csv"]
    folder = {"google-2019": "google", "azure-vm": "azure"}.get(fmt, fmt)
    names = {
        "swf": ["small.swf"],
        "azure-vm": ["vmtable.csv"],
        "google-2019": ["instance_events.csv", "collection_events.csv", "machine_events.csv"],
        "alibaba-2018": ["batch_instance.csv", "batch_task.csv", "machine_meta.csv"],
        "alibaba-gpu-2020": [
            "pai_job_table.csv",
            "pai_task_table.csv",
            "pai_instance_table.csv",
            "pai_machine_spec.csv",
        ],
        "kubernetes": ["list.yaml", "multi.yaml"],
    }[fmt]
    return [FIXTURES / folder / n for n in names]


def _ample(scenario: dict, jobs: pq.ParquetFile) -> dict:
    """The imported scenario on a cluster where no job waits: one node per job, each of
    the largest request (its filters and the format's placer left as they are, FCFS)."""
    table = jobs.read()
    gpu = table.column("request_gpu").to_numpy()
    node = {
        "name": "ample",
        "cpu": max(1.0, math.ceil(float(table.column("request_cpu").to_numpy().max()))),
        "memory_gb": max(1.0, math.ceil(float(table.column("request_memory_gb").to_numpy().max()))),
    }
    if gpu.max() > 0:
        node["gpu"] = max(1, math.ceil(float(gpu.max()) / 1000.0))
    scenario = dict(scenario)
    scenario["cluster"] = {
        "node_types": [node],
        "nodes": [{"type": "ample", "count": table.num_rows}],
    }
    scenario["scheduler"] = {"placer": {"name": "fcfs"}}
    return scenario


FORMATS = [
    "swf",
    "azure-vm",
    "google-2019",
    "alibaba-2018",
    "alibaba-gpu-2020",
    "alibaba-gpu-2023",
    "kubernetes",
]


@pytest.mark.parametrize("fmt", FORMATS)
def test_replay_conserves_the_trace(fmt: str, tmp_path: Path) -> None:
    trace = reader(fmt).read(_files(fmt, tmp_path), {})
    report = trace.report.to_dict(trace.jobs, trace.nodes)
    assert report["rows_read"] == report["rows_kept"] + report["rows_dropped"]
    assert report["rows_dropped"] == sum(report["dropped"].values())
    path = tmp_path / "jobs.parquet"
    pq.write_table(trace.jobs, path)
    scenario = _ample(scenario_for(trace, fmt, fmt), pq.ParquetFile(path))
    result = run_spec(spec_from_dict(scenario, fmt, tmp_path))
    jobs = trace.jobs
    arrival = jobs.column("arrival_s").to_numpy()
    run = jobs.column("run_s").to_numpy()
    cpu = jobs.column("request_cpu").to_numpy()
    out = result.jobs.sort_by("job")
    start = out.column("start_s").to_numpy()
    end = out.column("end_s").to_numpy()
    assert out.num_rows == jobs.num_rows == report["rows_kept"]
    np.testing.assert_array_equal(out.column("arrival_s").to_numpy(), arrival)
    np.testing.assert_array_equal(start, arrival)  # nobody waits
    finite = np.isfinite(run)
    np.testing.assert_allclose(end[finite] - start[finite], run[finite], rtol=1e-12, atol=1e-9)
    assert np.all(np.isnan(end[~finite]))  # runs until the end: still running
    replayed = float(np.sum(out.column("request_cpu").to_numpy()[finite] * (end - start)[finite]))
    assert replayed == pytest.approx(float(np.sum(cpu[finite] * run[finite])), rel=1e-12)
    assert float(arrival.max() - arrival.min()) == pytest.approx(
        report["time_span_s"][1] - report["time_span_s"][0]
    )
    assert result.summary["jobs_completed"] == int(finite.sum())
    assert result.summary["unscheduled"] == 0


@pytest.mark.skipif(not OPENB.is_dir(), reason=f"the Alibaba GPU trace is not in {OPENB}")
def test_the_real_openb_pods_replay_with_nothing_lost(tmp_path: Path) -> None:
    """All 8,152 pods of openb_pod_list_default.csv on the 1,213 GPU nodes' shapes."""
    files = [OPENB / "openb_node_list_gpu_node.csv", OPENB / "openb_pod_list_default.csv"]
    trace = reader("alibaba-gpu-2023").read(files, {})
    lines = sum(1 for _ in (OPENB / "openb_pod_list_default.csv").open()) - 1
    assert trace.report.rows_read == lines == trace.jobs.num_rows + trace.report.rows_dropped
    path = tmp_path / "jobs.parquet"
    pq.write_table(trace.jobs, path)
    scenario = _ample(scenario_for(trace, "openb", "alibaba-gpu-2023"), pq.ParquetFile(path))
    result = run_spec(spec_from_dict(scenario, "openb", tmp_path))
    out = result.jobs.sort_by("job")
    np.testing.assert_array_equal(
        out.column("start_s").to_numpy(), trace.jobs.column("arrival_s").to_numpy()
    )
    assert result.summary["unscheduled"] == 0
