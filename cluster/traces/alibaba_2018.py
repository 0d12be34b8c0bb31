"""Reader of the Alibaba cluster trace v2018 (`cluster-trace-v2018`): batch instances as jobs.

Files (recognised by name; no header row, as published; a header row equal to the column
names below is skipped; ``*.gz``, ``*.bz2``, ``*.zst``, ``*.lz4`` are read as they are):

- ``batch_instance.csv`` (required): instance_name, task_name, job_name, task_type, status,
  start_time, end_time, machine_id, seq_no, total_seq_no, cpu_avg, cpu_max, mem_avg, mem_max;
- ``batch_task.csv`` (required): task_name, instance_num, job_name, task_type, status,
  start_time, end_time, plan_cpu, plan_mem;
- ``machine_meta.csv`` (optional, gives the nodes): machine_id, time_stamp, failure_domain_1,
  failure_domain_2, cpu_num, mem_size, status.

One job row per batch_instance row (an instance run; a retried instance has one row per
run). Units: times are s from the trace's start; ``plan_cpu`` 100 = one core; ``plan_mem``
and ``mem_size`` are normalised to 0-100 (100 = the largest machine's memory) and turned
into GB by the option ``memory_gb_per_unit`` (default 5.12: the largest machine holds
512 GB; Alibaba does not publish the figure). No GPUs.

Rules, in this order (a dropped row is counted under the first rule that drops it;
corrections are counted on kept rows only):

1. ``status`` other than ``Terminated`` (the runs that finished): dropped, "status X";
2. an instance whose (job_name, task_name) is not in batch_task: dropped, "task not in
   batch_task"; batch_task rows repeating a (job_name, task_name): the first is used
   (noted);
3. the task's ``plan_cpu`` or ``plan_mem`` unknown (empty, NaN, or the trace's invalid
   markers -1 / 101 in ``plan_mem``): dropped, "no plan_cpu in batch_task" / "no plan_mem
   in batch_task";
4. arrival = the instance's ``start_time`` (the trace has no submission time); unknown
   (0, -1 or empty: the trace writes 0 for a time outside its 8 days): the task's
   ``start_time``, corrected "instance start_time unknown: the task's start_time"; both
   unknown:
   dropped, "no start_time";
5. ``end_time`` unknown (0, -1, empty): dropped, "no end_time"; run time
   ``end_time - start`` <= 0: dropped, "end_time not after start_time";
6. requests: ``plan_cpu / 100`` cores, ``plan_mem x memory_gb_per_unit`` GB, 0 GPUs;
7. class = the instance's ``task_type`` (option ``class_by=task_type``, the default), or
   "batch" where it is empty (corrected "no task_type: class batch"), or "batch" for every
   job (``class_by=none``); user, queue, priority: null; node = ``machine_id`` (null where
   empty); trace_id = ``job_name/task_name/instance_name``, with ``#<row>`` added (the
   line in batch_instance) where that repeats (a retried instance; corrected "trace_id
   repeats: '#<row>' added").

machine_meta has several rows per machine over time: each machine's last row (by
time_stamp, then file order) with status USING and known cpu_num and mem_size is kept,
else its last row with both known (then it is unschedulable); machines with neither
known are left out (noted). Node labels: ``failure_domain_1`` and ``failure_domain_2``.

Bad input is a `TraceError` naming the file, the line and the field: a value that is not
a number, a negative time (other than -1), a negative ``plan_cpu`` or ``cpu_num``, a
normalised memory outside 0-100 (other than -1 / 101), too few or too many fields (a cut
row), a blank line, an empty required name, a compressed file under a plain name, an
empty file. Fields the import does not use (instance_num, seq_no, the usage columns) are
not checked.

Speed: vectorised with pyarrow (multi-threaded CSV parsing of only the columns used, a
hash join of instances to tasks) and numpy, no loop over rows: 10^6 batch_instance rows
import in about 1 s on two cores, at a peak resident memory of about 0.7 KB per row
(measured with `resource.getrusage`: 8 times the CSV's 82 bytes a row). The whole trace
(1.4 billion rows) does not fit memory: cut batch_instance into parts (by time) first.

This module also holds the headerless-CSV helpers the other Alibaba readers share.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from cluster.traces.table import (
    ClassSpec,
    ImportReport,
    Trace,
    TraceError,
    job_table,
    node_table,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

NAME = "alibaba-2018"
DESCRIPTION = "Alibaba cluster-trace-v2018: batch instances (one job each), tasks' plans, machines"
FILES = "batch_instance.csv and batch_task.csv (required), machine_meta.csv (optional: nodes)"
OPTIONS: dict[str, str] = {
    "memory_gb_per_unit": "GB per unit of the normalised memory (0-100); default 5.12 "
    "(100 = a 512 GB machine)",
    "class_by": "task_type (default: class = the instance's task_type) or none (class batch)",
}

INSTANCE_COLUMNS = (
    "instance_name",
    "task_name",
    "job_name",
    "task_type",
    "status",
    "start_time",
    "end_time",
    "machine_id",
    "seq_no",
    "total_seq_no",
    "cpu_avg",
    "cpu_max",
    "mem_avg",
    "mem_max",
)
TASK_COLUMNS = (
    "task_name",
    "instance_num",
    "job_name",
    "task_type",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
)
MACHINE_COLUMNS = (
    "machine_id",
    "time_stamp",
    "failure_domain_1",
    "failure_domain_2",
    "cpu_num",
    "mem_size",
    "status",
)
#: File kinds: the text a file's name contains.
KINDS = {
    "batch_instance": "batch_instance",
    "batch_task": "batch_task",
    "machine_meta": "machine_meta",
}
#: Default GB per normalised memory unit: 100 units = a 512 GB machine.
MEMORY_GB_PER_UNIT = 5.12
#: The trace's markers of an invalid normalised value.
INVALID_NORMALISED = (-1.0, 101.0)
#: The marker of an unknown time (besides 0 and empty).
UNKNOWN_TIME = (-1.0,)

S = pa.string()
F = pa.float64()

# --------------------------------------------------------------------------------------
# Helpers shared by the Alibaba readers (headerless CSV files of a fixed column order).
# --------------------------------------------------------------------------------------

#: Leading bytes of compressed / archive formats -> (name, suffix pyarrow reads it by).
_MAGIC: tuple[tuple[bytes, str, str | None], ...] = (
    (b"\x1f\x8b", "gzip", ".gz"),
    (b"BZh", "bzip2", ".bz2"),
    (b"\x28\xb5\x2f\xfd", "zstd", ".zst"),
    (b"\x04\x22\x4d\x18", "lz4", ".lz4"),
    (b"\xfd7zXZ\x00", "xz", None),
    (b"PK\x03\x04", "zip", None),
    (b"7z\xbc\xaf\x27\x1c", "7z", None),
)
#: Suffix -> the pyarrow codec that reads it.
_CODECS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".lz4": "lz4"}
_CONVERSION = re.compile(r"In CSV column #(\d+): CSV conversion error to (\w+)")


def _stream(path: Path, codec: str | None) -> pa.NativeFile:
    return pa.input_stream(str(path), compression=codec)


def check_file(path: Path, decompress: bool = True) -> str | None:
    """Refuse a path that is not a readable, non-empty CSV text file; returns the pyarrow
    codec to read it with (by its suffix: ``.gz`` etc.; `decompress` False: refused), None
    for plain text."""
    if not path.exists():
        raise TraceError(path, "no such file")
    if path.is_dir():
        raise TraceError(path, "is a directory; expected a CSV file")
    if not path.is_file():
        raise TraceError(path, "not a regular file; expected a CSV file")
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(512)
    except OSError as exc:
        raise TraceError(path, f"cannot be read ({exc.strerror})") from None
    if size == 0:
        raise TraceError(path, "empty file; expected CSV rows")
    suffix = path.suffix.lower()
    codec = _CODECS.get(suffix)
    for magic, kind, readable in _MAGIC:
        if head.startswith(magic):
            if decompress and readable == suffix and pa.Codec.is_available(codec):
                break
            hint = f" (or name it *{readable} to have it read as it is)"
            hint = hint if decompress and readable else ""
            raise TraceError(path, f"compressed ({kind}): decompress it first{hint}")
    else:
        if codec is not None and decompress:
            raise TraceError(path, f"named *{suffix} but not {codec} data")
    if not decompress:
        codec = None
    if codec is not None:
        try:
            with _stream(path, codec) as s:
                head = s.read(512)
        except (OSError, pa.ArrowException) as exc:
            raise TraceError(path, f"cannot be decompressed ({exc})") from None
        if not head:
            raise TraceError(path, "empty file (after decompression); expected CSV rows")
    if len(head) >= 262 and head[257:262] == b"ustar":
        raise TraceError(path, "a tar archive: extract it first (tar xf)")
    if b"\x00" in head:
        raise TraceError(path, "binary data (NUL bytes); expected CSV text")
    return codec


def read_first_line(path: Path, codec: str | None) -> bytes:
    with _stream(path, codec) as s:
        head = s.read(1 << 16)
    return head.split(b"\n", 1)[0].rstrip(b"\r")


def _cut_last_line(path: Path, codec: str | None, text: str) -> bool:
    """Whether `text` is the file's last line and the file does not end with a newline."""
    if codec is not None:
        return False
    with path.open("rb") as fh:
        fh.seek(max(0, path.stat().st_size - (1 << 16)))
        tail = fh.read()
    return not tail.endswith(b"\n") and tail.rsplit(b"\n", 1)[-1].rstrip(b"\r") == text.encode()


