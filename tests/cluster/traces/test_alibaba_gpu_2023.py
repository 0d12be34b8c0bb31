"""The Alibaba cluster-trace-gpu-v2023 (openb) reader, built on `clusteremu.cluster.gpu_trace`: a
small
pod list written here hits every rule; the real files (when there) import whole; bad
input is refused naming the file, the row and the field."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from clusteremu.cluster import gpu_trace
from clusteremu.cluster.traces import alibaba_gpu_2023 as reader
from clusteremu.cluster.traces.table import ClassSpec, TraceError, check_jobs

TRACE = Path(__file__).resolve().parents[3].parent / "shared" / "traces" / "alibaba-gpu-v2023"
HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)
PODS = HEADER + (
    "p0,4000,8192,1,500,,LS,Running,100,1100,110\n"  # row 2
    "p1,8000,16384,2,1000,V100M32|V100M16,BE,Succeeded,200,700,200\n"
    "p2,2000,4096,0,0,,Burstable,Failed,300,400,300\n"
    "p3,1000,1024,1,250,T4,,Pending,400,900,\n"  # row 5: never scheduled
    "p4,1000,1024,1,1000,V100M16|V100M32|V100M32,LS,Running,,800,500\n"
    "p5,1000,1024,1,100,,LS,Pending,,900,\n"  # row 7: no time to arrive at
    "p6,16000,65536,8,1000,,LS,Running,600,,600\n"  # row 8: never deleted
    "p7,500,512,1,300,,LS,Running,700,700,700\n"  # row 9: deleted when created
    "p0,500,512,0,0,,LS,Running,800,900,-1\n"  # row 10: a repeated name
)
NODES = (
    "sn,cpu_milli,memory_mib,gpu,model\n"
    "n0,64000,262144,4,V100M16\n"
    "n1,96000,393216,8,V100M32\n"
    "n2,32000,131072,2,T4\n"
    "n3,32000,65536,0,\n"
)


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    nodes = tmp_path / "openb_node_list_test.csv"
    nodes.write_text(NODES)
    pods = tmp_path / "openb_pod_list_test.csv"
    pods.write_text(PODS)
    return [nodes, pods]


def test_pod_list_imports_and_every_row_is_accounted_for(files: list[Path]) -> None:
    trace = reader.read(files)
    jobs, report = trace.jobs, trace.report
    check_jobs(jobs)
    assert report.rows_read == 9 == jobs.num_rows + report.rows_dropped
    assert jobs.num_rows == 8
    run = jobs.column("run_s").to_numpy()
    cpu = jobs.column("request_cpu").to_numpy()
    finite = ~np.isnan(run)
    assert int((~finite).sum()) == 1  # p6, never deleted
    # By hand: p0 4x990, p1 8x500, p2 2x100, p3 1x500 (from creation), p4 1x300 (from
    # scheduling), p7 0.5x1 (0 s: 1 s), p0 again 0.5x100 (scheduled -1: from creation).
    assert float(np.sum(cpu[finite] * run[finite])) == pytest.approx(
        3960 + 4000 + 200 + 500 + 300 + 0.5 + 50
    )
    arrival = jobs.column("arrival_s").to_numpy()
    assert (arrival.min(), arrival.max()) == (0.0, 700.0)  # 100 s to 800 s
    assert report.files == [str(p) for p in files]
    assert report.units["request_cpu"].startswith("cores")


def test_every_rule_is_hit_and_counted(files: list[Path]) -> None:
    report = reader.read(files).report
    assert dict(report.dropped) == {"no creation_time or scheduled_time": 1}
    assert dict(report.corrected) == {
        "pod_phase Failed: replayed like every pod": 1,
        "pod_phase Pending: replayed like every pod": 1,
        "no creation_time: scheduled_time used": 1,
        "no scheduled_time (never scheduled): run from creation_time": 2,
        "no deletion_time: runs until the end": 1,
        "deletion_time not after the start: run 1 s": 1,
        "trace_id repeats: '#<row>' added": 2,
    }
    assert report.examples["no creation_time or scheduled_time"] == ["openb_pod_list_test.csv:7"]
    assert report.examples["no scheduled_time (never scheduled): run from creation_time"] == [
        "openb_pod_list_test.csv:5",
        "openb_pod_list_test.csv:10",
    ]


def test_job_fields_classes_and_nodes(files: list[Path]) -> None:
    trace = reader.read(files)
    rows = {r["trace_id"]: r for r in trace.jobs.to_pylist()}
    assert set(rows) == {"p0#2", "p1", "p2", "p3", "p4", "p6", "p7", "p0#10"}
    p0 = rows["p0#2"]
    assert (p0["request_cpu"], p0["request_memory_gb"], p0["request_gpu"]) == (4, 8, 500)
    assert (p0["class"], p0["queue"], p0["run_s"]) == ("pods", "LS", 990)
    assert rows["p1"]["request_gpu"] == 2000 and rows["p1"]["class"] == "V100M16|V100M32"
    assert rows["p4"]["class"] == "V100M16|V100M32" and rows["p4"]["arrival_s"] == 400
    assert rows["p2"]["request_gpu"] == 0
    assert rows["p3"]["queue"] is None and rows["p3"]["class"] == "T4"
    assert np.isnan(rows["p6"]["run_s"]) and rows["p6"]["request_gpu"] == 8000
    assert rows["p7"]["run_s"] == 1.0
    assert trace.classes == [
        ClassSpec("T4", node_selector={"gpu_model": ["T4"]}),
        ClassSpec("V100M16|V100M32", node_selector={"gpu_model": ["V100M16", "V100M32"]}),
        ClassSpec("pods"),
    ]
    nodes = trace.nodes.to_pylist()
    assert [n["node"] for n in nodes] == ["n0", "n1", "n2", "n3"]
    assert (nodes[1]["cpu"], nodes[1]["memory_gb"], nodes[1]["gpu"]) == (96, 384, 8)
    assert nodes[1]["gpu_model"] == "V100M32" and nodes[1]["labels"] == '{"gpu_model": "V100M32"}'
    assert nodes[3]["gpu_model"] is None and nodes[3]["labels"] == "{}"


def test_phases_option(files: list[Path]) -> None:
    trace = reader.read(files, {"phases": "Running,Succeeded"})
    report = trace.report
    assert report.dropped == {"pod_phase Failed": 1, "pod_phase Pending": 2}
    assert report.rows_read == trace.jobs.num_rows + report.rows_dropped == 9
    assert not any(r.startswith("pod_phase") for r in report.corrected)
    for bad in ({"phases": ","}, {"phase": "Running"}):
        with pytest.raises(TraceError) as err:
            reader.read(files, bad)
        assert err.value.field == next(iter(bad))


def test_without_node_list_or_time_columns(tmp_path: Path) -> None:
    pods = tmp_path / "openb_pod_list_small.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1000,1024,1,500\nb,0,0,3,1000\n"
    )
    trace = reader.read([pods])
    assert trace.nodes is None
    assert trace.jobs.column("arrival_s").to_pylist() == [0.0, 0.0]  # in file order
    assert trace.jobs.column("trace_id").to_pylist() == ["a", "b"]
    assert trace.jobs.column("request_gpu").to_pylist() == [500.0, 3000.0]
    assert dict(trace.report.corrected) == {
        "no creation_time column: arrives at 0 s": 2,
        "no deletion_time: runs until the end": 2,
    }
    assert len(trace.report.notes) == 3  # no node list, no creation / deletion column
    with pytest.raises(TraceError, match="no pod_phase column") as err:
        reader.read([pods], {"phases": "Running"})
    assert err.value.field == "phases"


@pytest.mark.parametrize(
    ("line", "text", "field", "problem"),
    [
        (3, "p1,8000,16384,1,1500,,BE,Succeeded,200,700,200", "gpu_milli", "out of range"),
        (3, "p1,8000,16384,2,500,,BE,Succeeded,200,700,200", "gpu_milli", "expected 1000"),
        (3, "p1,-8000,16384,2,1000,,BE,Succeeded,200,700,200", "cpu_milli", "out of range"),
        (3, "p1,8000,lots,2,1000,,BE,Succeeded,200,700,200", "memory_mib", "not a number"),
        (3, "p1,8000,16384,2,1000,H100,BE,Succeeded,200,700,200", "gpu_spec", "unknown GPU model"),
        (4, "p2,2000,4096,0,0,,Burstable,Failed,3e2x,400,300", "creation_time", "not a number"),
        (4, "p2,2000,4096,0,0,,Burstable,Failed,300,-400,300", "deletion_time", "out of range"),
        (4, "p2,2000,4096,0,0,,Burstable,Failed,300,400", "scheduled_time", "10 field(s)"),
    ],
)
def test_bad_values_name_file_row_and_field(
    files: list[Path], line: int, text: str, field: str, problem: str
) -> None:
    lines = PODS.splitlines()
    lines[line - 1] = text
    files[1].write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError) as err:
        reader.read(files)
    e = err.value
    assert not isinstance(e, gpu_trace.TraceError)
    assert (e.path, e.row, e.field) == (str(files[1]), line, field)
    assert problem in e.problem, e.problem
    assert f"openb_pod_list_test.csv, row {line}, field {field!r}" in str(e)


def test_bad_node_list(files: list[Path]) -> None:
    files[0].write_text(NODES.replace("n2,32000,131072,2,T4", "n2,32000,131072,2,"))
    with pytest.raises(TraceError) as err:
        reader.read(files)
    assert (Path(err.value.path).name, err.value.row, err.value.field) == (
        "openb_node_list_test.csv",
        4,
        "model",
    )


def test_bad_files(files: list[Path], tmp_path: Path) -> None:
    nodes, pods = files

    def refused(paths: list[Path], text: str) -> TraceError:
        with pytest.raises(TraceError) as err:
            reader.read(paths)
        assert text in str(err.value), str(err.value)
        return err.value

    refused([nodes], "the pod_list file is missing")
    refused([nodes, tmp_path / "openb_pod_list_none.csv"], "no such file")
    d = tmp_path / "openb_pod_list_dir"
    d.mkdir()
    refused([nodes, d], "is a directory")
    empty = tmp_path / "openb_pod_list_empty.csv"
    empty.write_text("")
    refused([nodes, empty], "empty file")
    header_only = tmp_path / "openb_pod_list_header.csv"
    header_only.write_text(HEADER)
    refused([nodes, header_only], "no pods")
    for name in ("openb_pod_list_gz.csv", "openb_pod_list.csv.gz"):
        gz = tmp_path / name
        gz.write_bytes(gzip.compress(PODS.encode(), mtime=0))
        e = refused([nodes, gz], "compressed (gzip): decompress it first")
        assert "name it" not in e.problem
    refused([nodes, pods, tmp_path / "openb_pods.csv"], "not a file of this format")
    headless = tmp_path / "openb_pod_list_headless.csv"
    headless.write_text(PODS.split("\n", 1)[1])
    e = refused([nodes, headless], "missing column(s) name, cpu_milli")
    assert (e.row, e.field) == (1, "name")


def test_real_default_pod_list() -> None:
    if not TRACE.is_dir():
        pytest.skip(f"the Alibaba GPU trace 2023 is not in {TRACE} (research use: not in the repo)")
    pods = TRACE / "openb_pod_list_default.csv"
    nodes = TRACE / "openb_node_list_gpu_node.csv"
    trace = reader.read([nodes, pods])
    check_jobs(trace.jobs)
    assert trace.jobs.num_rows == len(pods.read_text().splitlines()) - 1  # every pod, 8,152
    assert trace.nodes.num_rows == len(nodes.read_text().splitlines()) - 1
    report = trace.report
    assert report.rows_read == trace.jobs.num_rows and report.rows_dropped == 0
    assert set(trace.jobs.column("queue").to_pylist()) <= {"LS", "BE", "Burstable", "Guaranteed"}
    # The first pod: created at 0 s, deleted at 12,537,496 s; one whole GPU.
    first = trace.jobs.slice(0, 1).to_pylist()[0]
    assert first["trace_id"] == "openb-pod-0000"
    assert (first["run_s"], first["request_gpu"]) == (12537496.0, 1000.0)
    # The same requests as the loader gpu-frag uses.
    loaded = gpu_trace.load_pods(pods, gpu_trace.load_nodes(nodes).models)
    assert trace.jobs.column("request_gpu").to_numpy().sum() == loaded.gpu_request_milli.sum()


def test_real_gpuspec_and_multigpu_pod_lists() -> None:
    if not TRACE.is_dir():
        pytest.skip(f"the Alibaba GPU trace 2023 is not in {TRACE} (research use: not in the repo)")
    nodes = TRACE / "openb_node_list_all_node.csv"
    spec = reader.read([nodes, TRACE / "openb_pod_list_gpuspec33.csv"])
    assert spec.jobs.num_rows == 8152
    selectors = {c.name: c.node_selector for c in spec.classes}
    assert selectors["V100M16|V100M32"] == {"gpu_model": ["V100M16", "V100M32"]}
    assert selectors["pods"] == {}
    multi = reader.read([nodes, TRACE / "openb_pod_list_multigpu50.csv"])
    assert multi.jobs.num_rows == 9061
    assert set(multi.jobs.column("arrival_s").to_pylist()) == {0.0}
