"""Google cluster-data 2019 (Borg, trace format v3): `instance_events`, optionally
`collection_events` and `machine_events`, as exported from BigQuery.

Each file is named after its table (its name contains ``instance_events``,
``collection_events`` or ``machine_events``; a table may come in several shards) and is
either CSV with a header row (nested fields flattened: ``resource_request.cpus`` or
``resource_request_cpus``) or JSON Lines (one object per line, nested objects as
exported; integers may be JSON strings, as BigQuery writes INT64). gzip, bzip2 and xz files
are read transparently. Events may come in any order: they are sorted by time.

Columns read: instance_events ``time``, ``type``, ``collection_id``, ``instance_index``
(required), ``resource_request.cpus`` (required in CSV), ``resource_request.memory``,
``machine_id``, ``priority``, ``scheduling_class``, ``collection_type``;
collection_events ``time``, ``type``, ``collection_id`` (required), ``user``,
``collection_type``; machine_events ``time``, ``machine_id``, ``type`` (required),
``capacity.cpus``, ``capacity.memory``. Times are microseconds since the trace start; 0
means before the start and 2^63-1 after the end (such events are ignored). Event types:
0 SUBMIT, 1 QUEUE, 2 ENABLE, 3 SCHEDULE, 4 EVICT, 5 FAIL, 6 FINISH, 7 KILL, 8 LOST,
9 UPDATE_PENDING, 10 UPDATE_RUNNING; machine events 0 unknown, 1 ADD, 2 REMOVE, 3 UPDATE.

A job is one instance (``collection_id``, ``instance_index``); its row in the report is
the line of its earliest event. Rules, in order (a drop is counted under the first reason
that holds):

- an instance of an alloc set (``collection_type`` 1, from its events or else from
  collection_events): dropped, "alloc instance (a reservation, not a task)";
- no SCHEDULE event: dropped, "never scheduled";
- no CPU request in any event: dropped, "no CPU request";
- last terminating event (EVICT, FAIL, FINISH, KILL, LOST) at its first SCHEDULE:
  dropped, "zero run time";
- ``arrival_s`` = the first SUBMIT (s); an instance first seen at time 0 arrives at 0,
  "submitted before the trace began"; one without a SUBMIT arrives at its first event,
  "no submit event: arrival = first event";
- ``run_s`` = last terminating event - first SCHEDULE (s); no terminating event, or a
  SCHEDULE after the last one: NaN (runs until the end), "still running at the trace end";
- ``request_cpu`` = the last non-null ``resource_request.cpus`` x option ``cpu_per_unit``
  (cores per normalised unit, default 100); ``request_memory_gb`` = the last non-null
  ``resource_request.memory`` x option ``memory_gb_per_unit`` (GB per normalised unit,
  default 400), none: 0, "memory request unknown: 0 GB". The trace normalises both to the
  largest machine (1.0); Google does not publish its size, so the defaults (a 100-core,
  400 GB machine) are an assumption: scale both together to taste;
- ``node`` = ``machine_id`` of the last SCHEDULE (null when 0 or -1, no or a dedicated
  machine); ``priority`` = the last non-null priority; ``class`` = ``class-N`` from the
  last non-null ``scheduling_class`` N (0..3), none: ``class-unknown``, "scheduling class
  unknown"; ``user`` = the collection's last non-null ``user`` in collection_events
  (null without them); ``trace_id`` = ``<collection_id>-<instance_index>``; no GPUs, no
  estimate, no queue.
- nodes (with machine_events): every machine ever ADDed, with its last known capacity
  (``capacity.cpus`` x cpu_per_unit cores, ``capacity.memory`` x memory_gb_per_unit GB);
  a machine without a known capacity is left out (`ImportReport.notes` counts them).

Bad input is a `TraceError` naming the file, the line and the field: a missing required
column, a value of the wrong type (a number that is not an integer, a non-numeric text), a
value out of range (a negative time or request, an unknown event type, a scheduling
class outside 0..3), a CSV line with another number of fields than its header, a line
that is not a JSON object, a file whose name names no table, a compressed file that cannot
be decompressed, an empty file, a directory, a missing path.

Speed: pyarrow.csv / pyarrow.json with explicit types, numpy lexsort and reduceat by
instance; 10^6 instance events (a 66 MB generated CSV, shuffled) import in about 1.2 to
2 s on two cores at a peak of about 430 bytes of memory per event above the interpreter's
(as JSON Lines, 300 MB: about 3 s and 750 bytes per event; `resource.getrusage`).
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from clusteremu.cluster.traces.inputs import expect_paths, number_above, parse_options
from clusteremu.cluster.traces.rows import Rules
from clusteremu.cluster.traces.table import ImportReport, Trace, TraceError, job_table, node_table
from clusteremu.cluster.traces.text_files import (
    PARSE_ERRORS,
    BoolArray,
    IntArray,
    check_field_counts,
    check_values,
    describe_type,
    first_failing,
    first_failing_cast,
    load_text,
    read_delimited,
    text_records,
)

NAME = "google-2019"
DESCRIPTION = "Google cluster-data 2019 (Borg v3) instance, collection and machine events"
FILES = (
    "instance_events files (CSV or JSON Lines), optionally collection_events and "
    "machine_events files; the table is named in each file name"
)
OPTIONS: dict[str, str] = {
    "cpu_per_unit": "cores per normalised CPU unit (1.0 = the largest machine; default 100)",
    "memory_gb_per_unit": "GB per normalised memory unit (1.0 = the largest machine; default 400)",
}
_OPTION_SPEC = {
    "cpu_per_unit": (100.0, number_above(0)),
    "memory_gb_per_unit": (400.0, number_above(0)),
}
TABLES = ("instance_events", "collection_events", "machine_events")
#: Time stamp of events after the trace end (microseconds).
AFTER_END = 2**63 - 1
#: Microseconds per second.
US = 1e6
SUBMIT, SCHEDULE = 0, 3
TERMINATING = (4, 5, 6, 7, 8)


@dataclass(frozen=True)
class _Field:
    """A column read: the names it may have (a dotted name: a nested field in JSON), its
    type, whether it must be there, and its valid values (None: any)."""

    names: tuple[str, ...]
    type: pa.DataType
    required: bool = False
    valid: Callable[[npt.NDArray[Any]], BoolArray] | None = None
    expected: str = ""


def _between(low: float, high: float) -> Callable[[npt.NDArray[Any]], BoolArray]:
    def ok(v: npt.NDArray[Any]) -> BoolArray:
        return np.asarray((v >= low) & (v <= high))

    return ok


def _nonnegative(v: npt.NDArray[Any]) -> BoolArray:
    return np.asarray(np.isfinite(v) & (v >= 0))


_I64 = pa.int64()
_F64 = pa.float64()
_TIME = _Field(("time",), _I64, True, _nonnegative, "a time >= 0 (microseconds)")
_EVENT = _Field(("type",), _I64, True, _between(0, 10), "an event type 0..10")
_COLLECTION_TYPE = _Field(("collection_type",), _I64, False, _between(0, 1), "0 or 1")
INSTANCE_FIELDS: dict[str, _Field] = {
    "time": _TIME,
    "type": _EVENT,
    "collection_id": _Field(("collection_id",), _I64, True),
    "instance_index": _Field(("instance_index",), _I64, True, _nonnegative, "an index >= 0"),
    "cpus": _Field(
        ("resource_request.cpus", "resource_request_cpus"),
        _F64,
        True,
        _nonnegative,
        "a request >= 0",
    ),
    "memory": _Field(
        ("resource_request.memory", "resource_request_memory"),
        _F64,
        False,
        _nonnegative,
        "a request >= 0",
    ),
    "machine_id": _Field(("machine_id",), _I64),
    "priority": _Field(("priority",), _I64, False, _nonnegative, "a priority >= 0"),
    "scheduling_class": _Field(("scheduling_class",), _I64, False, _between(0, 3), "0..3"),
    "collection_type": _COLLECTION_TYPE,
}
COLLECTION_FIELDS: dict[str, _Field] = {
    "time": _TIME,
    "type": _EVENT,
    "collection_id": _Field(("collection_id",), _I64, True),
    "user": _Field(("user",), pa.string()),
    "collection_type": _COLLECTION_TYPE,
}
MACHINE_FIELDS: dict[str, _Field] = {
    "time": _TIME,
    "machine_id": _Field(("machine_id",), _I64, True),
    "type": _Field(("type",), _I64, True, _between(0, 3), "a machine event type 0..3"),
    "cpus": _Field(
        ("capacity.cpus", "capacity_cpus"), _F64, False, _nonnegative, "a capacity >= 0"
    ),
    "memory": _Field(
        ("capacity.memory", "capacity_memory"), _F64, False, _nonnegative, "a capacity >= 0"
    ),
}
_SPECS = {
    "instance_events": INSTANCE_FIELDS,
    "collection_events": COLLECTION_FIELDS,
    "machine_events": MACHINE_FIELDS,
}
#: Required as a CSV column, but a value may be null (JSON Lines exports leave out null
#: fields, so there the column may be missing).
_CSV_ONLY_REQUIRED = {"cpus"}


@dataclass
class _Events:
    """One table's events, all its files: typed columns (Arrow, nulls where not given),
    and each event's file (index into `labels`) and line."""

    columns: dict[str, pa.Array]
    file: IntArray
    line: IntArray
    labels: list[str]

    def __len__(self) -> int:
        return int(self.line.size)

    def values(self, name: str, fill: float = 0) -> tuple[npt.NDArray[Any], BoolArray]:
        """A numeric column as numpy (nulls: `fill`) and where it is given."""
        column = self.columns[name]
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        return column.fill_null(fill).to_numpy(zero_copy_only=False), valid


