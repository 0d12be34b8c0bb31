"""The SWF reader: the fixture's every job line accounted for, each rule hit and counted,
compressed logs read, and bad input refused naming the file, the line and the field."""

from __future__ import annotations

import bz2
import gzip
import lzma
import zipfile
from pathlib import Path

import numpy as np
import pytest

from clusteremu.cluster.traces import swf
from clusteremu.cluster.traces.table import TraceError, check_jobs

FIXTURES = Path(__file__).parent / "fixtures" / "swf"
SMALL = FIXTURES / "small.swf"


def _spoil(tmp_path: Path, line: int, text: str, name: str = "bad.swf") -> Path:
    """A copy of small.swf with line `line` (1-based) replaced by `text`."""
    lines = SMALL.read_text().splitlines()
    lines[line - 1] = text
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _raises(path: Path, row: int | None, field: str, words: str) -> TraceError:
    with pytest.raises(TraceError) as err:
        swf.read([path])
    e = err.value
    assert e.path == str(path)
    assert e.row == row
    assert e.field == field
    assert str(path) in str(e)
    if row is not None:
        assert f"row {row}" in str(e)
    if field:
        assert repr(field) in str(e)
    assert words in str(e)
    return e


def test_fixture_imports_and_every_job_line_is_accounted_for() -> None:
    trace = swf.read([SMALL])
    jobs, report = trace.jobs, trace.report
    check_jobs(jobs)
    assert report.rows_read == 14
    assert jobs.num_rows == 6
    assert report.rows_read == jobs.num_rows + report.rows_dropped
    assert report.files == [str(SMALL)]
    # By hand, kept jobs 1, 2, 3, 7, 13, 14 (cores x run time):
    # 4x100 + 8x50 + 2x30 + 16x40 + 2x70 + 64x10 core-seconds.
    cpu = jobs.column("request_cpu").to_numpy()
    run = jobs.column("run_s").to_numpy()
    assert float(np.sum(cpu * run)) == 2280.0
    arrival = jobs.column("arrival_s").to_numpy()
    assert (arrival.min(), arrival.max()) == (0.0, 60.0)  # submits 0 .. 60 s
    assert jobs.column("trace_id").to_pylist() == ["1", "2", "3", "7", "13", "14"]
    # Job 1: 2^20 KB x 4 processors = 4 GB; job 3: used 2^19 KB x 2 = 1 GB; others 0.
    assert jobs.column("request_memory_gb").to_pylist() == [4.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    # Requested time when known and >= the run, else the run time.
    assert jobs.column("estimate_s").to_pylist() == [200.0, 50.0, 30.0, 60.0, 70.0, 10.0]
    assert jobs.column("user").to_pylist() == ["7", None, "7", "8", "9", "9"]
    assert jobs.column("queue").to_pylist() == ["2", None, "1", "1", "3", "3"]
    assert set(jobs.column("class").to_pylist()) == {"swf"}
    assert jobs.column("request_gpu").to_pylist() == [0.0] * 6
    assert trace.nodes is None
    assert trace.machine_cpu == 64.0
    assert trace.notes == {"unix_start_time": 1000000000}
    assert report.notes == ["machine: 64 cores, MaxProcs of the header"]
    assert {"arrival_s", "run_s", "request_cpu", "request_memory_gb", "estimate_s"} <= set(
        report.units
    )


def test_every_rule_is_counted_with_its_lines() -> None:
    report = swf.read([SMALL]).report
    assert dict(report.dropped) == {
        "partial execution record (status 2)": 1,
        "partial execution record (status 3)": 1,
        "partial execution record (status 4)": 1,
        "cancelled before it ran": 1,
        "run time unknown": 1,
        "zero run time": 1,
        "no processor count": 1,
        "wider than the machine (MaxProcs)": 1,
    }
    assert dict(report.corrected) == {
        "processors: requested used, allocated unknown": 2,
        "requested time unknown: estimate = run time": 2,
        "requested time shorter than the run: estimate = run time": 1,
        "requested memory unknown: used memory": 1,
        "memory unknown: 0 GB": 4,
    }
    ex = report.examples
    assert ex["partial execution record (status 3)"] == ["small.swf:17"]  # after a comment
    assert ex["cancelled before it ran"] == ["small.swf:13"]
    assert ex["run time unknown"] == ["small.swf:11"]
    assert ex["zero run time"] == ["small.swf:12"]
    assert ex["no processor count"] == ["small.swf:19"]
    assert ex["wider than the machine (MaxProcs)"] == ["small.swf:20"]
    assert ex["processors: requested used, allocated unknown"] == ["small.swf:8", "small.swf:21"]
    assert ex["requested time shorter than the run: estimate = run time"] == ["small.swf:10"]


def test_machine_from_maxnodes_then_from_the_widest_job(tmp_path: Path) -> None:
    trace = swf.read([FIXTURES / "maxnodes.swf"])
    assert trace.machine_cpu == 8.0
    assert dict(trace.report.dropped) == {"wider than the machine (MaxNodes)": 1}
    assert trace.jobs.column("trace_id").to_pylist() == ["1", "3"]
    assert "MaxNodes" in trace.report.notes[0]

    path = tmp_path / "bare.swf"
    lines = (FIXTURES / "maxnodes.swf").read_text().splitlines()
    path.write_text("\n".join(line for line in lines if not line.startswith(";")) + "\n")
    trace = swf.read([path])
    assert trace.machine_cpu == 16.0
    assert trace.jobs.num_rows == 3 and trace.report.rows_dropped == 0
    assert "widest job" in trace.report.notes[0]


def test_crlf_and_compressed_logs_read_as_the_plain_one(tmp_path: Path) -> None:
    plain = swf.read([SMALL]).jobs
    data = SMALL.read_bytes()
    variants = {
        "crlf.swf": data.replace(b"\n", b"\r\n"),
        "log.swf.gz": gzip.compress(data, mtime=0),
        "log.swf.bz2": bz2.compress(data),
        "log.swf.xz": lzma.compress(data),
        "gz-without-suffix.swf": gzip.compress(data, mtime=0),
    }
    for name, content in variants.items():
        path = tmp_path / name
        path.write_bytes(content)
        trace = swf.read([path])
        assert trace.jobs.equals(plain), name
        assert trace.report.examples["zero run time"] == [f"{name}:12"]


@pytest.mark.parametrize(
    ("line", "text", "field", "words"),
    [
        (7, "1 0 10 100 -2 -1 -1 4 200 1048576 1 7 1 1 2 1 -1 -1", "allocated processors", "-2"),
        (8, "2 5 3 abc -1 -1 -1 8 -1 -1 1 -1 1 1 -1 1 -1 -1", "run time", "'abc'"),
        (8, "2 5 3 50 4.5 -1 -1 8 -1 -1 1 -1 1 1 -1 1 -1 -1", "allocated processors", "integer"),
        (8, "2 5 3 nan -1 -1 -1 8 -1 -1 1 -1 1 1 -1 1 -1 -1", "run time", "nan"),
        (10, "3 10 0 30 2 -1 524288 2 20 -1 7 7 1 1 1 1 -1 -1", "status", "-1 or 0..5"),
        (10, "3 10 0 30 2 -1 -5 2 20 -1 0 7 1 1 1 1 -1 -1", "used memory", "-5"),
        (12, "5 1 0 0 4 -1 -1 4 100 -1 1 8 1 1 1 1 -1 -1", "submit time", "order"),
        (7, "1 -1 10 100 4 -1 -1 4 200 1048576 1 7 1 1 2 1 -1 -1", "submit time", ">= 0"),
        (11, "4 12 0 -1 4 -1 -1 4 100 -1 1 8 1 1 1 1 -1", "think time", "found 17"),
        (11, "4 12 0 -1 4 -1 -1 4 100 -1 1 8 1 1 1 1 -1 -1 9", "think time", "found 19"),
    ],
)
def test_a_bad_field_names_the_file_line_and_field(
    tmp_path: Path, line: int, text: str, field: str, words: str
) -> None:
    _raises(_spoil(tmp_path, line, text), line, field, words)


def test_the_first_bad_line_is_named_whatever_its_field(tmp_path: Path) -> None:
    path = _spoil(tmp_path, 10, "3 10 0 30 2 -1 524288 2 20 -1 9 7 1 1 1 1 -1 -1")  # status
    lines = path.read_text().splitlines()
    lines[7] = "2 5 -3 50 -1 -1 -1 8 -1 -1 1 -1 1 1 -1 1 -1 -1"  # line 8: wait time
    path.write_text("\n".join(lines) + "\n")
    _raises(path, 8, "wait time", "-3")


def test_a_truncated_last_line_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.swf"
    path.write_bytes(SMALL.read_bytes() + b"15 70 0 10 4 -")  # no line break: cut off
    _raises(path, 23, "used memory", "expected 18 fields, found 6")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "empty file"),
        (b"\n  \n\t\n", "empty file"),
        (b"; MaxProcs: 8\n; only a header\n", "no job lines"),
        (gzip.compress(b"1 0 0 10 1 -1 -1 1 10 -1 1 1 1 1 1 1 -1 -1\n" * 50, mtime=0)[:30], "gzip"),
        (b"BZh91AY&SY" + b"\x00" * 20, "bzip2"),
        (b"PK\x03\x04" + b"\x00" * 40, "compressed (zip): decompress it first"),
        (b"(\xb5/\xfd" + b"\x00" * 20, "compressed (zstd): decompress it first"),
    ],
)
def test_a_bad_file_names_the_file(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "log.swf"
    path.write_bytes(content)
    _raises(path, None, "", words)


def test_a_real_zip_archive_and_paths_that_are_not_files(tmp_path: Path) -> None:
    archive = tmp_path / "log.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(SMALL, "small.swf")
    _raises(archive, None, "", "compressed (zip)")
    _raises(tmp_path, None, "", "a directory")
    _raises(tmp_path / "missing.swf", None, "", "no such file")


def test_options_and_file_count_are_checked() -> None:
    with pytest.raises(TraceError, match=r"swf: unknown option 'machine': expected one of"):
        swf.read([SMALL], {"machine": "4"})
    with pytest.raises(TraceError, match="expected one .swf log"):
        swf.read([SMALL, SMALL])
    with pytest.raises(TraceError, match="expected one .swf log"):
        swf.read([])
    assert swf.NAME == "swf" and swf.OPTIONS == {} and swf.DESCRIPTION and swf.FILES


def test_a_large_log_is_read_vectorised(tmp_path: Path) -> None:
    """2 x 10^5 generated jobs: every one accounted for, the sums as generated."""
    n = 200_000
    rng = np.random.default_rng(7)
    submit = np.cumsum(rng.integers(0, 5, n))
    run = rng.integers(-1, 500, n)
    procs = rng.integers(1, 33, n)
    status = rng.choice([0, 1, 2, 5], n)
    cols = np.full((n, 18), -1, dtype=np.int64)
    cols[:, 0] = np.arange(1, n + 1)
    cols[:, 1], cols[:, 3], cols[:, 4], cols[:, 10] = submit, run, procs, status
    path = tmp_path / "big.swf"
    with path.open("w") as f:
        f.write("; MaxProcs: 32\n")
        np.savetxt(f, cols, fmt="%d", delimiter="\t")
    trace = swf.read([path])
    keep = (run > 0) & (status != 2)
    assert trace.report.rows_read == n
    assert trace.jobs.num_rows == int(keep.sum())
    assert trace.report.rows_read == trace.jobs.num_rows + trace.report.rows_dropped
    jobs = trace.jobs
    total = np.sum(jobs.column("request_cpu").to_numpy() * jobs.column("run_s").to_numpy())
    assert total == float(np.sum(procs[keep] * run[keep]))
    assert jobs.column("arrival_s").to_numpy()[-1] == submit[keep][-1] - submit[keep][0]
