"""The engine's state, defined once: typed groups of arrays.

`EngineState` is a NamedTuple of numpy arrays (rows named in `clusteremu.cluster.layout`). It is
plain
data: numba compiles functions over it without reference counting, it copies and pickles,
and it ships to Ray actors. Only `clusteremu.cluster.engine.Engine` and the compiled loop it drives
(`clusteremu.cluster.kernel`) write it; everything else reads a `RunState` (a frozen, read-only
snapshot) or a policy view.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.layout import (
    CF,
    CI,
    FS,
    FX,
    GPU_MILLI,
    IS,
    JF,
    JI,
    MAX_GPUS_PER_NODE,
    NF,
    NI,
    PF,
    PI,
    SCALE_ACTIONS,
)
from clusteremu.cluster.layout import NodeStatus as NS
from clusteremu.cluster.model import NodeType, SimulationSpec
from clusteremu.cluster.speedup import MAX_TABLE_POINTS

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class EngineState(NamedTuple):
    """Every array of one replication. Shapes: J jobs, N node rows, G GPUs per node row."""

    jobs_f: FloatArray  #: (len(JF), J)
    jobs_i: IntArray  #: (len(JI), J)
    nodes_f: FloatArray  #: (len(NF), N)
    nodes_i: IntArray  #: (len(NI), N)
    gpu_free: FloatArray  #: (N, G) free milli-GPU of each GPU (1000 = a whole free GPU)
    pools_f: FloatArray
    pools_i: IntArray
    classes_f: FloatArray
    classes_i: IntArray
    class_tx: FloatArray  #: (classes, MAX_TABLE_POINTS) speed-up table x (cores)
    class_ty: FloatArray  #: speed-up table y
    heap_t: FloatArray  #: event heap: times
    heap_j: IntArray  #: event heap: job (or node) ids
    heap_k: IntArray  #: event heap: kind | attempt << 4
    run_by_type: FloatArray  #: (node types, J) run time on a type, s (-1: size / rate)
    queue: IntArray  #: placement queue (FIFO of job ids)
    members: IntArray  #: scratch: a pool's members
    n_class: IntArray  #: jobs in system per class
    area_class: FloatArray  #: integral of jobs in system per class over the window
    istate: IntArray  #: (len(IS),)
    fstate: FloatArray  #: (len(FS),)
    rng: npt.NDArray[np.uint64]  #: SplitMix64 state of compiled random placers
    placer_params: FloatArray
    alloc_params: FloatArray
    scaler_params: FloatArray
    alloc_out: FloatArray  #: (J,) scratch: a compiled allocator's cores per job
    scale_actions: IntArray  #: (3, A) scratch: a compiled scaler's actions (kind, argument, count)
    decisions: IntArray  #: (3, D) Python placements to apply: job, node, GPU mask (-1: any)
    decision_setup_s: FloatArray  #: (D,) their set-up delays, s
    wait_i: IntArray  #: (Q,) scratch: classes of the waiting jobs (for a Python placer)
    wait_f: FloatArray  #: (3, Q) scratch: their (cpu, GB, GPU) requests
    world_f: (
        FloatArray  #: the world model's float tables (`clusteremu.cluster.world`); (0, 0) if none
    )
    world_i: IntArray  #: its integer tables; (0, 0) if none
    cached: FloatArray  #: (N, I) 1.0 where node row k holds image (or data item) i
    #: (classes, 1 + E) the compiled lift rule per class: column 0 the cap (GB, inf: none),
    #: then the bin edges (GB, ascending, inf-padded); (0, 1) without a usage model.
    lift_edges: FloatArray
    #: (N, 2 * FAULT_DRAWS) each node row's next up times (first half) and down times
    #: (second half), s, drawn from its own streams; (0, 0) without failure models.
    fault_draws: FloatArray = np.zeros((0, 0))
    #: (len(TL), E) the scenario's timeline, sorted by time; (len(TL), 0) without one.
    timeline: FloatArray = np.zeros((8, 0))
    #: (2 L, len(FX)) the index of free capacity over node rows (`clusteremu.cluster.fit_index`) the
    #: compiled first-fit placer searches; (0, 0) without one (a scan of the rows instead).
    fit_index: FloatArray = np.zeros((0, 0))
    #: (ceil(N / 64),) bit k % 64 of word k // 64 set where node row k may fit a request of
    #: `FS.FIT_FLOOR` cores or more (`clusteremu.cluster.fit_index`, "free-node bits"); empty
    #: without them (a scan of the rows instead).
    fit_bits: IntArray = np.zeros(0, dtype=np.int64)


#: Heap entries a job and a node row may need at once: a completion and a patience timer
#: per job; a node-ready and a fault event per node row (`builder.build_state` sizes the
#: heap so; stale entries are purged when it is full: `kernel.purge_heap`).
HEAP_PER_JOB = 2
HEAP_PER_NODE = 2
#: A value per unit of growth that depends on the run: the node rows' GPUs (at least 1).
GPUS = -1


@dataclass(frozen=True)
class ArraySpec:
    """How one `EngineState` array is made and grows.

    `dtype` and `empty` (the shape with no rows: what `state_from` holds where it was given
    none); `grows`: what its size follows along `axis` (``job``, ``node``, ``heap``,
    ``queue``, ``class``, ``pool``, or ``fixed``: sized once from the scenario); `fill`:
    the value of rows added by growth; `per_unit`: the values it holds per unit of growth
    in every run (`layout_bytes`; 0 for rows only some runs have, `GPUS` for one per GPU).
    """

    dtype: Any
    empty: tuple[int, ...]
    grows: str
    axis: int = -1
    fill: float = 0.0
    per_unit: int = 0
    #: Where it holds job numbers (rows of the job arrays), which compaction renumbers
    #: (`clusteremu.cluster.engine.compaction`): "" none, "scratch" only during a call of
    #: the loop (nothing to renumber between calls), else the entries that do.
    job_ids: str = ""


_F, _I = np.float64, np.int64

#: Every array of `EngineState`, declared once (tests/cluster/test_state_table.py checks
#: the table against the NamedTuple): the empty state (`state_from`), the byte estimate
#: (`layout_bytes`), the engine's growth (`clusteremu.cluster.engine.store`) and a merged
#: Ray run (`clusteremu.actors.results`, through `state_from`) derive from it.
ARRAYS: dict[str, ArraySpec] = {
    "jobs_f": ArraySpec(_F, (0, 0), "job", per_unit=len(JF)),
    "jobs_i": ArraySpec(_I, (0, 0), "job", per_unit=len(JI), job_ids="rows NEXT, PREV"),
    "nodes_f": ArraySpec(_F, (0, 0), "node", per_unit=len(NF)),
    "nodes_i": ArraySpec(_I, (0, 0), "node", per_unit=len(NI), job_ids="row JOB_HEAD"),
    "gpu_free": ArraySpec(_F, (0, 0), "node", axis=0, per_unit=GPUS),
    "pools_f": ArraySpec(_F, (0, 0), "pool", per_unit=len(PF)),
    "pools_i": ArraySpec(_I, (0, 0), "pool", per_unit=len(PI), job_ids="rows HEAD, TAIL, NEXT_J"),
    "classes_f": ArraySpec(_F, (0, 0), "class", per_unit=len(CF)),
    "classes_i": ArraySpec(_I, (0, 0), "class", per_unit=len(CI)),
    "class_tx": ArraySpec(_F, (0, 0), "class", axis=0, per_unit=MAX_TABLE_POINTS),
    "class_ty": ArraySpec(_F, (0, 0), "class", axis=0, per_unit=MAX_TABLE_POINTS),
    "heap_t": ArraySpec(_F, (0,), "heap", per_unit=1),
    "heap_j": ArraySpec(_I, (0,), "heap", per_unit=1, job_ids="ids of job kinds"),
    "heap_k": ArraySpec(_I, (0,), "heap", per_unit=1),
    # one row per node type, only with per-type run times
    "run_by_type": ArraySpec(_F, (0, 0), "job", fill=-1.0),
    "queue": ArraySpec(_I, (0,), "queue", per_unit=1, job_ids="live entries"),
    "members": ArraySpec(_I, (0,), "queue", per_unit=1, job_ids="scratch"),
    "n_class": ArraySpec(_I, (0,), "class", per_unit=1),
    "area_class": ArraySpec(_F, (0,), "class", per_unit=1),
    "istate": ArraySpec(_I, (0,), "fixed", job_ids="NEXT_ARRIVAL, OOM_JOB"),
    "fstate": ArraySpec(_F, (0,), "fixed"),
    "rng": ArraySpec(np.uint64, (1,), "fixed"),
    "placer_params": ArraySpec(_F, (0,), "fixed"),
    "alloc_params": ArraySpec(_F, (0,), "fixed"),
    "scaler_params": ArraySpec(_F, (0,), "fixed"),
    "alloc_out": ArraySpec(_F, (0,), "queue", per_unit=1),
    "scale_actions": ArraySpec(_I, (3, 0), "fixed"),
    "decisions": ArraySpec(_I, (3, 0), "queue", per_unit=3, job_ids="scratch"),
    "decision_setup_s": ArraySpec(_F, (0,), "queue", per_unit=1),
    "wait_i": ArraySpec(_I, (0,), "queue", per_unit=1),
    "wait_f": ArraySpec(_F, (3, 0), "queue", per_unit=3),
    "world_f": ArraySpec(_F, (0, 0), "fixed"),
    "world_i": ArraySpec(_I, (0, 0), "fixed"),
    # one column without a world model, one per image or data item with one
    "cached": ArraySpec(_F, (0, 0), "node", axis=0, per_unit=1),
    "lift_edges": ArraySpec(_F, (0, 1), "class", axis=0),
    # only with failure models
    "fault_draws": ArraySpec(_F, (0, 0), "node", axis=0),
    "timeline": ArraySpec(_F, (8, 0), "fixed"),
    # rebuilt, not grown, when node rows are added (`builder.new_fit_index`)
    "fit_index": ArraySpec(_F, (0, 0), "fixed"),
    # rebuilt, not grown, when node rows are added (`builder.new_fit_bits`)
    "fit_bits": ArraySpec(_I, (0,), "fixed"),
}


def arrays_growing_with(unit: str) -> tuple[str, ...]:
    """The names of the arrays whose size follows `unit` (``job``, ``node``, ``heap``,
    ``queue``, ...), in `EngineState`'s order."""
    return tuple(name for name, spec in ARRAYS.items() if spec.grows == unit)