def read(paths: Sequence[Path], options: Mapping[str, str] | None = None) -> Trace:
    """Read Google 2019 event tables into the common per-job table and the nodes table
    (module docstring: the rules)."""
    opts = parse_options(NAME, options, _OPTION_SPEC, name_as_field=False)
    files = expect_paths(NAME, paths, FILES)
    by_table: dict[str, list[Path]] = {t: [] for t in TABLES}
    for p in files:
        table = next((t for t in TABLES if t in p.name), None)
        if table is None:
            raise TraceError(
                p, "names no table: expected a file name containing " + ", ".join(TABLES)
            )
        by_table[table].append(p)
    if not by_table["instance_events"]:
        raise TraceError(NAME, "expected at least one instance_events file")
    report = ImportReport(format=NAME, files=[str(p) for p in files])
    instances = _read_events(by_table["instance_events"], INSTANCE_FIELDS)
    if len(instances) == 0:
        raise TraceError(by_table["instance_events"][0], "no instance events (only a header)")
    collections = (
        _read_events(by_table["collection_events"], COLLECTION_FIELDS)
        if by_table["collection_events"]
        else None
    )
    machines = (
        _read_events(by_table["machine_events"], MACHINE_FIELDS)
        if by_table["machine_events"]
        else None
    )
    jobs = _jobs(instances, collections, report, opts)
    nodes = None if machines is None else _nodes(machines, report, opts)
    if collections is None:
        report.notes.append("no collection_events: every job's user is unknown")
    report.notes.append(
        f"requests and capacities scaled: 1.0 CPU = {opts['cpu_per_unit']:g} cores, "
        f"1.0 memory = {opts['memory_gb_per_unit']:g} GB (options cpu_per_unit, "
        "memory_gb_per_unit)"
    )
    report.units.update(
        {
            "arrival_s": "s: first SUBMIT time (microseconds since the trace start) / 10^6",
            "run_s": "s: last EVICT/FAIL/FINISH/KILL/LOST - first SCHEDULE (microseconds) / 10^6",
            "request_cpu": f"cores: resource_request.cpus (normalised) x {opts['cpu_per_unit']:g}",
            "request_memory_gb": "GB: resource_request.memory (normalised) x "
            f"{opts['memory_gb_per_unit']:g}",
            "request_gpu": "milli-GPU: 0 (the trace has no GPUs)",
            "priority": "priority (Borg, as in the trace)",
            "class": "class-N from scheduling_class N",
            "node": "machine_id of the last SCHEDULE",
        }
    )
    if nodes is not None:
        report.units["nodes.cpu"] = f"cores: capacity.cpus x {opts['cpu_per_unit']:g}"
        report.units["nodes.memory_gb"] = f"GB: capacity.memory x {opts['memory_gb_per_unit']:g}"
    return Trace(jobs=jobs, report=report, nodes=nodes)


