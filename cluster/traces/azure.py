"""The Azure public VM trace's `vmtable` (AzurePublicDataset, the 2017 and 2019 releases).

A `vmtable.csv` (plain or .gz) has no header and 11 comma-separated fields per VM:
vmid, subscriptionid, deploymentid, vmcreated (s), vmdeleted (s), maxcpu, avgcpu,
p95maxcpu (percent of the VM's cores), vmcategory (``Delay-insensitive``, ``Interactive``
or ``Unknown``), vmcorecountbucket (``2``, ``4``, ``8``, ``12``, ``24``, ``>24``),
vmmemorybucket (GB: ``2``, ``4``, ``8``, ``32``, ``64``, ``>64``). A first line whose
vmcreated field is not a number is a header: its column names (any order, these names,
any case) are used. Several files are read as one table (a split vmtable).

Each VM is a job. Rules, in order (the first drop that holds is counted, under the quoted
reason):

- vmcreated empty: dropped, "creation time unknown";
- vmcorecountbucket empty: dropped, "core count unknown";
- vmdeleted < vmcreated: dropped, "deleted before created"; equal: dropped, "zero
  lifetime"; vmdeleted <= 0 (the VM ended before the trace began): dropped, "deleted
  before the trace began";
- vmcreated <= 0 (created before the trace began; the 2017 data writes 0): kept, arrival
  at the trace start (0 s) and the run counted from there, "created before the trace
  began";
- vmdeleted empty: kept, ``run_s`` NaN (runs until the end), "deletion time unknown: runs
  until the end";
- ``arrival_s`` = vmcreated; ``run_s`` = vmdeleted - vmcreated (s);
- ``request_cpu`` = the core-count bucket (its upper bound, cores); ``>24`` is the option
  ``cores_above_24`` (default 30), "core bucket >24: cores_above_24";
- ``request_memory_gb`` = the memory bucket (GB); ``>64`` is the option
  ``memory_above_64_gb`` (default 70), "memory bucket >64: memory_above_64_gb"; empty: 0,
  "memory bucket unknown: 0 GB";
- ``class`` = vmcategory (empty: ``Unknown``, "category unknown: Unknown");
  ``user`` = subscriptionid (null when empty); ``trace_id`` = vmid (empty: ``line-N``,
  "vmid unknown: line number used"); no GPUs, estimate, queue, priority or node; no nodes
  table. maxcpu, avgcpu and p95maxcpu are checked (numbers) but not used.

Bad input is a `TraceError` naming the file, the line and the field: a line with another
number of fields, a time or utilisation that is not a number (or not finite), a bucket or
category that is not one of the above, a compressed file that cannot be decompressed
(gzip, bzip2 and xz are read transparently), an empty file, a directory, a missing path.

Speed: `pyarrow.csv` with explicit column types; 10^6 VMs (a 264 MB generated vmtable)
import in about 2.3 s on two cores, at a peak of about 790 bytes of memory per VM above the
interpreter's (the file's bytes included; `resource.getrusage`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clusteremu.cluster.traces.inputs import expect_paths, number_above, parse_options
from clusteremu.cluster.traces.rows import Rules
from clusteremu.cluster.traces.table import ImportReport, Trace, TraceError, job_table
from clusteremu.cluster.traces.text_files import (
    BoolArray,
    FloatArray,
    IntArray,
    check_field_counts,
    check_values,
    load_text,
    read_delimited,
    text_records,
)

NAME = "azure-vm"
DESCRIPTION = "Azure public VM trace vmtable (2017 or 2019 release): one job per VM"
FILES = "the vmtable.csv (or .csv.gz; several files: one split table)"
OPTIONS: dict[str, str] = {
    "cores_above_24": "cores of a VM in the core bucket '>24' (default 30)",
    "memory_above_64_gb": "GB of a VM in the memory bucket '>64' (default 70)",
}
_OPTION_SPEC = {
    "cores_above_24": (30.0, number_above(24)),
    "memory_above_64_gb": (70.0, number_above(64)),
}

#: The columns of a vmtable, in the order of the headerless files.
COLUMNS = (
    "vmid",
    "subscriptionid",
    "deploymentid",
    "vmcreated",
    "vmdeleted",
    "maxcpu",
    "avgcpu",
    "p95maxcpu",
    "vmcategory",
    "vmcorecountbucket",
    "vmmemorybucket",
)
_TYPES: dict[str, pa.DataType] = {
    "vmid": pa.string(),
    "subscriptionid": pa.string(),
    "vmcreated": pa.float64(),
    "vmdeleted": pa.float64(),
    "maxcpu": pa.float64(),
    "avgcpu": pa.float64(),
    "p95maxcpu": pa.float64(),
    "vmcategory": pa.string(),
    "vmcorecountbucket": pa.string(),
    "vmmemorybucket": pa.string(),
}
CORE_BUCKETS = ("2", "4", "8", "12", "24", ">24")
MEMORY_BUCKETS = ("2", "4", "8", "32", "64", ">64")
CATEGORIES = ("Delay-insensitive", "Interactive", "Unknown")


def read(paths: Sequence[Path], options: Mapping[str, str] | None = None) -> Trace:
    """Read one vmtable (or a split one) into the common per-job table (module docstring:
    the rules)."""
    opts = parse_options(NAME, options, _OPTION_SPEC, name_as_field=False)
    files = expect_paths(NAME, paths, FILES)
    report = ImportReport(format=NAME, files=[str(p) for p in files])
    parts = [_read_file(p, report, opts) for p in files]
    report.units.update(
        {
            "arrival_s": "s: vmcreated (s; before the trace start: 0)",
            "run_s": "s: vmdeleted - vmcreated (s)",
            "request_cpu": "cores: vmcorecountbucket (cores, the bucket's upper bound; "
            f">24: {opts['cores_above_24']:g})",
            "request_memory_gb": f"GB: vmmemorybucket (GB; >64: {opts['memory_above_64_gb']:g})",
            "request_gpu": "milli-GPU: 0 (the trace has no GPUs)",
            "class": "vmcategory",
            "user": "subscriptionid",
        }
    )
    return Trace(
        jobs=job_table(
            trace_id=pa.chunked_array([p.trace_id for p in parts], pa.string()),
            arrival_s=np.concatenate([p.arrival_s for p in parts]),
            run_s=np.concatenate([p.run_s for p in parts]),
            request_cpu=np.concatenate([p.request_cpu for p in parts]),
            request_memory_gb=np.concatenate([p.request_memory_gb for p in parts]),
            request_gpu=0.0,
            job_class=pa.chunked_array([p.job_class for p in parts], pa.string()),
            user=pa.chunked_array([p.user for p in parts], pa.string()),
        ),
        report=report,
        nodes=None,
    )


@dataclass(frozen=True)
class _Part:
    """The kept VMs of one file, as the job table's columns."""

    trace_id: pa.Array
    arrival_s: FloatArray
    run_s: FloatArray
    request_cpu: FloatArray
    request_memory_gb: FloatArray
    job_class: pa.Array
    user: pa.Array


