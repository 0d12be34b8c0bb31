"""Reader of the Alibaba GPU cluster trace 2023 (`cluster-trace-gpu-v2023`, "openb", the
trace of the ATC'23 FGD paper): pods as jobs, the node list as nodes.

It is the trace layer's face of `clusteremu.cluster.gpu_trace` (the loader ``clusteremu gpu-frag``
uses): the node list and the pods' requests are read, and checked, by its `load_nodes` and
`load_pods`; this module adds the columns the replay does not use (the pods' times, QoS and
phase) and the rules below. Files (CSV with a header row, recognised by name):

- ``openb_pod_list_*.csv`` (required): name, cpu_milli, memory_mib, num_gpu, gpu_milli,
  and optionally gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time;
- ``openb_node_list_*.csv`` (optional: the nodes; without it the GPU models a ``gpu_spec``
  names are not checked against any node): sn, cpu_milli, memory_mib, gpu, model.

Units: cpu_milli / 1,000 -> cores; memory_mib / 1,024 -> GB; times in s. One job row per
pod. Rules, in this order (a dropped row is counted under the first rule that drops it;
corrections are counted on kept rows only):

1. every pod is kept whatever its ``pod_phase`` (the FGD paper replays every pod): a pod
   Failed, Pending (never scheduled) or of any phase other than Running and Succeeded is
   counted, corrected "pod_phase X: replayed like every pod"; option ``phases`` (a comma
   list, e.g. ``Running,Succeeded``) keeps only those phases, the others dropped
   "pod_phase X";
2. arrival = ``creation_time``; unknown (empty, NaN, -1): ``scheduled_time``, corrected
   "no creation_time: scheduled_time used"; both unknown: dropped, "no creation_time or
   scheduled_time"; no creation_time column (``openb_pod_list_multigpu50.csv``): every
   pod arrives at 0 s in file order (noted, and corrected "no creation_time column:
   arrives at 0 s");
3. run time = ``deletion_time - scheduled_time``; where scheduled_time is unknown or its
   column absent (a pod never scheduled): ``deletion_time - creation_time``, corrected
   "no scheduled_time (never scheduled): run from creation_time" (where the pod has a
   deletion_time); deletion_time unknown or its column absent: NaN, the pod runs until
   the end of the run, corrected "no deletion_time: runs until the end"; a run time
   <= 0 s (deleted when created): 1 s, corrected "deletion_time not after the start: run
   1 s";
4. requests: ``cpu_milli / 1000`` cores, ``memory_mib / 1024`` GB, and milli-GPU
   ``gpu_milli`` on a pod of one GPU (below 1,000 it shares it), ``1000 x num_gpu`` on a
   pod of several, 0 on a CPU-only pod (`clusteremu.cluster.gpu_trace.load_pods` refuses any other
   combination, e.g. gpu_milli above 1,000);
5. class: a pod with a ``gpu_spec`` (GPU models separated by ``|``; repeats removed, the
   models sorted) gets the class named by its models, e.g. ``V100M16|V100M32``, whose
   `ClassSpec` has the node selector ``gpu_model: [V100M16, V100M32]``; the others class
   "pods"; queue = ``qos`` (null where empty); user, priority, node: null; trace_id = the
   pod's name (``#<row>`` added where it repeats, corrected "trace_id repeats: '#<row>'
   added").

Nodes: cpu_milli / 1,000 cores, memory_mib / 1,024 GB, ``gpu`` GPUs, gpu_model = ``model``
(null on a node without GPUs) and the label ``gpu_model: model``.

Bad input is a `TraceError` naming the file, the row (the header is row 1) and the field:
what `clusteremu.cluster.gpu_trace` refuses (not a number, out of range, gpu_milli above 1,000, a
GPU
model in gpu_spec that no node has, a missing column ...), a time that is not a number or
negative (other than -1), too few or too many fields, a compressed file, an empty file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from clusteremu.cluster import gpu_trace
from clusteremu.cluster.traces.csv_columns import (
    F,
    S,
    as_mask,
    locate_error,
    null_if_empty,
    numbers,
    open_csv,
    read_first_line,
    strings,
)
from clusteremu.cluster.traces.inputs import parse_options, pick_files
from clusteremu.cluster.traces.rows import Rules, unique_ids
from clusteremu.cluster.traces.table import (
    MIB_PER_GB,
    ClassSpec,
    ImportReport,
    Trace,
    TraceError,
    job_table,
    node_table,
)

NAME = "alibaba-gpu-2023"
DESCRIPTION = "Alibaba cluster-trace-gpu-v2023 (openb, FGD): pods (one job each) and GPU nodes"
FILES = "openb_pod_list_*.csv (required), openb_node_list_*.csv (optional: nodes)"
OPTIONS: dict[str, str] = {
    "phases": "pod phases to keep, comma-separated (e.g. Running,Succeeded); default all",
}

KINDS = {"pods": "pod_list", "nodes": "node_list"}
#: Class of the pods without a gpu_spec (any GPU model).
ANY = "pods"
#: Phases counted as a plain replay (the others are counted as corrected).
PLAIN_PHASES = ("Running", "Succeeded")
TIME_COLUMNS = ("creation_time", "deletion_time", "scheduled_time")
#: Marker of an unknown time (besides empty and NaN).
UNKNOWN_TIME = (-1.0,)
_WHERE = re.compile(r"^(?:, row (\d+))?(?:, column '([^']*)')?: (.*)$", re.DOTALL)


def _phases(text: str) -> tuple[str, ...] | None:
    if text.strip().lower() == "all":
        return None
    names = tuple(p.strip() for p in text.split(",") if p.strip())
    if not names:
        raise ValueError("expected all or a comma list of pod phases")
    return names


def _from_loader(exc: gpu_trace.TraceError, path: Path) -> TraceError:
    """The loader's error (a message of file, row, column and problem) as the trace layer's."""
    text = str(exc)
    rest = text[len(str(path)) :] if text.startswith(str(path)) else ""
    m = _WHERE.match(rest)
    if m is None:
        return TraceError(path, text)
    row = int(m.group(1)) if m.group(1) else None
    return TraceError(path, m.group(3), row, m.group(2) or "")


def _extra_columns(path: Path) -> tuple[pa.Table, list[str]]:
    """The optional columns of a pod list that the pod list has (times as floats, the
    others as text), and its header."""
    header = read_first_line(path, None).decode("utf-8", "replace").split(",")
    missing = [c for c in gpu_trace.POD_COLUMNS if c not in header]
    if missing:
        raise TraceError(
            path,
            f"missing column(s) {', '.join(missing)}; expected a header row with "
            f"{', '.join(gpu_trace.POD_COLUMNS)} (optional: "
            f"{', '.join(gpu_trace.POD_OPTIONAL_COLUMNS)})",
            1,
            missing[0],
        )
    present = [c for c in gpu_trace.POD_OPTIONAL_COLUMNS if c in header]
    types = {c: (F if c in TIME_COLUMNS else S) for c in present}
    try:
        table = pcsv.read_csv(
            str(path),
            pcsv.ReadOptions(column_names=header, skip_rows=1),
            pcsv.ParseOptions(),
            pcsv.ConvertOptions(column_types=types, include_columns=present or [header[0]]),
        )
    except pa.ArrowInvalid as exc:
        raise locate_error(path, None, header, 1, str(exc)) from None
    except (OSError, pa.ArrowException) as exc:
        raise TraceError(path, f"cannot be read ({exc})") from None
    return table, header


def _spec_models(spec: str) -> list[str]:
    """The GPU models a gpu_spec names (sorted, each once; none: any model)."""
    text = spec.strip()
    if not text or text.lower() == "nan":
        return []
    return sorted({m.strip() for m in text.split("|") if m.strip()})


def read(paths: Sequence[Path], options: Mapping[str, str] | None = None) -> Trace:
    """Read an openb pod list (one job per pod) and optional node list of
    cluster-trace-gpu-v2023 into the common per-job table (s, cores, GB, milli-GPU)."""
    opts = parse_options(NAME, options, {"phases": (None, _phases)})
    files = pick_files(paths, KINDS, ("pods",), FILES)
    report = ImportReport(format=NAME, files=[str(p) for p in files.values()])
    report.units = {
        "arrival_s": "s (creation_time)",
        "run_s": "s (deletion_time - scheduled_time; NaN: no deletion, runs until the end)",
        "request_cpu": "cores (cpu_milli / 1000)",
        "request_memory_gb": "GB (memory_mib / 1024)",
        "request_gpu": "milli-GPU (gpu_milli on one GPU; 1000 x num_gpu on several)",
    }

    nodes: pa.Table | None = None
    models: list[str] | None = None
    if "nodes" in files:
        npath = files["nodes"]
        open_csv(npath, decompress=False)
        try:
            loaded = gpu_trace.load_nodes(npath)
        except gpu_trace.TraceError as exc:
            raise _from_loader(exc, npath) from None
        models = loaded.models
        node_models = [models[m] if m >= 0 else None for m in loaded.model.tolist()]
        nodes = node_table(
            loaded.name,
            loaded.cpu_milli / 1000.0,
            loaded.memory_mib / MIB_PER_GB,
            loaded.gpus,
            gpu_model=node_models,
            labels=[{"gpu_model": m} if m else {} for m in node_models],
        )

    path = files["pods"]
    open_csv(path, decompress=False)
    extra, _ = _extra_columns(path)
    if models is None:  # no node list: the models the pods name
        given = extra.column("gpu_spec") if "gpu_spec" in extra.column_names else pa.array([], S)
        distinct = pc.unique(pc.fill_null(given, "")).to_pylist()
        models = sorted({m for text in distinct for m in _spec_models(text)})
        report.notes.append("no node list: the GPU models in gpu_spec are not checked")
    try:
        pods = gpu_trace.load_pods(path, models)
    except gpu_trace.TraceError as exc:
        raise _from_loader(exc, path) from None
    n = len(pods)
    if extra.num_rows != n:
        raise TraceError(
            path, f"{extra.num_rows} rows read as CSV but {n} pods: a quoted line break?"
        )
    report.read(n)
    lines = np.arange(n, dtype=np.int64) + 2
    file = str(path)

    def column(name: str) -> Any:
        if name not in extra.column_names:
            return None
        return numbers(extra, name, path, 2, unknown=UNKNOWN_TIME)

    def text(name: str) -> pa.Array:
        if name not in extra.column_names:
            return pa.array([""] * n, S)
        return strings(extra, name)

    created, deleted, scheduled = (column(c) for c in TIME_COLUMNS)
    phase = text("pod_phase")
    rules = Rules(report, lines, file)

    wanted = opts["phases"]
    if wanted is not None:
        if "pod_phase" not in extra.column_names:
            raise TraceError(path, "no pod_phase column to select phases by", None, "phases")
        keep = as_mask(pc.is_in(phase, pa.array(wanted, S)))
        rules.drop_by_value(phase, ~keep, "pod_phase {}")

    if created is None:
        report.notes.append("no creation_time column: every pod arrives at 0 s, in file order")
        rules.correct(np.ones(n, dtype=bool), "no creation_time column: arrives at 0 s")
        arrival = np.zeros(n)
    else:
        arrival = created
        if scheduled is not None:
            use = np.isnan(created) & ~np.isnan(scheduled)
            rules.correct(use, "no creation_time: scheduled_time used")
            arrival = np.where(use, scheduled, created)
        rules.drop(np.isnan(arrival), "no creation_time or scheduled_time")

    start = arrival if scheduled is None else np.where(np.isnan(scheduled), arrival, scheduled)
    unscheduled = np.ones(n, dtype=bool) if scheduled is None else np.isnan(scheduled)
    if deleted is None:
        report.notes.append("no deletion_time column: every pod runs until the end")
        deleted = np.full(n, math.nan)
    rules.correct(
        unscheduled & ~np.isnan(deleted),
        "no scheduled_time (never scheduled): run from creation_time",
    )
    rules.correct(np.isnan(deleted), "no deletion_time: runs until the end")
    run = deleted - start
    short = ~np.isnan(run) & (run <= 0)
    rules.correct(short, "deletion_time not after the start: run 1 s")
    run = np.where(short, 1.0, run)
    if "pod_phase" in extra.column_names:
        plain = as_mask(pc.is_in(phase, pa.array(PLAIN_PHASES, S)))
        rules.correct_by_value(phase, ~plain, "pod_phase {}: replayed like every pod")

    # Classes: one per distinct gpu_spec (a loop over the few distinct values, not pods).
    enc = pc.dictionary_encode(pa.array(pods.gpu_spec, S))
    codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    specs: dict[str, list[str]] = {}
    class_of = []
    for gpu_spec in enc.dictionary.to_pylist():
        chosen = _spec_models(gpu_spec)
        name = "|".join(chosen) if chosen else ANY
        specs.setdefault(name, chosen)
        class_of.append(name)
    job_class = pa.array(class_of, S).take(pa.array(codes))

    alive = rules.kept
    keep_rows = np.flatnonzero(alive)
    take = pa.array(keep_rows)
    ids = unique_ids(pa.array(pods.name, S).take(take), lines[keep_rows], report, file, "trace_id")
    qos = text("qos").take(take)
    jobs = job_table(
        ids,
        arrival[alive],
        run[alive],
        pods.cpu_milli[alive] / 1000.0,
        pods.memory_mib[alive] / MIB_PER_GB,
        pods.gpu_request_milli[alive].astype(np.float64),
        job_class=job_class.take(take),
        queue=null_if_empty(qos),
    )
    used = set(jobs.column("class").to_pylist())
    classes = [
        ClassSpec(name, node_selector={"gpu_model": chosen} if chosen else {})
        for name, chosen in sorted(specs.items())
        if name in used
    ]
    return Trace(jobs=jobs, report=report, nodes=nodes, classes=classes)