def _groups(*keys: npt.NDArray[Any]) -> tuple[IntArray, IntArray]:
    """Sort order by `keys` (the first the most significant; stable) and where each run
    of equal keys starts in it."""
    order = np.lexsort(keys[::-1]).astype(np.int64)
    new = np.zeros(order.size, dtype=np.bool_)
    if order.size:
        new[0] = True
    for k in keys[:-1]:  # all but the last: the time within a group
        s = k[order]
        new[1:] |= s[1:] != s[:-1]
    return order, np.flatnonzero(new).astype(np.int64)


def _last(mask: BoolArray, starts: IntArray) -> IntArray:
    """Per group: the position of the last event where `mask` holds (-1: none)."""
    pos = np.where(mask, np.arange(mask.size, dtype=np.int64), -1)
    return np.maximum.reduceat(pos, starts) if starts.size else np.zeros(0, np.int64)


def _jobs(
    ev: _Events, collections: _Events | None, report: ImportReport, opts: Mapping[str, float]
) -> pa.Table:
    """The per-job table: one row per instance (module docstring: the rules)."""
    time, _ = ev.values("time")
    cid, _ = ev.values("collection_id")
    index, _ = ev.values("instance_index")
    order, starts = _groups(cid, index, time)
    t = time[order]
    kind = ev.values("type")[0][order]
    cid_s, index_s = cid[order], index[order]
    n = starts.size
    report.read(n)
    inside = t != AFTER_END
    end = np.int64(AFTER_END)

    def first(mask: BoolArray) -> IntArray:
        return np.minimum.reduceat(np.where(mask & inside, t, end), starts)

    def latest(mask: BoolArray) -> IntArray:
        return np.maximum.reduceat(np.where(mask & inside, t, -1), starts)

    first_seen = first(np.ones(t.size, dtype=np.bool_))
    first_submit = first(kind == SUBMIT)
    first_schedule = first(kind == SCHEDULE)
    last_schedule = latest(kind == SCHEDULE)
    last_end = latest(np.isin(kind, TERMINATING))
    ended = (last_end >= 0) & (last_end >= last_schedule)

    def last_value(name: str) -> tuple[npt.NDArray[Any], BoolArray]:
        values, valid = ev.values(name)
        pos = _last(valid[order], starts)
        return values[order][np.maximum(pos, 0)], pos >= 0

    cpus, has_cpus = last_value("cpus")
    memory, has_memory = last_value("memory")
    priority, has_priority = last_value("priority")
    sclass, has_sclass = last_value("scheduling_class")
    ctype, has_ctype = last_value("collection_type")
    machines, has_machines = ev.values("machine_id")
    schedule_pos = np.maximum(_last((kind == SCHEDULE) & inside, starts), 0)
    machine = machines[order][schedule_pos]
    has_machine = (
        has_machines[order][schedule_pos] & (last_schedule >= 0) & (machine != 0) & (machine != -1)
    )
    job_cid = cid_s[starts]
    user: pa.Array = pa.nulls(n, pa.string())
    if collections is not None:
        cuser, cctype, has_cctype, found = _collections(collections, job_cid)
        user = cuser
        ctype = np.where(has_ctype, ctype, cctype)
        has_ctype = has_ctype | (found & has_cctype)
    rules = Rules(report, ev.line[order][starts], ev.labels, ev.file[order][starts])
    drop, correct = rules.drop, rules.correct
    drop(has_ctype & (ctype == 1), "alloc instance (a reservation, not a task)")
    drop(first_schedule == end, "never scheduled")
    drop(~has_cpus, "no CPU request")
    drop(ended & (last_end == first_schedule), "zero run time")
    keep = rules.kept
    early = first_seen == 0
    no_submit = ~early & (first_submit == end)
    correct(early, "submitted before the trace began")
    correct(no_submit, "no submit event: arrival = first event")
    correct(~ended, "still running at the trace end")
    correct(~has_memory, "memory request unknown: 0 GB")
    correct(~has_sclass, "scheduling class unknown")

    arrival = np.where(early, 0, np.where(no_submit, first_seen, first_submit)) / US
    run = np.where(ended, (last_end - first_schedule) / US, np.nan)
    idx = pa.array(np.flatnonzero(keep))
    ids = pc.binary_join_element_wise(
        pa.array(job_cid).cast(pa.string()), pa.array(index_s[starts]).cast(pa.string()), "-"
    )
    class_names = pc.binary_join_element_wise(
        "class", pa.array(sclass, mask=~has_sclass).cast(pa.string()), "-"
    )
    return job_table(
        trace_id=ids.take(idx),
        arrival_s=arrival[keep],
        run_s=run[keep],
        request_cpu=(cpus * opts["cpu_per_unit"])[keep],
        request_memory_gb=np.where(has_memory, memory * opts["memory_gb_per_unit"], 0.0)[keep],
        request_gpu=0.0,
        job_class=pc.coalesce(class_names, pa.scalar("class-unknown")).take(idx),
        user=user.take(idx),
        priority=pa.array(priority, mask=~has_priority).take(idx),
        node=pa.array(machine, mask=~has_machine).cast(pa.string()).take(idx),
    )


