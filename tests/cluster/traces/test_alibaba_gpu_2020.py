"""The Alibaba cluster-trace-gpu-v2020 (PAI) reader: the fixture's every row accounted for,
each rule hit and counted, and bad input refused naming the file, the row and the field."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest

from clusteremu.cluster.traces import alibaba_gpu_2020 as reader
from clusteremu.cluster.traces.table import ClassSpec, TraceError, check_jobs

FIXTURES = Path(__file__).parent / "fixtures" / "alibaba-gpu-2020"
FILES = (
    "pai_instance_table.csv",
    "pai_task_table.csv",
    "pai_job_table.csv",
    "pai_machine_spec.csv",
)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """A copy of the fixture files to spoil."""
    out = {}
    for name in FILES:
        out[name] = tmp_path / name
        shutil.copy(FIXTURES / name, out[name])
    return out


def _set_line(path: Path, line: int, text: str) -> None:
    lines = path.read_text().splitlines()
    lines[line - 1] = text
    path.write_text("\n".join(lines) + "\n")


def _fixture() -> list[Path]:
    return [FIXTURES / f for f in FILES]


def test_fixture_imports_and_every_row_is_accounted_for() -> None:
    trace = reader.read(_fixture())
    jobs, report = trace.jobs, trace.report
    check_jobs(jobs)
    assert report.rows_read == 17
    assert report.rows_read == jobs.num_rows + report.rows_dropped
    assert jobs.num_rows == 8
    run = jobs.column("run_s").to_numpy()
    # By hand from pai_instance_table.csv (kept rows 1, 2, 3, 5, 8, 9, 11, 17) and their tasks:
    cpu = jobs.column("request_cpu").to_numpy()
    assert float(np.sum(cpu * run)) == pytest.approx(
        6 * 600 + 6 * 300 + 4 * 990 + 8 * 750 + 12 * 800 + 12 * 900 + 2 * 50 + 1 * 200
    )
    gpu = jobs.column("request_gpu").to_numpy()
    assert float(np.sum(gpu * run)) == pytest.approx(
        500 * 600 + 500 * 300 + 2000 * 750 + 2000 * 800 + 2000 * 900 + 250 * 50
    )
    arrival = jobs.column("arrival_s").to_numpy()
    assert (arrival.min(), arrival.max()) == (0.0, 2050.0)  # job_a at 1,000 s, job_f at 3,050 s
    assert report.files == [str(p) for p in _fixture()]
    assert report.units["request_gpu"].startswith("milli-GPU")


def test_every_rule_is_hit_and_counted() -> None:
    report = reader.read(_fixture()).report
    assert dict(report.dropped) == {
        "status Failed": 1,
        "status Running": 1,
        "status Waiting": 1,
        "task not in pai_task": 1,
        "no plan_cpu in pai_task": 1,
        "no plan_mem in pai_task": 1,
        "no start_time": 1,
        "no end_time": 1,
        "end_time not after start_time": 1,
    }
    assert dict(report.corrected) == {
        "no plan_gpu: 0 GPUs": 2,
        "plan_gpu above 100 not whole GPUs: rounded up": 1,
        "job not in pai_job: the instance's start_time, user unknown": 1,
        "no job start_time: the instance's start_time": 1,
        "no gpu_type: class any": 2,
        "gpu_type MISC: class any": 2,
        "trace_id repeats: '#<row>' added": 2,
    }
    assert report.examples["task not in pai_task"] == ["pai_instance_table.csv:4"]
    assert report.examples["plan_gpu above 100 not whole GPUs: rounded up"] == [
        "pai_instance_table.csv:5"
    ]
    assert len(report.notes) == 4  # repeated task, job and machine rows; a machine left out


def test_job_fields_and_classes() -> None:
    trace = reader.read(_fixture())
    rows = {r["trace_id"]: r for r in trace.jobs.to_pylist()}
    a0 = rows["job_a/worker/w_a0"]
    assert (a0["request_cpu"], a0["request_memory_gb"], a0["request_gpu"]) == (6, 29.296875, 500)
    assert (a0["class"], a0["user"], a0["node"]) == ("V100", "user1", "mach1")
    assert rows["job_a/worker/w_a1"]["arrival_s"] == 0.0  # the job's submission, 1,000 s
    assert rows["job_b/tensorflow/w_b0"]["request_gpu"] == 2000  # plan_gpu 150: two GPUs
    assert rows["job_d/worker/w_d0#8"]["request_gpu"] == 2000  # plan_gpu 200, the first task row
    assert rows["job_d/worker/w_d0#9"]["node"] is None
    c1 = rows["job_c/evaluator/w_c1"]
    assert (c1["arrival_s"], c1["user"], c1["class"]) == (250.0, None, "any")
    assert rows["job_f/worker/w_f0"]["user"] is None
    assert trace.classes == [
        ClassSpec("T4", node_selector={"gpu_model": ["T4"]}),
        ClassSpec("V100", node_selector={"gpu_model": ["V100"]}),
        ClassSpec("V100M32", node_selector={"gpu_model": ["V100M32"]}),
        ClassSpec("any"),
    ]


def test_nodes_from_machine_spec() -> None:
    nodes = {r["node"]: r for r in reader.read(_fixture()).nodes.to_pylist()}
    assert set(nodes) == {"mach1", "mach2", "mach3", "mach4", "mach5", "mach6"}  # mach7: no cpu
    assert (nodes["mach3"]["memory_gb"], nodes["mach3"]["gpu"]) == (384, 2)  # its last row
    assert nodes["mach1"]["gpu_model"] == "V100" and nodes["mach1"]["labels"] == (
        '{"gpu_model": "V100"}'
    )
    assert nodes["mach4"]["gpu_model"] is None and nodes["mach4"]["labels"] == "{}"


def test_options() -> None:
    trace = reader.read(_fixture(), {"arrival": "instance", "fractional_gpus": "drop"})
    report = trace.report
    assert report.dropped["plan_gpu above 100 not whole GPUs"] == 1
    assert report.rows_read == trace.jobs.num_rows + report.rows_dropped
    assert not any("start_time" in r for r in report.corrected)
    assert trace.jobs.column("arrival_s").to_pylist()[:2] == [0.0, 0.0]  # both start at 1,010 s
    for bad in ({"arrival": "submit"}, {"fractional_gpus": "nearest"}, {"memory": "1"}):
        with pytest.raises(TraceError) as err:
            reader.read(_fixture(), bad)
        assert err.value.field == next(iter(bad))


def test_machine_spec_is_optional(files: dict[str, Path]) -> None:
    paths = [files[f] for f in FILES[:3]]
    trace = reader.read(paths)
    assert trace.nodes is None and trace.jobs.num_rows == 8


@pytest.mark.parametrize(
    ("name", "line", "text", "field", "problem"),
    [
        (
            "pai_task_table.csv",
            3,
            "job_b,tensorflow,1,T,1100,1900,800,32,-150,T4",
            "plan_gpu",
            "out of range",
        ),
        ("pai_task_table.csv", 2, "job_a,ps,1,T,1010,2000,400,ten,,", "plan_mem", "not a number"),
        ("pai_task_table.csv", 2, "job_a,ps,1,T,1010,2000,-400,10,,", "plan_cpu", "out of range"),
        ("pai_task_table.csv", 2, "job_a,ps,1,T,1010,2000,400,10", "plan_gpu", "8 field(s)"),
        (
            "pai_job_table.csv",
            4,
            "job_d,iid_d,user1,Terminated,-1500,2500",
            "start_time",
            "out of range",
        ),
        ("pai_job_table.csv", 4, "job_d,iid_d,user1", "status", "3 field(s)"),
        (
            "pai_instance_table.csv",
            2,
            "job_a,worker,in_a1,w_a1,iid_a,Terminated,10x,1320,mach2",
            "start_time",
            "not a number",
        ),
        ("pai_instance_table.csv", 6, "", "job_name", "blank line"),
        (
            "pai_instance_table.csv",
            6,
            "job_b,,in_b1,w_b1,iid_b,Failed,1150,1200,mach3",
            "task_name",
            "empty",
        ),
        ("pai_machine_spec.csv", 3, "mach3,T4,96,512,2.5", "cap_gpu", "whole number"),
        ("pai_machine_spec.csv", 3, "mach3,T4,96,-512,2", "cap_mem", "out of range"),
    ],
)
def test_bad_values_name_file_row_and_field(
    files: dict[str, Path], name: str, line: int, text: str, field: str, problem: str
) -> None:
    _set_line(files[name], line, text)
    with pytest.raises(TraceError) as err:
        reader.read(list(files.values()))
    e = err.value
    assert (Path(e.path).name, e.row, e.field) == (name, line, field)
    assert problem in e.problem
    assert f"{name}, row {line}, field {field!r}" in str(e)


def test_cut_off_last_line(files: dict[str, Path]) -> None:
    path = files["pai_instance_table.csv"]
    path.write_bytes(path.read_bytes()[:-9])  # "...,1250,14"
    with pytest.raises(TraceError) as err:
        reader.read(list(files.values()))
    e = err.value
    assert (Path(e.path).name, e.row, e.field) == ("pai_instance_table.csv", 17, "machine")
    assert "cut-off last line" in e.problem


def test_bad_files(files: dict[str, Path], tmp_path: Path) -> None:
    inst, task, job = (files[f] for f in FILES[:3])

    def refused(paths: list[Path], text: str) -> TraceError:
        with pytest.raises(TraceError) as err:
            reader.read(paths)
        assert text in str(err.value), str(err.value)
        return err.value

    refused([inst, task], "the pai_job file is missing")
    refused([inst, job], "the pai_task file is missing")
    refused([task, job], "the pai_instance file is missing")
    refused([inst, task, tmp_path / "pai_job_table.csv.missing"], "no such file")
    d = tmp_path / "pai_job_dir"
    d.mkdir()
    refused([inst, task, d], "is a directory")
    empty = tmp_path / "pai_job_empty.csv"
    empty.write_bytes(b"")
    refused([inst, task, empty], "empty file")
    gz = tmp_path / "pai_job_table_gz.csv"
    gz.write_bytes(gzip.compress(job.read_bytes(), mtime=0))
    e = refused([inst, task, gz], "compressed (gzip): decompress it first")
    assert e.path == str(gz)
    readable = tmp_path / "pai_job_table.csv.gz"
    readable.write_bytes(gzip.compress(job.read_bytes(), mtime=0))
    assert reader.read([inst, task, readable]).jobs.num_rows == 8
    refused([inst, task, job, tmp_path / "pai_sensor_table.csv"], "not a file of this format")


def test_a_header_row_is_skipped(files: dict[str, Path]) -> None:
    path = files["pai_task_table.csv"]
    path.write_text(",".join(reader.TASK_COLUMNS) + "\n" + path.read_text())
    trace = reader.read(list(files.values()))
    assert trace.jobs.num_rows == 8
