"""The instance table of Alibaba's batch traces (v2018 ``batch_instance``, gpu-v2020
``pai_instance_table``): one job row per instance run, read and checked, the runs that did
not finish dropped (``status`` other than ``Terminated``: "status X", the first rule of
both readers) and the others joined to their task (and job) rows, in file order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from clusteremu.cluster.traces.csv_columns import (
    as_mask,
    given,
    nan_filled,
    numbers,
    read_headerless,
    strings,
)
from clusteremu.cluster.traces.rows import Rules, count_by_value, join_rows
from clusteremu.cluster.traces.table import ImportReport
from clusteremu.cluster.traces.text_files import BoolArray, FloatArray, IntArray

#: The columns an instance's task is found by.
TASK_KEYS = ("job_name", "task_name")


@dataclass(frozen=True)
class Instances:
    """An instance table (`table`, every row: its `lines`, `start` and `end` times, NaN
    where unknown) and its finished rows joined to the lookups (`joined`; `index`: each
    joined row's row in `table`)."""

    table: pa.Table
    file: str
    lines: IntArray
    start: FloatArray
    end: FloatArray
    joined: pa.Table
    index: IntArray

    def rules(self, report: ImportReport) -> Rules:
        """The rules over the joined rows."""
        return Rules(report, self.lines[self.index], self.file)

    def matched(self, column: str) -> BoolArray:
        """Where a lookup had a row for the joined row (its `column`, never null there, is
        given)."""
        return given(self.joined, column)

    def numbers(self, *columns: str) -> list[FloatArray]:
        """Numeric columns of the joined rows, NaN where null."""
        return [nan_filled(self.joined, c) for c in columns]


def read_instances(
    path: Path,
    columns: Sequence[str],
    types: Mapping[str, pa.DataType],
    names: Sequence[str],
    unknown_times: Sequence[float],
    report: ImportReport,
    *lookups: tuple[pa.Table, Sequence[str]],
) -> Instances:
    """Read the instance file `path` (`columns`, the `types` read; `names`: the columns
    that must not be empty; `unknown_times`: the markers of an unknown start or end time),
    drop the unfinished instances into `report` and join the others to `lookups` (a
    table and its keys each; the first on `TASK_KEYS`)."""
    table, first = read_headerless(path, columns, types, names)
    report.read(table.num_rows)
    start = numbers(table, "start_time", path, first, unknown=unknown_times)
    end = numbers(table, "end_time", path, first, unknown=unknown_times)
    lines = np.arange(table.num_rows, dtype=np.int64) + first
    file = str(path)
    status = strings(table, "status")
    done = as_mask(pc.equal(status, "Terminated"))
    count_by_value(report.drop, status, ~done, lines, "status {}", file)
    joined, index = join_rows(table, np.flatnonzero(done), TASK_KEYS, *lookups)
    return Instances(table, file, lines, start, end, joined, index)
