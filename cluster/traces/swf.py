"""The Standard Workload Format (SWF) of the Parallel Workloads Archive: one `.swf` log.

A log is text: header comments (lines starting with ``;``; ``; MaxProcs: N``,
``; MaxNodes: N`` and ``; UnixStartTime: T`` are read, the others ignored), blank lines
(skipped) and one line per job of 18 fields separated by spaces or tabs: 1 job number,
2 submit time (s), 3 wait time (s), 4 run time (s), 5 allocated processors, 6 average CPU
time (s), 7 used memory (KB per processor), 8 requested processors, 9 requested time (s),
10 requested memory (KB per processor), 11 status, 12 user id, 13 group id,
14 executable, 15 queue, 16 partition, 17 preceding job, 18 think time (s). -1 means
unknown.

Rules, in the order they are applied (a job is dropped for the first that holds; every
drop and correction is counted in the import report under the quoted reason):

- status 2, 3 or 4 (a partial-execution record of a checkpointed job): dropped,
  "partial execution record (status N)"; status 0 (failed), 1 (completed), 5 (cancelled)
  and -1 (unknown) are kept;
- status 5 with a run time of 0 or -1: dropped, "cancelled before it ran";
- run time -1: dropped, "run time unknown"; 0: dropped, "zero run time";
- cores (``request_cpu``) = allocated processors (field 5) when > 0, else requested
  processors (field 8), "processors: requested used, allocated unknown"; neither > 0:
  dropped, "no processor count";
- the machine (``Trace.machine_cpu``, cores) is ``MaxProcs`` from the header, else
  ``MaxNodes``, else the widest job kept so far (`ImportReport.notes` says which); a job
  wider than the machine is dropped, "wider than the machine (MaxProcs)" (or MaxNodes);
- ``run_s`` = run time (field 4);
- ``estimate_s`` = requested time (field 9) when known and >= the run time, else the run
  time: "requested time unknown: estimate = run time", "requested time shorter than the
  run: estimate = run time";
- ``request_memory_gb`` = requested memory (field 10, KB per processor) x cores / 2^20
  when > 0, else used memory (field 7) likewise, "requested memory unknown: used memory",
  else 0, "memory unknown: 0 GB";
- ``arrival_s`` = submit time (field 2), shifted so the first job arrives at 0 s;
  ``trace_id`` = the job number; ``user`` = user id (field 12, null when -1); ``queue`` =
  queue number (field 15, null when -1); ``class`` = "swf"; no GPUs, no priority, no node,
  no nodes table. ``UnixStartTime`` goes to ``Trace.notes["unix_start_time"]``.

Bad input is a `TraceError` naming the file, the line and the field: a line without 18
fields (a truncated last line included), a non-numeric field, a value out of its range
(negative other than -1; a status other than -1, 0..5; a submit time < 0), a submit time
smaller than the previous job's (SWF orders jobs by submit time), a compressed file that
cannot be decompressed (gzip, bzip2 and xz are read transparently: line numbers are then
those of the decompressed text; zip, zstd, 7z and rar are refused), an empty file or one without
job lines, a directory or a missing path.

Speed: whitespace is normalised with numpy and the fields parsed by `pyarrow.csv`;
10^6 jobs (a 127 MB log) import in about 2 s on two cores, at a peak of about 630 bytes
of memory per job above the interpreter's (the file's bytes included; measured with
`resource.getrusage` on a generated log).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from clusteremu.cluster.traces.inputs import expect_paths, parse_options
from clusteremu.cluster.traces.rows import Rules
from clusteremu.cluster.traces.table import ImportReport, Trace, TraceError, job_table
from clusteremu.cluster.traces.text_files import (
    BoolArray,
    ByteArray,
    Lines,
    check_field_counts,
    check_values,
    index_lines,
    load_text,
    read_delimited,
)

NAME = "swf"
DESCRIPTION = "Standard Workload Format log of the Parallel Workloads Archive (jobs on one machine)"
FILES = "one .swf log (plain, .gz, .bz2 or .xz)"
OPTIONS: dict[str, str] = {}

#: The 18 fields of a job line, as errors name them.
FIELDS = (
    "job number",
    "submit time",
    "wait time",
    "run time",
    "allocated processors",
    "average CPU time",
    "used memory",
    "requested processors",
    "requested time",
    "requested memory",
    "status",
    "user id",
    "group id",
    "executable",
    "queue",
    "partition",
    "preceding job",
    "think time",
)
#: The integer fields: 1, 5, 8 and 11 to 17 (the others are numbers).
_INT_FIELDS = {FIELDS[i] for i in (0, 4, 7, 10, 11, 12, 13, 14, 15, 16)}
#: The integer fields the rules read (the others are only checked).
_USED = {"allocated processors", "requested processors", "status", "user id", "queue"}
#: KB per GB (1 GB = 2^30 bytes).
KB_PER_GB = float(2**20)
_HEADER = re.compile(rb"^;\s*(MaxProcs|MaxNodes|UnixStartTime)\s*:\s*(-?\d+)", re.IGNORECASE)


def read(paths: Sequence[Path], options: Mapping[str, str] | None = None) -> Trace:
    """Read one SWF log into the common per-job table (module docstring: the rules)."""
    parse_options(NAME, options, {}, name_as_field=False)
    (path,) = expect_paths(NAME, paths, FILES, most=1)
    label = str(path)
    report = ImportReport(format=NAME, files=[label])
    buf = np.frombuffer(load_text(path, "SWF job lines"), dtype=np.uint8)
    norm = _normalise_whitespace(buf)
    del buf
    lines = index_lines(norm)
    content = lines.ends > lines.starts
    comment = content & (norm[np.minimum(lines.starts, max(norm.size - 1, 0))] == ord(";"))
    header = _read_header(norm, lines.select(np.flatnonzero(comment)))
    jobs = lines.select(np.flatnonzero(content & ~comment))
    if len(jobs) == 0:
        raise TraceError(path, "no job lines: expected lines of 18 fields after the header")
    # Comment lines between job lines: blank them out (pyarrow skips empty lines).
    for i in np.flatnonzero(comment & (lines.starts > jobs.starts[0])).tolist():
        norm[lines.starts[i] : lines.ends[i]] = ord("\n")
    check_field_counts(path, norm, jobs, FIELDS, "fields", delimiter=" ")
    types = {f: pa.int64() if f in _INT_FIELDS else pa.float64() for f in FIELDS}
    table = read_delimited(label, norm, jobs, list(FIELDS), types, delimiter=" ")
    del norm
    rows = jobs.numbers
    report.read(rows.size)
    col: dict[str, npt.NDArray[Any]] = {}
    for f in FIELDS[1:]:
        column = table.column(f)
        if f in _INT_FIELDS and f not in _USED:
            low = pc.min(column).as_py()
            if low is not None and low >= -1:
                continue  # an unused integer field in its range: no copy into numpy
        col[f] = column.to_numpy()
    submit, status = col["submit time"], col["status"]
    checks = [("submit time", np.isfinite(submit) & (submit >= 0), ">= 0 s")]
    checks.append(("status", (status >= -1) & (status <= 5), "-1 or 0..5"))
    for f, v in col.items():
        if f not in ("submit time", "status"):
            ok = (v == -1) | (v >= 0)
            checks.append((f, ok & np.isfinite(v) if v.dtype == np.float64 else ok, ">= 0 or -1"))
    # The first bad line of all (then the first field on it).
    first = [(int(np.argmin(ok)), k) for k, (_, ok, _) in enumerate(checks) if not ok.all()]
    if first:
        f, ok, expected = checks[min(first)[1]]
        check_values(label, col[f], ok, rows, f, expected)
    back = np.flatnonzero(np.diff(submit) < 0)
    if back.size:
        i = int(back[0]) + 1
        raise TraceError(
            path,
            f"submit time {submit[i]:g} s is before the previous job's {submit[i - 1]:g} s: "
            "SWF lists jobs in order of submit time",
            int(rows[i]),
            "submit time",
        )

    run = col["run time"]
    alloc = col["allocated processors"]
    requested = col["requested processors"]
    rules = Rules(report, rows, label)
    drop = rules.drop
    for s in (2, 3, 4):
        drop(status == s, f"partial execution record (status {s})")
    drop((status == 5) & (run <= 0), "cancelled before it ran")
    drop(run == -1, "run time unknown")
    drop(run == 0, "zero run time")
    cpu = np.where(alloc > 0, alloc, requested).astype(np.float64)
    drop(cpu <= 0, "no processor count")

    if header.get("maxprocs", 0) > 0:
        machine, source = float(header["maxprocs"]), "MaxProcs"
        report.notes.append(f"machine: {machine:g} cores, MaxProcs of the header")
    elif header.get("maxnodes", 0) > 0:
        machine, source = float(header["maxnodes"]), "MaxNodes"
        report.notes.append(
            f"machine: {machine:g} cores, MaxNodes of the header (no MaxProcs: one core a node)"
        )
    else:
        kept = cpu[rules.kept]
        machine, source = (float(kept.max()) if kept.size else 0.0), "widest job"
        report.notes.append(
            f"machine: {machine:g} cores, the widest job (the header gives neither MaxProcs "
            "nor MaxNodes)"
        )
    drop(cpu > machine, f"wider than the machine ({source})")

    keep = rules.kept
    correct = rules.correct
    correct(alloc <= 0, "processors: requested used, allocated unknown")
    req_time = col["requested time"]
    correct(req_time == -1, "requested time unknown: estimate = run time")
    correct(
        (req_time != -1) & (req_time < run),
        "requested time shorter than the run: estimate = run time",
    )
    estimate = np.where((req_time != -1) & (req_time >= run), req_time, run)
    req_mem, used_mem = col["requested memory"], col["used memory"]
    memory = np.where(req_mem > 0, req_mem, np.where(used_mem > 0, used_mem, 0.0))
    memory_gb = memory * cpu / KB_PER_GB
    correct((req_mem <= 0) & (used_mem > 0), "requested memory unknown: used memory")
    correct((req_mem <= 0) & (used_mem <= 0), "memory unknown: 0 GB")

    idx = pa.array(np.flatnonzero(keep))
    user = pa.array(col["user id"], mask=col["user id"] == -1).take(idx)
    queue = pa.array(col["queue"], mask=col["queue"] == -1).take(idx)
    report.units.update(
        {
            "arrival_s": "s: submit time (field 2, s), shifted so the first job arrives at 0",
            "run_s": "s: run time (field 4, s)",
            "request_cpu": "cores: allocated processors (field 5), else requested (field 8)",
            "request_memory_gb": "GB: requested memory (field 10, KB per processor) x cores "
            "/ 2^20, else used memory (field 7, KB per processor) likewise",
            "request_gpu": "milli-GPU: 0 (SWF has no GPUs)",
            "estimate_s": "s: requested time (field 9, s)",
            "user": "user id (field 12)",
            "queue": "queue number (field 15)",
        }
    )
    table_jobs = job_table(
        trace_id=table.column("job number").take(idx).cast(pa.string()),
        arrival_s=submit[keep],
        run_s=run[keep],
        request_cpu=cpu[keep],
        request_memory_gb=memory_gb[keep],
        request_gpu=0.0,
        estimate_s=estimate[keep],
        job_class="swf",
        user=user.cast(pa.string()),
        queue=queue.cast(pa.string()),
    )
    notes: dict[str, object] = {}
    if "unixstarttime" in header:
        notes["unix_start_time"] = header["unixstarttime"]
    return Trace(jobs=table_jobs, report=report, nodes=None, machine_cpu=machine, notes=notes)


def _read_header(buf: ByteArray, comments: Lines) -> dict[str, int]:
    """``MaxProcs``, ``MaxNodes``, ``UnixStartTime`` of the header comments (lower-case
    keys; the first of each; a value that is not an integer is ignored)."""
    found: dict[str, int] = {}
    for start, end in zip(comments.starts.tolist(), comments.ends.tolist(), strict=True):
        m = _HEADER.match(buf[start:end].tobytes())
        if m:
            found.setdefault(m.group(1).decode().lower(), int(m.group(2)))
    return found


#: Bytes normalised at a time (bounds the temporaries of `_normalise_whitespace`).
_CHUNK = 32 * 2**20


def _normalise_whitespace(buf: ByteArray) -> ByteArray:
    """`buf` with each run of spaces, tabs and carriage returns inside a line made one space
    and those at the start or end of a line removed; line breaks stay where they were (so
    line numbers do not change)."""
    out: list[ByteArray] = []
    start = 0
    if buf.size == 0:
        return buf.copy()
    while start < buf.size:
        stop = min(start + _CHUNK, buf.size)
        while stop < buf.size:  # end the chunk after a line break
            nl = np.flatnonzero(buf[stop : stop + 65536] == 10)
            if nl.size:
                stop += int(nl[0]) + 1
                break
            stop = min(stop + 65536, buf.size)
        out.append(_normalise_chunk(buf[start:stop]))
        start = stop
    return np.concatenate(out) if len(out) != 1 else out[0]


def _whitespace(buf: ByteArray) -> BoolArray:
    """Spaces, tabs, vertical tabs, form feeds and carriage returns (not line feeds)."""
    return (buf == 32) | ((buf >= 9) & (buf <= 13) & (buf != 10))


def _normalise_chunk(buf: ByteArray) -> ByteArray:
    ws = _whitespace(buf)
    keep = ~ws
    keep[0] = True
    keep[1:] |= ~ws[:-1]  # the first byte of each whitespace run
    del ws
    out = buf[keep]
    del keep
    space = _whitespace(out)
    out[space] = 32
    # A space at the start or the end of a line goes.
    after_break = np.empty(out.size, dtype=np.bool_)
    after_break[0] = True
    after_break[1:] = out[:-1] == 10
    before_break = np.empty(out.size, dtype=np.bool_)
    before_break[-1] = True
    before_break[:-1] = out[1:] == 10
    return out[~(space & (after_break | before_break))]
