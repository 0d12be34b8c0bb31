"""A run's per-job table written as it comes: held in memory while it is small, then
written to Parquet a row group at a time, through a temporary file renamed over the table
at the end (a run killed before leaves no table).

`RowGroups(path)` takes whole tables (`add`: a replication's table) and batches of a
streamed run (`write`: rows of jobs that have left, `clusteremu.cluster.engine.sinks`).
Tables added are held until they hold more than `hold_rows` rows or a batch is written;
a table held whole to the end is written by `clusteremu.cluster.io.write_parquet` (the
same bytes as a run that kept its table); past that the rows held go to the file first,
in order, then each batch as it comes. Without a path, rows past `hold_rows` are dropped
(a run that wants its summary only).
"""

from __future__ import annotations

import contextlib
from contextlib import ExitStack
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from clusteremu.cluster.io import atomic_path, write_parquet

#: Rows held in memory before the table goes to its file (as `sinks.KEEP_ROWS`).
HOLD_ROWS = 1 << 20


class RowGroups:
    """The per-job table bound for `path` (None: rows past `hold_rows` are dropped).

    Use it as a context manager, or call `close` (the table written, renamed over `path`)
    or `abort` (the temporary file removed) once.
    """

    def __init__(self, path: str | Path | None, hold_rows: float = HOLD_ROWS) -> None:
        self.path = None if path is None else Path(path)
        self.hold_rows = hold_rows
        self._held: list[pa.Table] = []
        self._held_rows = 0
        self._files = ExitStack()
        self._writer: pq.ParquetWriter | None = None
        #: The table's schema (the first table or batch given), None before any.
        self.schema: pa.Schema | None = None
        #: Whether rows went past memory (to the file, or dropped without a path).
        self.streamed = False
        #: Rows given so far, and the bytes of the file written (after `close`).
        self.rows = 0
        self.bytes = 0

    def add(self, table: pa.Table) -> None:
        """A whole table (a replication's): held while the rows held stay within
        `hold_rows`, else written (or dropped) with the rows held before it."""
        self._see(table)
        if self.streamed:
            self._put(table)
            return
        self._held.append(table)
        self._held_rows += table.num_rows
        if self._held_rows > self.hold_rows:
            self._start()

    def write(self, table: pa.Table) -> None:
        """A batch of a streamed run: written now (the rows held first)."""
        self._see(table)
        if not self.streamed:
            self._start()
        self._put(table)

    def held(self) -> pa.Table | None:
        """The tables held, concatenated (None once rows went past memory, or none)."""
        if self.streamed or not self._held:
            return None
        return pa.concat_tables(self._held)

    def close(self) -> None:
        """Write the table to `path` (nothing without one): the tables held, whole, or the
        file's last row group and its renaming over `path`."""
        try:
            if self.path is not None and not self.streamed and self._held:
                write_parquet(pa.concat_tables(self._held), self.path)
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            self._files.close()  # the temporary file renamed over `path`
            if self.path is not None and self.path.exists():
                self.bytes = self.path.stat().st_size
        except BaseException as exc:
            self._abort(exc)
            raise
        self._held, self._held_rows = [], 0

    def abort(self) -> None:
        """Remove the temporary file; `path` keeps what it held."""
        self._abort(RuntimeError("the table was abandoned"))

    def __enter__(self) -> RowGroups:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            self.close()
        else:
            self._abort(exc)

    # -- internals ---------------------------------------------------------------------------

    def _see(self, table: pa.Table) -> None:
        if self.schema is None:
            self.schema = table.schema
        self.rows += table.num_rows

    def _start(self) -> None:
        """Rows go past memory from now on: those held go first."""
        self.streamed = True
        held, self._held, self._held_rows = self._held, [], 0
        for table in held:
            self._put(table)

    def _put(self, table: pa.Table) -> None:
        if self.path is None or table.num_rows == 0:
            return  # dropped (a summary-only run), or nothing to write
        if self._writer is None:
            tmp = self._files.enter_context(atomic_path(self.path))
            self._writer = pq.ParquetWriter(tmp, table.schema, compression="zstd")
        self._writer.write_table(table)

    def _abort(self, exc: BaseException) -> None:
        with contextlib.suppress(Exception):
            if self._writer is not None:
                self._writer.close()
        self._writer = None
        self._files.__exit__(type(exc), exc, exc.__traceback__)  # the file removed
        self._held, self._held_rows = [], 0
