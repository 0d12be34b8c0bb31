"""Trace loaders: schema-exact reading, and errors naming file, row and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.gpu_trace import TraceError, load_nodes, load_pods

FIX = Path(__file__).parent.parent / "fixtures" / "gpu"


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
        ("name,cpu_milli\np,1\n", r"row 1: missing column\(s\) memory_mib"),
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