def _read_file(path: Path, report: ImportReport, opts: Mapping[str, float]) -> _Part:
    """The kept VMs of one file as the job table's columns; counts into `report`."""
    label = str(path)
    data = load_text(path, "vmtable rows")
    quoted = b'"' in data
    buf = np.frombuffer(data, dtype=np.uint8)
    buf, records = text_records(buf, quoted)
    names = list(COLUMNS)
    first_fields = [f.strip().strip('"').strip().lower() for f in records.text(buf, 0).split(",")]
    if not _is_number(first_fields[3] if len(first_fields) > 3 else ""):
        missing = [c for c in _TYPES if c not in first_fields]
        if missing:
            raise TraceError(
                path,
                f"a header without the column {missing[0]!r}: expected {', '.join(COLUMNS)}",
                int(records.numbers[0]),
                missing[0],
            )
        names = first_fields
        records = records.select(np.arange(1, len(records)))
        if len(records) == 0:
            raise TraceError(path, "a header and no VMs")
    check_field_counts(path, buf, records, names, "comma-separated fields", quoted=quoted)
    table = read_delimited(label, buf, records, names, _TYPES, ",", quoted)
    del buf, data
    rows = records.numbers
    n = rows.size
    report.read(n)

    def floats(name: str) -> tuple[FloatArray, BoolArray]:
        column = table.column(name)
        known = column.is_valid().to_numpy(zero_copy_only=False)
        values = column.fill_null(0.0).to_numpy()
        check_values(label, values, np.isfinite(values), rows, name, "a finite number")
        return values, known

    for name in ("maxcpu", "avgcpu", "p95maxcpu"):
        floats(name)
    created, has_created = floats("vmcreated")
    deleted, has_deleted = floats("vmdeleted")
    cores_raw, has_cores = _bucket(label, table, rows, "vmcorecountbucket", CORE_BUCKETS)
    memory_raw, has_memory = _bucket(label, table, rows, "vmmemorybucket", MEMORY_BUCKETS)
    category = table.column("vmcategory")
    _, has_category = _one_of(label, category, rows, "vmcategory", CATEGORIES)

    rules = Rules(report, rows, label)
    drop, correct = rules.drop, rules.correct
    drop(~has_created, "creation time unknown")
    drop(~has_cores, "core count unknown")
    drop(has_deleted & (deleted < created), "deleted before created")
    drop(has_deleted & (deleted == created), "zero lifetime")
    drop(has_deleted & (deleted <= 0), "deleted before the trace began")
    keep = rules.kept
    early = created <= 0
    correct(early, "created before the trace began")
    correct(~has_deleted, "deletion time unknown: runs until the end")
    above_24 = cores_raw == np.inf
    correct(above_24, "core bucket >24: cores_above_24")
    above_64 = memory_raw == np.inf
    correct(above_64 & has_memory, "memory bucket >64: memory_above_64_gb")
    correct(~has_memory, "memory bucket unknown: 0 GB")
    correct(~has_category, "category unknown: Unknown")
    vmid = table.column("vmid")
    correct(~vmid.is_valid().to_numpy(zero_copy_only=False), "vmid unknown: line number used")

    arrival = np.maximum(created, 0.0)
    run = np.where(has_deleted, deleted - arrival, np.nan)
    cores = np.where(above_24, opts["cores_above_24"], cores_raw)
    memory = np.where(has_memory, np.where(above_64, opts["memory_above_64_gb"], memory_raw), 0.0)
    idx = pa.array(np.flatnonzero(keep))
    line_ids = pc.binary_join_element_wise("line", pa.array(rows).cast(pa.string()), "-")
    return _Part(
        trace_id=pc.coalesce(vmid, line_ids).take(idx).combine_chunks(),
        arrival_s=arrival[keep],
        run_s=run[keep],
        request_cpu=cores[keep],
        request_memory_gb=memory[keep],
        job_class=pc.coalesce(category, pa.scalar("Unknown")).take(idx).combine_chunks(),
        user=table.column("subscriptionid").take(idx).combine_chunks(),
    )


def _bucket(
    label: str, table: pa.Table, rows: IntArray, name: str, buckets: tuple[str, ...]
) -> tuple[FloatArray, BoolArray]:
    """A bucket column as numbers (the ``>N`` bucket: inf) and where it is given."""
    index, given = _one_of(label, pc.utf8_trim_whitespace(table.column(name)), rows, name, buckets)
    value = np.array([float(b) if b[0] != ">" else np.inf for b in buckets] + [np.nan])
    return value[index.fill_null(len(buckets)).to_numpy()], given


def _one_of(
    label: str, column: pa.ChunkedArray, rows: IntArray, name: str, allowed: tuple[str, ...]
) -> tuple[pa.ChunkedArray, BoolArray]:
    """Each value's index in `allowed` (null where empty) and where a value is given;
    `TraceError` at the first value not in `allowed`."""
    index = pc.index_in(column, value_set=pa.array(allowed))
    given = column.is_valid().to_numpy(zero_copy_only=False)
    known = index.is_valid().to_numpy(zero_copy_only=False)
    expected = "one of " + ", ".join(allowed)
    check_values(label, column.to_numpy(zero_copy_only=False), known | ~given, rows, name, expected)
    return index, given


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
