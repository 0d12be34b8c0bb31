"""The event engine: the one owner of simulated time and state.

An `Engine` holds one replication's `EngineState` (typed groups of arrays,
`cluster.state`) and drives the compiled loop (`cluster.kernel`). Only the engine moves
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

>>> from cluster.model import *
>>> from cluster.distributions import Exponential
>>> from cluster.speedup import LinearSpeedup
>>> from cluster.workload import poisson_arrivals
>>> spec = SimulationSpec(
...     name="mm1", seed=1, stop=StopRule(jobs=1000),
...     node_types=(NodeType("core", cpu=1, memory_gb=1),), nodes=("core",), pools=(),
...     classes=(JobClass("a", poisson_arrivals(0.5), Exponential(1.0), LinearSpeedup()),))
>>> run = Engine(spec).run()
>>> run.summary["jobs_completed"]
1000
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from cluster import kernel
from cluster.capacity import fits_a_node_type, node_types_of_run
from cluster.faults import FaultDraws, timeline_array
from cluster.jit import direct_entry
from cluster.jobs import (
    Jobs,
    Purpose,
    concat_jobs,
    generate_jobs,
    replication_seed,
    replication_seeds,
    runtime_table,
    stream,
)
from cluster.layout import (
    CF,
    CI,
    FS,
    IS,
    JF,
    JI,
    NF,
    NI,
    PF,
    PI,
    TL,
    JobState,
    NodeStatus,
    Refusal,
    Status,
)
from cluster.metrics import RunResult, build_result
from cluster.model import SimulationSpec
from cluster.policies import compiled, registry
from cluster.policies.base import (
    Allocation,
    Allocator,
    LiftRule,
    OomKill,
    Placement,
    PlacementView,
    Placer,
    Policy,
    PolicyError,
    PoolView,
    Provisioner,
    Release,
    Rent,
    Scaler,
    ScaleView,
)
from cluster.policies.codes import PlacerCode, check_code
from cluster.state import (
    EngineState,
    RunState,
    check_gpu_request,
    class_arrays,
    empty_nodes,
    fill_node,
    grown,
    max_gpus,
    pool_arrays,
    read_only,
)
from cluster.usage import CPU_RULES, Usage
from cluster.world import build_world, initial_cache

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Plain ints for the Python hot path (reading an IntEnum member costs a dictionary lookup).
_Q_HEAD, _Q_TAIL, _NEED_PLACE = int(IS.Q_HEAD), int(IS.Q_TAIL), int(IS.NEED_PLACE)
_STATE, _QUEUED, _NOW = int(JI.STATE), int(JobState.QUEUED), int(FS.NOW)
_NEED_SCALE, _STATUS_POOL = int(IS.NEED_SCALE), int(IS.STATUS_POOL)
_N_WAITING, _DEC_N = int(IS.N_WAITING), int(IS.DEC_N)
_BAD = int(Status.BAD_DECISION)
_LIFT = int(Status.NEED_LIFT_DECISION)
_TIMELINE, _DRAWS = int(Status.NEED_TIMELINE_ACTION), int(Status.NEED_FAULT_DRAWS)
_REDRAWS = int(Status.NEED_SIZE_REDRAWS)
_PLACE, _ALLOC, _SCALE = (
    int(Status.NEED_PLACE_DECISION),
    int(Status.NEED_ALLOC_DECISION),
    int(Status.NEED_SCALE_DECISION),
)

#: Events per call of the compiled loop between progress reports.
EVENTS_PER_CALL = 1 << 18
#: Tolerance on over-allocation of a pool (cores).
ALLOC_EPS = 1e-9

__all__ = [
    "ALLOC_EPS",
    "Engine",
    "Jobs",
    "check_allocation",
    "generate_jobs",
    "replication_seeds",
    "runtime_table",
]


def job_state(
    spec: SimulationSpec, provisioner: Provisioner, jobs: Jobs
) -> tuple[FloatArray, IntArray]:
    """Fresh per-job state arrays for the given jobs (requests from the provisioner).

    Only the rows the loop reads before writing are filled; the others stay zero pages
    that the operating system maps lazily (a row a run never writes costs no memory).
    """
    n = jobs.arrival_s.size
    jobs_f = np.zeros((len(JF), n))
    jobs_i = np.zeros((len(JI), n), dtype=np.int64)
    jobs_f[JF.ARRIVAL] = jobs.arrival_s
    jobs_f[JF.SIZE] = jobs.size
    jobs_i[JI.CLS] = jobs.class_index
    cpu, mem, gpu = provisioner.requests_for(spec, jobs)
    for row, values in ((JF.REQ_CPU, cpu), (JF.REQ_MEM, mem), (JF.REQ_GPU, gpu)):
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (n,) or not np.all(np.isfinite(values)) or np.any(values < 0):
            raise PolicyError(
                provisioner.name,
                0.0,
                f"requests must give one finite value >= 0 per job for {row.name.lower()} "
                f"({n} jobs)",
            )
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


def _policy(spec: SimulationSpec, kind: registry.Kind, given: Any, base: type) -> Any:
    ref = getattr(spec.scheduler, kind)
    policy = given if given is not None else registry.create(kind, ref.name, **ref.params)
    if not isinstance(policy, Policy) or not isinstance(policy, base):
        raise TypeError(f"{policy!r} is not a {base.__name__}")
    code = int(policy.kernel_code)
    if not check_code(kind, code):
        raise PolicyError(
            policy.name,
            0.0,
            f"kernel_code {code} is not a compiled {kind} code "
            "(see cluster.policies.codes; 0 = decide in Python)",
        )
    return policy


class Engine:
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
    ) -> None:
        """Build the state of one replication.

        `jobs` replaces the jobs drawn from the scenario's streams (e.g. jobs routed to a
        shard by a Ray scheduler); policies default to the scenario's scheduler block;
        `force_python_policies` takes the Python decision path even for compiled policies.
        """
        self.spec = spec
        self.replication = replication
        seq = replication_seed(spec, replication)
        self.placer: Placer = _policy(spec, "placer", placer, Placer)
        self.allocator: Allocator = _policy(spec, "allocator", allocator, Allocator)
        self.provisioner: Provisioner = _policy(spec, "provisioner", provisioner, Provisioner)
        if (
            scaler is None
            and spec.scheduler.scaler.name == "static"
            and isinstance(self.placer, Scaler)
        ):
            # A placer that rents its own nodes (Pennyworth's plans) is the scaler too.
            scaler = self.placer
        self.scaler: Scaler = _policy(spec, "scaler", scaler, Scaler)
        placer_rng = stream(seq, Purpose.PLACER)
        self.placer.setup(spec, stream(seq, Purpose.PLACER))
        self.allocator.setup(spec, stream(seq, Purpose.ALLOCATOR))
        self.provisioner.setup(spec, stream(seq, Purpose.PROVISIONER))
        if self.scaler is not self.placer:
            self.scaler.setup(spec, stream(seq, Purpose.SCALER))
        for c in spec.classes:
            check_gpu_request(f"workload class {c.name!r}: request.gpu", c.request.gpu)
        self.jobs = jobs if jobs is not None else generate_jobs(spec, seq)
        self._type_index = {t.name: i for i, t in enumerate(spec.node_types)}
        self._fault_draws = FaultDraws(spec, seq)
        self._redraw_rngs: dict[int, np.random.Generator] = {}
        self._s = self._build_state(placer_rng, force_python_policies)
        self._t = tuple(self._s)  # what compiled entries take (see cluster.kernel)
        self._first_failures()
        self._run: Callable[..., int] | None = None  # run_entry without type dispatch
        self._ro: EngineState | None = None
        self._view_cache: dict[str, Any] = {}
        self._pending: list[Placement] | tuple[Placement, ...] = []
        self.status = -1

    # -- state ------------------------------------------------------------------------

    def _build_state(self, placer_rng: np.random.Generator, force_python: bool) -> EngineState:
        spec, jobs = self.spec, self.jobs
        n = jobs.arrival_s.size
        jobs_f, jobs_i = job_state(spec, self.provisioner, jobs)
        m = len(spec.nodes)
        nodes_f, nodes_i, gpu_free = empty_nodes(max(m, 1), max_gpus(spec))
        for k, type_name in enumerate(spec.nodes):
            t = self._type_index[type_name]
            fill_node(nodes_f, nodes_i, gpu_free, k, spec.node_types[t], t, 0.0, NodeStatus.UP)
        pools_f, pools_i = pool_arrays(spec)
        classes_f, classes_i, tx, ty = class_arrays(spec)
        world_f, world_i, items = build_world(spec)
        cached = np.zeros((nodes_f.shape[1], max(items, 1)))
        for k, type_name in enumerate(spec.nodes):
            cached[k] = initial_cache(spec, self._type_index[type_name], items)
        istate = np.zeros(len(IS), dtype=np.int64)
        fstate = np.zeros(len(FS))
        istate[IS.NODES_USED] = m
        istate[IS.PLACER_CODE] = 0 if force_python else self.placer.kernel_code
        istate[IS.ALLOC_CODE] = 0 if force_python else self.allocator.kernel_code
        istate[IS.SCALER_CODE] = self.scaler.kernel_code
        n_classes = len(spec.classes)
        fcfs = istate[IS.PLACER_CODE] != 0 or bool(getattr(self.placer, "strict_fcfs", False))
        istate[IS.PLACER_FCFS] = int(fcfs)
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
        return EngineState(
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
            decisions=np.zeros((3, max(n, 1)), dtype=np.int64),
            decision_setup_s=np.zeros(max(n, 1)),
            wait_i=np.zeros(max(n, 1), dtype=np.int64),
            wait_f=np.zeros((3, max(n, 1))),
            world_f=world_f,
            world_i=world_i,
            cached=cached,
            lift_edges=lift_edges,
            **self._fault_state(nodes_f, nodes_i, istate, heap),
        )

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
        for k in range(len(spec.nodes)):
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
        for k in range(len(self.spec.nodes)):
            if s.nodes_i[NI.FAILS, k]:
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
        return RunState(self.spec, self.replication, state, self.now)

    # -- driving ----------------------------------------------------------------------

    def peek(self) -> float:
        """Time of the next event, seconds (+inf if none)."""
        return float(kernel.peek_entry(self._t))

    def step(self, until_s: float = math.inf, max_events: int = EVENTS_PER_CALL) -> int:
        """Advance until `until_s`, `max_events` events or the end; answer policy calls.

        Returns a `cluster.layout.Status`: FINISHED, PAUSED (next event after `until_s`)
        or YIELDED (`max_events` events done).
        """
        run = self._run
        if run is None:
            entry = kernel.loop_entry(
                pools=self._s.pools_f.shape[1] > 0,
                python_placer=self._s.istate[IS.PLACER_CODE] == PlacerCode.PYTHON,
            )
            run = self._run = direct_entry(entry, self._t, until_s, max_events, -1, -1)
        job = node = -1
        while True:
            status = run(self._t, until_s, max_events, job, node)
            job = -1
            if status < 0:  # a Python placer decides for -status waiting jobs
                view = self._view_cache.get("view") or self._new_view()
                fill = view.__dict__
                fill["_n"] = -status
                fill["_running"] = None  # counted again on the call's first read
                decisions = self.placer.place(view)
                self._pending = decisions
                if (
                    type(decisions) is list
                    and len(decisions) == 1
                    and type(d := decisions[0]) is Placement
                    and d.gpus is None
                    and d.setup_s == 0.0
                ):
                    job, node = d.job, d.node  # the loop applies it as it resumes
                else:
                    self._queue_decisions(decisions)
            elif status == _SCALE:
                self._python_scale()
            elif status == _ALLOC:
                self._python_allocate(int(self._s.istate[_STATUS_POOL]))
            elif status == _BAD:
                self._refused()
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
        total = max(self.jobs.arrival_s.size, 1)
        horizon = self.spec.stop.time_s
        while self.step() != Status.FINISHED:
            if progress is not None:
                done = self.now / horizon if horizon else self.jobs_done / total
                progress(min(float(done), 1.0))
        if progress is not None:
            progress(1.0)
        return self.result()

    def result(self) -> RunResult:
        return build_result(
            self.snapshot(),
            (self.placer, self.allocator, self.provisioner),
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

    def add_jobs(self, jobs: Jobs) -> IntArray:
        """Append jobs to a paused engine; return their row indices.

        For feeding an engine window by window (the Ray shards of `actors/`): the new jobs
        must be sorted by arrival and arrive no earlier than `now` and than every job
        already known. The arrays grow; the heap, the queue and every running job are
        kept, so an engine fed this way runs exactly as one given all its jobs up front.
        """
        m = jobs.arrival_s.size
        s = self._s
        n = s.jobs_f.shape[1]
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        last = s.jobs_f[JF.ARRIVAL, n - 1] if n else -math.inf
        if np.any(np.diff(jobs.arrival_s) < 0) or jobs.arrival_s[0] < max(last, self.now):
            raise ValueError(
                "add_jobs: jobs must be sorted and arrive at or after now and "
                "after every job already known"
            )
        new_f, new_i = job_state(self.spec, self.provisioner, jobs)
        arrays: dict[str, Any] = {
            "jobs_f": np.concatenate([s.jobs_f, new_f], axis=1),
            "jobs_i": np.concatenate([s.jobs_i, new_i], axis=1),
        }
        table = runtime_table(self.spec, jobs)
        if table.shape[0] or s.run_by_type.shape[0]:
            types = len(self.spec.node_types)
            old = s.run_by_type if s.run_by_type.shape[0] else np.full((types, n), -1.0)
            table = table if table.shape[0] else np.full((types, m), -1.0)
            arrays["run_by_type"] = np.concatenate([old, table], axis=1)
        self.jobs = concat_jobs(self.jobs, jobs)
        total = n + m
        arrays.update(self._room(2 * total + self.nodes_used + 1, total))
        self._replace(**arrays)
        self._queue_room(total)
        return np.arange(n, total, dtype=np.int64)

    def _queue_room(self, jobs: int, extra: int = 0) -> None:
        """Grow the queue so that every job of the first `jobs` rows still to arrive, and
        `extra` re-queued ones, find room behind its entries so far (a killed and re-queued
        job takes a second entry)."""
        s = self._s
        need = int(s.istate[IS.Q_TAIL]) + max(jobs - int(s.istate[IS.NEXT_ARRIVAL]), 0) + extra
        if need > s.queue.size:
            self._replace(**self._room(s.heap_t.size, need))

    def _room(self, heap: int, queue: int) -> dict[str, Any]:
        s = self._s
        return {
            "heap_t": grown(s.heap_t, heap),
            "heap_j": grown(s.heap_j, heap),
            "heap_k": grown(s.heap_k, heap),
            "queue": grown(s.queue, queue),
            "members": grown(s.members, queue),
            "decisions": grown(s.decisions, queue),
            "decision_setup_s": grown(s.decision_setup_s, queue),
            "wait_i": grown(s.wait_i, queue),
            "wait_f": grown(s.wait_f, queue),
        }

    # -- feeding many small batches (the windowed Ray shards of `actors/`) ---------------

    #: Rows filled by `append_jobs`; None while every row is a job (no spare rows).
    _fed: int | None = None

    @property
    def jobs_fed(self) -> int:
        """Job rows that hold jobs; rows from here on are `append_jobs`'s spare rows."""
        return self._s.jobs_f.shape[1] if self._fed is None else self._fed

    def append_jobs(self, jobs: Jobs) -> IntArray:
        """`add_jobs` in amortised O(batch) time, for an engine fed many small batches.

        The job arrays keep spare rows that never arrive (arrival +inf, state FUTURE) and
        grow by doubling; each batch fills the next spare rows in place, so feeding n jobs
        costs O(n) instead of `add_jobs`' O(n^2 / batch). Same rules as `add_jobs` (sorted,
        at or after now and after every job fed); returns the batch's row indices. Rows
        from `jobs_fed` on are spare: feed such an engine with `append_jobs` only, and read
        its jobs as the first `jobs_fed` rows (`self.jobs` keeps the jobs it was built on).
        """
        m = jobs.arrival_s.size
        lo = self.jobs_fed
        if m == 0:
            return np.zeros(0, dtype=np.int64)
        s = self._s
        last = s.jobs_f[JF.ARRIVAL, lo - 1] if lo else -math.inf
        if np.any(np.diff(jobs.arrival_s) < 0) or jobs.arrival_s[0] < max(last, self.now):
            raise ValueError(
                "append_jobs: jobs must be sorted and arrive at or after now and "
                "after every job already known"
            )
        hi = lo + m
        if hi > s.jobs_f.shape[1]:
            size = max(hi, 2 * s.jobs_f.shape[1])
            jobs_f = grown(s.jobs_f, size)
            jobs_f[JF.ARRIVAL, s.jobs_f.shape[1] :] = math.inf
            arrays: dict[str, Any] = {"jobs_f": jobs_f, "jobs_i": grown(s.jobs_i, size)}
            if s.run_by_type.shape[0]:
                arrays["run_by_type"] = grown(s.run_by_type, size, fill=-1.0)
            arrays.update(self._room(2 * size + self.nodes_used + 1, size))
            self._replace(**arrays)
            s = self._s
        new_f, new_i = job_state(self.spec, self.provisioner, jobs)
        s.jobs_f[:, lo:hi] = new_f
        s.jobs_i[:, lo:hi] = new_i
        table = runtime_table(self.spec, jobs)
        if table.shape[0]:
            if s.run_by_type.shape[0] == 0:
                self._replace(run_by_type=np.full((table.shape[0], s.jobs_f.shape[1]), -1.0))
                s = self._s
            s.run_by_type[:, lo:hi] = table
        self._fed = hi
        self._queue_room(hi)
        return np.arange(lo, hi, dtype=np.int64)

    # -- operations ---------------------------------------------------------------------

    def start(
        self,
        job: int,
        node: int,
        gpus: Sequence[int] | None = None,
        setup_s: float = 0.0,
        policy: str = "engine",
    ) -> None:
        """Start queued `job` on `node` now (checked: it must be waiting and fit).

        `gpus` names the node's GPUs the job gets (default: the first with room); `setup_s`
        is a delay before execution while the job holds its request.
        """
        s = self._s
        j, k = int(job), int(node)
        decision = Placement(j, k, gpus=None if gpus is None else tuple(gpus), setup_s=setup_s)
        if not 0 <= j < s.jobs_f.shape[1] or s.jobs_i[JI.STATE, j] != JobState.QUEUED:
            raise PolicyError(policy, self.now, f"job {j} is not waiting in the queue", decision)
        self._apply(policy, decision)
        s.istate[IS.NEED_SCALE] = 1

    def kill(
        self,
        job: int,
        requeue: bool = True,
        request: tuple[float, float, float] | None = None,
    ) -> None:
        """Kill running placed `job` now: its work is lost and counted as waste.

        With `requeue` it waits in the queue again, with `request` (cores, GB, GPUs) if
        given, and its `retries` grows; otherwise it fails.
        """
        s = self._s
        j = int(job)
        if not 0 <= j < s.jobs_f.shape[1] or s.jobs_i[JI.STATE, j] != JobState.RUNNING:
            raise ValueError(f"kill: job {j} is not running")
        if s.jobs_i[JI.POOL, j] >= 0 and s.jobs_i[JI.NODE, j] < 0:
            raise ValueError(f"kill: job {j} runs in a malleable pool, not on a node")
        if requeue:
            self._queue_room(self.jobs_fed, extra=1)
            s = self._s
            if request is not None:
                check_gpu_request(f"kill({j}): request", request[2])
        kernel.kill_entry(self._t, j, self.now, requeue)
        if requeue and request is not None:
            s.jobs_f[[JF.REQ_CPU, JF.REQ_MEM, JF.REQ_GPU], j] = request

    def drop(self, job: int) -> None:
        """Drop waiting `job` now: it leaves the queue unplaced and fails (for admission
        control, e.g. a pod that fits on no node is not retried)."""
        s = self._s
        j = int(job)
        if not 0 <= j < s.jobs_f.shape[1] or s.jobs_i[JI.STATE, j] != JobState.QUEUED:
            raise ValueError(f"drop: job {j} is not waiting in the queue")
        kernel.drop_entry(self._t, j, self.now)

    def _timeline_action(self, e: int) -> None:
        """Carry out timeline event e that the loop hands over: `join` rents its nodes."""
        s = self._s
        t = int(s.timeline[TL.TYPE, e])
        for _ in range(int(s.timeline[TL.COUNT, e])):
            self.rent(t)

    def _refill_draws(self) -> None:
        """A node's up (or down) times ran out: draw the next block and schedule its event."""
        s = self._s
        k, kind = int(s.istate[IS.DRAW_NODE]), int(s.istate[IS.DRAW_KIND])
        self._store_draws(s.fault_draws, s.nodes_i, k, up=kind == int(kernel.Event.FAIL))
        kernel.schedule_fault_entry(self._t, k, self.now, kind)

    def _redraw_sizes(self) -> None:
        """Jobs re-queued after a failure get fresh work from their class's size
        distribution (`restart_work: redraw`), each class from its own stream."""
        s = self._s
        n = int(s.istate[IS.REDRAW_N])
        s.istate[IS.REDRAW_N] = 0
        for j in s.members[:n].tolist():
            c = int(s.jobs_i[JI.CLS, j])
            rng = self._redraw_rngs.get(c)
            if rng is None:
                seq = replication_seed(self.spec, self.replication)
                rng = stream(seq, Purpose.RESTART, self.spec.classes[c].name)
                self._redraw_rngs[c] = rng
            s.jobs_f[JF.SIZE, j] = float(self.spec.classes[c].size.sample(rng, 1)[0])

    def _lift(self, j: int) -> None:
        """Job j ran out of memory within its retry limit: the provisioner lifts its
        request and the job is killed and queued again with it (its work is lost)."""
        s = self._s
        s.istate[IS.OOM_JOB] = -1
        req_cpu, req_mem = float(s.jobs_f[JF.REQ_CPU, j]), float(s.jobs_f[JF.REQ_MEM, j])
        kill = OomKill(
            job=j,
            class_index=int(s.jobs_i[JI.CLS, j]),
            time_s=self.now,
            request_cpu=req_cpu,
            request_memory_gb=req_mem,
            used_memory_gb=req_mem,
            retries=int(s.jobs_i[JI.RETRIES, j]),
            features={k: float(v[j]) for k, v in self.jobs.features.items()},
        )
        name = self.provisioner.name
        rule = self._lift_rule
        if rule is not None:  # the loop's own rule, when it had no queue room to apply it
            mem_or_none = rule.next_request(kill.class_index, req_mem)
            new = None if mem_or_none is None else (req_cpu, mem_or_none)
        else:
            new = self.provisioner.lift(kill)
        if new is None:  # the provisioner gives up: the job fails
            self.kill(j, requeue=False)
            return
        try:
            cpu, mem = (float(x) for x in new)
        except (TypeError, ValueError) as exc:
            raise PolicyError(name, self.now, f"lift() must return (cores, GB): {exc}") from None
        if not (math.isfinite(cpu) and cpu >= 0 and math.isfinite(mem)) or mem <= req_mem:
            raise PolicyError(
                name,
                self.now,
                f"lift() must grow the memory request of job {j} above {req_mem:g} GB "
                "(finite cores >= 0)",
                (cpu, mem),
            )
        gpu = float(s.jobs_f[JF.REQ_GPU, j])
        types = node_types_of_run(self.spec, s.nodes_i[NI.NODE_TYPE, : self.nodes_used])
        if not fits_a_node_type(self.spec, types, cpu, mem, gpu):
            # No node the run holds or may rent could ever hold it: it fails now (it would
            # wait forever), and its request shows what it needed (`failed_no_fit`).
            self.kill(j, requeue=False)
            s.jobs_f[[JF.REQ_CPU, JF.REQ_MEM], j] = (cpu, mem)
            return
        self.kill(j, requeue=True, request=(cpu, mem, gpu))

    def rent(self, node_type: str | int) -> int:
        """Rent a node of `node_type` now; it takes jobs after the type's start-up delay.

        Returns the node's index. Money: the type's start-up cost, plus its price from
        ready to release.
        """
        t = self._node_type(node_type)
        s = self._s
        k = self.nodes_used
        if k >= s.nodes_f.shape[1]:
            rows = max(2 * s.nodes_f.shape[1], k + 1)
            nodes_f, nodes_i, gpu_free = empty_nodes(rows, s.gpu_free.shape[1])
            nodes_f[:, :k], nodes_i[:, :k], gpu_free[:k] = s.nodes_f, s.nodes_i, s.gpu_free
            self._replace(
                nodes_f=nodes_f,
                nodes_i=nodes_i,
                gpu_free=gpu_free,
                cached=grown(s.cached, rows, axis=0),
                fault_draws=grown(s.fault_draws, rows, axis=0),
                **self._room(s.heap_t.size + 2 * (k + 1), s.queue.size),
            )
            s = self._s
        nt = self.spec.node_types[t]
        delay = float(nt.startup_delay_s)
        status = NodeStatus.UP if delay <= 0 else NodeStatus.BOOTING
        fill_node(s.nodes_f, s.nodes_i, s.gpu_free, k, nt, t, self.now, status)
        s.cached[k] = initial_cache(self.spec, t, s.cached.shape[1])
        s.istate[IS.NODES_USED] = k + 1
        self._fault_draws.add_node(k, t)
        if s.nodes_i[NI.FAILS, k]:
            for up in (True, False):
                self._store_draws(s.fault_draws, s.nodes_i, k, up)
        if s.istate[IS.HEAP_N] + 2 >= s.heap_t.size:
            self._replace(**self._room(2 * s.heap_t.size, s.queue.size))
            s = self._s
        if status == NodeStatus.BOOTING:
            kernel.push_entry(self._t, self.now + delay, k, int(kernel.Event.NODE_READY))
        else:
            s.istate[IS.NEED_PLACE] = 1
            if s.nodes_i[NI.FAILS, k]:
                kernel.schedule_fault_entry(self._t, k, self.now, int(kernel.Event.FAIL))
        self._view_cache.clear()
        return k

    def release(self, node: int) -> None:
        """Give node `node` back now (it must run no job); its price stops."""
        s = self._s
        k = int(node)
        if not 0 <= k < self.nodes_used:
            raise ValueError(f"release: node {k} does not exist")
        status = s.nodes_i[NI.STATUS, k]
        if status == NodeStatus.RELEASED:
            raise ValueError(f"release: node {k} is already released")
        if s.nodes_f[NF.RUNNING_JOBS, k] > 0:
            raise ValueError(
                f"release: node {k} still runs {int(s.nodes_f[NF.RUNNING_JOBS, k])} job(s)"
            )
        s.nodes_i[NI.STATUS, k] = NodeStatus.RELEASED
        s.nodes_f[NF.RELEASED_AT, k] = self.now
        if status == NodeStatus.BOOTING:
            s.nodes_f[NF.READY_AT, k] = self.now  # never ready: no operating time
        self._view_cache.clear()

    def _node_type(self, node_type: str | int) -> int:
        if isinstance(node_type, str):
            if node_type not in self._type_index:
                raise ValueError(
                    f"unknown node type {node_type!r}; the scenario has "
                    f"{', '.join(self._type_index)}"
                )
            return self._type_index[node_type]
        t = int(node_type)
        if not 0 <= t < len(self.spec.node_types):
            raise ValueError(f"node type index {t} out of range")
        return t

    # -- Python policies --------------------------------------------------------------

    def _static_nodes(self) -> dict[str, npt.NDArray[Any]]:
        cache = self._view_cache
        if "static" not in cache:
            cache["static"] = static_node_arrays(self._s.nodes_f, self._s.nodes_i)
        return cache["static"]

    def placement_view(self) -> PlacementView:
        """The queue and the nodes now, as a Python placer sees them.

        One view object per run is re-filled at every call (valid during the call only):
        free resources are read-only views of the engine's arrays, and the waiting jobs,
        their classes and requests are what the loop gathered.
        """
        view = self._view_cache.get("view") or self._new_view()
        d = view.__dict__
        d["_n"] = kernel.gather_entry(self._t)
        d["_running"] = None
        return view

    def _new_view(self) -> LiveView:
        view = self._view_cache["view"] = LiveView(self._s, self._static_nodes())
        return view

    def _queue_decisions(self, decisions: object) -> None:
        """Hand a Python placer's placements to the loop, which applies them first."""
        name = self.placer.name
        if not isinstance(decisions, list | tuple):
            raise PolicyError(name, self.now, "place() must return a list of Placement", decisions)
        s = self._s
        if len(decisions) > s.decisions.shape[1]:
            self._replace(**self._room(s.heap_t.size, len(decisions)))
            s = self._s
        out, setup = s.decisions, s.decision_setup_s
        for i, d in enumerate(decisions):
            if not isinstance(d, Placement):
                raise PolicyError(name, self.now, "not a Placement", d)
            mask = -1
            if d.gpus is not None or d.setup_s != 0.0:
                mask = check_placement(name, self.now, d, s)
            out[0, i] = d.job
            out[1, i] = d.node
            out[2, i] = mask
            setup[i] = d.setup_s
        s.istate[_DEC_N] = len(decisions)
        s.istate[_NEED_PLACE] = 0

    def _refused(self) -> None:
        """The loop refused a placement of the last Python call: raise, naming it."""
        s = self._s
        i = int(s.istate[IS.DEC_BAD])
        d = self._pending[i]
        why = int(s.istate[IS.DEC_WHY])
        if why == Refusal.NOT_WAITING:
            raise PolicyError(
                self.placer.name, self.now, f"job {d.job} is not waiting in the queue", d
            )
        check_placement(self.placer.name, self.now, d, s)  # raises with the details
        raise PolicyError(self.placer.name, self.now, "the placement cannot be applied", d)

    def _apply(self, policy: str, d: Placement) -> None:
        """Check and apply one placement now (the compiled `try_start` checks the fit)."""
        now = float(self._s.fstate[_NOW])
        mask = -1
        if d.gpus is not None or d.setup_s != 0.0:
            mask = check_placement(policy, now, d, self._s)
        why = kernel.try_start(self._t, int(d.job), int(d.node), now, float(d.setup_s), mask)
        if why == Refusal.NOT_WAITING:
            raise PolicyError(policy, now, f"job {d.job} is not waiting in the queue", d)
        if why != Refusal.NONE:
            check_placement(policy, now, d, self._s)  # raises with the details
            raise PolicyError(policy, now, "the placement cannot be applied", d)

    def scale_view(self) -> ScaleView:
        s = self._s
        used = self.nodes_used
        q = s.members[: kernel.gather_entry(self._t)].copy()
        return ScaleView(
            time_s=self.now,
            queue=q,
            class_index=s.jobs_i[JI.CLS, q],
            request_cpu=s.jobs_f[JF.REQ_CPU, q],
            node_type=s.nodes_i[NI.NODE_TYPE, :used].copy(),
            node_status=s.nodes_i[NI.STATUS, :used].copy(),
            running_jobs=s.nodes_f[NF.RUNNING_JOBS, :used].astype(np.int64),
            free_cpu=s.nodes_f[NF.FREE_CPU, :used].copy(),
            node_type_names=tuple(t.name for t in self.spec.node_types),
            batch_pending=self._batch_pending(),
        )

    def _batch_pending(self) -> bool:
        """Whether more jobs arrive at this very instant (a batch still being submitted)."""
        s = self._s
        a = int(s.istate[IS.NEXT_ARRIVAL])
        return a < s.jobs_f.shape[1] and float(s.jobs_f[JF.ARRIVAL, a]) <= self.now

    def _python_scale(self) -> None:
        s = self._s
        s.istate[IS.NEED_SCALE] = 0
        decisions = self.scaler.scale(self.scale_view())
        name, now = self.scaler.name, self.now
        if not isinstance(decisions, list | tuple):
            raise PolicyError(name, now, "scale() must return a list of Rent / Release", decisions)
        for d in decisions:
            try:
                if isinstance(d, Rent):
                    for _ in range(int(d.count)):
                        self.rent(d.node_type)
                elif isinstance(d, Release):
                    self.release(d.node)
                else:
                    raise PolicyError(name, now, "not a Rent or Release", d)
            except ValueError as exc:
                raise PolicyError(name, now, str(exc), d) from None

    def pool_view(self, p: int) -> PoolView:
        s = self._s
        n = kernel.pool_members_entry(self._t, p)
        ids = s.members[:n].copy()
        cls = s.jobs_i[JI.CLS, ids]
        return PoolView(
            time_s=self.now,
            pool=self.spec.pools[p].name,
            cores=float(s.pools_f[PF.CORES, p]),
            job_ids=ids,
            class_index=cls.copy(),
            arrival_s=s.jobs_f[JF.ARRIVAL, ids].copy(),
            size=s.jobs_f[JF.SIZE, ids].copy(),
            remaining=s.jobs_f[JF.REM, ids].copy(),
            holding_cost=s.classes_f[CF.HOLDING_COST, cls].copy(),
            current_cores=s.jobs_f[JF.CORES, ids].copy(),
        )

    def _python_allocate(self, p: int) -> None:
        view = self.pool_view(p)
        if view.job_ids.size:
            decision = self.allocator.allocate(view)
            cores = check_allocation(self.allocator.name, view, decision)
            self._s.jobs_f[JF.CORES, view.job_ids] = cores
        kernel.apply_allocation_entry(self._t, p, self.now)