def _first_failing(values: pa.Array, to: pa.DataType) -> int | None:
    """Index of the first value of `values` that does not cast to `to` (None: all do);
    casts slices (bisection inside the first slice that fails), not one value at a time."""
    step = 1 << 16

    def fails(a: pa.Array) -> bool:
        try:
            a.cast(to)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return True
        return False

    for start in range(0, len(values), step):
        piece = values.slice(start, step)
        if not fails(piece):
            continue
        lo, hi = 0, len(piece)  # piece[:lo] casts, piece[:hi] does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fails(piece.slice(0, mid)):
                hi = mid
            else:
                lo = mid
        return start + lo
    return None


def locate_error(
    path: Path,
    codec: str | None,
    columns: Sequence[str],
    skip: int,
    message: str,
) -> TraceError:
    """The `TraceError` (with its line) for pyarrow's error `message` on `path`."""
    first_line = skip + 1
    match = _CONVERSION.search(message)
    if match is None:  # a parse error: a row of the wrong number of fields
        bad: list[Any] = []

        def handler(row: Any) -> str:
            bad.append(row)
            return "error"

        with contextlib.suppress(pa.ArrowInvalid, OSError):
            pcsv.read_csv(
                _stream(path, codec),
                pcsv.ReadOptions(column_names=list(columns), skip_rows=skip, use_threads=False),
                pcsv.ParseOptions(ignore_empty_lines=False, invalid_row_handler=handler),
                pcsv.ConvertOptions(include_columns=[columns[0]], column_types={columns[0]: S}),
            )
        if not bad:
            return TraceError(path, f"not a CSV file of this format ({message})")
        row = bad[0]
        n, got = len(columns), int(row.actual_columns)
        problem = f"{got} field(s); expected {n} ({', '.join(columns)})"
        if got < n and _cut_last_line(path, codec, row.text):
            problem += ": a cut-off last line (no newline at the end of the file)"
        field = columns[got] if got < n else columns[-1]
        return TraceError(path, problem, row.number, field)
    name = columns[int(match.group(1))]
    target = F if match.group(2) in ("double", "float", "int64") else S
    read_as = S if target == F else pa.binary()
    try:
        col = pcsv.read_csv(
            _stream(path, codec),
            pcsv.ReadOptions(column_names=list(columns), skip_rows=skip),
            pcsv.ParseOptions(ignore_empty_lines=False),
            pcsv.ConvertOptions(
                include_columns=[name], column_types={name: read_as}, strings_can_be_null=True
            ),
        ).column(name)
    except (pa.ArrowInvalid, OSError):
        return TraceError(path, f"not a CSV file of this format ({message})", None, name)
    values = col.combine_chunks()
    if target == F:
        values = pc.utf8_trim_whitespace(values)
    i = _first_failing(values, target)
    if i is None:
        return TraceError(path, message, None, name)
    if target == F:
        return TraceError(path, f"{values[i].as_py()!r} is not a number", i + first_line, name)
    return TraceError(path, "not UTF-8 text", i + first_line, name)


