"""The workload's trace table (`workload.jobs`, written by `clusteremu import`): its columns
read once into arrays and split into the table classes' arrival processes.

The table is the common per-job table of `cluster.traces.table` (docs/traces.md): the
loader reads `arrival_s`, `run_s`, `request_cpu`, `request_memory_gb`, `request_gpu`
(milli-GPU), `estimate_s` and `class` as columns (no Python object per job) and checks
every value before any work: a bad row is a `ScenarioError` naming the file, the row and
the column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cluster import readback
from cluster import workload as wl
from cluster.traces.table import JOB_SCHEMA
from scenarios import limits, schema
from scenarios.errors import ScenarioError, shorten

FloatArray = npt.NDArray[np.float64]

#: Columns the engine reads (the others, labels and trace ids, stay in the file).
READ_COLUMNS = (
    "arrival_s",
    "run_s",
    "request_cpu",
    "request_memory_gb",
    "request_gpu",
    "estimate_s",
    "class",
)


def table_path(model: schema.ScenarioModel, base_dir: Path) -> Path | None:
    """The trace table's path (relative paths from the scenario's folder), or None."""
    jobs = model.workload.jobs
    if jobs is None:
        return None
    path = Path(jobs.path)
    return path if path.is_absolute() else base_dir / path


def read_table_classes(
    model: schema.ScenarioModel, base_dir: Path, source: str
) -> dict[str, wl.TableArrivals]:
    """Each table class's `TableArrivals` (class name -> its rows), read from the table."""
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
    try:
        table = pq.read_table(path, columns=list(READ_COLUMNS), read_dictionary=["class"])
    except Exception as exc:
        raise ScenarioError(
            source, [(where, f"cannot read {shown} ({type(exc).__name__})")]
        ) from None
    cols = {
        name: np.ascontiguousarray(table.column(name).to_numpy(), dtype=np.float64)
        for name in READ_COLUMNS
        if name != "class"
    }
    _check(cols, shown, source)
    classes_col = table.unify_dictionaries().column("class").combine_chunks()
    if classes_col.null_count:
        raise ScenarioError(source, [(where, f"{shown}: column class has empty rows")])
    if not pa.types.is_dictionary(classes_col.type):
        classes_col = classes_col.dictionary_encode()
    encoded = classes_col
    names = [str(x) for x in encoded.dictionary.to_pylist()]
    codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    declared = {c.name for c in model.workload.classes if c.arrival.kind == "table"}
    unknown = [n for n in names if n not in declared]
    if unknown:
        raise ScenarioError(
            source,
            [
                (
                    "workload.classes",
                    f"{shown} has rows of class {shorten(unknown[0])}, which is not a class "
                    f"of arrival kind table (declared: {shorten(sorted(declared), 200)})",
                )
            ],
        )
    sizes = np.where(np.isnan(cols["run_s"]), np.inf, cols["run_s"])
    gpu = cols["request_gpu"] / 1000.0
    estimate = np.where(np.isnan(cols["estimate_s"]), 0.0, cols["estimate_s"])
    out: dict[str, wl.TableArrivals] = {}
    rows_all = np.arange(table.num_rows, dtype=np.int64)
    by_code = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[by_code], np.arange(len(names) + 1))
    for code, name in enumerate(names):
        rows = rows_all[by_code[bounds[code] : bounds[code + 1]]]
        out[name] = wl.TableArrivals(
            cols["arrival_s"][rows],
            sizes[rows],
            cols["request_cpu"][rows],
            cols["request_memory_gb"][rows],
            gpu[rows],
            estimate[rows],
            rows,
        )
    empty = np.zeros(0)
    for name in declared - set(names):  # a table class without rows: no jobs
        out[name] = wl.TableArrivals(
            empty, empty, empty, empty, empty, empty, np.zeros(0, dtype=np.int64)
        )
    return out


def _check(cols: dict[str, FloatArray], shown: str, source: str) -> None:
    """Every value in its range (rows 1-based: the table's first job is row 1)."""

    def bad(name: str, mask: npt.NDArray[np.bool_], expected: str) -> None:
        rows = np.flatnonzero(mask)
        if rows.size:
            raise ScenarioError(
                source,
                [
                    (
                        "workload.jobs.path",
                        f"{shown}, row {int(rows[0]) + 1}, column {name}: expected {expected}, "
                        f"got {cols[name][rows[0]]!r} ({rows.size} such rows)",
                    )
                ],
            )

    a = cols["arrival_s"]
    bad("arrival_s", ~np.isfinite(a) | (a < 0), "a finite arrival >= 0 s")
    order = np.zeros(a.size, dtype=np.bool_)
    order[1:] = a[1:] < a[:-1]
    bad("arrival_s", order, "arrivals in order (the table is sorted by arrival_s)")
    r = cols["run_s"]
    bad(
        "run_s",
        ~(np.isnan(r) | ((r > 0) & np.isfinite(r))),
        "a run time > 0 s (NaN: until the end)",
    )
    for name in ("request_cpu", "request_memory_gb", "request_gpu"):
        v = cols[name]
        bad(name, ~np.isfinite(v) | (v < 0), "a finite request >= 0")
    g = cols["request_gpu"]
    bad(
        "request_gpu",
        (g > 1000.0) & (np.mod(g, 1000.0) != 0.0),
        "milli-GPU below 1,000 (a share of one GPU) or a multiple of 1,000 (whole GPUs)",
    )
    e = cols["estimate_s"]
    bad("estimate_s", ~(np.isnan(e) | ((e >= 0) & np.isfinite(e))), "an estimate >= 0 s or NaN")
