"""Reading back files that clusteremu (or a user) wrote: the checks every reader shares.

A file read back (a Pennyworth tree, a sizing model, an RL model, a trace, a Parquet
chunk) is input like a scenario: it may be a FIFO or a device, huge, nested deep enough to
overflow a parser's stack, damaged, or written by hand. Every reader goes through these
helpers, which refuse, before parsing and with a message naming the file:

- anything but a regular file (a FIFO or a device is refused from `stat`, never opened, so
  the check cannot wait for a writer);
- a file larger than the reader's cap (bytes);
- JSON nested deeper than `MAX_JSON_DEPTH`, or holding `NaN`/`Infinity` (not JSON);
- a zip archive with a member whose CRC does not match, or members larger than the cap;
- a Parquet file that pyarrow cannot read.

Each raises `ReadBackError` (a `ValueError`): "<file>: <field>: <what was expected>".
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

#: The deepest JSON nesting a file read back may have (the files clusteremu writes use < 10).
MAX_JSON_DEPTH = 64
#: Default cap (bytes) on a JSON file read back.
MAX_JSON_BYTES = 64 * 2**20
#: The most members a zip archive read back may have.
MAX_ZIP_MEMBERS = 64

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


class ReadBackError(ValueError):
    """A file read back is not what the reader expects: names the file, field and why."""

    def __init__(self, path: str | Path, problem: str, field: str = "", kind: str = "") -> None:
        self.path = str(path)
        self.field = field
        self.problem = problem
        #: "read" (not a readable regular file, not UTF-8), "json" (not valid JSON), or ""
        self.kind = kind
        super().__init__(f"{path}: {field + ': ' if field else ''}{problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.problem, self.field, self.kind))


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def regular_file_size(path: str | Path, what: str) -> int:
    """The size (bytes) of `path` if it is a regular file (symbolic links followed).

    `stat` never opens the file, so a FIFO is refused without waiting for a writer.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ReadBackError(
            path, f"cannot be read (no such file); expected {what}", kind="read"
        ) from None
    except OSError as exc:
        raise ReadBackError(
            path, f"cannot be read ({exc.strerror}); expected {what}", kind="read"
        ) from None
    if not stat.S_ISREG(st.st_mode):
        raise ReadBackError(
            path, f"is {_kind(st.st_mode)}; expected {what} (a regular file)", kind="read"
        )
    return st.st_size


def _size_problem(size: int, limit: int, what: str) -> str:
    cap = f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit:,} bytes"
    return f"{size:,} bytes: larger than {cap}; expected {what}"


def check_size(path: str | Path, limit: int, what: str) -> int:
    """The size of regular file `path` (bytes), refused when over `limit`."""
    size = regular_file_size(path, what)
    if size > limit:
        raise ReadBackError(path, _size_problem(size, limit, what))
    return size