def read_headerless(
    path: Path, columns: Sequence[str], types: Mapping[str, pa.DataType]
) -> tuple[pa.Table, int]:
    """Read the columns `types` names of a CSV file whose fields are `columns` (no header
    row; a first row equal to `columns` is skipped). Returns the table (empty string
    fields as "", unknown numbers as null) and the line of its first row (1-based).

    Every row must have exactly ``len(columns)`` fields; a blank line is a row of empty
    fields (refused by `require_names`). Raises `TraceError` naming the line and field."""
    codec = check_file(path)
    first = read_first_line(path, codec)
    fields = [f.strip() for f in first.decode("utf-8", "replace").split(",")]
    skip = 0
    if fields and fields[0] == columns[0]:
        if fields != list(columns):
            raise TraceError(
                path, f"header row: expected the columns {', '.join(columns)}", 1, columns[0]
            )
        skip = 1
    try:
        table = pcsv.read_csv(
            _stream(path, codec),
            pcsv.ReadOptions(column_names=list(columns), skip_rows=skip, block_size=1 << 24),
            pcsv.ParseOptions(ignore_empty_lines=False),
            pcsv.ConvertOptions(column_types=dict(types), include_columns=list(types)),
        )
    except pa.ArrowInvalid as exc:
        raise locate_error(path, codec, columns, skip, str(exc)) from None
    except (OSError, pa.ArrowException) as exc:
        raise TraceError(path, f"cannot be read ({exc})") from None
    if table.num_rows == 0:
        raise TraceError(path, "no rows (only a header)")
    return table, skip + 1


