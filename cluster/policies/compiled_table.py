"""The one table of compiled policies: decorators, typed read-only views, function pointers.

A compiled policy is a numba function with a fixed signature per extension point,
registered with a decorator and called by the engine's compiled loop through a function
pointer, so the loop is compiled once for every policy (built-in or yours) and your module
compiles only your function:

    @compiled_placer
    def place(job: int, now_s: float, view: PlacerView) -> int: ...      # node, or -1
    @compiled_allocator
    def allocate(members, n, pool_cores, now_s, view: AllocatorView, cores) -> None: ...
    @compiled_scaler
    def scale(now_s: float, view: ScalerView, actions) -> int: ...       # actions written

Views are NamedTuples of read-only arrays (numba refuses to compile a write to one): the
engine's state as the loop holds it at the call, by name and unit. Two fields belong to
the policy and are writable: `params` (its `kernel_params()`, also a workspace) and `rng`
(its seeded SplitMix64 stream: draw with `uniform_index(view.rng, n)`). Decisions are
checked like Python ones: a placement must fit (`fits`), an allocation must give every
member a finite non-negative number of cores and no more than the pool's, scaler actions
go through the engine's `rent` and `release`. A violation stops the run with a
`PolicyError` naming the policy.

A policy class points at its function (`compiled = place`); the engine refuses a function
that is not in this table for the class's extension point. docs/adding_a_policy.md has
worked examples.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from numba import njit, typeof, types
from numba.core import cgutils
from numba.core.registry import CPUDispatcher
from numba.experimental.function_type import _get_jit_address, _get_wrapper_address
from numba.extending import intrinsic

from clusteremu.cluster.fit_index import bits_search, search, search_from
from clusteremu.cluster.jit import inline_function, signals_blocked
from clusteremu.cluster.layout import CF, FS, JF, JI, NF, NI, JobState, NodeStatus
from clusteremu.cluster.policies.compiled import has_room, uniform_index

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

__all__ = [
    "AllocatorView",
    "PlacerView",
    "ScalerView",
    "compiled_allocator",
    "compiled_placer",
    "compiled_scaler",
    "compiled_scorer",
    "ScorerView",
    "fits",
    "first_fit",
    "next_fit",
    "uniform_index",
    "RENT",
    "RELEASE",
    "JobState",
    "NodeStatus",
]


class PlacerView(NamedTuple):
    """What a compiled placer reads (arrays read-only unless said): J job rows, N node rows.

    Job rows are indexed by job id, node rows by node index (rows never handed out, or
    released, are not UP and never fit)."""

    request_cpu: FloatArray  #: (J,) cores
    request_mem: FloatArray  #: (J,) GB
    request_gpu: FloatArray  #: (J,) GPUs (a share of one GPU below 1)
    arrival_s: FloatArray  #: (J,) s
    job_class: IntArray  #: (J,) class index (scenario order)
    free_cpu: FloatArray  #: (N,) cores
    free_mem: FloatArray  #: (N,) GB
    free_slots: FloatArray  #: (N,) worker slots
    capacity_cpu: FloatArray  #: (N,) cores
    capacity_mem: FloatArray  #: (N,) GB
    node_status: IntArray  #: (N,) `clusteremu.cluster.layout.NodeStatus`
    node_type: IntArray  #: (N,) node type index (scenario order)
    gpu_free: FloatArray  #: (N, G) free milli-GPU of each GPU (1000 = a whole free GPU)
    #: the engine's index of free capacity (`clusteremu.cluster.fit_index`; (0, 0) when it keeps
    #: none: kept for a placer class with `uses_fit_index = True` from `fit_index.MIN_ROWS`
    #: node rows): `first_fit(view, job)` and `next_fit(view, job, start)` search it
    fit_index: FloatArray
    #: the engine's free-node bits where it keeps no index (`clusteremu.cluster.fit_index`:
    #: a bit per node row that may fit a request of `fit_floor[0]` cores or more; empty
    #: otherwise): `first_fit` and `next_fit` visit only those rows
    fit_bits: IntArray
    fit_floor: FloatArray  #: (1,) cores: the floor the bits are for
    params: FloatArray  #: writable: the policy's `kernel_params()`
    rng: npt.NDArray[np.uint64]  #: writable: the policy's SplitMix64 state (`uniform_index`)


class AllocatorView(NamedTuple):
    """What a compiled allocator reads (read-only unless said). The `*_f`/`*_i` tables are
    the engine's own rows (named in `clusteremu.cluster.layout`: `JF`, `JI`, `CF`, `CI`), for
    allocators that need the speed-up curves; the named fields cover the common needs."""

    arrival_s: FloatArray  #: (J,) s
    size: FloatArray  #: (J,) work (s on one core)
    remaining: FloatArray  #: (J,) work left
    current_cores: FloatArray  #: (J,) cores held now
    job_class: IntArray  #: (J,) class index
    holding_cost: FloatArray  #: (classes,) $ per s in system
    jobs_f: FloatArray
    jobs_i: IntArray
    classes_f: FloatArray
    classes_i: IntArray
    class_tx: FloatArray  #: (classes, points) speed-up table x (cores)
    class_ty: FloatArray  #: speed-up table y
    params: FloatArray  #: writable: the policy's `kernel_params()` (and workspace)


class ScalerView(NamedTuple):
    """What a compiled scaler reads (read-only unless said); the waiting jobs are
    `queue[queue_head:queue_tail]` whose `job_state` is QUEUED (others left)."""

    queue: IntArray  #: job ids in arrival order
    queue_head: int
    queue_tail: int
    job_state: IntArray  #: (J,) `clusteremu.cluster.layout.JobState` (QUEUED while it waits)
    request_cpu: FloatArray  #: (J,) cores
    job_class: IntArray  #: (J,) class index
    node_count: int  #: node rows handed out (static nodes, then rented ones)
    node_status: IntArray  #: (N,) `NodeStatus`
    node_type: IntArray  #: (N,) node type index
    running_jobs: FloatArray  #: (N,) jobs running on the node
    free_cpu: FloatArray  #: (N,) cores
    params: FloatArray  #: writable: the policy's `kernel_params()`


class ScorerView(NamedTuple):
    """What a compiled score plugin (the scoring scheduler, docs/scoring.md) reads, all
    read-only but `params`: N nodes of the scoring scheduler's cluster."""

    request: FloatArray  #: (3,) the pod's cores, GB, GPUs
    capacity: FloatArray  #: (3, N) cores, GB, GPUs
    free: FloatArray  #: (3, N) free before this placement
    free_slots: FloatArray  #: (N,) worker slots (inf: unlimited)
    node_type: IntArray  #: (N,) node type index
    is_edge: npt.NDArray[np.bool_]  #: (N,) an edge node (docs/scoring.md)
    missing_image_mb: FloatArray  #: (m,) MB of the pod's image each scored node must pull
    params: FloatArray  #: writable: the plugin's `kernel_params()`