def _collections(
    ev: _Events, cid: IntArray
) -> tuple[pa.Array, npt.NDArray[Any], BoolArray, BoolArray]:
    """For collections `cid`: the last non-null user (Arrow, nulls), collection type and
    where it is known, and whether collection_events name the collection at all."""
    time, _ = ev.values("time")
    ids, _ = ev.values("collection_id")
    order, starts = _groups(ids, time)
    unique = ids[order][starts]
    user_valid = ev.columns["user"].is_valid().to_numpy(zero_copy_only=False)
    user_pos = _last(user_valid[order], starts)
    ctype, ctype_valid = ev.values("collection_type")
    ctype_pos = _last(ctype_valid[order], starts)
    at = np.minimum(np.searchsorted(unique, cid), max(unique.size - 1, 0))
    found = (unique[at] == cid) if unique.size else np.zeros(cid.size, dtype=np.bool_)
    pick = np.where(found, user_pos[at] if unique.size else -1, -1)
    take = pa.array(order[np.maximum(pick, 0)] if order.size else pick, mask=pick < 0)
    user = ev.columns["user"].take(take)
    cpick = np.where(found, ctype_pos[at] if unique.size else -1, -1)
    ctype_value = ctype[order][np.maximum(cpick, 0)] if order.size else np.zeros(cid.size)
    return user, ctype_value, cpick >= 0, found