def numbers(
    table: pa.Table,
    name: str,
    path: Path,
    first_line: int,
    lo: float = 0.0,
    hi: float = math.inf,
    unknown: Sequence[float] = (),
) -> FloatArray:
    """Column `name` as floats, NaN where unknown (empty, NaN, or one of the `unknown`
    markers); raises `TraceError` at the first other value outside [lo, hi] or infinite."""
    v = pc.fill_null(table.column(name), math.nan).to_numpy()
    v = np.array(v, dtype=np.float64)  # writable copy
    for marker in unknown:
        v[v == marker] = math.nan
    bad = np.flatnonzero(np.isinf(v) | (v < lo) | (v > hi))
    if bad.size:
        i = int(bad[0])
        what = f"[{lo:g}, {hi:g}]" if math.isfinite(hi) else f">= {lo:g}"
        also = f" (or {' / '.join(f'{m:g}' for m in unknown)}: unknown)" if unknown else ""
        raise TraceError(
            path, f"{v[i]:g} out of range; expected {what}{also}", i + first_line, name
        )
    return v


def require_names(table: pa.Table, names: Sequence[str], path: Path, first_line: int) -> None:
    """Raise `TraceError` at the first row where a column of `names` is empty."""
    for name in names:
        col = table.column(name)
        empty = pc.or_kleene(pc.is_null(col), pc.equal(col, ""))
        if pc.any(empty).as_py():
            i = int(pc.index(empty, True).as_py())
            blank = all(table.column(c)[i].as_py() in (None, "") for c in table.column_names)
            problem = "a blank line" if blank else "empty; expected a name"
            raise TraceError(path, problem, i + first_line, name)


def strings(table: pa.Table, name: str) -> pa.Array:
    """Column `name` as one string array ("" where empty)."""
    return pc.fill_null(table.column(name), "").combine_chunks()


def pick_files(
    paths: Sequence[Path | str], kinds: Mapping[str, str], required: Sequence[str], files: str
) -> dict[str, Path]:
    """The files by kind: a file's kind is the first of `kinds` (kind -> text) whose text
    its name contains. Raises `TraceError` for an unrecognised or repeated file, and for a
    required kind missing (`files`: what to pass)."""
    found: dict[str, Path] = {}
    for raw in paths:
        p = Path(raw)
        kind = next((k for k, text in kinds.items() if text in p.name.lower()), None)
        if kind is None:
            raise TraceError(
                p,
                f"not a file of this format (its name should contain one of "
                f"{', '.join(kinds.values())}); expected {files}",
            )
        if kind in found:
            raise TraceError(p, f"a second {kinds[kind]} file (the first: {found[kind]})")
        found[kind] = p
    for kind in required:
        if kind not in found:
            given = ", ".join(str(p) for p in paths) or "none"
            raise TraceError(
                kinds[kind], f"the {kinds[kind]} file is missing (given: {given}); expected {files}"
            )
    return found