class LiveView(PlacementView):
    """The engine's reusable `PlacementView`: re-filled at each call, valid during it.

    Free resources are read-only views of the engine's arrays (no copies); the queued
    jobs' classes and requests and the `active` mask are gathered on first read, and
    `running_by_class` is counted on its first read in a call (then kept for the call).
    """

    def __init__(self, s: EngineState, static: dict[str, npt.NDArray[Any]]) -> None:
        put = object.__setattr__
        for name, array in (
            ("free_cpu", s.nodes_f[NF.FREE_CPU]),
            ("free_memory_gb", s.nodes_f[NF.FREE_MEM]),
            ("free_gpu", s.nodes_f[NF.FREE_GPU]),
            ("free_slots", s.nodes_f[NF.FREE_SLOTS]),
            ("gpu_free_milli", s.gpu_free),
            ("cached", s.cached if s.world_i.shape[0] else np.zeros((0, 0))),
        ):
            view = array.view()
            view.flags.writeable = False
            put(self, name, view)
        for name in ("capacity_cpu", "capacity_memory_gb", "capacity_gpu", "speed", "node_type"):
            put(self, name, static[name])
        put(self, "_s", s)
        put(self, "_slices", {})
        put(self, "_n", 0)
        put(self, "_running", None)  # running_by_class of this call, once read
        put(self, "_ended", 0)  # every job row below this one has ended

    def _slice(self, key: int, array: npt.NDArray[Any]) -> Any:
        """The first `_n` entries of `array`, read-only (one slice object per length)."""
        d = self.__dict__
        n = d["_n"]
        slices = d["_slices"]
        got = slices.get((key, n))
        if got is None:
            got = slices[(key, n)] = array[:n]
            got.flags.writeable = False
        return got

    @property
    def time_s(self) -> float:
        return float(self.__dict__["_s"].fstate[FS.NOW])

    @property
    def queue(self) -> IntArray:
        return self._slice(0, self.__dict__["_s"].members)

    @property
    def class_index(self) -> IntArray:
        return self._slice(1, self.__dict__["_s"].wait_i)

    @property
    def request_cpu(self) -> FloatArray:
        return self._slice(2, self.__dict__["_s"].wait_f[0])

    @property
    def request_memory_gb(self) -> FloatArray:
        return self._slice(3, self.__dict__["_s"].wait_f[1])

    @property
    def request_gpu(self) -> FloatArray:
        return self._slice(4, self.__dict__["_s"].wait_f[2])

    @property
    def active(self) -> npt.NDArray[np.bool_]:
        """Node rows that are up now (computed at each read: nodes boot and leave)."""
        return self.__dict__["_s"].nodes_i[NI.STATUS] == NodeStatus.UP

    @property
    def node_status(self) -> IntArray:
        """Every node row's `NodeStatus` now (read-only)."""
        status = self.__dict__["_s"].nodes_i[NI.STATUS].view()
        status.flags.writeable = False
        return status

    @property
    def running_by_class(self) -> IntArray:
        """(node rows, classes): jobs of each class holding resources on each node now,
        counted at the first read in a call (read-only)."""
        d = self.__dict__
        got = d["_running"]
        if got is None:
            got, d["_ended"] = running_by_class(d["_s"], d["_ended"])
            d["_running"] = got
        return got