#: Scaler actions (rows of the `actions` array a compiled scaler writes; column i = action i).
RENT, RELEASE = 1, 2


def _read_only(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    a = np.zeros((1,) * a.ndim, dtype=a.dtype)
    a.flags.writeable = False
    return a


def _view_type(cls: type, sample: dict[str, npt.NDArray[Any] | int], writable: set[str]) -> Any:
    fields = {}
    for name in cls._fields:  # type: ignore[attr-defined]
        v = sample[name]
        fields[name] = v if not isinstance(v, np.ndarray) or name in writable else _read_only(v)
    return typeof(cls(**fields))


_F1, _I1, _F2, _I2 = (
    np.zeros(1),
    np.zeros(1, np.int64),
    np.zeros((1, 1)),
    np.zeros((1, 1), np.int64),
)
_U1 = np.zeros(1, np.uint64)
PLACER_VIEW = _view_type(
    PlacerView,
    {
        **dict.fromkeys(PlacerView._fields, _F1),
        "job_class": _I1,
        "node_status": _I1,
        "node_type": _I1,
        "gpu_free": _F2,
        "fit_index": _F2,
        "fit_bits": _I1,
        "rng": _U1,
    },
    {"params", "rng"},
)
ALLOCATOR_VIEW = _view_type(
    AllocatorView,
    {
        **dict.fromkeys(AllocatorView._fields, _F1),
        "job_class": _I1,
        "jobs_f": _F2,
        "jobs_i": _I2,
        "classes_f": _F2,
        "classes_i": _I2,
        "class_tx": _F2,
        "class_ty": _F2,
    },
    {"params"},
)
SCALER_VIEW = _view_type(
    ScalerView,
    {
        **dict.fromkeys(ScalerView._fields, _F1),
        "queue": _I1,
        "queue_head": 0,
        "queue_tail": 0,
        "job_state": _I1,
        "job_class": _I1,
        "node_count": 0,
        "node_status": _I1,
        "node_type": _I1,
    },
    {"params"},
)
SCORER_VIEW = _view_type(
    ScorerView,
    {
        **dict.fromkeys(ScorerView._fields, _F1),
        "capacity": _F2,
        "free": _F2,
        "node_type": _I1,
        "is_edge": np.zeros(1, np.bool_),
    },
    {"params"},
)
_MEMBERS = types.Array(types.int64, 1, "C")
_CORES = types.Array(types.float64, 1, "C")
_ACTIONS = types.Array(types.int64, 2, "C")

#: The signature of each extension point's compiled function.
SIGNATURES: dict[str, Any] = {
    "placer": types.int64(types.int64, types.float64, PLACER_VIEW),
    "allocator": types.none(
        _MEMBERS, types.int64, types.float64, types.float64, ALLOCATOR_VIEW, _CORES
    ),
    "scaler": types.int64(types.float64, SCALER_VIEW, _ACTIONS),
    "scorer": types.none(types.Array(types.int64, 1, "C", readonly=True), SCORER_VIEW, _CORES),
}
KINDS = tuple(SIGNATURES)

#: The one table: every compiled policy function by extension point, in registration
#: order; a function's code is its index + 1 (0 = a Python policy).
TABLE: dict[str, list[Any]] = {kind: [] for kind in KINDS}


#: Compiled policies run without numba's reference counting (NRT), like the loop: with it,
#: every read of a view field counts a reference up and down (two calls per array per
#: read: 12 us instead of 80 ns for a first-fit over 100 nodes). So they cannot allocate
#: arrays: scratch space goes in the policy's `params`.
_OPTIONS: dict[str, Any] = {"cache": True, "_nrt": False}


def _register(kind: str, fn: Any) -> Any:
    if isinstance(fn, CPUDispatcher):
        dispatcher = fn
    else:  # cached on disk, unless defined where numba cannot cache (`python -c`, a REPL)
        on_disk = os.path.isfile(getattr(getattr(fn, "__code__", None), "co_filename", ""))
        dispatcher = njit(**{**_OPTIONS, "cache": on_disk})(fn)
    if getattr(dispatcher, "extension_point", kind) != kind:
        raise TypeError(
            f"{dispatcher.py_func.__qualname__} is already a compiled {dispatcher.extension_point}"
        )
    dispatcher.extension_point = kind
    if dispatcher not in TABLE[kind]:
        TABLE[kind].append(dispatcher)
    return dispatcher


#: Each extension point's signature as a plug-in's author writes it (for error messages).
SIGNATURE_TEXT: dict[str, str] = {
    "placer": "place(job, now_s, view: PlacerView) -> int",
    "allocator": "allocate(members, n, pool_cores, now_s, view: AllocatorView, cores) -> None",
    "scaler": "scale(now_s, view: ScalerView, actions) -> int",
    "scorer": "score(nodes, view: ScorerView, out) -> None",
}


class CompileError(ValueError):
    """A compiled policy function does not compile for its extension point's signature
    (wrong arguments, a type numba cannot infer, a write to a read-only view): found when a
    plug-in is loaded (`check_compiles`), before any run. The message is one paragraph."""


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NUMBA_NOISE = ("Failed in ", "During: ", "There are ", "- Of which", "Overload ", "With argument")


def numba_problem(exc: BaseException) -> str:
    """numba's error as one short sentence: what failed, and where in the user's file
    (numba's own message is a multi-line dump of its pipeline and candidate overloads)."""
    text = _ANSI.sub("", str(exc))
    raw = text.splitlines()
    lines = [line.strip() for line in raw if line.strip()]
    specific = [
        line.split("Error: ", 1)[1]
        for line in lines
        if line.startswith(("NumbaTypeError: ", "TypingError: ", "NumbaValueError: "))
    ]
    useful = [line for line in lines if not line.startswith(_NUMBA_NOISE)]
    if specific:
        head = specific[0]
    elif useful:
        head = useful[0]
        if head.endswith(":") and len(useful) > 1 and useful[1].startswith(">>>"):
            head = f"{head} {useful[1].removeprefix('>>>').strip()}"
    else:
        head = type(exc).__name__
    where = ""
    for i, line in enumerate(raw):
        found = re.match(r'\s*File "([^"]+)", line (\d+):', line)
        if not found:
            continue
        source = ""
        for j in range(i + 1, len(raw)):  # the line above numba's ^ marker
            if raw[j].strip() and set(raw[j].strip()) <= {"^", "~"}:
                source = raw[j - 1].strip()
                break
            if not raw[j].strip():
                break
        where = f" ({found.group(1)}, line {found.group(2)}" + (f": {source}" if source else "")
        where += ")"
        break
    head = _short_types(head)
    if len(head) > 240:
        head = head[:239] + "…"
    if "readonly array" in head and ("modify" in head or "setitem" in head):
        head += " (the views are read-only but for `params` and `rng`)"
    message = head.rstrip(".:") + where
    return message if len(message) <= 400 else message[:399] + "…"


def _short_types(text: str) -> str:
    """numba's type of a view (`PlacerView(readonly array(float64, 1d, C), ...)`, sixteen
    fields) written as its name."""
    for view in ("PlacerView", "AllocatorView", "ScalerView", "ScorerView"):
        start = text.find(view + "(")
        while start >= 0:
            depth, end = 0, start + len(view)
            for end in range(start + len(view), len(text)):
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                if depth == 0:
                    break
            text = text[: start + len(view)] + text[end + 1 :]
            start = text.find(view + "(", start + 1)
    return text


def check_compiles(kind: str, fn: Any) -> None:
    """Compile registered function `fn` for extension point `kind`'s signature now (or find
    it compiled, or in numba's cache); CompileError naming the function and what numba
    refused. Run when a plug-in is loaded, so that `validate` refuses what `run` would
    crash on, and a run never starts with a function that cannot be called."""
    sig = SIGNATURES[kind]
    if sig.args in fn.overloads:
        return
    name = getattr(getattr(fn, "py_func", fn), "__qualname__", repr(fn))
    try:
        with signals_blocked():
            fn.compile(sig)
    except Exception as exc:  # noqa: BLE001 - numba's TypingError, TypeError, LoweringError...
        raise CompileError(
            f"{name} does not compile as a compiled {kind} {SIGNATURE_TEXT[kind]}: "
            f"{numba_problem(exc)}"
        ) from None


def compiled_placer(fn: Callable[..., int]) -> Any:
    """Register `place(job, now_s, view: PlacerView) -> node` (-1: the job waits).

    The engine calls it for the job at the head of the queue (a compiled placer is strict
    FCFS) until it returns -1; the node must be up and `fits`."""
    return _register("placer", fn)


def compiled_allocator(fn: Callable[..., None]) -> Any:
    """Register `allocate(members, n, pool_cores, now_s, view: AllocatorView, cores)`.

    `members[:n]` are the pool's jobs in arrival order (scratch: it may be reordered);
    write `cores[j]` (cores, finite, >= 0) for each member j; together at most
    `pool_cores`."""
    return _register("allocator", fn)


def compiled_scaler(fn: Callable[..., int]) -> Any:
    """Register `scale(now_s, view: ScalerView, actions) -> count`.

    Write action i as `actions[0, i] = RENT, actions[1, i] = node type index,
    actions[2, i] = how many` or `actions[0, i] = RELEASE, actions[1, i] = node`, at most
    `actions.shape[1]` (64) actions; return how many (0: nothing to do,
    the loop goes on without leaving compiled code)."""
    return _register("scaler", fn)


def compiled_of(policy: object) -> Any:
    """A policy's `compiled` function as set (a numba dispatcher is a descriptor: read
    through the instance, it would come back bound)."""
    return inspect.getattr_static(policy, "compiled", None)


def compiled_scorer(fn: Callable[..., None]) -> Any:
    """Register `score(nodes, view: ScorerView, out)` for a scoring-scheduler plugin.

    Write `out[i]`, the score in [0, 100] of node `nodes[i]` (the feasible nodes, in the
    framework's order), for every i; the framework checks the range as for any plugin."""
    return _register("scorer", fn)


def code_of(kind: str, fn: Any) -> int:
    """The table code of compiled function `fn` for extension point `kind` (index + 1);
    0 for None (a Python policy); ValueError for a function not in the table."""
    if fn is None:
        return 0
    for i, f in enumerate(TABLE.get(kind, ())):
        if f is fn:
            return i + 1
    raise ValueError(
        f"{getattr(fn, '__name__', fn)!r} is not a registered compiled {kind} "
        f"(decorate it with @compiled_{kind}, clusteremu.cluster.policies.compiled_table)"
    )


def function_addresses(kind: str, fn: Any) -> tuple[int, int, int]:
    """(C wrapper, Python object, numba entry) addresses of `fn` compiled for its
    extension point's signature: what the loop calls through (`as_*`). Zeros for None.
    The caller keeps `fn` alive while the addresses are in use."""
    if fn is None:
        return (0, 0, 0)
    sig = SIGNATURES[kind]
    with signals_blocked():
        if sig.args not in fn.overloads:
            fn.compile(sig)
    return (_get_wrapper_address(fn, sig), id(fn), _get_jit_address(fn, sig))


#: This process's address rows (`address_row`), by function: addresses never leave the
#: process (a policy pickled to a Ray worker finds its function there afresh).
_ROWS: dict[int, tuple[Any, IntArray]] = {}


def address_row(kind: str, fn: Any) -> IntArray:
    """`function_addresses` of a registered function as an int64 array, cached per process;
    ValueError for a function not in the table."""
    row = _ROWS.get(id(fn))
    if row is None or row[0] is not fn:
        code_of(kind, fn)
        row = (fn, np.array(function_addresses(kind, fn), dtype=np.int64))
        _ROWS[id(fn)] = row
    return row[1]


def _pointer_caster(kind: str) -> Any:
    fn_type = types.FunctionType(SIGNATURES[kind])

    def as_function(typingctx: Any, c_addr: Any, py_addr: Any, jit_addr: Any) -> Any:
        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            fn = cgutils.create_struct_proxy(fn_type)(context, builder)
            pointer = context.get_value_type(types.voidptr)
            fn.c_addr = builder.inttoptr(args[0], pointer)
            fn.py_addr = builder.inttoptr(args[1], pointer)
            fn.jit_addr = builder.inttoptr(args[2], pointer)
            return fn._getvalue()

        return fn_type(c_addr, py_addr, jit_addr), codegen

    as_function.__name__ = f"as_{kind}"
    return intrinsic(as_function)


#: Intrinsics turning addresses (`function_addresses`) into a callable first-class function.
as_placer = _pointer_caster("placer")
as_allocator = _pointer_caster("allocator")
as_scaler = _pointer_caster("scaler")
as_scorer = _pointer_caster("scorer")


@njit(cache=True)
def call_scorer(addresses, nodes, view, out) -> None:  # type: ignore[no-untyped-def]
    """Run a compiled score plugin (its `function_addresses`) on `nodes` into `out`."""
    score = as_scorer(addresses[0], addresses[1], addresses[2])
    score(nodes, view, out)


@intrinsic
def read_only(typingctx: Any, array: Any) -> Any:
    """The same array typed read-only (no copy): numba refuses to compile a write to it."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return args[0]

    return array.copy(readonly=True)(array), codegen


@inline_function
def placer_view(s) -> PlacerView:  # type: ignore[no-untyped-def]
    """The placer's view of engine state `s` (built by the loop at each placing round)."""
    return PlacerView(
        read_only(s.jobs_f[JF.REQ_CPU]),
        read_only(s.jobs_f[JF.REQ_MEM]),
        read_only(s.jobs_f[JF.REQ_GPU]),
        read_only(s.jobs_f[JF.ARRIVAL]),
        read_only(s.jobs_i[JI.CLS]),
        read_only(s.nodes_f[NF.FREE_CPU]),
        read_only(s.nodes_f[NF.FREE_MEM]),
        read_only(s.nodes_f[NF.FREE_SLOTS]),
        read_only(s.nodes_f[NF.CAP_CPU]),
        read_only(s.nodes_f[NF.CAP_MEM]),
        read_only(s.nodes_i[NI.STATUS]),
        read_only(s.nodes_i[NI.NODE_TYPE]),
        read_only(s.gpu_free),
        read_only(s.fit_index),
        read_only(s.fit_bits),
        read_only(s.fstate[FS.FIT_FLOOR : FS.FIT_FLOOR + 1]),
        s.placer_params,
        s.rng,
    )


@inline_function
def allocator_view(s) -> AllocatorView:  # type: ignore[no-untyped-def]
    """The allocator's view of engine state `s`."""
    return AllocatorView(
        read_only(s.jobs_f[JF.ARRIVAL]),
        read_only(s.jobs_f[JF.SIZE]),
        read_only(s.jobs_f[JF.REM]),
        read_only(s.jobs_f[JF.CORES]),
        read_only(s.jobs_i[JI.CLS]),
        read_only(s.classes_f[CF.HOLDING_COST]),
        read_only(s.jobs_f),
        read_only(s.jobs_i),
        read_only(s.classes_f),
        read_only(s.classes_i),
        read_only(s.class_tx),
        read_only(s.class_ty),
        s.alloc_params,
    )


@inline_function
def scaler_view(s, q_head: int, q_tail: int, nodes_used: int) -> ScalerView:  # type: ignore[no-untyped-def]
    """The scaler's view of engine state `s`."""
    return ScalerView(
        read_only(s.queue),
        q_head,
        q_tail,
        read_only(s.jobs_i[JI.STATE]),
        read_only(s.jobs_f[JF.REQ_CPU]),
        read_only(s.jobs_i[JI.CLS]),
        nodes_used,
        read_only(s.nodes_i[NI.STATUS]),
        read_only(s.nodes_i[NI.NODE_TYPE]),
        read_only(s.nodes_f[NF.RUNNING_JOBS]),
        read_only(s.nodes_f[NF.FREE_CPU]),
        s.scaler_params,
    )


@inline_function
def fits(view, job: int, node: int) -> bool:  # type: ignore[no-untyped-def]
    """Whether `node` is up and has room for `job` (cores, GB, GPUs, a free slot): the
    engine's one fit rule (`compiled.has_room`), the one it checks a compiled placer with."""
    return view.node_status[node] == NodeStatus.UP and has_room(
        view.free_cpu[node],
        view.free_mem[node],
        view.free_slots[node],
        view.gpu_free,
        node,
        view.request_cpu[job],
        view.request_mem[job],
        view.request_gpu[job],
    )


@inline_function
def _bits_or_scan(view, job: int, start: int) -> int:  # type: ignore[no-untyped-def]
    """The first node >= `start` that `fits` the job, or -1, without the index: through
    the free-node bits when they hold for the job's request, else a scan."""
    bits = view.fit_bits
    if bits.shape[0] > 0 and view.request_cpu[job] >= view.fit_floor[0]:
        return bits_search(
            bits,
            view.free_cpu,
            view.free_mem,
            view.free_slots,
            view.node_status,
            view.gpu_free,
            view.request_cpu[job],
            view.request_mem[job],
            view.request_gpu[job],
            start,
        )
    for k in range(max(start, 0), view.free_cpu.shape[0]):
        if fits(view, job, k):
            return k
    return -1


@inline_function
def first_fit(view, job: int) -> int:  # type: ignore[no-untyped-def]
    """The first node in node order that `fits` the job, or -1: through the engine's index
    of free capacity when it keeps one (`view.fit_index`, logarithmic in the nodes), else a
    scan. Both give the same node."""
    fx = view.fit_index
    if fx.shape[0] == 0:
        return _bits_or_scan(view, job, 0)
    return search(
        fx,
        view.free_cpu,
        view.free_mem,
        view.free_slots,
        view.node_status,
        view.gpu_free,
        view.request_cpu[job],
        view.request_mem[job],
        view.request_gpu[job],
    )


@inline_function
def next_fit(view, job: int, start: int) -> int:  # type: ignore[no-untyped-def]
    """The first node >= `start` (a negative `start`: 0) that `fits` the job, or -1: through
    the engine's index of free capacity when it keeps one (`view.fit_index`: subtrees where
    no node has room are skipped whole, O(log N) per call), else a scan from `start`. Both
    give the same node, so `k = next_fit(view, job, 0)`, then `k = next_fit(view, job,
    k + 1)` while `k >= 0`, visits exactly the fitting nodes in node order."""
    fx = view.fit_index
    if fx.shape[0] == 0:
        return _bits_or_scan(view, job, start)
    if start > 0:
        # The row itself first, then the tree from the next one: a run of fitting rows
        # costs what a scan of them costs (on a cluster where most rows fit, the walk
        # from each row to the next made best-fit three times slower than a scan).
        if start < view.free_cpu.shape[0] and fits(view, job, start):
            return start
        start += 1
    return search_from(
        fx,
        view.free_cpu,
        view.free_mem,
        view.free_slots,
        view.node_status,
        view.gpu_free,
        view.request_cpu[job],
        view.request_mem[job],
        view.request_gpu[job],
        start,
    )