def parse_options(
    options: Mapping[str, str] | None, spec: Mapping[str, tuple[str, Callable[[str], Any]]]
) -> dict[str, Any]:
    """Options by name -> value: `spec` maps a name to (default text, parser); a parser
    raises ValueError on a bad value. Unknown names and bad values raise `TraceError`."""
    given = dict(options or {})
    unknown = sorted(set(given) - set(spec))
    if unknown:
        raise TraceError(
            "options",
            f"unknown option {unknown[0]!r}; expected one of {', '.join(spec) or '(none)'}",
            None,
            unknown[0],
        )
    out: dict[str, Any] = {}
    for name, (default, parse) in spec.items():
        text = str(given.get(name, default))
        try:
            out[name] = parse(text)
        except ValueError as exc:
            raise TraceError("options", f"{text!r}: {exc}", None, name) from None
    return out


def positive_float(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise ValueError("expected a number > 0")
    return value


def choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in allowed:
            raise ValueError(f"expected one of {', '.join(allowed)}")
        return text

    return parse


def count_by_value(
    count: Callable[[str, Any, str], None],
    values: pa.Array,
    mask: BoolArray,
    lines: IntArray,
    template: str,
    file: str,
    most: int = 50,
) -> None:
    """Count the rows of `mask` (`count`: `ImportReport.drop` or `.correct`), one reason
    per distinct value of `values` (`template` with ``{}``: the value, "empty" for "");
    past `most` distinct values the rest share one reason ("other")."""
    if not mask.any():
        return
    idx = np.flatnonzero(mask)
    enc = pc.dictionary_encode(values.take(pa.array(idx)))
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    names = enc.dictionary.to_pylist()
    order = np.argsort(-np.bincount(codes, minlength=len(names)), kind="stable")
    for k in order[:most].tolist():
        count(template.format(names[k] or "empty"), lines[idx[codes == k]], file)
    if order.size > most:
        rest = np.isin(codes, order[most:])
        count(template.format("other"), lines[idx[rest]], file)


def unique_ids(
    ids: pa.Array, lines: IntArray, report: ImportReport, file: str, what: str
) -> pa.Array:
    """`ids` with ``#<line>`` added to every id that repeats (counted as corrected)."""
    if len(ids) == 0:
        return ids
    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    enc = pc.dictionary_encode(ids)
    codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    dup = np.bincount(codes)[codes] > 1
    if not dup.any():
        return ids
    report.correct(f"{what} repeats: '#<row>' added", lines[dup], file)
    tagged = pc.binary_join_element_wise(ids, pa.array(lines).cast(S), "#")
    return pc.if_else(pa.array(dup), tagged, ids)


def dedupe(table: pa.Table, keys: list[str], keep: str = "min") -> tuple[pa.Table, int]:
    """`table` with one row per value of `keys`: the first (keep="min") or last ("max")
    in file order, in file order; and how many rows were left out."""
    t = table.append_column("__i", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    g = t.group_by(keys, use_threads=False).aggregate([("__i", keep)])
    if g.num_rows == table.num_rows:
        return table, 0
    index = np.sort(np.asarray(g.column(f"__i_{keep}").to_numpy(), dtype=np.int64))
    return table.take(pa.array(index)), table.num_rows - g.num_rows


# --------------------------------------------------------------------------------------
# The 2018 reader.
# --------------------------------------------------------------------------------------


def read(paths: Sequence[Path], options: Mapping[str, str] | None = None) -> Trace:
    """Read batch_instance (one job per row), batch_task and optional machine_meta files
    of cluster-trace-v2018 into the common per-job table (s, cores, GB)."""
    opts = parse_options(
        options,
        {
            "memory_gb_per_unit": (str(MEMORY_GB_PER_UNIT), positive_float),
            "class_by": ("task_type", choice("task_type", "none")),
        },
    )
    gb_per_unit: float = opts["memory_gb_per_unit"]
    files = pick_files(paths, KINDS, ("batch_instance", "batch_task"), FILES)
    report = ImportReport(format=NAME, files=[str(p) for p in files.values()])
    report.units = {
        "arrival_s": "s (instance start_time, s from the trace's start)",
        "run_s": "s (end_time - start_time)",
        "request_cpu": "cores (plan_cpu / 100)",
        "request_memory_gb": f"GB (plan_mem, normalised 0-100, x {gb_per_unit:g} GB per unit)",
        "request_gpu": "milli-GPU (none in this trace: 0)",
    }
    report.notes.append(
        "arrival = instance start time (the trace has no submission time); "
        f"memory: 100 normalised units = {100 * gb_per_unit:g} GB"
    )

    tpath = files["batch_task"]
    tasks, tfirst = read_headerless(
        tpath,
        TASK_COLUMNS,
        {"task_name": S, "job_name": S, "start_time": F, "plan_cpu": F, "plan_mem": F},
    )
    require_names(tasks, ("job_name", "task_name"), tpath, tfirst)
    t_start = numbers(tasks, "start_time", tpath, tfirst, unknown=UNKNOWN_TIME)
    t_cpu = numbers(tasks, "plan_cpu", tpath, tfirst)
    t_mem = numbers(tasks, "plan_mem", tpath, tfirst, 0.0, 100.0, INVALID_NORMALISED)
    tasks = pa.table(
        {
            "job_name": tasks.column("job_name"),
            "task_name": tasks.column("task_name"),
            "t_start": t_start,
            "t_cpu": t_cpu,
            "t_mem": t_mem,
            "t_row": np.arange(tasks.num_rows, dtype=np.int64),
        }
    )
    tasks, repeated = dedupe(tasks, ["job_name", "task_name"])
    if repeated:
        report.notes.append(
            f"{repeated} batch_task row(s) repeat a (job_name, task_name): the first used"
        )

    ipath = files["batch_instance"]
    inst, ifirst = read_headerless(
        ipath,
        INSTANCE_COLUMNS,
        {
            "instance_name": S,
            "task_name": S,
            "job_name": S,
            "task_type": S,
            "status": S,
            "start_time": F,
            "end_time": F,
            "machine_id": S,
        },
    )
    report.read(inst.num_rows)
    require_names(inst, ("job_name", "task_name", "instance_name"), ipath, ifirst)
    start = numbers(inst, "start_time", ipath, ifirst, unknown=UNKNOWN_TIME)
    end = numbers(inst, "end_time", ipath, ifirst, unknown=UNKNOWN_TIME)
    lines = np.arange(inst.num_rows, dtype=np.int64) + ifirst
    file = str(ipath)

    status = strings(inst, "status")
    done = np.asarray(pc.equal(status, "Terminated").to_numpy(zero_copy_only=False), dtype=bool)
    count_by_value(report.drop, status, ~done, lines, "status {}", file)

    # Instances (that finished) joined to their tasks, back in file order.
    kept = np.flatnonzero(done)
    left = pa.table(
        {
            "job_name": inst.column("job_name").take(pa.array(kept)),
            "task_name": inst.column("task_name").take(pa.array(kept)),
            "i": kept,
        }
    )
    joined = left.join(tasks, ["job_name", "task_name"], join_type="left outer")
    joined = joined.take(pc.sort_indices(joined.column("i")))
    i = np.asarray(joined.column("i").to_numpy(), dtype=np.int64)
    has_task = np.asarray(joined.column("t_row").is_valid().to_numpy(zero_copy_only=False))
    t_start_i = pc.fill_null(joined.column("t_start"), math.nan).to_numpy()
    cpu = pc.fill_null(joined.column("t_cpu"), math.nan).to_numpy()
    mem = pc.fill_null(joined.column("t_mem"), math.nan).to_numpy()

    alive = np.ones(i.size, dtype=bool)

    def drop(mask: BoolArray, reason: str) -> None:
        hit = alive & mask
        report.drop(reason, lines[i[hit]], file)
        alive[hit] = False

    drop(~has_task, "task not in batch_task")
    drop(np.isnan(cpu), "no plan_cpu in batch_task")
    drop(np.isnan(mem), "no plan_mem in batch_task")
    s_inst = start[i]
    no_start = np.isnan(s_inst) | (s_inst == 0)
    s = np.where(no_start, t_start_i, s_inst)
    drop(np.isnan(s) | (s == 0), "no start_time")
    e = end[i]
    drop(np.isnan(e) | (e == 0), "no end_time")
    run = e - s
    drop(~(run > 0), "end_time not after start_time")
    report.correct(
        "instance start_time unknown: the task's start_time", lines[i[alive & no_start]], file
    )

    rows = i[alive]
    take = pa.array(rows)
    job = inst.column("job_name").take(take)
    task = inst.column("task_name").take(take)
    name = inst.column("instance_name").take(take)
    ids = unique_ids(
        pc.binary_join_element_wise(job, task, name, "/"), lines[rows], report, file, "trace_id"
    )
    if opts["class_by"] == "task_type":
        ttype = strings(inst, "task_type").take(take)
        empty = np.asarray(pc.equal(ttype, "").to_numpy(zero_copy_only=False), dtype=bool)
        report.correct("no task_type: class batch", lines[rows[empty]], file)
        job_class: Any = pc.if_else(pa.array(empty), "batch", ttype)
    else:
        job_class = "batch"
    machine = strings(inst, "machine_id").take(take)
    node = pc.if_else(pc.equal(machine, ""), pa.scalar(None, S), machine)
    jobs = job_table(
        ids,
        s[alive],
        run[alive],
        cpu[alive] / 100.0,
        mem[alive] * gb_per_unit,
        0.0,
        job_class=job_class,
        node=node,
    )
    nodes = None
    if "machine_meta" in files:
        nodes = _machines(files["machine_meta"], gb_per_unit, report)
    classes = [ClassSpec(c) for c in pc.unique(jobs.column("class")).to_pylist()]
    return Trace(jobs=jobs, report=report, nodes=nodes, classes=classes)


def _machines(path: Path, gb_per_unit: float, report: ImportReport) -> pa.Table:
    """The nodes table from machine_meta: each machine's last USING row with known sizes."""
    meta, first = read_headerless(
        path,
        MACHINE_COLUMNS,
        {
            "machine_id": S,
            "time_stamp": F,
            "failure_domain_1": S,
            "failure_domain_2": S,
            "cpu_num": F,
            "mem_size": F,
            "status": S,
        },
    )
    require_names(meta, ("machine_id",), path, first)
    t = numbers(meta, "time_stamp", path, first, unknown=UNKNOWN_TIME)
    cpu = numbers(meta, "cpu_num", path, first, unknown=UNKNOWN_TIME)
    mem = numbers(meta, "mem_size", path, first, 0.0, 100.0, INVALID_NORMALISED)
    using = np.asarray(
        pc.equal(pc.utf8_upper(strings(meta, "status")), "USING").to_numpy(zero_copy_only=False),
        dtype=bool,
    )
    known = ~np.isnan(cpu) & ~np.isnan(mem)
    enc = pc.dictionary_encode(meta.column("machine_id").combine_chunks())
    code = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    priority = 2 * known.astype(np.int64) + (known & using)
    order = np.lexsort((np.arange(code.size), np.nan_to_num(t, nan=-1.0), priority, code))
    last = order[np.r_[code[order][1:] != code[order][:-1], True]]  # one per machine
    good = last[known[last]]
    missing = last.size - good.size
    if missing:
        report.notes.append(
            f"{missing} machine(s) in machine_meta without a known cpu_num and mem_size: left out"
        )
    fd1 = strings(meta, "failure_domain_1").take(pa.array(good)).to_pylist()
    fd2 = strings(meta, "failure_domain_2").take(pa.array(good)).to_pylist()
    labels = [
        {k: v for k, v in (("failure_domain_1", a), ("failure_domain_2", b)) if v}
        for a, b in zip(fd1, fd2, strict=True)
    ]
    return node_table(
        meta.column("machine_id").take(pa.array(good)),
        cpu[good],
        mem[good] * gb_per_unit,
        0,
        unschedulable=~using[good],
        labels=labels,
    )