def _nodes(ev: _Events, report: ImportReport, opts: Mapping[str, float]) -> pa.Table:
    """Every machine ever added, with its last known capacity."""
    time, _ = ev.values("time")
    ids, _ = ev.values("machine_id")
    kind, _ = ev.values("type")
    order, starts = _groups(ids, time)
    added = np.maximum.reduceat((kind[order] == 1).astype(np.int8), starts) > 0
    cpus, cpus_valid = ev.values("cpus")
    memory, memory_valid = ev.values("memory")
    cpu_pos = _last(cpus_valid[order], starts)
    memory_pos = _last(memory_valid[order], starts)
    known = added & (cpu_pos >= 0) & (memory_pos >= 0)
    unknown = int(np.count_nonzero(added & ~known))
    if unknown:
        report.notes.append(f"{unknown} machines added without a known capacity: left out")
    machine = ids[order][starts][known]
    return node_table(
        node=pa.array(machine).cast(pa.string()),
        cpu=cpus[order][cpu_pos[known]] * opts["cpu_per_unit"],
        memory_gb=memory[order][memory_pos[known]] * opts["memory_gb_per_unit"],
    )


# --- Reading one table's files --------------------------------------------------------


def _read_events(paths: list[Path], spec: Mapping[str, _Field]) -> _Events:
    """The events of one table from its files (CSV or JSON Lines each)."""
    parts: list[dict[str, pa.Array]] = []
    files: list[IntArray] = []
    lines: list[IntArray] = []
    for i, path in enumerate(paths):
        columns, numbers = _read_file(path, spec)
        parts.append(columns)
        lines.append(numbers)
        files.append(np.full(numbers.size, i, dtype=np.int64))
    return _Events(
        columns={k: pa.concat_arrays([p[k] for p in parts]) for k in spec},
        file=np.concatenate(files),
        line=np.concatenate(lines),
        labels=[str(p) for p in paths],
    )


