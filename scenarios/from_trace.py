"""The scenario that replays an imported trace as it is (`clusteremu import`, docs/traces.md).

`scenario_for(trace, ...)` returns the `scenario.yaml` mapping written beside the trace's
`jobs.parquet`:

- the cluster: the trace's machines grouped into node types (identical capacity, GPUs,
  pod limit, labels, taints and cordon; the per-node `kubernetes.io/hostname` label is left
  out unless a class selects on it); a trace that gives only its machine's size (SWF's
  `MaxProcs`) one node of that many cores; a trace without machines a cluster sized so
  that no job waits (one node per job running at the trace's peak, each as large as the
  largest request; above `MAX_DEFAULT_NODES` nodes, twice the peak demand in cores);
- one class per value of the table's `class` column (arrival kind `table`, speed-up
  `rigid`: a job holds its request for its logged run time), with the Kubernetes filters
  of its pods;
- `stop.jobs` = every row; the scheduler's placer the format's usual one (`DEFAULT_PLACER`).
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pyarrow as pa

from clusteremu.cluster.traces.table import ClassSpec, Trace

#: The placer an imported scenario starts with (others: `fcfs`).
DEFAULT_PLACER = {
    "swf": "easy-backfill",
    "kubernetes": "kube-default",
    "alibaba-gpu-2023": "kube-default",
    "alibaba-gpu-2020": "kube-default",
}
#: Most nodes of a cluster sized for a trace without machines.
MAX_DEFAULT_NODES = 100_000
#: A label that names one node (it would make every node a type of its own).
HOSTNAME_LABEL = "kubernetes.io/hostname"


def scenario_for(
    trace: Trace, name: str, fmt: str, jobs_file: str = "jobs.parquet"
) -> dict[str, Any]:
    """The scenario mapping that replays `trace` (its table written as `jobs_file`)."""
    jobs = trace.jobs
    if jobs.num_rows == 0:
        raise ValueError("the import kept no job: nothing to replay (see the import report)")
    classes = classes_of(trace)
    node_types, nodes, note = cluster_for(trace, classes)
    scenario: dict[str, Any] = {
        "name": name,
        "description": f"{fmt} trace replayed ({jobs.num_rows:,} jobs; docs/traces.md). {note}",
        "seed": 1,
        "stop": {"jobs": int(jobs.num_rows)},
        "cluster": {"node_types": node_types, "nodes": nodes},
        "workload": {"jobs": {"path": jobs_file}, "classes": [_class_entry(c) for c in classes]},
        "scheduler": {"placer": {"name": DEFAULT_PLACER.get(fmt, "fcfs")}},
    }
    return scenario


def classes_of(trace: Trace) -> list[ClassSpec]:
    """The trace's classes in order of first appearance in the table (its own specs where
    the reader gave them)."""
    column = trace.jobs.column("class").combine_chunks()
    encoded = column.dictionary_encode()
    names = encoded.dictionary.to_pylist()
    codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False))
    first = np.full(len(names), codes.size, dtype=np.int64)
    np.minimum.at(first, codes, np.arange(codes.size))
    given = {c.name: c for c in trace.classes}
    return [given.get(names[i], ClassSpec(names[i])) for i in np.argsort(first, kind="stable")]


def _class_entry(c: ClassSpec) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": c.name,
        "arrival": {"kind": "table"},
        "speedup": {"kind": "rigid"},
    }
    if c.node_selector:
        entry["node_selector"] = {k: list(v) for k, v in c.node_selector.items()}
    if c.node_affinity:
        entry["node_affinity"] = [
            [{k: (list(v) if k == "values" else v) for k, v in e.items()} for e in term]
            for term in c.node_affinity
        ]
    if c.tolerations:
        entry["tolerations"] = [dict(t) for t in c.tolerations]
    return entry


def cluster_for(
    trace: Trace, classes: list[ClassSpec]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """(node types, node groups, a sentence saying where the cluster came from)."""
    if trace.nodes is not None and trace.nodes.num_rows:
        types, groups = _node_types(trace.nodes, classes)
        return types, groups, f"The trace's {trace.nodes.num_rows:,} machines."
    jobs = trace.jobs
    memory = float(np.nansum(jobs.column("request_memory_gb").to_numpy()))
    if trace.machine_cpu is not None:
        mem = trace.machine_memory_gb or max(1.0, math.ceil(memory))
        machine = {"name": "machine", "cpu": float(trace.machine_cpu), "memory_gb": float(mem)}
        return (
            [machine],
            [{"type": "machine", "count": 1}],
            f"One machine of {trace.machine_cpu:g} processors (the trace's size).",
        )
    return _sized_for_peak(jobs)


def _node_types(
    nodes: pa.Table, classes: list[ClassSpec]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    selected = {k for c in classes for k in c.node_selector} | {
        e["key"] for c in classes for term in c.node_affinity for e in term
    }
    types: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    order: list[str] = []
    for row in nodes.to_pylist():
        labels = json.loads(row["labels"])
        if HOSTNAME_LABEL not in selected:
            labels.pop(HOSTNAME_LABEL, None)
        if row["gpu_model"] and "gpu_model" not in labels:
            labels["gpu_model"] = row["gpu_model"]
        taints = json.loads(row["taints"])
        entry: dict[str, Any] = {"cpu": row["cpu"], "memory_gb": row["memory_gb"]}
        if row["gpu"]:
            entry["gpu"] = int(row["gpu"])
        if labels:
            entry["labels"] = {str(k): str(v) for k, v in sorted(labels.items())}
        if row["max_pods"] is not None:
            entry["max_jobs"] = int(row["max_pods"])
        if taints:
            entry["taints"] = [
                {"key": t["key"], "value": t.get("value", "") or "", "effect": t["effect"]}
                for t in taints
            ]
        if row["unschedulable"]:
            entry["unschedulable"] = True
        key = json.dumps(entry, sort_keys=True)
        if key not in types:
            gpu = f"-{entry['gpu']}gpu" if entry.get("gpu") else ""
            model = f"-{labels['gpu_model']}" if gpu and labels.get("gpu_model") else ""
            base = f"{entry['cpu']:g}c-{entry['memory_gb']:g}g{gpu}{model}"
            taken = {t["name"] for t in types.values()}
            type_name, i = base, 1
            while type_name in taken:
                i += 1
                type_name = f"{base}-{i}"
            types[key] = {"name": type_name, **entry}
            order.append(key)
            counts[key] = 0
        counts[key] += 1
    return (
        [types[k] for k in order],
        [{"type": types[k]["name"], "count": counts[k]} for k in order],
    )


def _sized_for_peak(jobs: pa.Table) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """A cluster where no job of `jobs` waits (see the module docstring)."""
    cpu = jobs.column("request_cpu").to_numpy()
    mem = jobs.column("request_memory_gb").to_numpy()
    gpu = jobs.column("request_gpu").to_numpy()
    node_cpu = float(max(1.0, math.ceil(float(cpu.max()))))
    node: dict[str, Any] = {
        "name": "node",
        "cpu": node_cpu,
        "memory_gb": float(max(1.0, math.ceil(float(mem.max())))),
    }
    if gpu.max() > 0:
        node["gpu"] = int(max(1, math.ceil(float(gpu.max()) / 1000.0)))
    peak_jobs, peak_cpu = peak_demand(jobs)
    count = peak_jobs
    how = f"one node per job running at the trace's peak ({peak_jobs:,})"
    if count > MAX_DEFAULT_NODES:
        count = min(MAX_DEFAULT_NODES, int(math.ceil(2.0 * peak_cpu / node_cpu)))
        how = f"twice the peak demand of {peak_cpu:,.0f} cores"
    count = max(count, 1)
    return (
        [node],
        [{"type": "node", "count": count}],
        f"The trace has no machines: {count:,} nodes of the largest request, {how}.",
    )


def peak_demand(jobs: pa.Table) -> tuple[int, float]:
    """(most jobs running at once, most cores requested at once) if every job started at
    its arrival and ran its run time (a job without a run time runs to the end)."""
    arrival = jobs.column("arrival_s").to_numpy()
    run = jobs.column("run_s").to_numpy()
    cpu = jobs.column("request_cpu").to_numpy()
    end = np.where(np.isnan(run), np.inf, arrival + run)
    times = np.concatenate([arrival, end])
    # At one instant, ends before starts (a job ending frees its room for one arriving).
    kind = np.concatenate([np.ones(arrival.size), np.zeros(end.size)])
    order = np.lexsort((kind, times))
    step = np.concatenate([np.ones(arrival.size), -np.ones(end.size)])[order]
    cores = np.concatenate([cpu, -cpu])[order]
    return int(np.cumsum(step).max(initial=0)), float(np.cumsum(cores).max(initial=0.0))


def cluster_cores(node_types: list[dict[str, Any]], groups: list[dict[str, Any]]) -> float:
    """The cores of a scenario's cluster (its node types and node groups), cores."""
    cpu = {t["name"]: float(t["cpu"]) for t in node_types}
    return sum(cpu[g["type"]] * g["count"] for g in groups)
