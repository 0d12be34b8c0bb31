"""The Alibaba cluster-trace-v2018 reader: the fixture's every row accounted for, each rule
hit and counted, and bad input refused naming the file, the row and the field."""

from __future__ import annotations

import bz2
import gzip
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest

from clusteremu.cluster.traces import alibaba_2018 as reader
from clusteremu.cluster.traces.table import Trace, TraceError, check_jobs
from clusteremu.cluster.traces.text_files import first_failing_cast

FIXTURES = Path(__file__).parent / "fixtures" / "alibaba-2018"
FILES = ("batch_instance.csv", "batch_task.csv", "machine_meta.csv")


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """A copy of the fixture files to spoil."""
    out = {}
    for name in FILES:
        out[name] = tmp_path / name
        shutil.copy(FIXTURES / name, out[name])
    return out


def _read(files: dict[str, Path], **options: str) -> Trace:
    return reader.read(list(files.values()), options)


def _set_line(path: Path, line: int, text: str) -> None:
    lines = path.read_text().splitlines()
    lines[line - 1] = text
    path.write_text("\n".join(lines) + "\n")


def test_fixture_imports_and_every_row_is_accounted_for() -> None:
    trace = reader.read([FIXTURES / f for f in FILES])
    jobs, report = trace.jobs, trace.report
    check_jobs(jobs)
    assert report.rows_read == 21
    assert report.rows_read == jobs.num_rows + report.rows_dropped
    assert jobs.num_rows == 8
    # By hand from batch_instance.csv (kept rows 1, 2, 3, 5, 11, 17, 18, 20):
    # 1x60 + 1x80 + 2.5x100 + 0.5x100 + 4x150 + 1x90 + 1x90 + 1x80 core-seconds.
    cpu = jobs.column("request_cpu").to_numpy()
    run = jobs.column("run_s").to_numpy()
    assert float(np.sum(cpu * run)) == pytest.approx(1300.0)
    arrival = jobs.column("arrival_s").to_numpy()
    assert (arrival.min(), arrival.max()) == (0.0, 920.0)  # first 100 s, last 1,020 s
    mem = jobs.column("request_memory_gb").to_numpy()
    assert float(np.sum(mem * run)) == pytest.approx(
        5.12 * (0.5 * 60 + 0.5 * 80 + 1 * 100 + 0.25 * 100 + 2 * 150 + 0.1 * (90 + 90 + 80))
    )
    assert set(jobs.column("request_gpu").to_pylist()) == {0.0}
    assert report.files == [str(FIXTURES / f) for f in FILES]
    assert {"arrival_s", "run_s", "request_cpu", "request_memory_gb"} <= set(report.units)


def test_every_rule_is_hit_and_counted() -> None:
    report = reader.read([FIXTURES / f for f in FILES]).report
    assert dict(report.dropped) == {
        "status Failed": 1,
        "status Running": 1,
        "status Waiting": 1,
        "status Cancelled": 1,
        "status empty": 1,
        "task not in batch_task": 1,
        "no plan_cpu in batch_task": 1,
        "no plan_mem in batch_task": 2,  # -1 and 101: the trace's invalid markers
        "no start_time": 1,
        "no end_time": 1,
        "end_time not after start_time": 2,
    }
    assert dict(report.corrected) == {
        "instance start_time unknown: the task's start_time": 2,
        "no task_type: class batch": 1,
        "trace_id repeats: '#<row>' added": 2,
    }
    assert report.examples["task not in batch_task"] == ["batch_instance.csv:13"]
    assert report.examples["end_time not after start_time"] == [
        "batch_instance.csv:15",
        "batch_instance.csv:16",
    ]
    assert any("repeat a (job_name, task_name)" in n for n in report.notes)


def test_job_fields() -> None:
    jobs = reader.read([FIXTURES / f for f in FILES]).jobs
    rows = {r["trace_id"]: r for r in jobs.to_pylist()}
    # Instance start 0: the task's start (300 s); the first of the repeated j_4/M1 tasks.
    j4 = rows["j_4/M1/ins_1"]
    assert (j4["arrival_s"], j4["run_s"], j4["request_cpu"]) == (200.0, 150.0, 4.0)
    assert j4["request_memory_gb"] == pytest.approx(2.0 * 5.12)
    assert j4["class"] == "batch" and j4["node"] == "m_2"
    assert rows["j_6/M1/ins_4#17"]["node"] is None
    assert rows["j_6/M1/ins_4#18"]["node"] == "m_6"
    assert rows["j_1/R2_1/ins_1"]["class"] == "1"
    assert {r["user"] for r in rows.values()} == {None}


def test_nodes_from_machine_meta() -> None:
    trace = reader.read([FIXTURES / f for f in FILES])
    nodes = {r["node"]: r for r in trace.nodes.to_pylist()}
    assert set(nodes) == {"m_1", "m_2", "m_4"}  # m_3, m_5: no known sizes
    assert nodes["m_1"]["cpu"] == 96 and nodes["m_1"]["memory_gb"] == pytest.approx(512)
    assert nodes["m_1"]["unschedulable"] is False  # its last USING row, not the later one
    assert nodes["m_2"]["memory_gb"] == pytest.approx(60 * 5.12)  # the last USING row
    assert nodes["m_4"]["unschedulable"] is True  # never USING
    assert '"failure_domain_2": "c"' in nodes["m_4"]["labels"]
    assert any("2 machine(s)" in n for n in trace.report.notes)


