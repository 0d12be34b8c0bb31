"""Trace loaders: schema-exact reading, and errors naming file, row and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusteremu.cluster.gpu_trace import TraceError, load_nodes, load_pods

FIX = Path(__file__).parent.parent / "fixtures" / "gpu"
TRACE = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "alibaba-gpu-v2023"
POD_LISTS = ("default", "cpu050", "gpushare60", "gpuspec33", "multigpu50")


def test_fixture_nodes_and_pods_load() -> None:
    nodes = load_nodes(FIX / "nodes.csv")
    assert nodes.models == ["V100M16", "T4"]
    assert nodes.gpus.tolist() == [2, 4, 0] and nodes.model.tolist() == [0, 1, -1]
    assert nodes.gpu_capacity_milli == 6000
    pods = load_pods(FIX / "pods.csv", nodes.models)
    assert pods.num_gpu.tolist() == [1, 1, 2, 0, 1, 1]
    assert pods.gpu_milli.tolist() == [500, 1000, 1000, 0, 500, 250]
    assert pods.model_mask.tolist() == [3, 3, 2, 3, 3, 3]
    assert pods.gpu_request_milli.tolist() == [500, 1000, 2000, 0, 500, 250]


def write(tmp: Path, text: str) -> Path:
    path = tmp / "t.csv"
    path.write_text(text)
    return path


HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            "name,cpu_milli\np,1\n",
            r"t\.csv, row 1, column 'memory_mib': missing column\(s\) memory_mib, num_gpu, "
            r"gpu_milli; expected name, cpu_milli, memory_mib, num_gpu, gpu_milli \(optional: "
            r"gpu_spec, ",
        ),
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_spec\np,1,1,0,\n",
            r"row 1, column 'gpu_milli': missing column\(s\) gpu_milli;",
        ),
        (HEADER + "p,abc,1,0,0,,LS,R,0,0,0\n", r"row 2, column 'cpu_milli': 'abc' is not a number"),
        (HEADER + "p,-5,1,0,0,,LS,R,0,0,0\n", r"row 2, column 'cpu_milli': '-5' out of range"),
        (
            HEADER + "p,1,1,1,500,H100,LS,R,0,0,0\n",
            r"row 2, column 'gpu_spec': unknown GPU model 'H100'",
        ),
        (HEADER, "the pod list is empty"),
    ],
)
def test_bad_pod_rows_name_file_row_and_column(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(TraceError, match=match):
        load_pods(write(tmp_path, text), ["T4"])


def test_a_gpu_node_without_a_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"row 2, column 'model'"):
        load_nodes(write(tmp_path, "sn,cpu_milli,memory_mib,gpu,model\nn,1000,10,2,\n"))


def test_the_optional_columns_may_be_absent(tmp_path: Path) -> None:
    """Only name, cpu_milli, memory_mib, num_gpu and gpu_milli are required (the
    `..._multigpu50.csv` list has no more): without `gpu_spec` a pod may use any model."""
    path = write(tmp_path, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1000,1,1,500\n")
    pods = load_pods(path, ["V100M16", "T4"])
    assert pods.model_mask.tolist() == [3] and pods.gpu_spec == [""]
    assert (pods.num_gpu.tolist(), pods.gpu_milli.tolist()) == ([1], [500])


@pytest.mark.parametrize(
    ("row", "match"),
    [
        (
            "p,1,1,2,500,,LS,R,0,0,0",
            r"t\.csv, row 2, column 'gpu_milli': 500 milli-GPU per GPU on a pod with num_gpu 2; "
            r"expected 1000",
        ),
        (
            "p,1,1,1,0,,LS,R,0,0,0",
            r"t\.csv, row 2, column 'gpu_milli': 0 milli-GPU on a pod with num_gpu 1; "
            r"expected 1 to 1000",
        ),
        (
            "p,1,1,1,1500,,LS,R,0,0,0",
            r"t\.csv, row 2, column 'gpu_milli': '1500' out of range; expected in \[0, 1000\]",
        ),
        (
            "p,1,1,0,1500,,LS,R,0,0,0",
            r"t\.csv, row 2, column 'gpu_milli': '1500' out of range; expected in \[0, 1000\]",
        ),
        (
            "p,1,1,0,300,,LS,R,0,0,0",
            r"t\.csv, row 2, column 'gpu_milli': 300 milli-GPU on a pod with num_gpu 0; "
            r"expected 0 \(CPU-only\)",
        ),
        ("p,1,1,0,,,LS,R,0,0,0", r"t\.csv, row 2, column 'gpu_milli': empty"),
    ],
)
def test_requests_are_refused_not_coerced(tmp_path: Path, row: str, match: str) -> None:
    """A request the model cannot hold as written is an error naming file, row and column
    (none of the shipped pod lists has one): nothing becomes CPU-only or whole-GPU."""
    ok = "q,1,1,1,1000,,LS,R,0,0,0\n"
    with pytest.raises(TraceError, match=match.replace("row 2", "row 3")):
        load_pods(write(tmp_path, HEADER + ok + row + "\n"), ["T4"])


@pytest.mark.skipif(not TRACE.is_dir(), reason="the Alibaba trace (../shared/traces) is absent")
@pytest.mark.parametrize("kind", POD_LISTS)
def test_every_pod_list_of_the_trace_loads(kind: str) -> None:
    nodes = load_nodes(TRACE / "openb_node_list_gpu_node.csv")
    pods = load_pods(TRACE / f"openb_pod_list_{kind}.csv", nodes.models)
    assert len(pods) > 7000
    k, d = pods.num_gpu, pods.gpu_milli
    assert ((k == 0) == (d == 0)).all() and (d[k > 1] == 1000).all()
