"""The workload's trace table (`workload.jobs`, written by `clusteremu import`): its columns
read once into arrays and split into the table classes' arrival processes.

The table is the common per-job table of `clusteremu.cluster.traces.table` (docs/traces.md): the
loader reads `arrival_s`, `run_s`, `request_cpu`, `request_memory_gb`, `request_gpu`
(milli-GPU), `estimate_s` and `class` as columns (no Python object per job) and checks
every value before any work: a bad row is a `ScenarioError` naming the file, the row and
the column.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster import readback
from clusteremu.cluster.traces import feed
from clusteremu.cluster.traces.feed import (
    READ_COLUMNS,
    Chunk,
    TableClassStream,
    TableSource,
    batch_columns,
)
from clusteremu.cluster.traces.table import JOB_SCHEMA
from clusteremu.scenarios import limits, schema
from clusteremu.scenarios.errors import ScenarioError, shorten

FloatArray = npt.NDArray[np.float64]


def table_path(model: schema.ScenarioModel, base_dir: Path) -> Path | None:
    """The trace table's path (relative paths from the scenario's folder), or None."""
    jobs = model.workload.jobs
    if jobs is None:
        return None
    path = Path(jobs.path)
    return path if path.is_absolute() else base_dir / path


def read_table_classes(
    model: schema.ScenarioModel, base_dir: Path, source: str
) -> dict[str, TableClassStream]:
    """Each table class's arrival process (class name -> its rows, streamed from the
    table: `clusteremu.cluster.traces.feed`), after a check of every row, a chunk at a time."""
    import pyarrow.parquet as pq

    path = table_path(model, base_dir)
    if path is None:
        return {}
    where = "workload.jobs.path"
    shown = shorten(str(path), 200)
    if not path.exists():
        raise ScenarioError(source, [(where, f"trace table {shown} not found")])
    try:
        file_bytes = readback.regular_file_size(path, "a trace table")
    except readback.ReadBackError as exc:
        raise ScenarioError(source, [(where, f"trace table {shown} {exc.problem}")]) from None
    refusal = limits.count_refusal(
        file_bytes, limits.TRACE_BYTES_FACTOR, f"bytes of trace table {shown}"
    )
    if refusal is not None:
        raise ScenarioError(source, [(where, refusal)])
    try:
        schema_ = pq.read_schema(path)
    except Exception as exc:  # pyarrow raises several types for unreadable files
        raise ScenarioError(
            source,
            [(where, f"cannot read {shown} as a Parquet trace table ({type(exc).__name__})")],
        ) from None
    missing = [c for c in READ_COLUMNS if c not in schema_.names]
    if missing:
        raise ScenarioError(
            source,
            [
                (
                    where,
                    f"{shown} lacks the column(s) {', '.join(missing)} of a trace table "
                    "(written by clusteremu import; docs/traces.md)",
                )
            ],
        )
    for name in READ_COLUMNS:
        want = JOB_SCHEMA.field(name).type
        got = schema_.field(name).type
        if name == "class":
            if not (str(got) == "string" or str(got).startswith("dictionary")):
                raise ScenarioError(source, [(where, f"{shown}: column class must be text")])
        elif got != want:
            raise ScenarioError(
                source, [(where, f"{shown}: column {name} must be {want}, got {got}")]
            )
    declared = [c.name for c in model.workload.classes if c.arrival.kind == "table"]
    stop = model.stop
    window = (stop.warmup_s, stop.time_s) if stop.time_s is not None else (0.0, math.inf)
    rows, class_rows, window_rows = _validate(path, shown, source, set(declared), window)
    table = TableSource(str(path), rows, class_rows, feed.CHUNK_ROWS, window_rows)
    return {name: TableClassStream(table, name) for name in declared}


def _validate(
    path: Path, shown: str, source: str, declared: set[str], window: tuple[float, float]
) -> tuple[int, dict[str, int], dict[str, int]]:
    """Check every row, a chunk at a time: (rows, rows per class, rows per class arriving
    in the window [start, end] s)."""
    import pyarrow.parquet as pq

    where = "workload.jobs.path"
    class_rows: dict[str, int] = {name: 0 for name in declared}
    window_rows: dict[str, int] = {name: 0 for name in declared}
    last = -math.inf
    rows = 0
    try:
        f = pq.ParquetFile(path)
        batches = f.iter_batches(batch_size=feed.CHUNK_ROWS, columns=list(READ_COLUMNS))
        for batch in batches:
            if batch.column("class").null_count:
                raise ScenarioError(source, [(where, f"{shown}: column class has empty rows")])
            chunk = batch_columns(batch, rows)
            _check(batch, chunk, last, shown, source)
            unknown = [n for n in chunk.class_names if n not in declared]
            if unknown:
                raise ScenarioError(
                    source,
                    [
                        (
                            "workload.classes",
                            f"{shown} has rows of class {shorten(unknown[0])}, which is not a "
                            f"class of arrival kind table (declared: "
                            f"{shorten(sorted(declared), 200)})",
                        )
                    ],
                )
            counts = np.bincount(chunk.class_code, minlength=len(chunk.class_names))
            inside = (chunk.arrival_s >= window[0]) & (chunk.arrival_s <= window[1])
            in_window = np.bincount(chunk.class_code[inside], minlength=len(chunk.class_names))
            for code, name in enumerate(chunk.class_names):
                class_rows[name] += int(counts[code])
                window_rows[name] += int(in_window[code])
            if chunk.arrival_s.size:
                last = float(chunk.arrival_s[-1])
            rows += batch.num_rows
    except ScenarioError:
        raise
    except Exception as exc:  # pyarrow raises several types for unreadable files
        raise ScenarioError(
            source, [(where, f"cannot read {shown} ({type(exc).__name__})")]
        ) from None
    return rows, class_rows, window_rows


def _check(batch: Any, chunk: Chunk, last: float, shown: str, source: str) -> None:
    """Every value of one chunk in its range (rows 1-based: the table's first job is row
    1); `last` is the previous chunk's last arrival (s)."""
    lo = chunk.lo

    def column(name: str) -> FloatArray:
        return np.asarray(batch.column(name).to_numpy(zero_copy_only=False), dtype=np.float64)

    def bad(name: str, values: FloatArray, mask: npt.NDArray[np.bool_], expected: str) -> None:
        rows = np.flatnonzero(mask)
        if rows.size:
            raise ScenarioError(
                source,
                [
                    (
                        "workload.jobs.path",
                        f"{shown}, row {lo + int(rows[0]) + 1}, column {name}: expected "
                        f"{expected}, got {values[rows[0]]!r} ({rows.size} such rows in rows "
                        f"{lo + 1}-{lo + values.size})",
                    )
                ],
            )

    a = chunk.arrival_s
    bad("arrival_s", a, ~np.isfinite(a) | (a < 0), "a finite arrival >= 0 s")
    order = np.zeros(a.size, dtype=np.bool_)
    order[1:] = a[1:] < a[:-1]
    if a.size:
        order[0] = a[0] < last
    bad("arrival_s", a, order, "arrivals in order (the table is sorted by arrival_s)")
    r = column("run_s")
    bad(
        "run_s",
        r,
        ~(np.isnan(r) | ((r > 0) & np.isfinite(r))),
        "a run time > 0 s (NaN: until the end)",
    )
    g = column("request_gpu")  # milli-GPU as written (the chunk holds GPUs)
    for name, v in (
        ("request_cpu", chunk.cpu),
        ("request_memory_gb", chunk.memory_gb),
        ("request_gpu", g),
    ):
        bad(name, v, ~np.isfinite(v) | (v < 0), "a finite request >= 0")
    bad(
        "request_gpu",
        g,
        (g > 1000.0) & (np.mod(g, 1000.0) != 0.0),
        "milli-GPU below 1,000 (a share of one GPU) or a multiple of 1,000 (whole GPUs)",
    )
    e = column("estimate_s")
    bad("estimate_s", e, ~(np.isnan(e) | ((e >= 0) & np.isfinite(e))), "an estimate >= 0 s or NaN")