def state_from(**arrays: npt.NDArray[Any]) -> EngineState:
    """An `EngineState` from the arrays given by name, every other one empty (`ARRAYS`):
    how anything but the engine (a merged Ray run, a read-back) builds a state. An unknown
    name, or an array of another dtype or number of dimensions, is a ValueError."""
    unknown = sorted(set(arrays) - set(EngineState._fields))
    if unknown:
        raise ValueError(f"state_from: unknown state arrays {unknown}")
    out = {}
    for name in EngineState._fields:
        dtype, shape = ARRAYS[name].dtype, ARRAYS[name].empty
        array = arrays.get(name)
        if array is None:
            out[name] = np.zeros(shape, dtype=dtype)
            continue
        if array.dtype != dtype or array.ndim != len(shape):
            raise ValueError(
                f"state_from: {name} is {array.dtype}[{array.ndim}-d], expected "
                f"{np.dtype(dtype)}[{len(shape)}-d]"
            )
        out[name] = array
    return EngineState(**out)


def gpu_count(t: NodeType) -> int:
    """Whole GPUs of a node type; refuses fractions and more than a node row can hold."""
    n = float(t.gpu)
    if n != math.floor(n) or n < 0:
        raise ValueError(
            f"node type {t.name!r}: gpu must be a whole number of GPUs (each holds "
            f"{GPU_MILLI} milli-GPU that pods may share), got {t.gpu}"
        )
    if n > MAX_GPUS_PER_NODE:
        raise ValueError(f"node type {t.name!r}: at most {MAX_GPUS_PER_NODE} GPUs per node")
    return int(n)