def running_by_class(s: EngineState, ended: int = 0) -> tuple[IntArray, int]:
    """(node rows, classes): how many placed jobs of each class run or set up (state
    RUNNING, i.e. hold their request) on each node row; read-only.

    Jobs arrive in row order, so only the rows from `ended` (every row below it has ended:
    done or failed) up to the next arrival are read. Returns the counts and the new such
    row, for the next count to start from.
    """
    hi = int(s.istate[IS.NEXT_ARRIVAL])
    state = s.jobs_i[JI.STATE, ended:hi]
    live = (state != JobState.DONE) & (state != JobState.FAILED)
    first = int(np.argmax(live)) if live.size and live.any() else live.size
    ended += first
    running = state[first:] == JobState.RUNNING
    node = s.jobs_i[JI.NODE, ended:hi][running]
    cls = s.jobs_i[JI.CLS, ended:hi][running]
    n_nodes, n_classes = s.nodes_f.shape[1], s.classes_i.shape[1]
    counts = np.bincount(node * n_classes + cls, minlength=n_nodes * n_classes).astype(
        np.int64, copy=False
    )
    counts = counts.reshape(n_nodes, n_classes)
    counts[:, s.classes_i[CI.POOL] >= 0] = 0  # a pool's jobs are on no node
    counts.flags.writeable = False
    return counts, ended