def _read_file(path: Path, spec: Mapping[str, _Field]) -> tuple[dict[str, pa.Array], IntArray]:
    """One file's columns (typed, checked) and each row's line number."""
    label = str(path)
    data = load_text(path, "events (CSV or JSON Lines)")
    buf = np.frombuffer(data, dtype=np.uint8)
    start = re.search(rb"\S", data)
    is_json = start is not None and data[start.start() : start.start() + 1] in (b"{", b"[")
    if is_json:
        columns, numbers = _read_json(label, buf, spec)
    else:
        columns, numbers = _read_csv(label, buf, spec)
    for name, f in spec.items():
        column = columns[name]
        if f.required and name not in _CSV_ONLY_REQUIRED:
            valid = column.is_valid().to_numpy(zero_copy_only=False)
            check_values(
                label, column.to_numpy(zero_copy_only=False), valid, numbers, f.names[0], "a value"
            )
        if f.valid is not None:
            values = column.fill_null(0).to_numpy(zero_copy_only=False)
            check_values(label, values, f.valid(values), numbers, f.names[0], f.expected)
    return columns, numbers


def _read_csv(
    label: str, buf: npt.NDArray[np.uint8], spec: Mapping[str, _Field]
) -> tuple[dict[str, pa.Array], IntArray]:
    quoted = bool(np.any(buf == 34))
    buf, records = text_records(buf, quoted)
    names = [n.strip() for n in next(csv.reader([records.text(buf, 0)]))]
    chosen: dict[str, str] = {}
    for key, f in spec.items():
        name = next((n for n in f.names if n in names), None)
        if name is not None:
            chosen[key] = name
        elif f.required:
            raise TraceError(
                label,
                f"no column {f.names[0]!r} in the header: expected the columns "
                + ", ".join(g.names[0] for g in spec.values() if g.required),
                int(records.numbers[0]),
                f.names[0],
            )
    records = records.select(np.arange(1, len(records)))
    n = len(records)
    if n == 0:
        return {k: pa.nulls(0, f.type) for k, f in spec.items()}, np.zeros(0, np.int64)
    check_field_counts(label, buf, records, names, "fields as the header has", quoted=quoted)
    types = {chosen[k]: spec[k].type for k in chosen}
    table = read_delimited(label, buf, records, names, types, ",", quoted)
    columns = {
        k: table.column(chosen[k]).combine_chunks() if k in chosen else pa.nulls(n, f.type)
        for k, f in spec.items()
    }
    return columns, records.numbers


