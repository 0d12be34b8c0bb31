"""A replication's first state, built from its scenario, jobs and policies (pure: nothing
here runs the loop): the per-job arrays (`job_rows`, `job_state`), the compiled functions
the loop calls and their addresses (`compiled_functions`), the index of free capacity
(`new_fit_index`), the provisioner's lift table (`lift_table`) and the whole `EngineState`
(`build_state`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster import fit_index
from clusteremu.cluster.engine.fault_feed import FaultFeed
from clusteremu.cluster.jobs import Jobs, runtime_table
from clusteremu.cluster.layout import FS, IS, JF, JI, SCALE_ACTIONS
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies import compiled_table
from clusteremu.cluster.policies.base import (
    Allocator,
    LiftRule,
    Placer,
    PolicyError,
    Provisioner,
    Scaler,
)
from clusteremu.cluster.state import (
    HEAP_PER_JOB,
    HEAP_PER_NODE,
    EngineState,
    check_gpu_request,
    class_arrays,
    max_gpus,
    pool_arrays,
    state_from,
    static_nodes,
)
from clusteremu.cluster.usage import CPU_RULES, Usage
from clusteremu.cluster.world import build_world, initial_cache

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def job_rows(jobs: Jobs) -> tuple[FloatArray, IntArray]:
    """Per-job state arrays with each job's arrival (s), size and class filled, every
    other row zero (what the engine and a merged Ray result start from)."""
    n = jobs.arrival_s.size
    jobs_f = np.zeros((len(JF), n))
    jobs_i = np.zeros((len(JI), n), dtype=np.int64)
    jobs_f[JF.ARRIVAL] = jobs.arrival_s
    jobs_f[JF.SIZE] = jobs.size
    if jobs.class_index.any():  # one class: the row stays zero pages, never touched
        jobs_i[JI.CLS] = jobs.class_index
    if jobs.estimate_s is not None:
        jobs_f[JF.ESTIMATE] = jobs.estimate_s
    return jobs_f, jobs_i


#: The request rows of `jobs_f`, in the order provisioners give them (cores, GB, GPUs).
REQUEST_ROWS = (JF.REQ_CPU, JF.REQ_MEM, JF.REQ_GPU)


def _checked_requests(
    provisioner: Provisioner, row: JF, values: Any, count: int, per: str
) -> FloatArray:
    """`values` as float64, one finite value >= 0 per `per` ("job" or "class"), else a
    PolicyError naming the provisioner and the row."""
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (count,) or not np.all(np.isfinite(values)) or np.any(values < 0):
        what = "requests" if per == "job" else "class requests"
        raise PolicyError(
            provisioner.name,
            0.0,
            f"{what} must give one finite value >= 0 per {per} for {row.name.lower()} "
            f"({count} {per}s)",
        )
    return values


def _fill_from_classes(
    provisioner: Provisioner,
    jobs_f: FloatArray,
    class_index: IntArray,
    per_class: tuple[FloatArray, FloatArray, FloatArray],
    classes: int,
) -> None:
    """Each job's request rows from its class's (`Provisioner.class_requests`), checked
    per class: a row no class requests stays zero pages, one value for every job is a
    fill, else a gather straight into the row (no per-job temporary)."""
    for row, values in zip(REQUEST_ROWS, per_class, strict=True):
        values = _checked_requests(provisioner, row, values, classes, "class")
        if not np.any(values):
            continue
        if np.all(values == values[0]):
            jobs_f[row].fill(values[0])
        else:
            np.take(values, class_index, out=jobs_f[row])


def job_state(
    spec: SimulationSpec, provisioner: Provisioner, jobs: Jobs
) -> tuple[FloatArray, IntArray]:
    """Fresh per-job state arrays for the given jobs (requests from the provisioner).

    Only the rows the loop reads before writing are filled; the others stay zero pages
    that the operating system maps lazily (a row a run never writes costs no memory).
    """
    n = jobs.arrival_s.size
    jobs_f, jobs_i = job_rows(jobs)
    per_class = provisioner.class_requests(spec, jobs)
    if per_class is not None:
        _fill_from_classes(provisioner, jobs_f, jobs.class_index, per_class, len(spec.classes))
        cpu, mem, gpu = jobs_f[JF.REQ_CPU], jobs_f[JF.REQ_MEM], jobs_f[JF.REQ_GPU]
    else:
        cpu, mem, gpu = provisioner.requests_for(spec, jobs)
        for row, values in zip(REQUEST_ROWS, (cpu, mem, gpu), strict=True):
            values = _checked_requests(provisioner, row, values, n, "job")
            if np.any(values):
                jobs_f[row] = values
    gpu = np.asarray(gpu, dtype=np.float64)
    if jobs.request is not None and np.any(gpu > 1.0):
        bad = gpu[(gpu > 1.0) & (gpu != np.floor(gpu))]
        if bad.size:
            check_gpu_request("a job's GPU request", float(bad[0]))
    if spec.usage is not None or jobs.usage is not None:
        usage = jobs.usage if jobs.usage is not None else Usage.none(n)
        jobs_f[JF.USE_CPU] = usage.cpu
        jobs_f[JF.USE_MEM] = usage.memory_gb
        jobs_f[JF.PEAK_AT] = usage.peak_at
    return jobs_f, jobs_i


def lift_table(rule: LiftRule, n_classes: int) -> FloatArray:
    """(classes, 1 + E): each class's cap (GB, inf: none), then its bin edges (inf-padded)."""
    width = max([len(e) for e in rule.edges] + [0])
    table = np.full((n_classes, 1 + width), math.inf)
    for c in range(n_classes):
        if c < len(rule.cap_gb):
            table[c, 0] = rule.cap_gb[c]
        if c < len(rule.edges) and rule.edges[c]:
            table[c, 1 : 1 + len(rule.edges[c])] = rule.edges[c]
    return table


