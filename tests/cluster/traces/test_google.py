"""The Google 2019 reader: the fixture's every instance accounted for, each rule hit and
counted, CSV and JSON Lines alike, events in any order, and bad input refused naming the
file, the line and the field."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from clusteremu.cluster.traces import google
from clusteremu.cluster.traces.table import TraceError, check_jobs

FIXTURES = Path(__file__).parent / "fixtures" / "google"
INSTANCES = FIXTURES / "instance_events.csv"
INSTANCES_JSON = FIXTURES / "instance_events.json"
COLLECTIONS = FIXTURES / "collection_events.csv"
MACHINES = FIXTURES / "machine_events.csv"
ALL = [INSTANCES, COLLECTIONS, MACHINES]


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


def _spoil(tmp_path: Path, line: int, text: str, source: Path = INSTANCES) -> Path:
    lines = source.read_text().splitlines()
    lines[line - 1] = text
    path = tmp_path / source.name
    path.write_text("\n".join(lines) + "\n")
    return path


def _raises(paths: list[Path], path: Path, row: int | None, field: str, words: str) -> None:
    with pytest.raises(TraceError) as err:
        google.read(paths)
    e = err.value
    assert (e.path, e.row, e.field) == (str(path), row, field)
    assert str(path) in str(e) and words in str(e)
    if row is not None:
        assert f"row {row}" in str(e)
    if field:
        assert repr(field) in str(e)


def test_fixture_imports_and_every_instance_is_accounted_for() -> None:
    trace = google.read(ALL)
    jobs, report = trace.jobs, trace.report
    check_jobs(jobs)
    assert report.rows_read == 10  # instances (34 events)
    assert jobs.num_rows == 6
    assert report.rows_read == jobs.num_rows + report.rows_dropped
    assert report.files == [str(p) for p in ALL]
    # By hand (x100 cores per unit): 100-0 2 cores x 10 s, 100-1 4 x 5, 200-0 8 x 5 (last
    # request 0.08; first SCHEDULE 5 s to FINISH 10 s), 400-0 3 x 10; 200-1 and 400-3 run
    # until the end (NaN).
    cpu = jobs.column("request_cpu").to_numpy()
    run = jobs.column("run_s").to_numpy()
    assert float(np.nansum(cpu * run)) == pytest.approx(110.0)
    assert int(np.isnan(run).sum()) == 2
    arrival = jobs.column("arrival_s").to_numpy()
    assert (arrival.min(), arrival.max()) == (0.0, 14.0)
    assert jobs.column("trace_id").to_pylist() == [
        "100-1",
        "100-0",
        "200-0",
        "200-1",
        "400-0",
        "400-3",
    ]
    assert arrival.tolist() == [0.0, 1.0, 4.0, 6.0, 9.0, 14.0]
    assert cpu.tolist() == pytest.approx([4, 2, 8, 1, 3, 5])
    assert jobs.column("request_memory_gb").to_numpy().tolist() == pytest.approx(
        [0, 4, 12, 4, 4, 4]
    )
    assert jobs.column("node").to_pylist() == ["12", "11", "12", "13", "11", "11"]
    assert jobs.column("priority").to_pylist() == [200, 200, 360, 360, 0, 0]
    assert jobs.column("class").to_pylist() == [
        "class-unknown",
        "class-2",
        "class-3",
        "class-3",
        "class-0",
        "class-1",
    ]
    assert jobs.column("user").to_pylist() == ["alice", "alice", "bob", "bob", None, None]
    # Machines 11 and 12 with their last known capacity; 13 (no capacity) left out, 14
    # (never added) not a node.
    nodes = trace.nodes
    assert nodes is not None
    assert nodes.column("node").to_pylist() == ["11", "12"]
    assert nodes.column("cpu").to_pylist() == [25.0, 100.0]
    assert nodes.column("memory_gb").to_pylist() == [200.0, 400.0]
    assert "1 machines added without a known capacity: left out" in report.notes
    assert {"arrival_s", "run_s", "request_cpu", "request_memory_gb", "nodes.cpu"} <= set(
        report.units
    )


def test_every_rule_is_counted_with_its_lines() -> None:
    report = google.read(ALL).report
    assert dict(report.dropped) == {
        "alloc instance (a reservation, not a task)": 1,
        "never scheduled": 1,
        "no CPU request": 1,
        "zero run time": 1,
    }
    assert dict(report.corrected) == {
        "submitted before the trace began": 1,
        "no submit event: arrival = first event": 1,
        "still running at the trace end": 2,
        "memory request unknown: 0 GB": 1,
        "scheduling class unknown": 1,
    }
    ex = report.examples  # the line of each instance's earliest event
    assert ex["alloc instance (a reservation, not a task)"] == ["instance_events.csv:2"]
    assert ex["never scheduled"] == ["instance_events.csv:3"]
    assert ex["no CPU request"] == ["instance_events.csv:28"]
    assert ex["zero run time"] == ["instance_events.csv:23"]
    assert ex["no submit event: arrival = first event"] == ["instance_events.csv:10"]
    assert ex["still running at the trace end"] == [
        "instance_events.csv:13",
        "instance_events.csv:29",
    ]


def test_json_lines_read_as_the_csv(tmp_path: Path) -> None:
    csv_trace = google.read(ALL)
    json_trace = google.read([INSTANCES_JSON, COLLECTIONS, MACHINES])
    assert _same(json_trace.jobs, csv_trace.jobs)
    assert dict(json_trace.report.dropped) == dict(csv_trace.report.dropped)
    # Numbers as JSON numbers (not BigQuery's strings), machines as JSON too, blank lines.
    lines = [json.loads(line) for line in INSTANCES_JSON.read_text().splitlines()]
    numbers = tmp_path / "instance_events.jsonl"
    numbers.write_text(
        "\n\n".join(
            json.dumps({k: (int(v) if isinstance(v, str) else v) for k, v in obj.items()})
            for obj in lines
        )
        + "\n"
    )
    machines = tmp_path / "machine_events.json"
    machines.write_text(
        '{"time": 0, "machine_id": 11, "type": 1, "capacity": {"cpus": 0.5, "memory": 0.5}}\n'
        '{"time": 100000000, "machine_id": 11, "type": 3, "capacity": {"cpus": 0.25}}\n'
        '{"time": 0, "machine_id": 12, "type": 1, "capacity": {"cpus": 1.0, "memory": 1.0}}\n'
    )
    trace = google.read([numbers, COLLECTIONS, machines])
    assert _same(trace.jobs, csv_trace.jobs)
    assert trace.nodes is not None and csv_trace.nodes is not None
    assert trace.nodes.equals(csv_trace.nodes)
    assert trace.report.examples["never scheduled"] == ["instance_events.jsonl:3"]


def test_quoted_csv_fields(tmp_path: Path) -> None:
    collections = tmp_path / "collection_events.csv"
    lines = COLLECTIONS.read_text().splitlines()
    lines[2] = lines[2].replace("alice", '"alice, ""the first"""')
    collections.write_text("\n".join(lines) + "\n")
    users = google.read([INSTANCES, collections]).jobs.column("user").to_pylist()
    assert users[:2] == ['alice, "the first"'] * 2


