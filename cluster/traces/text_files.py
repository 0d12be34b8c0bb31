"""Trace files as text: opening one, its compression, its lines, and the errors that name
the file, the line and the field.

For every reader:

- `check_file`: the path is a readable, non-empty regular file (else a `TraceError`:
  no such file, a directory, empty ...);
- `compression`: what a file's first bytes say it is compressed with (gzip, bzip2, xz,
  zstd, lz4, zip, 7z, rar), `compressed_error` the refusal, `refuse_tar` the refusal of a
  tar archive;
- `first_failing` / `first_failing_cast`: the first row that fails a check (bisection,
  not a loop over rows);
- `check_values`: a `TraceError` at the first row whose value fails its check,
  ``expected ..., found ...``.

For the readers that hold a whole text file in memory (`swf`, `azure`, `google`):
`load_text` (gzip, bzip2 and xz decompressed whatever the name; the other formats
refused), `index_lines` and `text_records` (`Lines`: where each line starts and ends, and
its number as a text editor counts it), `check_field_counts` and `read_delimited` (typed
columns parsed by `pyarrow.csv`).
"""

from __future__ import annotations

import bz2
import csv
import gzip
import lzma
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.csv as pacsv

from clusteremu.cluster.traces.table import TraceError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
ByteArray = npt.NDArray[np.uint8]

#: Leading bytes of the compressed and archive formats (bzip2: `_BZIP2`).
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "gzip"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"(\xb5/\xfd", "zstd"),
    (b'\x04"M\x18', "lz4"),
    (b"PK\x03\x04", "zip"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"Rar!\x1a\x07", "rar"),
)
#: A bzip2 stream: its header, then a block (or the end of an empty stream).
_BZIP2 = re.compile(rb"BZh[1-9](1AY&SY|\x17rE8P\x90)")
#: The formats `load_text` decompresses.
_DECOMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.decompress,
    "bzip2": bz2.decompress,
    "xz": lzma.decompress,
}
#: Spaces, tabs, vertical tabs, form feeds and carriage returns (not line feeds), by byte.
WHITESPACE = np.zeros(256, dtype=np.bool_)
WHITESPACE[[9, 11, 12, 13, 32]] = True
#: What pyarrow raises on text it cannot parse or convert.
PARSE_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError)


def check_file(path: Path, content: str) -> int:
    """The size of `path`; `TraceError` unless it is a readable, non-empty regular file
    (`content`: what the file should hold, for the message)."""
    if not path.exists():
        raise TraceError(path, "no such file")
    if path.is_dir():
        raise TraceError(path, f"is a directory; expected a file of {content}")
    if not path.is_file():
        raise TraceError(path, f"not a regular file; expected a file of {content}")
    try:
        size = path.stat().st_size
    except OSError as e:
        raise TraceError(path, f"cannot be read ({e.strerror or e})") from None
    if size == 0:
        raise TraceError(path, f"empty file; expected {content}")
    return size


def compression(head: bytes) -> str | None:
    """The compressed or archive format whose magic bytes `head` starts with (``gzip``,
    ``bzip2``, ``xz``, ``zstd``, ``lz4``, ``zip``, ``7z``, ``rar``); None: neither."""
    kind = next((k for magic, k in _MAGIC if head.startswith(magic)), None)
    if kind is None and _BZIP2.match(head[:10]):
        kind = "bzip2"
    return kind


def compressed_error(path: Path | str, kind: str, hint: str = "") -> TraceError:
    """The refusal of a file compressed with `kind` (`hint`: how else to pass it)."""
    return TraceError(path, f"compressed ({kind}): decompress it first{hint}")


def refuse_tar(path: Path | str, head: bytes) -> None:
    """`TraceError` if `head` (a file's first bytes, decompressed) is a tar archive's."""
    if len(head) >= 262 and head[257:262] == b"ustar":
        raise TraceError(path, "a tar archive: extract it first (tar xf)")


def load_text(path: Path | str, content: str = "text") -> bytes:
    """The bytes of a text trace file; gzip, bzip2 and xz decompressed (by their magic
    bytes, whatever the name). `TraceError` for a missing path, a directory, an empty
    file, a file that cannot be decompressed, zstd / lz4 / zip / 7z / rar files, a tar
    archive, a Parquet file (`content`: what the file should hold, for the messages)."""
    p = Path(path)
    check_file(p, content)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise TraceError(p, f"cannot be read ({e.strerror or e})") from None
    kind = compression(data)
    if kind is not None:
        if kind not in _DECOMPRESS:
            raise compressed_error(p, kind)
        try:
            data = _DECOMPRESS[kind](data)
        except (OSError, EOFError, ValueError, lzma.LZMAError) as e:
            raise TraceError(
                p, f"compressed ({kind}) but cannot be decompressed ({e}): is it complete?"
            ) from None
        if not data:
            raise TraceError(p, f"empty file (once decompressed from {kind})")
    refuse_tar(p, data[:512])
    if data[:4] == b"PAR1" and data[-4:] == b"PAR1":
        raise TraceError(p, "a Parquet file: expected the trace's text format")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if re.search(rb"\S", data) is None:
        raise TraceError(p, "empty file (only blank lines)")
    return data