def static_node_arrays(nodes_f: FloatArray, nodes_i: IntArray) -> dict[str, npt.NDArray[Any]]:
    """Node arrays that change only when nodes are rented, as read-only copies."""
    arrays: dict[str, npt.NDArray[Any]] = {
        "capacity_cpu": nodes_f[NF.CAP_CPU].copy(),
        "capacity_memory_gb": nodes_f[NF.CAP_MEM].copy(),
        "capacity_gpu": nodes_f[NF.CAP_GPU].copy(),
        "speed": nodes_f[NF.SPEED].copy(),
        "node_type": nodes_i[NI.NODE_TYPE].copy(),
        "active": nodes_i[NI.STATUS] == NodeStatus.UP,
    }
    for array in arrays.values():
        array.flags.writeable = False
    return arrays


def check_placement(policy: str, now: float, decision: Placement, s: EngineState) -> int:
    """Validate one placement of a waiting job against the node's free resources.

    Returns the GPU mask the job gets; raises PolicyError naming the policy, the time and
    the decision otherwise. The fit rule is `compiled.node_fits`, the compiled placers' own.
    """
    j, k = int(decision.job), int(decision.node)
    nodes_f = s.nodes_f
    if not 0 <= k < nodes_f.shape[1] or s.nodes_i[NI.STATUS, k] != NodeStatus.UP:
        raise PolicyError(policy, now, f"node {k} does not exist or is not up", decision)
    cpu, mem, gpu = (float(s.jobs_f[r, j]) for r in (JF.REQ_CPU, JF.REQ_MEM, JF.REQ_GPU))
    if not compiled.node_fits(nodes_f, s.nodes_i, s.gpu_free, k, cpu, mem, gpu):
        free = tuple(float(nodes_f[r, k]) for r in (NF.FREE_CPU, NF.FREE_MEM, NF.FREE_GPU))
        raise PolicyError(
            policy,
            now,
            f"job {j} (cpu, GB, gpu) = {(cpu, mem, gpu)} does not fit node {k} "
            f"with free {free} and {nodes_f[NF.FREE_SLOTS, k]:g} slots",
            decision,
        )
    setup_s = float(decision.setup_s)
    if not (math.isfinite(setup_s) and setup_s >= 0):
        raise PolicyError(policy, now, "setup_s must be finite and non-negative", decision)
    if decision.gpus is None or gpu <= 0:
        return -1
    return _gpu_mask(policy, now, decision, s, k, gpu)