def check_gpu_request(where: str, gpu: float) -> None:
    """A request is a share of one GPU (0 < gpu < 1) or a whole number of GPUs."""
    if gpu > 1.0 and gpu != math.floor(gpu):
        raise ValueError(
            f"{where}: a GPU request above 1 must be a whole number of GPUs, got {gpu} "
            "(below 1 it is a share of one GPU, in steps of 0.001)"
        )


def empty_nodes(rows: int, gpus: int) -> tuple[FloatArray, IntArray, FloatArray]:
    """Unused node rows (released-at +inf, status UNUSED) and their GPUs."""
    nodes_f = np.zeros((len(NF), rows))
    nodes_f[NF.RELEASED_AT] = math.inf
    nodes_i = np.zeros((len(NI), rows), dtype=np.int64)
    nodes_i[NI.NODE_TYPE] = -1
    nodes_i[NI.JOB_HEAD] = -1
    return nodes_f, nodes_i, np.zeros((rows, max(gpus, 1)))


def fill_node(
    nodes_f: FloatArray,
    nodes_i: IntArray,
    gpu_free: FloatArray,
    k: int | IntArray,
    t: NodeType,
    type_index: int,
    now: float,
    status: int,
) -> None:
    """Write node type `t` into row k (or into each row of an index array k: one numpy
    operation per field), rented at `now` (ready now if `status` is UP)."""
    nodes_f[NF.CAP_CPU, k] = nodes_f[NF.FREE_CPU, k] = t.cpu
    nodes_f[NF.CAP_MEM, k] = nodes_f[NF.FREE_MEM, k] = t.memory_gb
    nodes_f[NF.CAP_GPU, k] = nodes_f[NF.FREE_GPU, k] = t.gpu
    nodes_f[NF.SPEED, k] = t.speed
    nodes_f[NF.PRICE_PER_S, k] = t.price_per_hour / 3600.0
    nodes_f[NF.CAP_SLOTS, k] = nodes_f[NF.FREE_SLOTS, k] = t.max_jobs
    nodes_f[NF.STARTUP_COST, k] = t.startup_cost
    nodes_f[NF.RENTED_AT, k] = now
    nodes_f[NF.READY_AT, k] = now if status == NS.UP else now + t.startup_delay_s
    nodes_f[NF.RELEASED_AT, k] = math.inf
    nodes_f[NF.RUNNING_JOBS, k] = 0.0
    nodes_f[NF.DOWN_SINCE, k] = -1.0
    nodes_f[NF.DOWN_S, k] = 0.0
    nodes_i[NI.NODE_TYPE, k] = type_index
    nodes_i[NI.STATUS, k] = status
    nodes_i[NI.EPOCH, k] = 0
    nodes_i[NI.JOB_HEAD, k] = -1
    nodes_i[NI.FAILS, k] = int(t.failures is not None)
    nodes_i[NI.UP_POS, k] = nodes_i[NI.DOWN_POS, k] = 0
    gpu_free[k, :] = 0.0
    gpu_free[k, : gpu_count(t)] = GPU_MILLI


