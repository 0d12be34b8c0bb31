"""CSV files of a fixed column order without a header row (the Alibaba traces), read by
`pyarrow.csv` into typed, checked columns.

`open_csv` refuses what is not CSV text (`clusteremu.cluster.traces.text_files`: missing, empty,
compressed under a plain name, a tar archive, binary) and says which pyarrow codec reads a
``*.gz``, ``*.bz2``, ``*.zst`` or ``*.lz4`` file as it is; `read_headerless` reads the
columns a reader uses (a first row equal to the column names is skipped) and turns
pyarrow's errors into `TraceError`s naming the line and the field (`locate_error`: a row
of the wrong number of fields, a cut-off last line, a value that is not a number or not
UTF-8); `numbers` checks a numeric column's range, `require_names` that names are given.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from clusteremu.cluster.traces.table import TraceError
from clusteremu.cluster.traces.text_files import (
    BoolArray,
    FloatArray,
    check_file,
    check_values,
    compressed_error,
    compression,
    field_at,
    first_failing_cast,
    refuse_tar,
)

S = pa.string()
F = pa.float64()

#: Compressed format -> the suffix pyarrow reads it by.
_SUFFIXES = {"gzip": ".gz", "bzip2": ".bz2", "zstd": ".zst", "lz4": ".lz4"}
#: Suffix -> the pyarrow codec that reads it.
_CODECS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd", ".lz4": "lz4"}
_CONVERSION = re.compile(r"In CSV column #(\d+): CSV conversion error to (\w+)")


def _stream(path: Path, codec: str | None) -> pa.NativeFile:
    return pa.input_stream(str(path), compression=codec)


def open_csv(path: Path, decompress: bool = True) -> str | None:
    """Refuse a path that is not a readable, non-empty CSV text file; returns the pyarrow
    codec to read it with (by its suffix: ``.gz`` etc.; `decompress` False: refused), None
    for plain text."""
    check_file(path, "CSV rows")
    try:
        with path.open("rb") as fh:
            head = fh.read(512)
    except OSError as exc:
        raise TraceError(path, f"cannot be read ({exc.strerror})") from None
    suffix = path.suffix.lower()
    codec = _CODECS.get(suffix)
    kind = compression(head)
    if kind is not None:
        readable = _SUFFIXES.get(kind)
        if not (decompress and readable == suffix and pa.Codec.is_available(codec)):
            hint = f" (or name it *{readable} to have it read as it is)"
            raise compressed_error(path, kind, hint if decompress and readable else "")
    elif codec is not None and decompress:
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
    refuse_tar(path, head)
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
        return TraceError(path, problem, row.number, field_at(columns, got))
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
    i = first_failing_cast(values, target)
    if i is None:
        return TraceError(path, message, None, name)
    if target == F:
        return TraceError(path, f"{values[i].as_py()!r} is not a number", i + first_line, name)
    return TraceError(path, "not UTF-8 text", i + first_line, name)


def read_headerless(
    path: Path,
    columns: Sequence[str],
    types: Mapping[str, pa.DataType],
    names: Sequence[str] = (),
) -> tuple[pa.Table, int]:
    """Read the columns `types` names of a CSV file whose fields are `columns` (no header
    row; a first row equal to `columns` is skipped). Returns the table (empty string
    fields as "", unknown numbers as null) and the line of its first row (1-based).

    Every row must have exactly ``len(columns)`` fields, and a name in each of the columns
    `names` (`require_names`: a blank line is a row of empty fields, refused). Raises
    `TraceError` naming the line and field."""
    codec = open_csv(path)
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
    require_names(table, names, path, skip + 1)
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
    v = np.array(nan_filled(table, name), dtype=np.float64)  # writable copy
    for marker in unknown:
        v[v == marker] = math.nan
    what = f"[{lo:g}, {hi:g}]" if math.isfinite(hi) else f">= {lo:g}"
    also = f" (or {' / '.join(f'{m:g}' for m in unknown)}: unknown)" if unknown else ""
    ok = ~(np.isinf(v) | (v < lo) | (v > hi))
    check_values(path, v, ok, first_line, name, what + also, "out of range")
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


def null_if_empty(values: pa.Array) -> pa.Array:
    """String `values` with null where empty."""
    return pc.if_else(pc.equal(values, ""), pa.scalar(None, S), values)


def nan_filled(table: pa.Table, name: str) -> Any:
    """Numeric column `name` as numpy, NaN where null."""
    return pc.fill_null(table.column(name), math.nan).to_numpy()


def given(table: pa.Table, name: str) -> BoolArray:
    """Where column `name` is not null."""
    return np.asarray(table.column(name).is_valid().to_numpy(zero_copy_only=False))


def as_mask(values: pa.Array | pa.ChunkedArray) -> BoolArray:
    """An Arrow boolean column as a numpy mask."""
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=bool)