def test_without_collection_events_alloc_sets_are_not_known() -> None:
    trace = google.read([INSTANCES])
    assert trace.nodes is None
    assert trace.report.rows_read == 10 and trace.jobs.num_rows == 7
    assert set(trace.jobs.column("user").to_pylist()) == {None}
    assert "no collection_events: every job's user is unknown" in trace.report.notes


def test_event_order_and_sharding_do_not_matter(tmp_path: Path) -> None:
    header, *rows = INSTANCES.read_text().splitlines()
    reverse = tmp_path / "instance_events.csv"
    reverse.write_text("\n".join([header, *rows[::-1]]) + "\n")
    base = google.read(ALL).jobs
    assert _same(google.read([reverse, COLLECTIONS, MACHINES]).jobs, base)
    shards = [tmp_path / "instance_events-000000000000.csv", tmp_path / "instance_events-01.csv"]
    shards[0].write_text("\n".join([header, *rows[:17]]) + "\n")
    shards[1].write_text("\n".join([header, *rows[17:]]) + "\n")
    trace = google.read([*shards, COLLECTIONS, MACHINES])
    assert _same(trace.jobs, base)
    assert trace.report.rows_read == 10
    # 400-2 begins on line 28 of the whole file: line 11 of the second shard.
    assert trace.report.examples["no CPU request"] == ["instance_events-01.csv:11"]