@dataclass(frozen=True)
class CompiledFunctions:
    """Each extension point's compiled function (None: decided in Python), and `fns`, the
    addresses the loop calls them through (one row per kind; the last row is the Python
    placer's way in, set by the loop). Holding this keeps the functions alive."""

    functions: dict[str, Any]
    fns: IntArray


def compiled_functions(
    spec: SimulationSpec, placer: Placer, allocator: Allocator, scaler: Scaler, force_python: bool
) -> CompiledFunctions:
    """The compiled functions the scenario calls (`force_python`: the Python path of every
    policy that has one)."""
    policies = {"placer": placer, "allocator": allocator, "scaler": scaler}
    functions = {}
    for kind, policy in policies.items():  # a pair's function serves its own point
        function = compiled_table.compiled_of(policy)
        ok = function is not None and getattr(function, "extension_point", None) == kind
        functions[kind] = function if ok else None
    if force_python:
        functions["placer"] = functions["allocator"] = None
        if type(scaler).scale is not Scaler.scale:
            functions["scaler"] = None
    if scaler.static:
        functions["scaler"] = None
    # Compile (or load) only what the scenario calls: no allocator without pools.
    used = {
        "placer": bool(spec.nodes or spec.node_types),
        "allocator": bool(spec.pools),
        "scaler": True,
    }
    addresses = {k: f if used[k] else None for k, f in functions.items()}
    rows = [compiled_table.address_row(kind, addresses[kind]) for kind in functions]
    # The Python placer's way in (kernel.FN_PYTHON_PLACER) is set by the loop.
    return CompiledFunctions(functions, np.array([*rows, (0, 0, 0)], dtype=np.int64))


def new_fit_index(
    spec: SimulationSpec,
    placer: Placer,
    wanted: bool | None,
    nodes_f: FloatArray,
    nodes_i: IntArray,
    gpu_free: FloatArray,
    placer_code: int,
) -> FloatArray:
    """The index of free capacity over these node rows, or an empty one where none is kept
    (`wanted`: True, False, or None for "with a compiled placer that uses it, on
    `fit_index.MIN_ROWS` node rows or more")."""
    want = wanted
    if want is None:
        want = (
            placer_code > 0
            and bool(getattr(placer, "uses_fit_index", False))
            and nodes_f.shape[1] >= fit_index.MIN_ROWS
        )
    if not want:
        return np.zeros((0, 0))
    index = fit_index.new_index(nodes_f.shape[1], gpus=max_gpus(spec) > 0)
    fit_index.build(index, nodes_f, nodes_i, gpu_free)
    return index


def new_fit_bits(
    nodes_f: FloatArray, nodes_i: IntArray, index: FloatArray, floor: float
) -> IntArray:
    """The free-node bits over these node rows for `floor` cores (`fit_index`, "free-node
    bits"), or empty where the engine keeps an index (which answers instead)."""
    if index.shape[0] > 0:
        return np.zeros(0, dtype=np.int64)
    bits = fit_index.new_bits(nodes_f.shape[1])
    if floor < math.inf:
        fit_index.bits_build(bits, nodes_f, nodes_i, floor)
    return bits


