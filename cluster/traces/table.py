"""The common per-job table every trace reader produces, its nodes table and the import report.

One row per job (`JOB_SCHEMA`), units normalised whatever the trace's own:

- ``trace_id`` (string): the job's identity in the trace (SWF job number, pod name, ...);
- ``arrival_s`` (float64): submit / creation time, s from the trace's first arrival (>= 0);
- ``run_s`` (float64): run time, s (NaN: runs until the end of the run, e.g. a pod that
  was never deleted);
- ``request_cpu`` (float64): cores; ``request_memory_gb`` (float64): GB;
- ``request_gpu`` (float64): milli-GPU (1,000 = one whole GPU; 2,000 two whole GPUs; below
  1,000 a share of one GPU);
- ``estimate_s`` (float64): the user's estimate of the run time (SWF requested time), s;
  NaN where the trace has none;
- ``class`` (string): the scenario class the job belongs to (`scenario.yaml` defines it);
- ``user``, ``queue`` (string, null where unknown), ``priority`` (int64, null where
  unknown): labels;
- ``node`` (string, null where unknown): the node the trace placed the job on.

The nodes table (`NODE_SCHEMA`), where the trace has machines: ``node`` (string), ``cpu``
(cores), ``memory_gb`` (GB), ``gpu`` (whole GPUs), ``gpu_model`` (string, null: none),
``max_pods`` (int64, null: no limit), ``unschedulable`` (bool), ``labels`` and ``taints``
(JSON text: an object of label -> value; a list of ``{key, value, effect}``).

`ImportReport` accounts for every row: rows read, kept, dropped and corrected, a count per
reason and the first rows of each; `TraceError` names the file, the row (1-based, as a text
editor counts lines) and the field of bad input.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

FloatArray = npt.NDArray[np.float64]

#: Columns of `jobs.parquet`, in this order.
JOB_SCHEMA = pa.schema(
    [
        pa.field("trace_id", pa.string(), nullable=False),
        pa.field("arrival_s", pa.float64(), nullable=False),
        pa.field("run_s", pa.float64(), nullable=False),
        pa.field("request_cpu", pa.float64(), nullable=False),
        pa.field("request_memory_gb", pa.float64(), nullable=False),
        pa.field("request_gpu", pa.float64(), nullable=False),
        pa.field("estimate_s", pa.float64(), nullable=False),
        pa.field("class", pa.string(), nullable=False),
        pa.field("user", pa.string()),
        pa.field("queue", pa.string()),
        pa.field("priority", pa.int64()),
        pa.field("node", pa.string()),
    ]
)

#: Columns of `nodes.parquet`, in this order.
NODE_SCHEMA = pa.schema(
    [
        pa.field("node", pa.string(), nullable=False),
        pa.field("cpu", pa.float64(), nullable=False),
        pa.field("memory_gb", pa.float64(), nullable=False),
        pa.field("gpu", pa.int64(), nullable=False),
        pa.field("gpu_model", pa.string()),
        pa.field("max_pods", pa.int64()),
        pa.field("unschedulable", pa.bool_(), nullable=False),
        pa.field("labels", pa.string(), nullable=False),
        pa.field("taints", pa.string(), nullable=False),
    ]
)

#: MiB per GB: memory is normalised to GB as the rest of clusteremu counts it (1 GB = 1,024
#: MiB = 2^30 bytes).
MIB_PER_GB = 1024.0
#: One GPU in milli-GPU.
GPU_MILLI = 1000.0
#: Rows of each reason listed in the report (the rest are counted only).
EXAMPLE_ROWS = 5


class TraceError(ValueError):
    """Bad trace input: names the file, the row (1-based; None: the whole file) and the
    field, and what was expected. The command line prints it and exits with status 2."""

    def __init__(
        self, path: Path | str, problem: str, row: int | None = None, field: str = ""
    ) -> None:
        self.path = str(path)
        self.row = row
        self.field = field
        self.problem = problem
        where = self.path + (f", row {row}" if row is not None else "")
        where += f", field {field!r}" if field else ""
        super().__init__(f"{where}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.problem, self.row, self.field))


@dataclass
class ImportReport:
    """What an import did with every row: read, kept, dropped or corrected (by reason)."""

    format: str
    files: list[str] = field(default_factory=list)
    rows_read: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    corrected: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    #: Units chosen for the common table (field -> unit and the trace's own).
    units: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def read(self, count: int) -> None:
        """`count` more job rows were read from the trace."""
        self.rows_read += int(count)

    def drop(self, reason: str, rows: Any, file: str = "") -> None:
        """Rows dropped for `reason`: a row number, or an array / list of them (1-based)."""
        self._account(self.dropped, reason, rows, file)

    def correct(self, reason: str, rows: Any, file: str = "") -> None:
        """Rows kept with a field corrected by rule (the reason says which and how)."""
        self._account(self.corrected, reason, rows, file)

    def _account(self, counter: Counter[str], reason: str, rows: Any, file: str) -> None:
        rows = np.atleast_1d(np.asarray(rows))
        if rows.dtype == np.bool_:
            raise TypeError("report rows: give row numbers, not a mask")
        if rows.size == 0:
            return
        counter[reason] += int(rows.size)
        kept = self.examples.setdefault(reason, [])
        prefix = f"{Path(file).name}:" if file else ""
        for r in rows[: max(0, EXAMPLE_ROWS - len(kept))].tolist():
            kept.append(f"{prefix}{r}")

    @property
    def rows_dropped(self) -> int:
        return int(sum(self.dropped.values()))

    def to_dict(self, jobs: pa.Table, nodes: pa.Table | None) -> dict[str, Any]:
        """The report as `import-report.json` holds it (jobs / nodes: what was written)."""
        arrival = np.asarray(jobs.column("arrival_s").to_numpy()) if jobs.num_rows else np.zeros(0)
        return {
            "format": self.format,
            "files": list(self.files),
            "rows_read": self.rows_read,
            "rows_kept": jobs.num_rows,
            "rows_dropped": self.rows_dropped,
            "dropped": dict(sorted(self.dropped.items())),
            "corrected": dict(sorted(self.corrected.items())),
            "examples": {k: v for k, v in sorted(self.examples.items())},
            "nodes": 0 if nodes is None else nodes.num_rows,
            "time_span_s": [float(arrival.min()), float(arrival.max())] if arrival.size else None,
            "units": dict(self.units),
            "notes": list(self.notes),
        }


@dataclass
class ClassSpec:
    """What the scenario says of one job class of an imported trace: Kubernetes filters
    (the pods' node selector, required node affinity and tolerations) and a label."""

    name: str
    #: label -> allowed values (every key must match one).
    node_selector: dict[str, list[str]] = field(default_factory=dict)
    #: required node affinity: a list of terms (ORed), each a list of
    #: ``{key, operator, values}`` expressions (ANDed); operator In, NotIn, Exists, DoesNotExist.
    node_affinity: list[list[dict[str, Any]]] = field(default_factory=list)
    #: ``{key, operator, value, effect}`` (operator Equal or Exists; effect may be empty).
    tolerations: list[dict[str, str]] = field(default_factory=list)


@dataclass
class Trace:
    """What a reader returns: the per-job table, the nodes (None: the trace has none), the
    classes the jobs name, the report, and facts of the machine (SWF's `MaxProcs`)."""

    jobs: pa.Table
    report: ImportReport
    nodes: pa.Table | None = None
    classes: list[ClassSpec] = field(default_factory=list)
    #: The whole machine as one node where the trace gives only its size: cores (SWF).
    machine_cpu: float | None = None
    machine_memory_gb: float | None = None
    #: Facts of the trace a reader keeps beside the table (SWF's ``unix_start_time``, s).
    notes: dict[str, Any] = field(default_factory=dict)


def job_table(
    trace_id: Any,
    arrival_s: Any,
    run_s: Any,
    request_cpu: Any,
    request_memory_gb: Any,
    request_gpu: Any,
    estimate_s: Any = None,
    job_class: Any = "trace",
    user: Any = None,
    queue: Any = None,
    priority: Any = None,
    node: Any = None,
) -> pa.Table:
    """The common per-job table from columns (arrays, lists or Arrow arrays), sorted by
    arrival (stable: ties keep the given order), arrivals shifted so the first is 0 s.

    Scalars broadcast (``job_class="trace"``); None gives NaN (estimate) or nulls (labels).
    """
    n = len(arrival_s)

    def floats(x: Any) -> FloatArray:
        if x is None:
            return np.full(n, math.nan)
        a = np.asarray(x, dtype=np.float64)
        return np.full(n, float(a)) if a.ndim == 0 else a

    def strings(x: Any, nullable: bool) -> pa.Array:
        if x is None:
            return pa.nulls(n, pa.string())
        if isinstance(x, str):
            return pa.array([x] * n, pa.string())
        arr = x if isinstance(x, pa.Array | pa.ChunkedArray) else pa.array(x)
        return arr.cast(pa.string())

    arrival = floats(arrival_s)
    order = np.argsort(arrival, kind="stable")
    if n:
        arrival = arrival - arrival[order[0]]
    cols: dict[str, Any] = {
        "trace_id": strings(trace_id, False),
        "arrival_s": arrival,
        "run_s": floats(run_s),
        "request_cpu": floats(request_cpu),
        "request_memory_gb": floats(request_memory_gb),
        "request_gpu": floats(request_gpu),
        "estimate_s": floats(estimate_s),
        "class": strings(job_class, False),
        "user": strings(user, True),
        "queue": strings(queue, True),
        "priority": pa.nulls(n, pa.int64())
        if priority is None
        else pa.array(priority).cast(pa.int64()),
        "node": strings(node, True),
    }
    table = pa.table(cols).cast(JOB_SCHEMA)
    if n and not np.all(order[1:] > order[:-1]):
        table = table.take(pa.array(order))
    return table


def node_table(
    node: Any,
    cpu: Any,
    memory_gb: Any,
    gpu: Any = 0,
    gpu_model: Any = None,
    max_pods: Any = None,
    unschedulable: Any = False,
    labels: list[dict[str, str]] | None = None,
    taints: list[list[dict[str, str]]] | None = None,
) -> pa.Table:
    """The nodes table from columns; labels and taints as Python lists, one per node."""
    n = len(node)

    def column(x: Any, dtype: pa.DataType) -> pa.Array:
        if x is None:
            return pa.nulls(n, dtype)
        a = np.asarray(x) if not isinstance(x, list) else x
        if np.ndim(a) == 0:
            return pa.array([a.item() if hasattr(a, "item") else a] * n).cast(dtype)
        return pa.array(a).cast(dtype)

    return pa.table(
        {
            "node": pa.array(node).cast(pa.string()),
            "cpu": column(cpu, pa.float64()),
            "memory_gb": column(memory_gb, pa.float64()),
            "gpu": column(gpu, pa.int64()),
            "gpu_model": column(gpu_model, pa.string()),
            "max_pods": column(max_pods, pa.int64()),
            "unschedulable": column(unschedulable, pa.bool_()),
            "labels": pa.array(
                [json.dumps(x, sort_keys=True) for x in (labels or [{}] * n)], pa.string()
            ),
            "taints": pa.array(
                [json.dumps(x, sort_keys=True) for x in (taints or [[]] * n)], pa.string()
            ),
        }
    ).cast(NODE_SCHEMA)


def check_jobs(table: pa.Table, source: str = "jobs") -> None:
    """Raise `TraceError` unless `table` is a valid common per-job table (schema, finite
    non-negative arrivals in order, run times > 0 or NaN, requests finite and >= 0)."""
    if table.schema.remove_metadata() != JOB_SCHEMA:
        missing = [f.name for f in JOB_SCHEMA if f.name not in table.column_names]
        raise TraceError(
            source,
            f"expected the columns {', '.join(JOB_SCHEMA.names)} with their types"
            + (f"; missing {', '.join(missing)}" if missing else ""),
        )
    arrival = table.column("arrival_s").to_numpy()
    bad = np.flatnonzero(~np.isfinite(arrival) | (arrival < 0))
    if bad.size:
        raise TraceError(source, "expected a finite arrival >= 0 s", int(bad[0]) + 1, "arrival_s")
    bad = np.flatnonzero(np.diff(arrival) < 0)
    if bad.size:
        raise TraceError(source, "expected arrivals in order", int(bad[0]) + 2, "arrival_s")
    run = table.column("run_s").to_numpy()
    bad = np.flatnonzero(~(np.isnan(run) | ((run > 0) & np.isfinite(run))))
    if bad.size:
        raise TraceError(
            source, "expected a run time > 0 s (NaN: until the end)", int(bad[0]) + 1, "run_s"
        )
    for name in ("request_cpu", "request_memory_gb", "request_gpu"):
        v = table.column(name).to_numpy()
        bad = np.flatnonzero(~np.isfinite(v) | (v < 0))
        if bad.size:
            raise TraceError(source, "expected a finite request >= 0", int(bad[0]) + 1, name)