def test_options() -> None:
    paths = [FIXTURES / f for f in FILES]
    trace = reader.read(paths, {"memory_gb_per_unit": "10", "class_by": "none"})
    assert set(trace.jobs.column("class").to_pylist()) == {"batch"}
    assert [c.name for c in trace.classes] == ["batch"]
    assert trace.nodes.column("memory_gb").to_pylist()[0] == pytest.approx(1000)
    for bad in ({"memory_gb_per_unit": "0"}, {"memory_gb_per_unit": "x"}, {"class_by": "job"}):
        with pytest.raises(TraceError) as err:
            reader.read(paths, bad)
        assert err.value.field == next(iter(bad))
    with pytest.raises(TraceError, match="unknown option 'colour'"):
        reader.read(paths, {"colour": "red"})


def test_machine_meta_is_optional_and_a_header_row_is_skipped(
    files: dict[str, Path],
) -> None:
    path = files["batch_instance.csv"]
    path.write_text(",".join(reader.INSTANCE_COLUMNS) + "\n" + path.read_text())
    trace = reader.read([files["batch_instance.csv"], files["batch_task.csv"]])
    assert trace.nodes is None and trace.jobs.num_rows == 8
    assert trace.report.examples["task not in batch_task"] == ["batch_instance.csv:14"]


def test_compressed_files_read_by_name(files: dict[str, Path], tmp_path: Path) -> None:
    gz = tmp_path / "batch_instance.csv.gz"
    gz.write_bytes(gzip.compress(files["batch_instance.csv"].read_bytes(), mtime=0))
    bz = tmp_path / "batch_task.csv.bz2"
    bz.write_bytes(bz2.compress(files["batch_task.csv"].read_bytes()))
    trace = reader.read([gz, bz])
    assert trace.jobs.num_rows == 8 and trace.report.rows_dropped == 13


@pytest.mark.parametrize(
    ("name", "line", "text", "field", "problem"),
    [
        (
            "batch_task.csv",
            3,
            "task_aaa,3,j_2,12,Terminated,0,400,fifty,0.25",
            "plan_cpu",
            "not a number",
        ),
        (
            "batch_task.csv",
            2,
            "R2_1,1,j_1,1,Terminated,150,300,-250,1.00",
            "plan_cpu",
            "out of range",
        ),
        (
            "batch_task.csv",
            2,
            "R2_1,1,j_1,1,Terminated,150,300,250,100.5",
            "plan_mem",
            "out of range",
        ),
        (
            "batch_task.csv",
            2,
            "R2_1,1,j_1,1,Terminated,150,300,250,inf",
            "plan_mem",
            "out of range",
        ),
        ("batch_task.csv", 4, ",1,j_3,3,Failed,200,260,,0.40", "task_name", "empty"),
        (
            "batch_instance.csv",
            5,
            "ins_3,task_aaa,j_2,12,Terminated,-5,330,m_3,2,2,,,,",
            "start_time",
            "out of range",
        ),
        (
            "batch_instance.csv",
            7,
            "ins_5,task_aaa,j_2,12,Running,250,1e400x,m_4,1,1,,,,",
            "end_time",
            "not a number",
        ),
        (
            "batch_instance.csv",
            7,
            "ins_5,task_aaa,j_2,12,Running,250,300,m_4,1,1",
            "cpu_avg",
            "10 field(s); expected 14",
        ),
        (
            "batch_instance.csv",
            7,
            "ins_5,task_aaa,j_2,12,Running,250,300,m_4,1,1,,,,,,",
            "mem_max",
            "16 field",
        ),
        ("batch_instance.csv", 9, "", "job_name", "blank line"),
        (
            "batch_instance.csv",
            3,
            "ins_1,R2_1,,1,Terminated,200,300,m_1,1,1,1,1,0.1,0.1",
            "job_name",
            "empty",
        ),
        ("machine_meta.csv", 4, "m_2,200,2,b,64,160,USING", "mem_size", "out of range"),
        ("machine_meta.csv", 4, "m_2,200,2,b,-64,60,USING", "cpu_num", "out of range"),
    ],
)
def test_bad_values_name_file_row_and_field(
    files: dict[str, Path], name: str, line: int, text: str, field: str, problem: str
) -> None:
    _set_line(files[name], line, text)
    with pytest.raises(TraceError) as err:
        _read(files)
    e = err.value
    assert (Path(e.path).name, e.row, e.field) == (name, line, field)
    assert problem in e.problem
    assert f"{name}, row {line}, field {field!r}" in str(e)


def test_cut_off_last_line(files: dict[str, Path]) -> None:
    path = files["batch_instance.csv"]
    path.write_bytes(path.read_bytes()[:-16])  # the last row cut in its seventh field
    with pytest.raises(TraceError) as err:
        _read(files)
    e = err.value
    assert (Path(e.path).name, e.row) == ("batch_instance.csv", 21)
    assert "cut-off last line" in e.problem and e.field == "machine_id"