def static_nodes(spec: SimulationSpec) -> tuple[FloatArray, IntArray, FloatArray, IntArray]:
    """The node rows of the scenario's nodes (up at time 0; at least one row) and each
    one's type index, filled a type at a time (100,000 nodes in milliseconds)."""
    m = len(spec.nodes)
    nodes_f, nodes_i, gpu_free = empty_nodes(max(m, 1), max_gpus(spec))
    index = {t.name: i for i, t in enumerate(spec.node_types)}
    types = np.fromiter((index[name] for name in spec.nodes), dtype=np.int64, count=m)
    for t in np.unique(types).tolist():
        rows = np.flatnonzero(types == t)
        fill_node(nodes_f, nodes_i, gpu_free, rows, spec.node_types[t], t, 0.0, NS.UP)
    return nodes_f, nodes_i, gpu_free, types


def max_gpus(spec: SimulationSpec) -> int:
    return max((gpu_count(t) for t in spec.node_types), default=0)


def class_arrays(
    spec: SimulationSpec,
) -> tuple[FloatArray, IntArray, FloatArray, FloatArray]:
    """(classes_f, classes_i, class_tx, class_ty) of the scenario's job classes."""
    n = len(spec.classes)
    classes_f = np.zeros((len(CF), n))
    classes_i = np.zeros((len(CI), n), dtype=np.int64)
    tx = np.zeros((n, MAX_TABLE_POINTS))
    ty = np.zeros((n, MAX_TABLE_POINTS))
    for c, jc in enumerate(spec.classes):
        classes_f[CF.HOLDING_COST, c] = jc.holding_cost
        params = jc.speedup.kernel_params()
        classes_f[CF.SP_PARAM, c] = params[0]
        classes_f[CF.SP_PARAM2, c] = params[1] if params.size > 1 else 0.0
        classes_f[CF.TIMEOUT_S, c] = jc.timeout_s
        classes_i[CI.SP_KIND, c] = jc.speedup.kernel_code
        classes_i[CI.POOL, c] = spec.pool_index(jc.pool) if jc.pool else -1
        xs, ys = jc.speedup.table_points()
        classes_i[CI.SP_NPTS, c] = xs.size
        tx[c, : xs.size], ty[c, : ys.size] = xs, ys
    return classes_f, classes_i, tx, ty


def pool_arrays(spec: SimulationSpec) -> tuple[FloatArray, IntArray]:
    n = len(spec.pools)
    pools_f = np.zeros((len(PF), n))
    pools_i = np.full((len(PI), n), -1, dtype=np.int64)
    for p, pool in enumerate(spec.pools):
        pools_f[PF.CORES, p] = pool.cores
        pools_f[PF.SPEED, p] = pool.speed
        pools_f[PF.PRICE_PER_S, p] = pool.price_per_hour / 3600.0
    pools_i[PI.COUNT] = 0
    pools_i[PI.NEED_ALLOC] = 0
    return pools_f, pools_i