def test_gzip_and_options(tmp_path: Path) -> None:
    packed = tmp_path / "instance_events.csv.gz"
    packed.write_bytes(gzip.compress(INSTANCES.read_bytes(), mtime=0))
    assert _same(google.read([packed]).jobs, google.read([INSTANCES]).jobs)
    trace = google.read(ALL, {"cpu_per_unit": "50", "memory_gb_per_unit": "100"})
    assert trace.jobs.column("request_cpu").to_numpy().tolist() == pytest.approx(
        [2, 1, 4, 0.5, 1.5, 2.5]
    )
    assert trace.nodes is not None
    assert trace.nodes.column("memory_gb").to_pylist() == [50.0, 100.0]
    for options, words in [
        ({"cpus": "1"}, "unknown option 'cpus': expected one of cpu_per_unit, memory_gb_per_unit"),
        ({"cpu_per_unit": "0"}, "expected a number > 0"),
        ({"memory_gb_per_unit": "nan"}, "expected a number > 0"),
    ]:
        with pytest.raises(TraceError, match=words) as err:
            google.read(ALL, options)
        assert err.value.path == "google-2019"


@pytest.mark.parametrize(
    ("line", "text", "field", "words"),
    [
        (5, "7000000,11,200,3,,0,360,0,0,11,-1,0.06,0.02", "type", "0..10"),
        (5, "7e6x,4,200,3,,0,360,0,0,11,-1,0.06,0.02", "time", "'7e6x'"),
        (5, "-7,4,200,3,,0,360,0,0,11,-1,0.06,0.02", "time", ">= 0"),
        (5, "7000000,4,200,3,,0,360,0,0,11,-1,-0.06,0.02", "resource_request.cpus", "-0.06"),
        (5, "7000000,4,200,5,,0,360,0,0,11,-1,0.06,0.02", "scheduling_class", "0..3"),
        (5, "7000000,4,200,3,,0,360,0,0.5,11,-1,0.06,0.02", "instance_index", "integer"),
        (5, "7000000,4,,3,,0,360,0,0,11,-1,0.06,0.02", "collection_id", "a value"),
        (5, "7000000,4,200,3,,0,360,0,0,11,-1", "resource_request.cpus", "found 11"),
    ],
)
def test_a_bad_csv_field_names_the_file_line_and_field(
    tmp_path: Path, line: int, text: str, field: str, words: str
) -> None:
    path = _spoil(tmp_path, line, text)
    _raises([path], path, line, field, words)


def test_bad_machine_and_collection_events(tmp_path: Path) -> None:
    machines = _spoil(tmp_path, 3, "0,11,4,s1,0.5,0.5,p1,", MACHINES)
    _raises([INSTANCES, machines], machines, 3, "type", "machine event type 0..3")
    machines = _spoil(tmp_path, 3, "0,11,1,s1,-0.5,0.5,p1,", MACHINES)
    _raises([INSTANCES, machines], machines, 3, "capacity.cpus", "-0.5")
    collections = _spoil(tmp_path, 2, "13000000,6,100,2,,7,200,0,,n1,l1,,0,0,1,0", COLLECTIONS)
    _raises([INSTANCES, collections], collections, 2, "collection_type", "0 or 1")


def test_a_truncated_last_line_and_a_missing_column(tmp_path: Path) -> None:
    cut = tmp_path / "instance_events.csv"
    cut.write_bytes(INSTANCES.read_bytes() + b"21000000,6,400")
    _raises([cut], cut, 36, "scheduling_class", "found 3 (a truncated line?)")
    header = INSTANCES.read_text().splitlines()[0].replace("instance_index", "index")
    path = _spoil(tmp_path, 1, header)
    _raises([path], path, 1, "instance_index", "no column 'instance_index'")


@pytest.mark.parametrize(
    ("line", "text", "field", "words"),
    [
        (4, '{"time": "0", "type": "0", "collection_id": "100"', "", "not a JSON object"),
        (4, "[1, 2]", "", "one JSON object per line"),
        (
            4,
            '{"time": "soon", "type": "0", "collection_id": "1", "instance_index": "0"}',
            "time",
            "'soon'",
        ),
        (
            4,
            '{"time": 0, "type": "0", "collection_id": "1", "instance_index": "0"}',
            "time",
            "another JSON type",
        ),
        (
            4,
            '{"time": "0", "type": "3", "collection_id": "1", "instance_index": "0", '
            '"resource_request": {"cpus": true}}',
            "resource_request.cpus",
            "True",
        ),
        (4, '{"time": "0", "type": "3", "instance_index": "0"}', "collection_id", "a value"),
    ],
)
def test_a_bad_json_line_names_the_file_line_and_field(
    tmp_path: Path, line: int, text: str, field: str, words: str
) -> None:
    path = _spoil(tmp_path, line, text, INSTANCES_JSON)
    _raises([path], path, line, field, words)


