"""The event engine: the one owner of simulated time and state.

An `Engine` holds one replication's `EngineState` (typed groups of arrays,
`clusteremu.cluster.state`) and drives the compiled loop (`clusteremu.cluster.kernel`). Only the
engine moves
time and writes state; policies, actors, learners and tuners use its API (SimPy's rule):

- `peek()` the time of the next event, `step(until_s)` advance, `run()` to the end;
- `start(job, node, gpus=...)` a queued job on a node, `kill(job, ...)` a running one
  (work lost, re-queued with a new request or failed);
- `rent(node_type)` a node (ready after the type's start-up delay), `release(node)`;
- `set_speedup(class, params)`, `advance(t)`, `set_window(...)`, `add_jobs(jobs)`;
- `snapshot()` a frozen, read-only `RunState` that metrics and results read.

Arrays read through the engine's properties (`engine.jobs_f`, ...) are read-only views:
writing them raises. Policies are called back through four extension points (scaler,
placer, allocator, provisioner) when they have no compiled path.

The engine's code is split by job: this module builds the state and drives the loop;
`clusteremu.cluster.engine_operations` (start, kill, rent, release and what the loop asks for),
`clusteremu.cluster.engine_feeding` (jobs added after the start) and
`clusteremu.cluster.engine_policies` (the
Python policies' views and decisions) are mixins of `Engine`; `clusteremu.cluster.live_view` is the
placers' reusable view and `clusteremu.cluster.decision_checks` the checks of their decisions.

>>> from clusteremu.cluster.model import *
>>> from clusteremu.cluster.distributions import Exponential
>>> from clusteremu.cluster.speedup import LinearSpeedup
>>> from clusteremu.cluster.workload import poisson_arrivals
>>> spec = SimulationSpec(
...     name="mm1", seed=1, stop=StopRule(jobs=1000),
...     node_types=(NodeType("core", cpu=1, memory_gb=1),), nodes=("core",), pools=(),
...     classes=(JobClass("a", poisson_arrivals(0.5), Exponential(1.0), LinearSpeedup()),))
>>> run = Engine(spec).run()
>>> run.summary["jobs_completed"]
1000
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from clusteremu.cluster import fit_index, kernel
from clusteremu.cluster.decision_checks import ALLOC_EPS, check_allocation
from clusteremu.cluster.engine_feeding import JobFeeding, job_state
from clusteremu.cluster.engine_operations import Operations
from clusteremu.cluster.engine_policies import PLACER_CALLBACK, PolicyCalls
from clusteremu.cluster.faults import FaultDraws, timeline_array
from clusteremu.cluster.jit import direct_entry
from clusteremu.cluster.jobs import (
    Jobs,
    Purpose,
    generate_jobs,
    replication_seed,
    replication_seeds,
    runtime_table,
    stream,
)
from clusteremu.cluster.layout import (
    CF,
    FS,
    IS,
    JF,
    NI,
    PI,
    SCALE_ACTIONS,
    Status,
)
from clusteremu.cluster.metrics import RunResult, build_result
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies import compiled_table
from clusteremu.cluster.policies.base import (
    Allocator,
    LiftRule,
    Placement,
    Placer,
    Provisioner,
    Scaler,
)
from clusteremu.cluster.policies.points import build_policies, distinct, setup_policies
from clusteremu.cluster.state import (
    EngineState,
    RunState,
    check_gpu_request,
    class_arrays,
    max_gpus,
    pool_arrays,
    read_only,
    state_from,
    static_nodes,
)
from clusteremu.cluster.traces.feed import TableSource, streamed_source
from clusteremu.cluster.usage import CPU_RULES
from clusteremu.cluster.world import build_world, initial_cache

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Plain ints for the Python hot path (reading an IntEnum member costs a dictionary lookup).
_STATUS_POOL = int(IS.STATUS_POOL)
_BAD = int(Status.BAD_DECISION)
_LIFT = int(Status.NEED_LIFT_DECISION)
_TIMELINE, _DRAWS = int(Status.NEED_TIMELINE_ACTION), int(Status.NEED_FAULT_DRAWS)
_REDRAWS = int(Status.NEED_SIZE_REDRAWS)
_ALLOC, _SCALE = int(Status.NEED_ALLOC_DECISION), int(Status.NEED_SCALE_DECISION)
_BAD_COMPILED, _BAD_ALLOCATION = int(Status.BAD_COMPILED_DECISION), int(Status.BAD_ALLOCATION)
_SCALE_ACTIONS = int(Status.NEED_SCALE_ACTIONS)
_HANDED_BACK = int(Status.PLACER_HANDED_BACK)
_PYTHON_PLACER, _PLACER_CODE = kernel.FN_PYTHON_PLACER, int(IS.PLACER_CODE)

#: Events per call of the compiled loop between progress reports.
EVENTS_PER_CALL = 1 << 18

__all__ = [
    "ALLOC_EPS",
    "Engine",
    "Jobs",
    "check_allocation",
    "generate_jobs",
    "replication_seeds",
    "runtime_table",
]


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


def _table_feed(
    spec: SimulationSpec,
) -> tuple[TableSource | None, Iterator[Jobs] | None, Jobs | None, int]:
    """(the table, the chunks after the first, the first chunk, the jobs in all) of a
    scenario whose every class replays one streamed trace table (`clusteremu.cluster.traces.feed`),
    else nothing."""
    source = streamed_source(spec.classes)
    if source is None or spec.usage is not None:
        return None, None, None, 0
    if any(c.runtime_by_node_type for c in spec.classes):
        return None, None, None, 0
    stop = spec.stop
    limit = source.rows if stop.jobs is None else min(source.rows, int(stop.jobs))
    until = math.inf if stop.time_s is None else float(stop.time_s)
    feed = source.chunks({c.name: i for i, c in enumerate(spec.classes)}, limit, until)
    first = next(feed, None)
    if first is None:
        first = Jobs(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0))
    return source, feed, first, limit


class Engine(JobFeeding, Operations, PolicyCalls):
    """One replication of a scenario: its state, its policies and the loop that drives it."""

    def __init__(
        self,
        spec: SimulationSpec,
        replication: int = 0,
        placer: Placer | None = None,
        allocator: Allocator | None = None,
        provisioner: Provisioner | None = None,
        force_python_policies: bool = False,
        jobs: Jobs | None = None,
        scaler: Scaler | None = None,
        fit_index: bool | None = None,
    ) -> None:
        """Build the state of one replication.

        `jobs` replaces the jobs drawn from the scenario's streams (e.g. jobs routed to a
        shard by a Ray scheduler); policies default to the scenario's scheduler block (an
        object given for a point replaces the scenario's policy there; a pair's object, such
        as a Pennyworth planner, is given at each of its points: `Engine(spec, placer=p,
        scaler=p)`); `force_python_policies` takes the Python decision path even for
        compiled policies.
        `fit_index` keeps an index of free capacity (`clusteremu.cluster.fit_index`; the same runs,
        faster first-fit placements on many nodes) or not; None: with a placer that uses it
        (`uses_fit_index`, the compiled first-fit) on `fit_index.MIN_ROWS` node rows or more.
        """
        self.spec = spec
        self._fit_index_wanted = fit_index
        self.replication = replication
        seq = replication_seed(spec, replication)
        # One object per policy: a pair (Pennyworth's planners, placer and scaler) is one
        # object at each of its points, named so by the scenario
        # (`clusteremu.cluster.policies.points`).
        self.policies = build_policies(
            spec, placer=placer, allocator=allocator, provisioner=provisioner, scaler=scaler
        )
        self.placer: Placer = self.policies["placer"]  # type: ignore[assignment]
        self.allocator: Allocator = self.policies["allocator"]  # type: ignore[assignment]
        self.provisioner: Provisioner = self.policies["provisioner"]  # type: ignore[assignment]
        self.scaler: Scaler = self.policies["scaler"]  # type: ignore[assignment]
        placer_rng = stream(seq, Purpose.PLACER)
        setup_policies(self.policies, spec, seq)
        for c in spec.classes:
            check_gpu_request(f"workload class {c.name!r}: request.gpu", c.request.gpu)
        # A trace table is read a chunk at a time and fed as the run reaches it.
        source, self._feed, first, total = (
            _table_feed(spec) if jobs is None else (None, None, None, 0)
        )
        if first is not None:
            jobs = first
        self.jobs = jobs if jobs is not None else generate_jobs(spec, seq)
        self._type_index = {t.name: i for i, t in enumerate(spec.node_types)}
        self._fault_draws = FaultDraws(spec, seq)
        self._redraw_rngs: dict[int, np.random.Generator] = {}
        #: job row -> its original size and each redrawn one (`RunState.sizes_drawn`)
        self._sizes_drawn: dict[int, tuple[float, ...]] = {}
        self._s = self._build_state(placer_rng, force_python_policies)
        self._t = tuple(self._s)  # what compiled entries take (see clusteremu.cluster.kernel)
        self._first_failures()
        self._run: Callable[..., int] | None = None  # the loop entry without type dispatch
        self._ro: EngineState | None = None
        self._view_cache: dict[str, Any] = {}
        self._pending: list[Placement] | tuple[Placement, ...] = []
        self._placer_error: BaseException | None = None  # raised by the placer in the loop
        self.status = -1
        self._total_jobs = self.jobs.arrival_s.size
        self._next_chunk: Jobs | None = None
        if source is not None:
            self._total_jobs = total
            stop = spec.stop
            if stop.time_s is None and total > self.jobs.arrival_s.size:
                # The window of a job-count stop: the arrivals of its first measured and
                # its last job, which later chunks hold.
                warm = min(stop.warmup_jobs, total - 1)
                held = self.jobs.arrival_s
                self.set_window(
                    start_s=held[warm] if warm < held.size else source.arrival_at(warm),
                    end_s=source.arrival_at(total - 1),
                )
            self.reserve_jobs(total)
            self._next_chunk = self._take_chunk()

    # -- state ------------------------------------------------------------------------

    def _build_state(self, placer_rng: np.random.Generator, force_python: bool) -> EngineState:
        spec, jobs = self.spec, self.jobs
        n = jobs.arrival_s.size
        jobs_f, jobs_i = job_state(spec, self.provisioner, jobs)
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
        istate[IS.NODES_USED] = m
        compiled = self._compiled_functions(force_python)
        istate[IS.PLACER_CODE] = compiled_table.code_of("placer", compiled["placer"])
        istate[IS.ALLOC_CODE] = compiled_table.code_of("allocator", compiled["allocator"])
        istate[IS.SCALER_CODE] = (
            -1 if self.scaler.static else compiled_table.code_of("scaler", compiled["scaler"])
        )
        n_classes = len(spec.classes)
        fcfs = istate[IS.PLACER_CODE] != 0 or bool(getattr(self.placer, "strict_fcfs", False))
        index = self._new_fit_index(nodes_f, nodes_i, gpu_free, int(istate[IS.PLACER_CODE]))
        istate[IS.PLACER_FCFS] = int(fcfs)
        ask = bool(getattr(self.placer, "ask_when_nothing_fits", False))
        istate[IS.PLACER_ASK_ALWAYS] = int(ask)
        istate[IS.PLACE_AFTER_TIES] = int(bool(getattr(self.placer, "place_after_ties", False)))
        istate[IS.HAS_USAGE] = int(spec.usage is not None or jobs.usage is not None)
        istate[IS.CPU_RULE] = CPU_RULES[spec.usage.cpu_rule if spec.usage else "proportional"]
        istate[IS.RETRY_LIMIT] = int(getattr(self.provisioner, "retry_limit", 3))
        istate[IS.OOM_JOB] = -1
        rule = self._lift_rule = self.provisioner.compiled_lift()
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
        heap = 2 * n + 2 * m + 1
        # Out-of-memory kills queue jobs again: head-room, so the loop need not return.
        queue = max(n, 1) + (max(16, n // 16) if istate[IS.HAS_USAGE] else 0)
        return state_from(
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
            placer_params=np.asarray(self.placer.kernel_params(), dtype=np.float64),
            alloc_params=np.asarray(self.allocator.kernel_params(), dtype=np.float64),
            scaler_params=np.asarray(self.scaler.kernel_params(), dtype=np.float64),
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
            **self._fault_state(nodes_f, nodes_i, istate, heap),
        )

    def _compiled_functions(self, force_python: bool) -> dict[str, Any]:
        """Each extension point's compiled function (None: decided in Python), and the
        addresses the loop calls them through (`self._fns`, one row per kind)."""
        policies = {"placer": self.placer, "allocator": self.allocator, "scaler": self.scaler}
        functions = {}
        for kind, policy in policies.items():  # a pair's function serves its own point
            function = compiled_table.compiled_of(policy)
            ok = function is not None and getattr(function, "extension_point", None) == kind
            functions[kind] = function if ok else None
        if force_python:  # the Python path of every policy that has one
            functions["placer"] = functions["allocator"] = None
            if type(self.scaler).scale is not Scaler.scale:
                functions["scaler"] = None
        if self.scaler.static:
            functions["scaler"] = None
        # Compile (or load) only what the scenario calls: no allocator without pools.
        used = {
            "placer": bool(self.spec.nodes or self.spec.node_types),
            "allocator": bool(self.spec.pools),
            "scaler": True,
        }
        addresses = {k: f if used[k] else None for k, f in functions.items()}
        rows = [compiled_table.address_row(kind, addresses[kind]) for kind in functions]
        # The Python placer's way in (kernel.FN_PYTHON_PLACER) is set by `step`.
        self._fns = np.array([*rows, (0, 0, 0)], dtype=np.int64)
        self._compiled = functions  # keeps the functions (and their addresses) alive
        return functions

    def _new_fit_index(
        self, nodes_f: FloatArray, nodes_i: IntArray, gpu_free: FloatArray, placer_code: int
    ) -> FloatArray:
        """The index of free capacity over these node rows, or an empty one where none is
        kept (see `fit_index` in `__init__`)."""
        want = self._fit_index_wanted
        if want is None:
            want = (
                placer_code > 0
                and bool(getattr(self.placer, "uses_fit_index", False))
                and nodes_f.shape[1] >= fit_index.MIN_ROWS
            )
        if not want:
            return np.zeros((0, 0))
        index = fit_index.new_index(nodes_f.shape[1], gpus=max_gpus(self.spec) > 0)
        fit_index.build(index, nodes_f, nodes_i, gpu_free)
        return index

    def _fault_state(
        self, nodes_f: FloatArray, nodes_i: IntArray, istate: IntArray, heap: int
    ) -> dict[str, Any]:
        """The fault arrays: the static nodes' first up and down times and the timeline.

        Each static node with a failure model fails first after its first up time (the
        `Event.FAIL` entries are pushed by `_first_failures` once the state exists)."""
        spec = self.spec
        istate[IS.FAULTS] = int(spec.has_faults)
        istate[IS.ON_FAILURE] = int(spec.on_node_failure == "fail")
        istate[IS.REDRAW] = int(spec.restart_work == "redraw")
        draws = np.zeros((nodes_f.shape[1], self._fault_draws.width()))
        # Without a failure model nothing draws (a node's ordinal only keys its streams).
        for k in range(len(spec.nodes) if self._fault_draws.enabled else 0):
            self._fault_draws.add_node(k, int(nodes_i[NI.NODE_TYPE, k]))
            if nodes_i[NI.FAILS, k]:
                for up in (True, False):
                    self._store_draws(draws, nodes_i, k, up)
        return {"fault_draws": draws, "timeline": timeline_array(spec)}

    def _store_draws(self, draws: FloatArray, nodes_i: IntArray, k: int, up: bool) -> None:
        """Node k's next block of up (or down) times into its row; its cursor to 0."""
        block = self._fault_draws.next_block(k, int(nodes_i[NI.NODE_TYPE, k]), up)
        lo = 0 if up else block.size
        draws[k, lo : lo + block.size] = block
        nodes_i[NI.UP_POS if up else NI.DOWN_POS, k] = 0

    def _first_failures(self) -> None:
        """Schedule each static node's first random failure (after its first up time)."""
        s = self._s
        for k in np.flatnonzero(s.nodes_i[NI.FAILS, : len(self.spec.nodes)]).tolist():
            kernel.schedule_fault_entry(self._t, k, 0.0, int(kernel.Event.FAIL))

    def _replace(self, **arrays: Any) -> None:
        """Swap in grown arrays (the state is immutable as a tuple; its arrays are not)."""
        self._s = self._s._replace(**arrays)
        self._t = tuple(self._s)
        self._run = None
        self._ro = None
        self._view_cache.clear()

    @property
    def state(self) -> EngineState:
        """Read-only views of every state array."""
        if self._ro is None:
            self._ro = read_only(self._s)
        return self._ro

    # Read-only views of the arrays most readers want (writing them raises ValueError).
    @property
    def jobs_f(self) -> FloatArray:
        return self.state.jobs_f

    @property
    def jobs_i(self) -> IntArray:
        return self.state.jobs_i

    @property
    def nodes_f(self) -> FloatArray:
        return self.state.nodes_f

    @property
    def nodes_i(self) -> IntArray:
        return self.state.nodes_i

    @property
    def pools_f(self) -> FloatArray:
        return self.state.pools_f

    @property
    def pools_i(self) -> IntArray:
        return self.state.pools_i

    @property
    def now(self) -> float:
        """Simulated time, seconds."""
        return float(self._s.fstate[FS.NOW])

    @property
    def events(self) -> int:
        return int(self._s.istate[IS.EVENTS])

    @property
    def jobs_done(self) -> int:
        """Jobs that have left the system (completed or failed)."""
        return int(self._s.istate[IS.DONE_COUNT])

    @property
    def jobs_in_system(self) -> int:
        return int(self._s.istate[IS.N_SYSTEM])

    @property
    def nodes_used(self) -> int:
        """Node rows handed out so far (the static nodes, then rented ones)."""
        return int(self._s.istate[IS.NODES_USED])

    @property
    def finished(self) -> bool:
        return self.status == Status.FINISHED

    def snapshot(self) -> RunState:
        """The state now, frozen: a read-only copy that never changes as the engine moves on
        (`state` gives read-only views of the live arrays instead)."""
        state = read_only(EngineState(*(a.copy() for a in self._s)))  # type: ignore[arg-type]
        return RunState(self.spec, self.replication, state, self.now, dict(self._sizes_drawn))

    # -- driving ----------------------------------------------------------------------

    def peek(self) -> float:
        """Time of the next event, seconds (+inf if none)."""
        return float(kernel.peek_entry(self._t))

    def _take_chunk(self) -> Jobs | None:
        """The next chunk of a streamed table, or None when it has ended (the unfilled
        rows reserved for it are dropped)."""
        chunk = next(self._feed, None) if self._feed is not None else None
        if chunk is None and self._feed is not None:
            self._feed = None
            self.trim_jobs()
        return chunk

    def step(self, until_s: float = math.inf, max_events: int = EVENTS_PER_CALL) -> int:
        """Advance until `until_s`, `max_events` events or the end; answer policy calls.

        Returns a `clusteremu.cluster.layout.Status`: FINISHED, PAUSED (next event after `until_s`)
        or YIELDED (`max_events` events done). A streamed trace table's next chunk is fed
        just before the time of its first arrival.
        """
        while True:
            chunk = self._next_chunk
            if chunk is None:
                return self._step(until_s, max_events)
            first = float(chunk.arrival_s[0])
            limit = min(until_s, float(np.nextafter(first, -math.inf)))
            # The loop sees the chunk's first arrival as the next one (and pauses before
            # it): without it, an idle gap would look like the end of the run.
            self._s.jobs_f[JF.ARRIVAL, self.jobs_fed] = first
            status = self._step(limit, max_events)
            if status == Status.YIELDED or (status == Status.PAUSED and limit == until_s):
                return status
            if first > self._s.fstate[FS.HORIZON]:  # the run ended before it
                self._next_chunk, self._feed = None, None
                self.trim_jobs()
                return status
            self.append_jobs(chunk)
            self._next_chunk = self._take_chunk()

    def _step(self, until_s: float, max_events: int) -> int:
        """`step` without the streamed table's feed."""
        run = self._run
        python_placer = self._s.istate.item(_PLACER_CODE) == 0
        if run is None:
            entry = kernel.loop_entry(
                pools=self._s.pools_f.shape[1] > 0,
                python_placer=python_placer,
                events=bool(self._s.istate[IS.FAULTS] or self._s.istate[IS.HAS_USAGE]),
            )
            run = self._run = direct_entry(entry, self._t, self._fns, until_s, max_events)
        fns = self._fns
        # A Python placer is called from inside the loop through a C function pointer to
        # `_placer_call`, made for this call only: held by the engine, it would tie the
        # engine to itself (a cycle), and its arrays would outlive the run until the
        # garbage collector found them. (`ctypes.cast` would make such a cycle too: the
        # pointer is read from the callback's own buffer.)
        if python_placer:
            callback = PLACER_CALLBACK(self._placer_call)
            fns[_PYTHON_PLACER, 0] = ctypes.c_void_p.from_buffer(callback).value or 0
        try:
            return self._answer_calls(run, fns, until_s, max_events)
        finally:
            fns[_PYTHON_PLACER, 0] = 0

    def _answer_calls(
        self, run: Callable[..., int], fns: IntArray, until_s: float, max_events: int
    ) -> int:
        """Run the loop (`run`), answering what it hands back, until it stops."""
        while True:
            status = run(self._t, fns, until_s, max_events)
            if status == _HANDED_BACK:
                self._placer_handed_back()
            elif status == _SCALE:
                self._python_scale()
            elif status == _ALLOC:
                self._python_allocate(int(self._s.istate[_STATUS_POOL]))
            elif status == _BAD:
                self._refused()
            elif status == _BAD_COMPILED:
                self._refused_compiled()
            elif status == _BAD_ALLOCATION:
                self._refused_allocation()
            elif status == _SCALE_ACTIONS:
                self._compiled_scale()
            elif status == _LIFT:
                self._lift(int(self._s.istate[IS.OOM_JOB]))
            elif status == _TIMELINE:
                self._timeline_action(int(self._s.istate[IS.TL_EVENT]))
            elif status == _DRAWS:
                self._refill_draws()
            elif status == _REDRAWS:
                self._redraw_sizes()
            else:
                if self._s.istate[IS.HEAP_OVERFLOW]:
                    raise RuntimeError("the event heap overflowed (a bug in the engine)")
                self.status = status
                return status

    def run(self, progress: Callable[[float], None] | None = None) -> RunResult:
        """Run to the end and return the per-job table and summary.

        `progress` receives the fraction done (by jobs completed, or simulated time).
        """
        total = max(self._total_jobs, 1)
        horizon = self.spec.stop.time_s
        while self.step() != Status.FINISHED:
            if progress is not None:
                done = self.now / horizon if horizon else self.jobs_done / total
                progress(min(float(done), 1.0))
        if progress is not None:
            progress(1.0)
        return self.result()

    def result(self) -> RunResult:
        """The per-job table and summary of the run so far (read from the live state: the
        table shares no memory with it, so the engine may go on)."""
        return build_result(
            RunState(self.spec, self.replication, self.state, self.now, self._sizes_drawn),
            tuple(policy for _, policy in distinct(self.policies)),
            runs=self.jobs.features.get("run"),
        )

    def advance(self, t: float) -> None:
        """Move the clock to `t` with no event (pools' work and integrals brought up to t).

        `t` must not lie beyond the next event: call `step(until_s=t)` first.
        """
        if t < self.now:
            raise ValueError(f"advance: {t} s is before now ({self.now} s)")
        if t > self.peek():
            raise ValueError(f"advance: {t} s is after the next event ({self.peek()} s)")
        kernel.advance_entry(self._t, t)

    def set_window(
        self,
        start_s: float | None = None,
        end_s: float | None = None,
        horizon_s: float | None = None,
    ) -> None:
        """Set the measurement window [start_s, end_s] and the horizon (seconds)."""
        f = self._s.fstate
        if start_s is not None:
            f[FS.WIN_START] = start_s
        if end_s is not None:
            f[FS.WIN_END] = end_s
        if horizon_s is not None:
            f[FS.HORIZON] = horizon_s

    def close_window(self, t: float) -> None:
        """Account time integrals up to `t` (end of a shard's run) without moving jobs."""
        kernel.accumulate_entry(self._t, t)

    def set_speedup(self, cls: int, params: Sequence[float]) -> None:
        """Change class `cls`'s speed-up parameters now; running pool jobs' rates follow.

        Pools are brought up to now first, so the change takes effect exactly at `now`.
        """
        s = self._s
        values = [float(v) for v in params]
        s.classes_f[CF.SP_PARAM, cls] = values[0]
        if len(values) > 1:
            s.classes_f[CF.SP_PARAM2, cls] = values[1]
        kernel.reallocate_entry(self._t, self.now)

    def request_allocation(self, pool: int) -> None:
        """Ask the allocator to decide pool `pool` again before the next event."""
        self._s.pools_i[PI.NEED_ALLOC, pool] = 1