def grown(array: npt.NDArray[Any], size: int, axis: int = -1, fill: float = 0) -> Any:
    """`array` extended along `axis` to at least `size` (doubling), new entries `fill`."""
    have = array.shape[axis]
    if have >= size:
        return array
    new = max(size, 2 * have)
    shape = list(array.shape)
    shape[axis] = new - have
    return np.concatenate([array, np.full(shape, fill, dtype=array.dtype)], axis=axis)


def widened(array: npt.NDArray[Any], size: int, fill: float = 0) -> Any:
    """`array` with columns added up to exactly `size`, each `fill`."""
    extra = np.full((array.shape[0], size - array.shape[1]), fill, dtype=array.dtype)
    return np.concatenate([array, extra], axis=1)


#: Arrays counted together in `layout_bytes`' breakdown: a decision and its set-up delay; a
#: waiting job's class and request.
_BYTES_GROUP = {"decision_setup_s": "decisions", "wait_i": "wait", "wait_f": "wait"}


def layout_bytes(gpus: int = 0, fit_index_rows: int = 0) -> dict[str, int]:
    """Bytes the engine allocates per job and per node row
    (`clusteremu.cluster.engine.builder.build_state`), from the table of arrays (`ARRAYS`),
    for node rows of up to `gpus` GPUs: a run of J jobs on N node rows holds about
    J x `per_job` + N x `per_node` bytes of state, plus `fit_index` bytes for an index over
    `fit_index_rows` rows (2 L rows of 3 values, 5 with GPUs; L the power of two at or above
    the rows). Without a usage model, a world model, failure models or per-type run times
    (each adds its rows). Pages a run never writes (the Python placers' scratch with a
    compiled placer, the heap beyond the events pending at once, rows no job writes) are
    not resident: the resident size is smaller (`benchmarks/scale.py` measures both)."""
    word = 8

    def values(name: str) -> int:
        n = ARRAYS[name].per_unit
        return max(gpus, 1) if n == GPUS else n

    heap = sum(values(name) for name in arrays_growing_with("heap"))
    per_job: dict[str, int] = {}
    for name in arrays_growing_with("job") + arrays_growing_with("queue"):
        key = _BYTES_GROUP.get(name, name)
        per_job[key] = per_job.get(key, 0) + values(name) * word
    per_job["heap"] = HEAP_PER_JOB * heap * word
    per_node = {name: values(name) * word for name in arrays_growing_with("node")}
    per_node["heap"] = HEAP_PER_NODE * heap * word
    leaves = 1 << max(fit_index_rows - 1, 0).bit_length() if fit_index_rows else 0
    columns = len(FX) if gpus > 0 else int(FX.GPU_SHARE)
    return {
        "per_job": sum(per_job.values()),
        "per_node": sum(per_node.values()),
        "fit_index": 2 * leaves * columns * word,
        "fixed": 3 * SCALE_ACTIONS * word,  # a compiled scaler's actions
        **{f"job_{k}": v for k, v in per_job.items() if v},
        **{f"node_{k}": v for k, v in per_node.items() if v},
    }


@dataclass(frozen=True)
class RunState:
    """One replication's state as metrics and results read it: read-only copies of the
    engine's arrays that never change (`Engine.snapshot`), or read-only views of its live
    arrays, valid until the engine moves on (`Engine.result` builds its table from them at
    once). `now_s` is the simulated time.
    """

    spec: SimulationSpec
    replication: int
    state: EngineState
    now_s: float
    #: Jobs whose work was drawn again after a failure (`restart_work: redraw`): job row ->
    #: its original size, then each later attempt's (the state holds the last one).
    sizes_drawn: Mapping[int, tuple[float, ...]] = field(default_factory=dict)

    @property
    def nodes_used(self) -> int:
        return int(self.state.istate[IS.NODES_USED])

    @property
    def events(self) -> int:
        return int(self.state.istate[IS.EVENTS])


def read_only(state: EngineState) -> EngineState:
    """Read-only views of every array of `state` (no copies)."""
    views: list[Any] = []
    for array in state:
        view = array.view()
        view.flags.writeable = False
        views.append(view)
    return EngineState(*views)


__all__ = [
    "EngineState",
    "RunState",
    "check_gpu_request",
    "class_arrays",
    "empty_nodes",
    "fill_node",
    "gpu_count",
    "grown",
    "layout_bytes",
    "max_gpus",
    "pool_arrays",
    "read_only",
    "static_nodes",
    "FS",
    "IS",
    "JF",
    "JI",
]
