"""The Azure vmtable reader: the fixture's every VM accounted for, each rule hit and
counted, the header detected, and bad input refused naming the file, the line and the
field."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from clusteremu.cluster.traces import azure
from clusteremu.cluster.traces.table import TraceError, check_jobs

FIXTURES = Path(__file__).parent / "fixtures" / "azure"
TABLE = FIXTURES / "vmtable.csv"
HEADED = FIXTURES / "vmtable_header.csv"


def _spoil(tmp_path: Path, line: int, text: str, source: Path = TABLE) -> Path:
    lines = source.read_text().splitlines()
    lines[line - 1] = text
    path = tmp_path / "vmtable.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _raises(path: Path, row: int | None, field: str, words: str, **options: str) -> None:
    with pytest.raises(TraceError) as err:
        azure.read([path], options)
    e = err.value
    assert (e.path, e.row, e.field) == (str(path), row, field)
    assert str(path) in str(e) and words in str(e)
    if row is not None:
        assert f"row {row}" in str(e)
    if field:
        assert repr(field) in str(e)


def _same(a: pa.Table, b: pa.Table) -> bool:
    """Equal tables, NaN equal to NaN."""
    if a.schema != b.schema or a.num_rows != b.num_rows:
        return False
    for name in a.column_names:
        x, y = a.column(name), b.column(name)
        if pa.types.is_floating(x.type):
            if not np.array_equal(x.to_numpy(), y.to_numpy(), equal_nan=True):
                return False
        elif x.to_pylist() != y.to_pylist():
            return False
    return True


def test_fixture_imports_and_every_vm_is_accounted_for() -> None:
    trace = azure.read([TABLE])
    jobs, report = trace.jobs, trace.report
    check_jobs(jobs)
    assert report.rows_read == 14  # 15 lines, one blank
    assert jobs.num_rows == 9
    assert report.rows_read == jobs.num_rows + report.rows_dropped
    # By hand, kept VMs with a deletion time (cores x lifetime in the trace):
    # A1 2x3600, A6 8x600 (from 0), A2 4x600, A3 30x3600 (>24), A11 24x1000, A12 8x600,
    # line 14 4x600, A14 12x300; A8 runs until the end (NaN).
    cpu = jobs.column("request_cpu").to_numpy()
    run = jobs.column("run_s").to_numpy()
    assert float(np.nansum(cpu * run)) == 7200 + 4800 + 2400 + 108000 + 24000 + 4800 + 2400 + 3600
    assert int(np.isnan(run).sum()) == 1
    arrival = jobs.column("arrival_s").to_numpy()
    assert (arrival.min(), arrival.max()) == (0.0, 2000.0)  # created <= 0 .. 2,000 s
    assert jobs.column("trace_id").to_pylist() == [
        "vmA1",
        "vmA6",
        "vmA2",
        "vmA3",
        "vmA8",
        "vmA11",
        "vmA12",
        "line-14",
        "vmA14",
    ]
    assert jobs.column("request_memory_gb").to_pylist() == [4, 32, 8, 70, 64, 0, 8, 4, 32]
    assert jobs.column("class").to_pylist()[:4] == [
        "Interactive",
        "Unknown",
        "Delay-insensitive",
        "Delay-insensitive",
    ]
    assert jobs.column("user").to_pylist()[-2:] == ["sub4", None]
    assert trace.nodes is None and trace.machine_cpu is None
    assert report.files == [str(TABLE)]
    assert {"arrival_s", "run_s", "request_cpu", "request_memory_gb"} <= set(report.units)


def test_every_rule_is_counted_with_its_lines() -> None:
    report = azure.read([TABLE]).report
    assert dict(report.dropped) == {
        "creation time unknown": 1,
        "core count unknown": 1,
        "deleted before created": 1,
        "zero lifetime": 1,
        "deleted before the trace began": 1,
    }
    assert dict(report.corrected) == {
        "created before the trace began": 2,
        "deletion time unknown: runs until the end": 1,
        "core bucket >24: cores_above_24": 1,
        "memory bucket >64: memory_above_64_gb": 1,
        "memory bucket unknown: 0 GB": 1,
        "category unknown: Unknown": 1,
        "vmid unknown: line number used": 1,
    }
    ex = report.examples
    assert ex["deleted before created"] == ["vmtable.csv:4"]
    assert ex["core count unknown"] == ["vmtable.csv:11"]  # after the blank line 10
    assert ex["created before the trace began"] == ["vmtable.csv:1", "vmtable.csv:6"]


def test_options_set_the_open_buckets() -> None:
    jobs = azure.read([TABLE], {"cores_above_24": "48", "memory_above_64_gb": "128"}).jobs
    row = jobs.column("trace_id").to_pylist().index("vmA3")
    assert jobs.column("request_cpu")[row].as_py() == 48.0
    assert jobs.column("request_memory_gb")[row].as_py() == 128.0
    for options, words in [
        ({"cores": "4"}, "unknown option 'cores': expected one of cores_above_24"),
        ({"cores_above_24": "20"}, "expected a number > 24"),
        ({"memory_above_64_gb": "lots"}, "expected a number > 64"),
    ]:
        with pytest.raises(TraceError, match=words) as err:
            azure.read([TABLE], options)
        assert err.value.path == "azure-vm"


def test_a_header_is_detected_and_several_files_are_one_table(tmp_path: Path) -> None:
    trace = azure.read([HEADED])
    assert trace.report.rows_read == 3 and trace.jobs.num_rows == 2
    assert trace.report.examples["zero lifetime"] == ["vmtable_header.csv:4"]
    # Columns in another order under their names.
    lines = [line.split(",") for line in HEADED.read_text().splitlines()]
    order = [3, 0, 10, 1, 2, 4, 9, 5, 6, 7, 8]
    moved = tmp_path / "moved.csv"
    moved.write_text("\n".join(",".join(f[i] for i in order) for f in lines) + "\n")
    assert _same(azure.read([moved]).jobs, trace.jobs)
    both = azure.read([TABLE, HEADED])
    assert both.report.rows_read == 17
    assert both.jobs.num_rows == 11
    assert both.report.files == [str(TABLE), str(HEADED)]


def test_gzip_crlf_and_blank_lines_read_as_the_plain_table(tmp_path: Path) -> None:
    plain = azure.read([TABLE]).jobs
    path = tmp_path / "vmtable.csv.gz"
    path.write_bytes(gzip.compress(TABLE.read_bytes(), mtime=0))
    assert _same(azure.read([path]).jobs, plain)
    crlf = tmp_path / "crlf.csv"
    crlf.write_bytes(
        TABLE.read_bytes().replace(b"\n", b"\r\n").replace(b"\r\n\r\n", b"\r\n \t\r\n")
    )
    trace = azure.read([crlf])
    assert _same(trace.jobs, plain)
    assert trace.report.examples["core count unknown"] == ["crlf.csv:11"]


@pytest.mark.parametrize(
    ("line", "text", "field", "words"),
    [
        (
            2,
            "vmA2,sub1,dep1,300,900,50.0,10.0,45.0,Delay-insensitive,3,8",
            "vmcorecountbucket",
            "'3'",
        ),
        (
            2,
            "vmA2,sub1,dep1,300,900,50.0,10.0,45.0,Delay-insensitive,4,16",
            "vmmemorybucket",
            "'16'",
        ),
        (2, "vmA2,sub1,dep1,300,900,50.0,10.0,45.0,Batch,4,8", "vmcategory", "'Batch'"),
        (2, "vmA2,sub1,dep1,3e2x,900,50.0,10.0,45.0,Interactive,4,8", "vmcreated", "'3e2x'"),
        (2, "vmA2,sub1,dep1,300,900,high,10.0,45.0,Interactive,4,8", "maxcpu", "'high'"),
        (2, "vmA2,sub1,dep1,300,inf,50.0,10.0,45.0,Interactive,4,8", "vmdeleted", "finite"),
        (3, "vmA3,sub2,dep2,600,4200,99.0,70.0", "p95maxcpu", "found 7"),
        (
            3,
            "vmA3,sub2,dep2,600,4200,99.0,70.0,95.0,Unknown,2,2,extra",
            "vmmemorybucket",
            "found 12",
        ),
    ],
)
def test_a_bad_field_names_the_file_line_and_field(
    tmp_path: Path, line: int, text: str, field: str, words: str
) -> None:
    _raises(_spoil(tmp_path, line, text), line, field, words)


def test_a_truncated_last_line_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "vmtable.csv"
    path.write_bytes(TABLE.read_bytes() + b"vmA15,sub5,dep8,2100,26")
    _raises(path, 16, "maxcpu", "expected 11 comma-separated fields, found 5")


def test_a_header_without_a_needed_column(tmp_path: Path) -> None:
    path = _spoil(
        tmp_path,
        1,
        "vmid,subscriptionid,deploymentid,created,vmdeleted,maxcpu,avgcpu,"
        "p95maxcpu,vmcategory,vmcorecountbucket,vmmemorybucket",
        HEADED,
    )
    _raises(path, 1, "vmcreated", "a header without the column 'vmcreated'")


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "empty file"),
        (b"\n\n", "empty file"),
        (gzip.compress(b"vm,sub,dep,0,10,1,1,1,Interactive,2,2\n" * 40, mtime=0)[:25], "gzip"),
        (b"PK\x03\x04" + b"\x00" * 30, "compressed (zip): decompress it first"),
    ],
)
def test_a_bad_file_names_the_file(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "vmtable.csv"
    path.write_bytes(content)
    _raises(path, None, "", words)


def test_paths_that_are_not_files(tmp_path: Path) -> None:
    _raises(tmp_path, None, "", "a directory")
    _raises(tmp_path / "nope.csv", None, "", "no such file")
    with pytest.raises(TraceError, match="expected the vmtable"):
        azure.read([])


def test_a_large_table_is_read_vectorised(tmp_path: Path) -> None:
    """10^5 generated VMs: every one accounted for, the sums as generated."""
    n = 100_000
    rng = np.random.default_rng(3)
    created = np.sort(rng.integers(-100, 2_592_000, n))
    life = rng.integers(-5, 100_000, n)
    cores = rng.choice(np.array(azure.CORE_BUCKETS), n)
    memory = rng.choice(np.array(azure.MEMORY_BUCKETS), n)
    category = rng.choice(np.array(azure.CATEGORIES), n)
    ids = np.char.add("vm", np.arange(n).astype(str))
    table = np.column_stack(
        [ids, ids, ids, created, created + life, ["1.5"] * n, ["1.0"] * n, ["2.0"] * n]
        + [category, cores, memory]
    )
    path = tmp_path / "vmtable.csv"
    np.savetxt(path, table, fmt="%s", delimiter=",")
    trace = azure.read([path])
    deleted = created + life
    keep = (life > 0) & (deleted > 0)
    assert trace.report.rows_read == n
    assert trace.jobs.num_rows == int(keep.sum())
    assert trace.report.rows_read == trace.jobs.num_rows + trace.report.rows_dropped
    value = {b: (30.0 if b == ">24" else float(b)) for b in azure.CORE_BUCKETS}
    expected = np.vectorize(value.get)(cores[keep]) * (deleted - np.maximum(created, 0))[keep]
    jobs = trace.jobs
    total = np.sum(jobs.column("request_cpu").to_numpy() * jobs.column("run_s").to_numpy())
    assert total == pytest.approx(float(expected.sum()), rel=1e-12)
