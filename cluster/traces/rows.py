"""The readers' bookkeeping of rows: their rules' drops and corrections counted into the
`ImportReport` (`Rules`: a dropped row is counted under the first rule that drops it, a
correction only on rows kept), counts by value (`count_by_value`), trace ids made unique
(`unique_ids`), one row per key (`dedupe`) and a left join that keeps file order
(`join_rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clusteremu.cluster.traces.table import ImportReport
from clusteremu.cluster.traces.text_files import BoolArray, IntArray

#: `ImportReport.drop` or `ImportReport.correct`: (reason, rows, file).
Count = Callable[[str, Any, str], None]


class Rules:
    """A reader's rules over its rows (`rows`: each row's line, in `files[file_of[k]]`;
    one file: `file_of` None): `drop` counts the rows of a mask not dropped before and
    drops them, `correct` counts the rows of a mask still kept; `kept` is what is left."""

    def __init__(
        self,
        report: ImportReport,
        rows: IntArray,
        files: str | list[str],
        file_of: IntArray | None = None,
    ) -> None:
        self.report = report
        self.rows = rows
        self.files = [files] if isinstance(files, str) else files
        self.file_of = file_of
        self.kept = np.ones(rows.size, dtype=np.bool_)

    def drop(self, mask: BoolArray, reason: str) -> None:
        new = mask & self.kept
        self._count(self.report.drop, new, reason)
        self.kept[new] = False

    def correct(self, mask: BoolArray, reason: str) -> None:
        self._count(self.report.correct, self.kept & mask, reason)

    def drop_by_value(self, values: pa.Array, mask: BoolArray, template: str) -> None:
        """`drop`, one reason per value (`count_by_value`)."""
        new = mask & self.kept
        count_by_value(self.report.drop, values, new, self.rows, template, self.files[0])
        self.kept[new] = False

    def correct_by_value(self, values: pa.Array, mask: BoolArray, template: str) -> None:
        """`correct`, one reason per value (`count_by_value`)."""
        count = self.report.correct
        count_by_value(count, values, self.kept & mask, self.rows, template, self.files[0])

    def _count(self, count: Count, mask: BoolArray, reason: str) -> None:
        if self.file_of is None:
            count(reason, self.rows[mask], self.files[0])
            return
        sel = np.flatnonzero(mask)
        files = self.file_of[sel]
        for f in np.unique(files).tolist():
            count(reason, self.rows[sel[files == f]], self.files[f])


def count_by_value(
    count: Count,
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
    tagged = pc.binary_join_element_wise(ids, pa.array(lines).cast(pa.string()), "#")
    return pc.if_else(pa.array(dup), tagged, ids)


def dedupe(
    table: pa.Table, keys: Sequence[str], report: ImportReport, file: str, keep: str = "first"
) -> pa.Table:
    """`table` with one row per value of `keys`: the first (keep="first") or the last
    ("last") in file order, in file order; how many were left out goes to the report's
    notes (``N <file> row(s) repeat a <keys>: the first used``)."""
    how = "min" if keep == "first" else "max"
    t = table.append_column("__i", pa.array(np.arange(table.num_rows, dtype=np.int64)))
    g = t.group_by(list(keys), use_threads=False).aggregate([("__i", how)])
    if g.num_rows == table.num_rows:
        return table
    index = np.sort(np.asarray(g.column(f"__i_{how}").to_numpy(), dtype=np.int64))
    key = keys[0] if len(keys) == 1 else f"({', '.join(keys)})"
    report.notes.append(
        f"{table.num_rows - g.num_rows} {file} row(s) repeat a {key}: the {keep} used"
    )
    return table.take(pa.array(index))


def join_rows(
    table: pa.Table,
    rows: IntArray,
    keys: Sequence[str],
    *lookups: tuple[pa.Table, Sequence[str]],
) -> tuple[pa.Table, IntArray]:
    """The rows `rows` of `table` (their `keys` columns) left-joined to each lookup table
    on its keys in turn, back in the order of `rows`; and each joined row's index in
    `table`."""
    take = pa.array(rows)
    joined = pa.table({**{k: table.column(k).take(take) for k in keys}, "i": rows})
    for right, on in lookups:
        joined = joined.join(right, list(on), join_type="left outer")
    joined = joined.take(pc.sort_indices(joined.column("i")))
    return joined, np.asarray(joined.column("i").to_numpy(), dtype=np.int64)