def test_a_json_array_is_not_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "instance_events.json"
    path.write_text(json.dumps([{"time": 0}, {"time": 1}]))
    _raises([path], path, 1, "", "one JSON object per line")


def test_files_and_paths_that_cannot_be_read(tmp_path: Path) -> None:
    other = tmp_path / "instance_usage.csv"
    other.write_text("start_time\n0\n")
    _raises([INSTANCES, other], other, None, "", "names no table")
    with pytest.raises(TraceError, match="at least one instance_events file") as err:
        google.read([COLLECTIONS])
    assert err.value.path == "google-2019"
    for content, words in [
        (b"", "empty file"),
        (b"PK\x03\x04" + b"\x00" * 30, "compressed (zip): decompress it first"),
        (gzip.compress(INSTANCES.read_bytes(), mtime=0)[:40], "compressed (gzip) but cannot be"),
    ]:
        path = tmp_path / "instance_events.csv"
        path.write_bytes(content)
        _raises([path], path, None, "", words)
    header_only = tmp_path / "instance_events-0.csv"
    header_only.write_text(INSTANCES.read_text().splitlines()[0] + "\n")
    _raises([header_only], header_only, None, "", "no instance events (only a header)")
    # Header-only shards of the other tables (or of instance_events beside others) are fine.
    others = [tmp_path / "collection_events.csv", tmp_path / "machine_events.csv"]
    for other, source in zip(others, (COLLECTIONS, MACHINES), strict=True):
        other.write_text(source.read_text().splitlines()[0] + "\n")
    trace = google.read([INSTANCES, header_only, *others])
    assert trace.report.rows_read == 10 and trace.jobs.num_rows == 7
    assert trace.nodes is not None and trace.nodes.num_rows == 0
    folder = tmp_path / "instance_events"
    folder.mkdir()
    _raises([folder], folder, None, "", "a directory")
    _raises(
        [tmp_path / "instance_events_x.csv"],
        tmp_path / "instance_events_x.csv",
        None,
        "",
        "no such file",
    )


def test_many_events_are_grouped_vectorised(tmp_path: Path) -> None:
    """3 x 10^5 generated events of 10^5 instances, shuffled: every instance accounted for."""
    n = 100_000
    rng = np.random.default_rng(11)
    submit = rng.integers(1, 10**12, n)
    start = submit + rng.integers(0, 10**8, n)
    stop = start + rng.integers(0, 10**9, n)  # 0: zero run time
    scheduled = rng.random(n) < 0.9
    cpus = rng.integers(1, 100, n) / 1000
    cid, index = np.arange(n) // 4 + 10**6, np.arange(n) % 4
    kind = np.repeat([0, 3, 6], n)
    time = np.concatenate([submit, start, stop])
    keep_event = np.concatenate([np.ones(n, bool), scheduled, scheduled])
    table = np.column_stack([time, kind, np.tile(cid, 3), np.tile(index, 3), np.tile(cpus, 3)])[
        keep_event
    ]
    table = table[rng.permutation(len(table))]
    path = tmp_path / "instance_events.csv"
    with path.open("w") as f:
        f.write("time,type,collection_id,instance_index,resource_request.cpus\n")
        np.savetxt(f, table, fmt=["%d", "%d", "%d", "%d", "%.3f"], delimiter=",")
    trace = google.read([path])
    keep = scheduled & (stop > start)
    assert trace.report.rows_read == n
    assert trace.jobs.num_rows == int(keep.sum())
    assert trace.report.rows_read == trace.jobs.num_rows + trace.report.rows_dropped
    jobs = trace.jobs
    total = np.sum(jobs.column("request_cpu").to_numpy() * jobs.column("run_s").to_numpy())
    expected = np.sum(cpus[keep] * 100 * (stop - start)[keep] / 1e6)
    assert total == pytest.approx(float(expected), rel=1e-9)