def test_not_utf8(files: dict[str, Path]) -> None:
    path = files["batch_task.csv"]
    path.write_bytes(path.read_bytes().replace(b"task_bbb", b"task_\xff\xfe"))
    with pytest.raises(TraceError) as err:
        _read(files)
    assert (err.value.row, err.value.field) == (8, "task_name")
    assert "UTF-8" in err.value.problem


def test_bad_files(files: dict[str, Path], tmp_path: Path) -> None:
    inst, task = files["batch_instance.csv"], files["batch_task.csv"]

    def refused(paths: list[Path], text: str) -> TraceError:
        with pytest.raises(TraceError) as err:
            reader.read(paths)
        assert text in str(err.value), str(err.value)
        return err.value

    e = refused([inst], "the batch_task file is missing")
    assert "batch_task" in e.path
    refused([tmp_path / "batch_task_missing.csv", inst], "no such file")
    d = tmp_path / "batch_task_dir"
    d.mkdir()
    refused([d, inst], "is a directory")
    empty = tmp_path / "batch_task_empty.csv"
    empty.write_bytes(b"")
    e = refused([empty, inst], "empty file")
    assert e.path == str(empty)
    gz = tmp_path / "batch_task_gz.csv"
    gz.write_bytes(gzip.compress(task.read_bytes(), mtime=0))
    refused([gz, inst], "compressed (gzip): decompress it first")
    fake = tmp_path / "batch_task_fake.csv.gz"
    fake.write_bytes(task.read_bytes())
    refused([fake, inst], "not gzip data")
    tgz = tmp_path / "batch_task.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(task, arcname="batch_task.csv")
    refused([tgz, inst], "a tar archive: extract it first")
    header = tmp_path / "batch_task_header.csv"
    header.write_text("task_name,job_name\n" + task.read_text())
    e = refused([header, inst], "header row")
    assert e.row == 1
    refused([task, inst, tmp_path / "container_meta.csv"], "not a file of this format")
    refused([task, inst, inst], "a second batch_instance file")


def _synthetic(n: int, folder: Path) -> list[Path]:
    """`n` batch_instance rows over n/10 tasks (pyarrow writes them: the test times the read)."""
    rng = np.random.default_rng(1)
    nt = n // 10
    tn = np.char.add("M", np.arange(nt).astype(str))
    tj = np.char.add("j_", (np.arange(nt) // 3).astype(str))
    tasks = pa.table(
        {
            "task_name": tn,
            "instance_num": np.full(nt, 10),
            "job_name": tj,
            "task_type": rng.integers(1, 13, nt).astype(str),
            "status": np.full(nt, "Terminated"),
            "start_time": rng.integers(1, 700_000, nt),
            "end_time": np.full(nt, 800_000),
            "plan_cpu": rng.choice([50.0, 100.0, 200.0], nt),
            "plan_mem": rng.uniform(0.1, 2, nt).round(2),
        }
    )
    ti = rng.integers(0, nt, n)
    start = rng.integers(1, 700_000, n)
    inst = pa.table(
        {
            "instance_name": np.char.add("ins_", np.arange(n).astype(str)),
            "task_name": tn[ti],
            "job_name": tj[ti],
            "task_type": np.asarray(tasks.column("task_type"))[ti],
            "status": rng.choice(["Terminated", "Failed"], n, p=[0.95, 0.05]),
            "start_time": start,
            "end_time": start + rng.integers(1, 1000, n),
            "machine_id": np.char.add("m_", rng.integers(1, 4000, n).astype(str)),
            "seq_no": np.ones(n, dtype=np.int64),
            "total_seq_no": np.ones(n, dtype=np.int64),
            "cpu_avg": rng.uniform(0, 100, n).round(1),
            "cpu_max": rng.uniform(0, 100, n).round(1),
            "mem_avg": rng.uniform(0, 1, n).round(2),
            "mem_max": rng.uniform(0, 1, n).round(2),
        }
    )
    out = [folder / "batch_instance.csv", folder / "batch_task.csv"]
    options = pcsv.WriteOptions(include_header=False, quoting_style="none")
    pcsv.write_csv(inst, str(out[0]), options)
    pcsv.write_csv(tasks, str(out[1]), options)
    return out


def test_many_rows_are_read_whole(tmp_path: Path) -> None:
    """A large synthetic batch_instance (its speed is `benchmarks/traces.py`'s: no test
    times anything)."""
    paths = _synthetic(200_000, tmp_path)
    trace = reader.read(paths)
    report = trace.report
    assert report.rows_read == 200_000 == trace.jobs.num_rows + report.rows_dropped
    assert set(report.dropped) == {"status Failed"}


def test_first_failing_finds_the_row_in_a_long_column() -> None:
    values = pa.array(["1"] * 200_000 + ["x"] + ["2"] * 10)
    assert first_failing_cast(values, pa.float64()) == 200_000
    assert first_failing_cast(pa.array(["1", "2"]), pa.float64()) is None