@dataclass(frozen=True)
class Lines:
    """Records of a text buffer: where each starts, where its content ends (before the
    line break, ``\\r\\n`` or ``\\n``), where the next may start, and its 1-based line
    number as a text editor counts."""

    starts: IntArray
    ends: IntArray
    stops: IntArray
    numbers: IntArray

    def __len__(self) -> int:
        return int(self.starts.size)

    def select(self, index: IntArray) -> Lines:
        return Lines(self.starts[index], self.ends[index], self.stops[index], self.numbers[index])

    def text(self, buf: ByteArray, i: int) -> str:
        """The content of record `i` as text (bad UTF-8 replaced)."""
        return buf[self.starts[i] : self.ends[i]].tobytes().decode("utf-8", "replace")


def index_lines(buf: ByteArray, quoted: bool = False) -> Lines:
    """The lines of `buf` (quoted: line breaks inside double quotes do not end a record)."""
    n = buf.size
    nl = np.flatnonzero(buf == 10)
    breaks = nl
    if quoted:
        quotes = np.flatnonzero(buf == 34)
        breaks = nl[np.searchsorted(quotes, nl) % 2 == 0]
    starts = np.concatenate((np.zeros(1, np.int64), breaks + 1))
    stops = np.concatenate((breaks + 1, np.full(1, n, np.int64)))
    if starts[-1] >= n:
        starts, stops = starts[:-1], stops[:-1]
    ends = stops - (buf[np.maximum(stops - 1, 0)] == 10)
    ends = ends - ((ends > starts) & (buf[np.maximum(ends - 1, 0)] == 13))
    numbers = np.searchsorted(nl, starts).astype(np.int64) + 1
    return Lines(starts.astype(np.int64), ends.astype(np.int64), stops.astype(np.int64), numbers)


def count_fields(buf: ByteArray, lines: Lines, delimiter: int, quoted: bool = False) -> IntArray:
    """Fields of each line: delimiters (outside double quotes if `quoted`) + 1."""
    d = np.flatnonzero(buf == delimiter)
    if quoted:
        quotes = np.flatnonzero(buf == 34)
        d = d[np.searchsorted(quotes, d) % 2 == 0]
    return (np.searchsorted(d, lines.ends) - np.searchsorted(d, lines.starts) + 1).astype(np.int64)


def field_at(names: Sequence[str], found: int) -> str:
    """The field a line of `found` fields lacks first (the last when it has too many)."""
    return names[found] if found < len(names) else names[-1]


def check_field_counts(
    label: Path | str,
    buf: ByteArray,
    records: Lines,
    names: Sequence[str],
    what: str,
    delimiter: str = ",",
    quoted: bool = False,
) -> None:
    """`TraceError` at the first record without ``len(names)`` fields (`count_fields`):
    ``expected N <what>, found M``, naming the first field it lacks (or the last)."""
    counts = count_fields(buf, records, ord(delimiter), quoted)
    bad = np.flatnonzero(counts != len(names))
    if bad.size:
        i = int(bad[0])
        found = int(counts[i])
        raise TraceError(
            label,
            f"expected {len(names)} {what}, found {found}"
            + (" (a truncated line?)" if found < len(names) else ""),
            int(records.numbers[i]),
            field_at(names, found),
        )


def text_records(buf: ByteArray, quoted: bool = False) -> tuple[ByteArray, Lines]:
    """The records of `buf` that hold more than white space (`index_lines`; quoted: line
    breaks inside double quotes do not end one), and the buffer they index (lines of only
    white space blanked out: `blank_out_whitespace_lines`)."""
    lines = index_lines(buf, quoted)
    buf, content = blank_out_whitespace_lines(buf, lines)
    return buf, lines.select(content)


def blank_out_whitespace_lines(buf: ByteArray, lines: Lines) -> tuple[ByteArray, IntArray]:
    """Records of `lines` that hold more than spaces; those that hold only spaces / tabs
    are overwritten with line breaks (a copy of `buf` if any) so that pyarrow skips them."""
    content = np.flatnonzero(lines.ends > lines.starts)
    # Only lines without a visible character can be blank: look at the first byte.
    first = buf[lines.starts[content]]
    maybe = content[WHITESPACE[first]]
    blank = [
        i for i in maybe.tolist() if not buf[lines.starts[i] : lines.ends[i]].tobytes().strip()
    ]
    if blank:
        buf = buf.copy()
        for i in blank:
            buf[lines.starts[i] : lines.ends[i]] = 10
        content = np.setdiff1d(content, np.asarray(blank, dtype=np.int64))
    return buf, content.astype(np.int64)