def build_state(
    spec: SimulationSpec,
    jobs: Jobs,
    policies: dict[str, Any],
    compiled: CompiledFunctions,
    faults: FaultFeed,
    placer_rng: np.random.Generator,
    fit_index_wanted: bool | None,
) -> tuple[EngineState, LiftRule | None]:
    """A replication's state before its first event, and the provisioner's compiled lift
    rule (`Provisioner.compiled_lift()`, asked once its requests are drawn; None: none).
    `policies`: the point -> object map of
    `clusteremu.cluster.policies.points.build_policies`."""
    placer: Placer = policies["placer"]
    allocator: Allocator = policies["allocator"]
    provisioner: Provisioner = policies["provisioner"]
    scaler: Scaler = policies["scaler"]
    n = jobs.arrival_s.size
    jobs_f, jobs_i = job_state(spec, provisioner, jobs)
    m = len(spec.nodes)
    nodes_f, nodes_i, gpu_free, types = static_nodes(spec)
    pools_f, pools_i = pool_arrays(spec)
    classes_f, classes_i, tx, ty = class_arrays(spec)
    world_f, world_i, items = build_world(spec)
    cached = np.zeros((nodes_f.shape[1], max(items, 1)))
    if items:
        for t in np.unique(types).tolist():
            cached[np.flatnonzero(types == t)] = initial_cache(spec, t, items)
    istate = np.zeros(len(IS), dtype=np.int64)
    fstate = np.zeros(len(FS))
    fstate[FS.FIT_FLOOR] = math.inf  # the free-node bits: valid for no request yet
    istate[IS.NODES_USED] = m
    functions = compiled.functions
    istate[IS.PLACER_CODE] = compiled_table.code_of("placer", functions["placer"])
    istate[IS.ALLOC_CODE] = compiled_table.code_of("allocator", functions["allocator"])
    istate[IS.SCALER_CODE] = (
        -1 if scaler.static else compiled_table.code_of("scaler", functions["scaler"])
    )
    n_classes = len(spec.classes)
    fcfs = istate[IS.PLACER_CODE] != 0 or bool(getattr(placer, "strict_fcfs", False))
    index = new_fit_index(
        spec, placer, fit_index_wanted, nodes_f, nodes_i, gpu_free, int(istate[IS.PLACER_CODE])
    )
    istate[IS.PLACER_FCFS] = int(fcfs)
    ask = bool(getattr(placer, "ask_when_nothing_fits", False))
    istate[IS.PLACER_ASK_ALWAYS] = int(ask)
    istate[IS.PLACE_AFTER_TIES] = int(bool(getattr(placer, "place_after_ties", False)))
    istate[IS.HAS_USAGE] = int(spec.usage is not None or jobs.usage is not None)
    istate[IS.CPU_RULE] = CPU_RULES[spec.usage.cpu_rule if spec.usage else "proportional"]
    istate[IS.RETRY_LIMIT] = int(getattr(provisioner, "retry_limit", 3))
    istate[IS.OOM_JOB] = -1
    rule = provisioner.compiled_lift()
    lift_edges = np.zeros((0, 1))
    if rule is not None:
        istate[IS.LIFT_CODE] = 1
        fstate[FS.LIFT_MULT], fstate[FS.LIFT_ADD_GB] = rule.multiplier, rule.add_gb
        lift_edges = lift_table(rule, n_classes)
    stop = spec.stop
    if stop.time_s is not None:
        fstate[FS.WIN_START] = stop.warmup_s
        fstate[FS.WIN_END] = fstate[FS.HORIZON] = stop.time_s
    else:
        warm = min(stop.warmup_jobs, max(n - 1, 0))
        fstate[FS.WIN_START] = jobs.arrival_s[warm] if n else 0.0
        fstate[FS.WIN_END] = jobs.arrival_s[-1] if n else 0.0
        fstate[FS.HORIZON] = math.inf
    # A completion and a patience timer per job at most, plus node-ready and fault events
    # (stale entries are purged when the heap is full: see `kernel.purge_heap`).
    heap = HEAP_PER_JOB * n + HEAP_PER_NODE * m + 1
    # Out-of-memory kills queue jobs again: head-room, so the loop need not return.
    queue = max(n, 1) + (max(16, n // 16) if istate[IS.HAS_USAGE] else 0)
    state = state_from(
        jobs_f=jobs_f,
        jobs_i=jobs_i,
        nodes_f=nodes_f,
        nodes_i=nodes_i,
        gpu_free=gpu_free,
        pools_f=pools_f,
        pools_i=pools_i,
        classes_f=classes_f,
        classes_i=classes_i,
        class_tx=tx,
        class_ty=ty,
        heap_t=np.zeros(heap),
        heap_j=np.zeros(heap, dtype=np.int64),
        heap_k=np.zeros(heap, dtype=np.int64),
        run_by_type=runtime_table(spec, jobs),
        queue=np.zeros(queue, dtype=np.int64),
        members=np.zeros(max(n, 1), dtype=np.int64),
        n_class=np.zeros(n_classes, dtype=np.int64),
        area_class=np.zeros(n_classes),
        istate=istate,
        fstate=fstate,
        rng=np.array([placer_rng.integers(0, 2**63)], dtype=np.uint64),
        placer_params=np.asarray(placer.kernel_params(), dtype=np.float64),
        alloc_params=np.asarray(allocator.kernel_params(), dtype=np.float64),
        scaler_params=np.asarray(scaler.kernel_params(), dtype=np.float64),
        alloc_out=np.zeros(max(n, 1)),
        scale_actions=np.zeros((3, SCALE_ACTIONS), dtype=np.int64),
        decisions=np.zeros((3, max(n, 1)), dtype=np.int64),
        decision_setup_s=np.zeros(max(n, 1)),
        wait_i=np.zeros(max(n, 1), dtype=np.int64),
        wait_f=np.zeros((3, max(n, 1))),
        world_f=world_f,
        world_i=world_i,
        cached=cached,
        lift_edges=lift_edges,
        fit_index=index,
        fit_bits=new_fit_bits(nodes_f, nodes_i, index, math.inf),
        **faults.initial_arrays(nodes_f, nodes_i, istate),
    )
    return state, rule