def read_capped(path: str | Path, limit: int, what: str) -> bytes:
    """The bytes of regular file `path`, refused when larger than `limit` bytes."""
    check_size(path, limit, what)
    try:  # O_NONBLOCK: should the path become a FIFO after the check, do not wait on it
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise ReadBackError(path, f"cannot be read ({exc.strerror}); expected {what}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ReadBackError(path, f"is {_kind(st.st_mode)}; expected {what} (a regular file)")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(limit + 1)
    except OSError as exc:
        raise ReadBackError(path, f"cannot be read ({exc.strerror}); expected {what}") from None
    finally:
        os.close(fd)
    if len(raw) > limit:
        raise ReadBackError(path, _size_problem(len(raw), limit, what))
    return raw


def json_depth(raw: bytes) -> int:
    """The nesting depth of JSON text `raw` (brackets outside strings), without parsing."""
    bare = np.frombuffer(_STRING.sub(b'""', raw), dtype=np.uint8)
    step = np.zeros(bare.size, dtype=np.int64)
    step[(bare == ord("[")) | (bare == ord("{"))] = 1
    step[(bare == ord("]")) | (bare == ord("}"))] = -1
    return int(np.cumsum(step).max(initial=0))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def load_json(
    path: str | Path, what: str, limit: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """The JSON document in `path`, after the regular-file, size and nesting checks.

    `NaN`, `Infinity` and `-Infinity` (which Python's json accepts) are refused.
    """
    raw = read_capped(path, limit, what)
    depth = json_depth(raw)
    if depth > max_depth:
        raise ReadBackError(
            path, f"nested {depth} levels deep; expected {what} (at most {max_depth})"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ReadBackError(path, f"not UTF-8 text; expected {what}", kind="read") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:  # a guard: the depth check comes first
        raise ReadBackError(path, f"nested too deep; expected {what}") from None
    except ValueError as exc:  # JSONDecodeError, and the constants above
        reason = str(exc)[:120]
        raise ReadBackError(
            path, f"not valid JSON (truncated?): {reason}; expected {what}", kind="json"
        ) from None


def number_problem(
    value: Any, lo: float = -math.inf, hi: float = math.inf, *, integer: bool = False
) -> str | None:
    """Why `value` is not a (whole) number in [lo, hi], or None when it is.

    Strict: a bool or a string is not a number, and neither is NaN or an infinity.
    """
    kind = "a whole number" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"expected {kind}, got {type(value).__name__} {str(value)[:40]!r}"
    if not math.isfinite(value):
        return f"expected a finite number, got {value!r}"
    if integer and value != int(value):
        return f"expected a whole number, got {value!r}"
    if not lo <= value <= hi:
        return f"expected {kind} in [{lo:g}, {hi:g}], got {value:g}"
    return None


def check_zip(path: str | Path, what: str, limit: int, members: tuple[str, ...] = ()) -> None:
    """Refuse a zip archive that is not a regular file under `limit` bytes, lacks one of
    `members`, has more than MAX_ZIP_MEMBERS members, members that expand to more than
    `limit` bytes in all, or a member whose CRC-32 does not match its data (every member is
    read and checked)."""
    check_size(path, limit, what)
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_ZIP_MEMBERS:
                raise ReadBackError(path, f"{len(infos)} members; expected {what}")
            missing = [m for m in members if m not in {i.filename for i in infos}]
            if missing:
                raise ReadBackError(path, f"no member {', '.join(missing)}; expected {what}")
            total = sum(i.file_size for i in infos)
            if total > limit:
                raise ReadBackError(
                    path, f"members expand to {total:,} bytes, over the {limit:,}-byte limit"
                )
            bad = zf.testzip()
    except zipfile.BadZipFile as exc:
        raise ReadBackError(path, f"not a readable zip archive ({exc}); expected {what}") from None
    except (OSError, EOFError, NotImplementedError, RuntimeError) as exc:
        raise ReadBackError(
            path, f"damaged zip archive ({type(exc).__name__}); expected {what}"
        ) from None
    if bad is not None:
        raise ReadBackError(
            path, "fails its CRC-32 check (the archive is damaged)", f"member {bad}"
        )


def read_parquet(path: str | Path, what: str, limit: int) -> Any:
    """The Arrow table in Parquet file `path` (regular, under `limit` bytes, readable)."""
    import pyarrow.parquet as pq

    check_size(path, limit, what)
    try:
        return pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise ReadBackError(
            path, f"not a readable Parquet file ({type(exc).__name__}); expected {what}"
        ) from None


def parquet_rows(path: str | Path, what: str, limit: int) -> int:
    """The row count in Parquet file `path`'s footer (regular, under `limit` bytes)."""
    import pyarrow.parquet as pq

    check_size(path, limit, what)
    try:
        return int(pq.read_metadata(path).num_rows)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise ReadBackError(
            path, f"not a readable Parquet file ({type(exc).__name__}); expected {what}"
        ) from None