def _read_json(
    label: str, buf: npt.NDArray[np.uint8], spec: Mapping[str, _Field]
) -> tuple[dict[str, pa.Array], IntArray]:
    buf, records = text_records(buf)

    def parse(hi: int) -> pa.Table:
        chunk = buf[int(records.starts[0]) : int(records.stops[hi - 1])]
        return pajson.read_json(
            pa.BufferReader(pa.py_buffer(chunk)),
            read_options=pajson.ReadOptions(block_size=1 << 24),
        )

    def fails(hi: int) -> bool:
        try:
            parse(hi)
        except PARSE_ERRORS:
            return True
        return False

    n = len(records)
    try:
        table = parse(n)
    except PARSE_ERRORS as e:
        # The first line whose prefix does not parse (types are inferred from the lines
        # before it too).
        row = first_failing(n, lambda lo, hi: fails(hi)) or 0
        text = buf[records.starts[row] : records.ends[row]].tobytes()
        try:
            obj = json.loads(text)
        except ValueError as err:
            raise TraceError(
                label, f"not a JSON object ({err.args[0]})", int(records.numbers[row])
            ) from None
        if not isinstance(obj, dict):
            raise TraceError(
                label,
                "expected one JSON object per line (JSON Lines), found "
                + type(obj).__name__.replace("dict", "object"),
                int(records.numbers[row]),
            ) from None
        m = re.search(r"Column\(/([^)]*)\)", str(e))
        field = m.group(1).replace("/", ".") if m else ""
        value: Any = obj
        for part in field.split(".") if field else []:
            value = value.get(part) if isinstance(value, dict) else None
        raise TraceError(
            label,
            f"{value!r} is of another JSON type than on the lines before ({e})",
            int(records.numbers[row]),
            field,
        ) from None
    if table.num_rows != n:
        raise TraceError(label, f"{table.num_rows} JSON objects on {n} lines: one a line")
    columns = {}
    for key, f in spec.items():
        name, column = _json_column(table, f.names)
        columns[key] = _convert(label, column, f.type, records.numbers, name or f.names[0])
    return columns, records.numbers


def _json_column(table: pa.Table, names: tuple[str, ...]) -> tuple[str, pa.Array | None]:
    """The column of one of `names` (a dotted name: a field of a nested object too)."""
    for name in names:
        if name in table.column_names:
            return name, table.column(name).combine_chunks()
        parent, _, child = name.partition(".")
        if child and parent in table.column_names:
            column = table.column(parent).combine_chunks()
            if pa.types.is_struct(column.type) and column.type.get_field_index(child) >= 0:
                return name, pc.struct_field(column, child)
    return "", None


def _convert(
    label: str, column: pa.Array | None, target: pa.DataType, rows: IntArray, field: str
) -> pa.Array:
    """A JSON column as `target` (integers may be strings, as BigQuery writes INT64)."""
    if column is None:
        return pa.nulls(rows.size, target)
    if column.type == target:
        return column
    source = column.type
    convertible = (
        pa.types.is_null(source)
        or pa.types.is_integer(source)
        or pa.types.is_floating(source)
        or (pa.types.is_string(source) or pa.types.is_large_string(source))
    )
    if pa.types.is_string(target):
        convertible = convertible and not pa.types.is_floating(source)
    if convertible:
        try:
            return column.cast(target)
        except PARSE_ERRORS:
            lo = first_failing_cast(column, target) or 0
    else:  # the first value that is there
        valid = np.flatnonzero(column.is_valid().to_numpy(zero_copy_only=False))
        lo = int(valid[0]) if valid.size else 0
    raise TraceError(
        label,
        f"expected {describe_type(target)}, found {column[lo].as_py()!r}",
        int(rows[lo]),
        field,
    )