def describe_type(t: pa.DataType) -> str:
    """What a value of Arrow type `t` is, for ``expected ...`` messages."""
    if pa.types.is_integer(t):
        return "an integer"
    if pa.types.is_floating(t):
        return "a number"
    return "text (UTF-8)"


def first_failing(n: int, fails: Callable[[int, int], bool], step: int | None = None) -> int | None:
    """The first of `n` rows that fails, None when none does: `fails(lo, hi)` says whether
    rows ``lo..hi-1`` hold a failing one (given that none before `lo` fails). Checks
    slices of `step` rows (all at once: None), then bisects inside the first that fails."""
    size = max(n if step is None else step, 1)
    for start in range(0, n, size):
        lo, hi = start, min(start + size, n)
        if not fails(lo, hi):
            continue
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fails(lo, mid):
                hi = mid
            else:
                lo = mid
        return lo
    return None


def first_failing_cast(values: pa.Array, to: pa.DataType) -> int | None:
    """Index of the first value of `values` that does not cast to `to` (None: all do);
    casts slices (bisection inside the first slice that fails), not one value at a time."""

    def fails(lo: int, hi: int) -> bool:
        try:
            values.slice(lo, hi - lo).cast(to)
        except PARSE_ERRORS:
            return True
        return False

    return first_failing(len(values), fails, 1 << 16)


def read_delimited(
    label: str,
    buf: ByteArray,
    records: Lines,
    names: list[str],
    types: Mapping[str, pa.DataType],
    delimiter: str,
    quoted: bool = False,
    fields: Mapping[str, str] | None = None,
) -> pa.Table:
    """Parse the records of `buf` (every field count already checked; blank lines between
    them empty) into the columns of `types` (a subset of `names`). A value that is not of
    its type is a `TraceError` naming the line and the field (``fields[name]`` or name)."""
    include = [n for n in names if n in types]

    def parse(lo: int, hi: int, typed: Mapping[str, pa.DataType]) -> pa.Table:
        chunk = buf[int(records.starts[lo]) : int(records.stops[hi - 1])]
        return pacsv.read_csv(
            pa.BufferReader(pa.py_buffer(chunk)),
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 24),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter,
                quote_char='"' if quoted else False,
                newlines_in_values=quoted,
                ignore_empty_lines=True,
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=typed,
                include_columns=include,
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )

    def fails(lo: int, hi: int, typed: Mapping[str, pa.DataType] = types) -> bool:
        try:
            parse(lo, hi, typed)
        except PARSE_ERRORS:
            return True
        return False

    n = len(records)
    try:
        table = parse(0, n, types)
    except PARSE_ERRORS as e:
        lo = first_failing(n, fails) or 0
        text = records.text(buf, lo)
        split = next(csv.reader([text], delimiter=delimiter)) if quoted else None
        values = split if split is not None else text.split(delimiter)
        as_text = {name: pa.string() for name in include}
        for name in include:
            if fails(lo, lo + 1, {**as_text, name: types[name]}):
                k = names.index(name)
                value = values[k] if k < len(values) else ""
                raise TraceError(
                    label,
                    f"expected {describe_type(types[name])}, found {value!r}",
                    int(records.numbers[lo]),
                    (fields or {}).get(name, name),
                ) from None
        raise TraceError(label, f"cannot be parsed: {e}", int(records.numbers[lo])) from None
    if table.num_rows != n:
        raise TraceError(
            label,
            f"{table.num_rows} records parsed where {n} lines have them: a line break (\\r) "
            "inside a line?",
        )
    return table


def check_values(
    label: Path | str,
    values: npt.NDArray[np.generic],
    ok: BoolArray,
    rows: IntArray | int,
    field: str,
    expected: str,
    problem: str = "",
) -> None:
    """`TraceError` at the first row where `ok` is False: ``[<problem>: ]expected
    <expected>, found <value>``. `rows`: each value's row, or the first value's when the
    rows follow each other."""
    bad = np.flatnonzero(~ok)
    if bad.size:
        i = int(bad[0])
        v = values[i]
        shown = (
            f"{v:g}"
            if isinstance(v, float | np.floating)
            else repr(v.item() if hasattr(v, "item") else v)
        )
        row = int(rows) + i if isinstance(rows, int | np.integer) else int(rows[i])
        lead = f"{problem}: " if problem else ""
        raise TraceError(label, f"{lead}expected {expected}, found {shown}", row, field)