def _gpu_mask(
    policy: str, now: float, decision: Placement, s: EngineState, k: int, gpu: float
) -> int:
    gpus = [int(g) for g in decision.gpus or ()]
    want = int(kernel.gpus_wanted(gpu))
    milli = float(kernel.gpu_milli(gpu))
    n_gpus = int(s.nodes_f[NF.CAP_GPU, k])
    if len(gpus) != want or len(set(gpus)) != want:
        raise PolicyError(policy, now, f"the job needs {want} distinct GPU(s)", decision)
    mask = 0
    for g in gpus:
        if not 0 <= g < n_gpus or s.gpu_free[k, g] < milli - compiled.FIT_EPS:
            raise PolicyError(
                policy, now, f"GPU {g} of node {k} has no {milli:g} milli-GPU free", decision
            )
        mask |= 1 << g
    return mask


def check_allocation(policy: str, view: PoolView, decision: Allocation) -> FloatArray:
    """Validate an allocator's decision; return the cores as a float array."""
    if not isinstance(decision, Allocation):
        raise PolicyError(policy, view.time_s, "allocate() must return an Allocation", decision)
    cores = np.asarray(decision.cores, dtype=np.float64)
    if cores.shape != view.job_ids.shape:
        raise PolicyError(
            policy, view.time_s, f"{cores.size} core counts for {view.job_ids.size} jobs", decision
        )
    if not np.all(np.isfinite(cores)) or np.any(cores < 0):
        raise PolicyError(
            policy, view.time_s, "core counts must be finite and non-negative", decision
        )
    if cores.sum() > view.cores * (1 + ALLOC_EPS) + ALLOC_EPS:
        raise PolicyError(
            policy,
            view.time_s,
            f"allocated {cores.sum():.6g} cores in pool {view.pool!r} of {view.cores:g}",
            decision,
        )
    return cores
