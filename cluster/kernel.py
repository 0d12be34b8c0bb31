"""The compiled event loop: piecewise-constant rates, one clock, no time steps.

`run_kernel` advances an `EngineState` (see `clusteremu.cluster.state`, rows in
`clusteremu.cluster.layout`)
event by event. Between two events every rate is constant, so time jumps straight to the
next arrival, completion, pool completion, node ready or patience timer. Each event kind
has its own handler (`on_arrival`, `on_complete`, ...). Decisions are made at the top of
the loop: by a compiled policy (`clusteremu.cluster.policies.compiled_table`) inside the loop; by a
Python placer called from inside the loop (a C callback into the engine, `FN_PYTHON_PLACER`),
whose placements go through the same transitions (`start_job`); or, for the rarer Python
decisions, by returning to Python (`NEED_SCALE_DECISION`, `NEED_ALLOC_DECISION`, ...), which
applies them and calls the loop again. The loop also
returns when the next event lies beyond `until_s` or after `max_events` events, so a run
can be resumed at any point with exactly the same result.

Only `clusteremu.cluster.engine.Engine` calls these functions: they are the engine's transitions.
"""

from __future__ import annotations

import math

import numpy as np
from clusteremu.cluster.fit_index import index_update
from clusteremu.cluster.jit import (
    call_c,
    inline_function,
    internal_function,
    kernel_function,
    prefetch,
)
from clusteremu.cluster.layout import (
    CF,
    CI,
    FS,
    GPU_MILLI,
    IS,
    JF,
    JI,
    NF,
    NI,
    PF,
    PI,
    TL,
    Action,
    Event,
    JobState,
    NodeStatus,
    Status,
)
from clusteremu.cluster.policies.compiled import (
    FIT_EPS,
    choose_gpus,
    holds_request,
    node_fits,
)
from clusteremu.cluster.policies.compiled_table import (
    allocator_view,
    as_allocator,
    as_placer,
    as_scaler,
    placer_view,
    scaler_view,
)
from clusteremu.cluster.speedup import AMDAHL, POWER, RIGID, ROOFTOP, SMOOTH_ROOFTOP, TABLE
from clusteremu.cluster.state import EngineState
from clusteremu.cluster.world import setup_delay

# Return codes as plain ints: an IntEnum member returned to Python is boxed through pickle.
_FINISHED, _NEED_PLACE_DECISION, _NEED_ALLOC_DECISION = (
    int(Status.FINISHED),
    int(Status.NEED_PLACE_DECISION),
    int(Status.NEED_ALLOC_DECISION),
)
_PAUSED, _YIELDED, _NEED_SCALE_DECISION = (
    int(Status.PAUSED),
    int(Status.YIELDED),
    int(Status.NEED_SCALE_DECISION),
)
_BAD_DECISION = int(Status.BAD_DECISION)
_NEED_LIFT_DECISION = int(Status.NEED_LIFT_DECISION)
_NEED_TIMELINE_ACTION = int(Status.NEED_TIMELINE_ACTION)
_NEED_FAULT_DRAWS = int(Status.NEED_FAULT_DRAWS)
_NEED_SIZE_REDRAWS = int(Status.NEED_SIZE_REDRAWS)
_BAD_COMPILED_DECISION = int(Status.BAD_COMPILED_DECISION)
_BAD_ALLOCATION = int(Status.BAD_ALLOCATION)
_NEED_SCALE_ACTIONS = int(Status.NEED_SCALE_ACTIONS)
_PLACER_HANDED_BACK = int(Status.PLACER_HANDED_BACK)
#: Over-allocation a compiled allocator may make (relative and absolute, cores), as in
#: `clusteremu.cluster.decision_checks.ALLOC_EPS`.
_ALLOC_EPS = 1e-9
#: Rows of the `fns` array the loop takes: (C wrapper, object, entry) addresses per kind;
#: `FN_PYTHON_PLACER`: the engine's callback for a Python placer (`call_c`), then zeros.
FN_PLACER, FN_ALLOCATOR, FN_SCALER, FN_PYTHON_PLACER = 0, 1, 2, 3

#: What the Python placer's callback returns besides one placement (job << 32 | node):
#: it placed nothing; its placements wait in `decisions` (IS.DEC_N); the loop must return
#: (`Status.PLACER_HANDED_BACK`: the call raised, or its placements need larger arrays).
NO_PLACEMENT, PLACEMENTS_QUEUED, HANDED_BACK = -2, -3, -4
#: The node of a packed placement: its low 32 bits.
_NODE_BITS = (1 << 32) - 1

#: Heap kinds carry the job's attempt number above these bits (stale entries are skipped).
KIND_BITS = 4
KIND_MASK = (1 << KIND_BITS) - 1


@internal_function
def speedup_value(
    c: int,
    cores: float,
    classes_f: np.ndarray,
    classes_i: np.ndarray,
    tx: np.ndarray,
    ty: np.ndarray,
) -> float:
    """s_c(cores) for class c; linear below one core (see clusteremu.cluster.speedup) but for a
    rigid
    class (1 on any cores)."""
    kind = classes_i[CI.SP_KIND, c]
    if kind == RIGID:
        return 1.0
    if cores <= 1.0:
        return cores
    a = classes_f[CF.SP_PARAM, c]
    if kind == AMDAHL:
        return 1.0 / ((1.0 - a) + a / cores)
    if kind == POWER:
        return cores**a
    if kind == ROOFTOP:
        return min(cores, a)
    if kind == SMOOTH_ROOFTOP:
        q = classes_f[CF.SP_PARAM2, c]
        return ((cores**-q + a**-q) / (1.0 + a**-q)) ** (-1.0 / q)
    if kind == TABLE:
        npts = classes_i[CI.SP_NPTS, c]
        if cores >= tx[c, npts - 1]:
            return ty[c, npts - 1]
        for i in range(1, npts):
            if cores <= tx[c, i]:
                x0, x1 = tx[c, i - 1], tx[c, i]
                y0, y1 = ty[c, i - 1], ty[c, i]
                return y0 + (y1 - y0) * (cores - x0) / (x1 - x0)
        return ty[c, npts - 1]
    return cores


# --- binary heap of (time, key, kind), ordered by time, then kind, then id ----------------

#: A heap entry's key (`heap_j`): its kind's tie rank above RANK_SHIFT, its id (a job's
#: number or a node's row) below, so that (time, key) orders entries by time, then kind,
#: then id with one comparison of integers at equal times.
RANK_SHIFT = 56
ID_MASK = (1 << RANK_SHIFT) - 1


@inline_function
def tie_rank(kind: int) -> int:
    """Where a heap event of `kind` comes among the events at one instant (docs/engine.md,
    "Ties"): placed jobs' completions, out-of-memory kills, patience timeouts, random node
    failures and recoveries (and their draw refills), nodes finishing start-up. Pool
    completions, timeline events and arrivals come after the heap's completions (the
    loop)."""
    if kind == Event.COMPLETE:
        return 0
    if kind == Event.OOM:
        return 1
    if kind == Event.TIMER:
        return 2
    if kind == Event.NODE_READY:
        return 4
    return 3  # FAIL, RECOVER, DRAW_UP, DRAW_DOWN


@inline_function
def _heap_less(ht: np.ndarray, hj: np.ndarray, a: int, b: int) -> bool:
    """Entry a before entry b: earlier, or at one instant by kind (`tie_rank`), then by id
    (a job's number, or a node's row, within one kind): the key holds both."""
    return ht[a] < ht[b] or (ht[a] == ht[b] and hj[a] < hj[b])


@inline_function
def heap_id(s, i: int) -> int:  # type: ignore[no-untyped-def]
    """The id (job number or node row) of heap entry i."""
    return s.heap_j[i] & ID_MASK


@inline_function
def _heap_swap(ht: np.ndarray, hj: np.ndarray, hk: np.ndarray, a: int, b: int) -> None:
    ht[a], ht[b] = ht[b], ht[a]
    hj[a], hj[b] = hj[b], hj[a]
    hk[a], hk[b] = hk[b], hk[a]


@inline_function
def heap_push(s, t: float, j: int, kind: int) -> None:  # type: ignore[no-untyped-def]
    ht, hj, hk = s.heap_t, s.heap_j, s.heap_k
    i = s.istate[IS.HEAP_N]
    if i >= ht.size:
        # Full: drop the stale entries (killed attempts' completions pile up under
        # failures). Valid entries are at most one per job and two per node row.
        purge_heap(s)
        i = s.istate[IS.HEAP_N]
        if i >= ht.size:
            s.istate[IS.HEAP_OVERFLOW] = 1
            return
    ht[i], hj[i], hk[i] = t, (tie_rank(kind & KIND_MASK) << RANK_SHIFT) | j, kind
    s.istate[IS.HEAP_N] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if _heap_less(ht, hj, i, parent):
            _heap_swap(ht, hj, hk, i, parent)
            i = parent
        else:
            break


@inline_function
def _sift_down(ht: np.ndarray, hj: np.ndarray, hk: np.ndarray, i: int, n: int) -> None:
    """Move entry i down the first n entries of the heap until its children are later."""
    while True:
        left = 2 * i + 1
        if left >= n:
            break
        child = left
        if left + 1 < n and _heap_less(ht, hj, left + 1, left):
            child = left + 1
        if _heap_less(ht, hj, child, i):
            _heap_swap(ht, hj, hk, i, child)
            i = child
        else:
            break


@inline_function
def heap_pop(s) -> None:  # type: ignore[no-untyped-def]
    ht, hj, hk = s.heap_t, s.heap_j, s.heap_k
    n = s.istate[IS.HEAP_N] - 1
    s.istate[IS.HEAP_N] = n
    ht[0], hj[0], hk[0] = ht[n], hj[n], hk[n]
    _sift_down(ht, hj, hk, 0, n)


@internal_function
def purge_heap(s) -> None:  # type: ignore[no-untyped-def]
    """Drop every stale entry from the heap and restore the heap order."""
    ht, hj, hk = s.heap_t, s.heap_j, s.heap_k
    n = s.istate[IS.HEAP_N]
    w = 0
    for r in range(n):
        if not _stale(s, r):
            ht[w], hj[w], hk[w] = ht[r], hj[r], hk[r]
            w += 1
    s.istate[IS.HEAP_N] = w
    for top in range(w // 2 - 1, -1, -1):
        _sift_down(ht, hj, hk, top, w)


@inline_function
def _stale(s, i: int) -> bool:  # type: ignore[no-untyped-def]
    """Whether heap entry i no longer applies (a killed attempt, a job no longer waiting)."""
    kind = s.heap_k[i] & KIND_MASK
    j = heap_id(s, i)
    if kind == Event.COMPLETE or kind == Event.OOM:
        return (
            s.jobs_i[JI.STATE, j] != JobState.RUNNING
            or (s.heap_k[i] >> KIND_BITS) != s.jobs_i[JI.RETRIES, j]
        )
    if kind == Event.TIMER:
        return s.jobs_i[JI.STATE, j] != JobState.QUEUED
    if kind >= Event.FAIL:  # a node's fault event: stale once the node moved on
        return (
            s.nodes_i[NI.STATUS, j] == NodeStatus.RELEASED
            or (s.heap_k[i] >> KIND_BITS) != s.nodes_i[NI.EPOCH, j]
        )
    return False


@inline_function
def prefetch_heap_top(s) -> None:  # type: ignore[no-untyped-def]
    """Bring the job rows that the heap's first completion will read into the caches while
    the loop handles the event before it (`clusteremu.cluster.jit.prefetch`: a hint, no effect on
    what runs)."""
    if s.istate[IS.HEAP_N] > 0 and (s.heap_k[0] & KIND_MASK) == Event.COMPLETE:
        j = heap_id(s, 0)
        if j < s.jobs_f.shape[1]:
            jobs_f, jobs_i = s.jobs_f, s.jobs_i
            prefetch(jobs_i, JI.STATE, j)
            prefetch(jobs_i, JI.RETRIES, j)
            prefetch(jobs_i, JI.NODE, j)
            prefetch(jobs_i, JI.CLS, j)
            prefetch(jobs_f, JF.REQ_CPU, j)
            prefetch(jobs_f, JF.REQ_MEM, j)
            prefetch(jobs_f, JF.REQ_GPU, j)
            prefetch(jobs_f, JF.END, j)


# --- state transitions -------------------------------------------------------------------


@inline_function
def accumulate(s, t: float) -> None:  # type: ignore[no-untyped-def]
    """Add the time-integrals of jobs in system and busy cores from NOW up to t."""
    fstate = s.fstate
    lo = max(fstate[FS.NOW], fstate[FS.WIN_START])
    hi = min(t, fstate[FS.WIN_END])
    if hi > lo:
        dt = hi - lo
        for c in range(s.n_class.shape[0]):
            s.area_class[c] += s.n_class[c] * dt
        fstate[FS.BUSY_AREA] += fstate[FS.BUSY_CPU] * dt
        for p in range(s.pools_f.shape[1]):
            s.pools_f[PF.BUSY_AREA, p] += s.pools_f[PF.ALLOCATED, p] * dt
        fstate[FS.MEASURED_TIME] += dt


@inline_function
def advance_to(s, t: float) -> None:  # type: ignore[no-untyped-def]
    """Move the clock to t (no event): integrals up to t, then NOW = t."""
    accumulate(s, t)
    s.fstate[FS.NOW] = t


@inline_function
def gpu_milli(gpu: float) -> float:
    """Milli-GPU per GPU of a request (a share of one GPU, or whole GPUs)."""
    if gpu <= 0.0:
        return 0.0
    if gpu < 1.0:
        return math.floor(gpu * GPU_MILLI + 0.5)
    return float(GPU_MILLI)


@inline_function
def gpus_wanted(gpu: float) -> int:
    """How many GPUs a request occupies."""
    if gpu <= 0.0:
        return 0
    if gpu < 1.0:
        return 1
    return int(math.floor(gpu + 0.5))


@inline_function
def start_job(  # type: ignore[no-untyped-def]
    s, j: int, k: int, now: float, run_s: float, setup_s: float, gpu_mask: int
) -> None:
    """Start queued job j on node k at time now: reserve its request, schedule its end.

    The job runs for `run_s` seconds (size / (node speed * s(cpu)) when negative) after a
    set-up delay of `setup_s` seconds (image pull, data transfer) during which it already
    holds its request. `run_by_type[node type, j]`, when present and not negative, is the
    job's run time on that node type. The world model (`clusteremu.cluster.world`) adds the set-up
    delay of pulls and transfers the node needs. `gpu_mask` names the GPUs of node k the
    job gets (bit g = GPU g); -1 lets `choose_gpus` pick (the first GPUs with room).

    With real usages (`clusteremu.cluster.usage`): a job that keeps u cores busy runs at s(u) cores,
    whatever it requested; granted r < u cores, it runs u / r times longer (`cpu_rule`
    proportional; with a linear speed-up: size / min(r, u)). A memory peak above the
    request ends the attempt at `peak_at` of its run time with an out-of-memory event.
    """
    jobs_f, jobs_i, nodes_f = s.jobs_f, s.jobs_i, s.nodes_f
    c = jobs_i[JI.CLS, j]
    cpu = jobs_f[JF.REQ_CPU, j]
    if run_s < 0.0 and s.run_by_type.shape[0] > 0:
        run_s = s.run_by_type[s.nodes_i[NI.NODE_TYPE, k], j]
    # A job that requests no cores is not CPU-bound: it runs at the node's speed.
    cores = cpu if cpu > 0.0 else 1.0
    has_usage = s.istate[IS.HAS_USAGE] == 1
    used_cpu = jobs_f[JF.USE_CPU, j] if has_usage else math.nan
    if used_cpu > 0.0:
        cores = used_cpu  # it keeps this many busy, whatever it was granted
    rate = nodes_f[NF.SPEED, k] * speedup_value(
        c, cores, s.classes_f, s.classes_i, s.class_tx, s.class_ty
    )
    if s.world_i.shape[0] > 0:
        setup_s += setup_delay(s, j, k)
    exec_s = jobs_f[JF.SIZE, j] / rate if run_s < 0.0 else run_s
    event = Event.COMPLETE
    if has_usage:
        # Granted fewer cores than it keeps busy: it runs used/requested times longer.
        if s.istate[IS.CPU_RULE] == 1 and cpu > 0.0 and used_cpu > cpu:
            exec_s *= used_cpu / cpu
        # A memory peak above the request: killed (out-of-memory) when the peak occurs.
        if jobs_f[JF.USE_MEM, j] > jobs_f[JF.REQ_MEM, j]:
            exec_s *= jobs_f[JF.PEAK_AT, j]
            event = Event.OOM
    duration = exec_s + setup_s
    jobs_f[JF.SETUP_S, j] = setup_s
    jobs_f[JF.START, j] = now
    jobs_f[JF.DUE, j] = now + duration
    jobs_i[JI.NODE, j] = k
    jobs_i[JI.STATE, j] = JobState.RUNNING
    gpu = jobs_f[JF.REQ_GPU, j]
    if gpu > 0.0:
        if gpu_mask < 0:
            gpu_mask = choose_gpus(s.gpu_free, k, gpu)
        milli = gpu_milli(gpu)
        for g in range(s.gpu_free.shape[1]):
            if (gpu_mask >> g) & 1:
                s.gpu_free[k, g] -= milli
        jobs_i[JI.GPU_MASK, j] = gpu_mask
    nodes_f[NF.FREE_CPU, k] -= cpu
    nodes_f[NF.FREE_MEM, k] -= jobs_f[JF.REQ_MEM, j]
    nodes_f[NF.FREE_GPU, k] -= gpu
    nodes_f[NF.FREE_SLOTS, k] -= 1.0
    nodes_f[NF.RUNNING_JOBS, k] += 1.0
    index_update(s, k)
    if s.istate[IS.FAULTS] == 1:  # the node's list of running jobs (a failure kills them)
        head = s.nodes_i[NI.JOB_HEAD, k]
        jobs_i[JI.NEXT, j] = head
        jobs_i[JI.PREV, j] = -1
        if head >= 0:
            jobs_i[JI.PREV, head] = j
        s.nodes_i[NI.JOB_HEAD, k] = j
    s.fstate[FS.BUSY_CPU] += cpu
    heap_push(s, now + duration, j, event | (jobs_i[JI.RETRIES, j] << KIND_BITS))
    s.istate[IS.DECISIONS] += 1


@inline_function
def _account_usage(s, j: int, now: float) -> None:  # type: ignore[no-untyped-def]
    """Add the attempt of placed job j ending now to its reserved and used integrals."""
    jobs_f = s.jobs_f
    held = now - jobs_f[JF.START, j]
    cpu, mem = jobs_f[JF.REQ_CPU, j], jobs_f[JF.REQ_MEM, j]
    used_cpu, used_mem = jobs_f[JF.USE_CPU, j], jobs_f[JF.USE_MEM, j]
    jobs_f[JF.RESERVED_CPU_S, j] += cpu * held
    jobs_f[JF.RESERVED_MEM_S, j] += mem * held
    # A job cannot use more than it holds (NaN: exactly its request).
    jobs_f[JF.USED_CPU_S, j] += (cpu if not used_cpu < cpu else used_cpu) * held
    jobs_f[JF.USED_MEM_S, j] += (mem if not used_mem < mem else used_mem) * held


@inline_function
def _free_node_of(s, j: int) -> None:  # type: ignore[no-untyped-def]
    """Give back what placed job j holds on its node."""
    jobs_f, nodes_f = s.jobs_f, s.nodes_f
    k = s.jobs_i[JI.NODE, j]
    cpu = jobs_f[JF.REQ_CPU, j]
    gpu = jobs_f[JF.REQ_GPU, j]
    nodes_f[NF.FREE_SLOTS, k] += 1.0
    nodes_f[NF.FREE_CPU, k] += cpu
    nodes_f[NF.FREE_MEM, k] += jobs_f[JF.REQ_MEM, j]
    nodes_f[NF.FREE_GPU, k] += gpu
    nodes_f[NF.RUNNING_JOBS, k] -= 1.0
    if gpu > 0.0:
        milli = gpu_milli(gpu)
        mask = s.jobs_i[JI.GPU_MASK, j]
        for g in range(s.gpu_free.shape[1]):
            if (mask >> g) & 1:
                s.gpu_free[k, g] += milli
    index_update(s, k)
    s.fstate[FS.BUSY_CPU] -= cpu
    if s.istate[IS.FAULTS] == 1:
        _unlink_from_node(s, j, k)
        if s.nodes_i[NI.STATUS, k] == NodeStatus.DRAINING and nodes_f[NF.RUNNING_JOBS, k] <= 0:
            release_node(s, k, s.fstate[FS.NOW])  # drained: its last job left


@inline_function
def _unlink_from_node(s, j: int, k: int) -> None:  # type: ignore[no-untyped-def]
    """Take job j out of node k's list of running jobs."""
    jobs_i = s.jobs_i
    prev, nxt = jobs_i[JI.PREV, j], jobs_i[JI.NEXT, j]
    if prev >= 0:
        jobs_i[JI.NEXT, prev] = nxt
    else:
        s.nodes_i[NI.JOB_HEAD, k] = nxt
    if nxt >= 0:
        jobs_i[JI.PREV, nxt] = prev
    jobs_i[JI.NEXT, j] = -1
    jobs_i[JI.PREV, j] = -1


@inline_function
def _leave(s, j: int, t: float, state: int) -> None:  # type: ignore[no-untyped-def]
    """Job j leaves the system at t, done or failed."""
    s.jobs_f[JF.END, j] = t
    s.jobs_i[JI.STATE, j] = state
    s.n_class[s.jobs_i[JI.CLS, j]] -= 1
    s.istate[IS.N_SYSTEM] -= 1
    s.istate[IS.DONE_COUNT] += 1
    if state == JobState.FAILED:
        s.istate[IS.FAILED_COUNT] += 1


@inline_function
def _enqueue(s, j: int) -> None:  # type: ignore[no-untyped-def]
    s.jobs_i[JI.STATE, j] = JobState.QUEUED
    # A strict-FCFS placer (every compiled one) starts nothing behind a blocked head, so
    # only a job joining an empty queue needs a decision. Other Python placers may
    # backfill, so they are asked whenever a job joins.
    if next_queued(s) < 0 or s.istate[IS.PLACER_FCFS] == 0:
        s.istate[IS.NEED_PLACE] = 1
    tail = s.istate[IS.Q_TAIL]
    s.queue[tail] = j
    s.jobs_i[JI.QPOS, j] = tail
    s.istate[IS.Q_TAIL] = tail + 1


@internal_function
def kill_job(s, j: int, now: float, requeue: bool) -> None:  # type: ignore[no-untyped-def]
    """Kill running placed job j at `now`: its work is lost (counted as waste).

    With `requeue` it joins the queue again (its request may be changed before it is placed
    again) and its `retries` grows; otherwise it fails. The queue must have room for it.
    """
    _free_node_of(s, j)
    if s.istate[IS.HAS_USAGE] == 1:
        _account_usage(s, j, now)
    s.jobs_f[JF.WASTE_CORE_S, j] += s.jobs_f[JF.REQ_CPU, j] * (now - s.jobs_f[JF.START, j])
    s.istate[IS.KILLED_COUNT] += 1
    s.istate[IS.NEED_SCALE] = 1
    if requeue:
        s.jobs_i[JI.RETRIES, j] += 1
        _enqueue(s, j)
        s.istate[IS.NEED_PLACE] = 1
    else:
        _leave(s, j, now, JobState.FAILED)
        if s.istate[IS.Q_HEAD] < s.istate[IS.Q_TAIL]:
            s.istate[IS.NEED_PLACE] = 1


@inline_function
def advance_pool(s, p: int, now: float) -> None:  # type: ignore[no-untyped-def]
    """Bring the remaining work of every job in pool p up to time now."""
    pools_f, jobs_f = s.pools_f, s.jobs_f
    dt = now - pools_f[PF.LAST, p]
    if dt > 0.0:
        j = s.pools_i[PI.HEAD, p]
        while j >= 0:
            jobs_f[JF.REM, j] -= jobs_f[JF.RATE, j] * dt
            jobs_f[JF.CORE_SECONDS, j] += jobs_f[JF.CORES, j] * dt
            j = s.jobs_i[JI.NEXT, j]
    pools_f[PF.LAST, p] = now


@internal_function
def pool_members(s, p: int) -> int:  # type: ignore[no-untyped-def]
    """Write the jobs of pool p in arrival order into `members`; return how many."""
    n = 0
    j = s.pools_i[PI.HEAD, p]
    while j >= 0:
        s.members[n] = j
        n += 1
        j = s.jobs_i[JI.NEXT, j]
    return n


@internal_function
def apply_allocation(s, p: int, now: float) -> None:  # type: ignore[no-untyped-def]
    """Turn the cores in jobs_f[CORES] of pool p's jobs into rates and its next completion."""
    jobs_f, pools_f = s.jobs_f, s.pools_f
    speed = pools_f[PF.SPEED, p]
    best_t = math.inf
    best_j = -1
    total = 0.0
    j = s.pools_i[PI.HEAD, p]
    while j >= 0:
        k = jobs_f[JF.CORES, j]
        total += k
        rate = speed * speedup_value(
            s.jobs_i[JI.CLS, j], k, s.classes_f, s.classes_i, s.class_tx, s.class_ty
        )
        jobs_f[JF.RATE, j] = rate
        if k > 0.0 and jobs_f[JF.START, j] < 0.0:
            jobs_f[JF.START, j] = now
        if rate > 0.0:
            left = jobs_f[JF.REM, j] / rate
            if left < best_t:
                best_t = left
                best_j = j
        j = s.jobs_i[JI.NEXT, j]
    s.fstate[FS.BUSY_CPU] += total - pools_f[PF.ALLOCATED, p]
    pools_f[PF.ALLOCATED, p] = total
    pools_f[PF.NEXT_T, p] = now + max(best_t, 0.0)
    s.pools_i[PI.NEXT_J, p] = best_j
    s.pools_i[PI.NEED_ALLOC, p] = 0
    s.istate[IS.DECISIONS] += 1


@inline_function
def _pool_append(s, p: int, j: int) -> None:  # type: ignore[no-untyped-def]
    pools_i, jobs_i = s.pools_i, s.jobs_i
    tail = pools_i[PI.TAIL, p]
    jobs_i[JI.PREV, j] = tail
    jobs_i[JI.NEXT, j] = -1
    if tail >= 0:
        jobs_i[JI.NEXT, tail] = j
    else:
        pools_i[PI.HEAD, p] = j
    pools_i[PI.TAIL, p] = j
    pools_i[PI.COUNT, p] += 1


@inline_function
def _pool_remove(s, p: int, j: int) -> None:  # type: ignore[no-untyped-def]
    pools_i, jobs_i = s.pools_i, s.jobs_i
    prev, nxt = jobs_i[JI.PREV, j], jobs_i[JI.NEXT, j]
    if prev >= 0:
        jobs_i[JI.NEXT, prev] = nxt
    else:
        pools_i[PI.HEAD, p] = nxt
    if nxt >= 0:
        jobs_i[JI.PREV, nxt] = prev
    else:
        pools_i[PI.TAIL, p] = prev
    jobs_i[JI.NEXT, j] = -1
    jobs_i[JI.PREV, j] = -1
    pools_i[PI.COUNT, p] -= 1


@inline_function
def next_queued(s) -> int:  # type: ignore[no-untyped-def]
    """The earliest job still waiting for a node (skipping ones placed out of order), or -1."""
    istate = s.istate
    h = istate[IS.Q_HEAD]
    while h < istate[IS.Q_TAIL] and not _live(s, h):
        h += 1
    istate[IS.Q_HEAD] = h
    return s.queue[h] if h < istate[IS.Q_TAIL] else -1


@inline_function
def _live(s, h: int) -> bool:  # type: ignore[no-untyped-def]
    """Whether queue entry h is a waiting job's current entry (not one it left, or an old
    entry of a job killed and queued again)."""
    j = s.queue[h]
    return s.jobs_i[JI.STATE, j] == JobState.QUEUED and s.jobs_i[JI.QPOS, j] == h


@internal_function
def waiting_jobs(s, out) -> int:  # type: ignore[no-untyped-def]
    """Write the waiting jobs in queue order into `out`; return how many."""
    n = 0
    for h in range(next_queued_index(s), s.istate[IS.Q_TAIL]):
        if _live(s, h):
            out[n] = s.queue[h]
            n += 1
    return n


@internal_function
def gather_waiting(s) -> int:  # type: ignore[no-untyped-def]
    """For a Python placer: the waiting jobs into `members`, their class into `wait_i`
    and their (cpu, GB, GPU) requests into `wait_f`; return how many."""
    n = waiting_jobs(s, s.members)
    for i in range(n):
        j = s.members[i]
        s.wait_i[i] = s.jobs_i[JI.CLS, j]
        s.wait_f[0, i] = s.jobs_f[JF.REQ_CPU, j]
        s.wait_f[1, i] = s.jobs_f[JF.REQ_MEM, j]
        s.wait_f[2, i] = s.jobs_f[JF.REQ_GPU, j]
    s.istate[IS.N_WAITING] = n
    return n


@internal_function
def may_place(s) -> bool:  # type: ignore[no-untyped-def]
    """Whether a Python placer could place a waiting job now; False proves it cannot (its
    only legal answer is no placement), so the loop need not ask it.

    A strict-FCFS placer starts nothing behind the head: the head must fit a node
    (`node_fits`, the rule every placement is checked by). Otherwise some waiting job must
    be within the largest free cores and GB of an up node with a free worker slot (GPUs
    not checked: a job may be asked about that fits nowhere, never the reverse). O(nodes
    + waiting jobs).
    """
    nodes_f, nodes_i = s.nodes_f, s.nodes_i
    used = s.istate[IS.NODES_USED]
    if s.istate[IS.PLACER_FCFS] == 1:
        j = next_queued(s)
        if j < 0:
            return False
        cpu, mem, gpu = s.jobs_f[JF.REQ_CPU, j], s.jobs_f[JF.REQ_MEM, j], s.jobs_f[JF.REQ_GPU, j]
        fits = False
        for k in range(used):
            if node_fits(nodes_f, nodes_i, s.gpu_free, k, cpu, mem, gpu):
                fits = True
                break
        return fits
    max_cpu = -math.inf
    max_mem = -math.inf
    for k in range(used):
        if nodes_i[NI.STATUS, k] == NodeStatus.UP and nodes_f[NF.FREE_SLOTS, k] >= 1.0:
            max_cpu = max(max_cpu, nodes_f[NF.FREE_CPU, k])
            max_mem = max(max_mem, nodes_f[NF.FREE_MEM, k])
    if max_cpu == -math.inf:
        return False
    for h in range(next_queued_index(s), s.istate[IS.Q_TAIL]):
        if _live(s, h):
            j = s.queue[h]
            if (
                max_cpu >= s.jobs_f[JF.REQ_CPU, j] - FIT_EPS
                and max_mem >= s.jobs_f[JF.REQ_MEM, j] - FIT_EPS
            ):
                return True
    return False


@internal_function
def next_queued_index(s) -> int:  # type: ignore[no-untyped-def]
    next_queued(s)
    return s.istate[IS.Q_HEAD]


# --- event handlers ------------------------------------------------------------------------


@inline_function
def on_timer(s, j: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """A queued job's patience runs out: it leaves unserved (failed); the queue moves on."""
    _leave(s, j, t, JobState.FAILED)
    if s.istate[IS.Q_HEAD] < s.istate[IS.Q_TAIL]:
        s.istate[IS.NEED_PLACE] = 1
    s.istate[IS.NEED_SCALE] = 1


@inline_function
def on_complete(s, j: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """A placed job completes and frees its node."""
    _free_node_of(s, j)
    if s.istate[IS.HAS_USAGE] == 1:
        _account_usage(s, j, t)
    _leave(s, j, t, JobState.DONE)
    if s.istate[IS.Q_HEAD] < s.istate[IS.Q_TAIL]:
        s.istate[IS.NEED_PLACE] = 1
    s.istate[IS.NEED_SCALE] = 1


@inline_function
def on_oom(s, j: int, t: float) -> bool:  # type: ignore[no-untyped-def]
    """Running job j's memory peak exceeds its request: it is killed (its work is lost).

    Within its retry limit it waits again with a lifted request: the compiled `LiftRule`
    lifts it here when the provisioner has one and the queue has room; otherwise this
    returns True and the loop hands the job to Python (`NEED_LIFT_DECISION`), which kills
    and re-queues it. Past the limit, or at the rule's cap, it fails here. A lifted request
    that no node handed out so far could hold goes to Python too, which fails the job unless
    a node type the run may still rent holds it (it would wait forever otherwise).
    """
    s.jobs_i[JI.OOM_KILLS, j] += 1
    s.istate[IS.OOM_COUNT] += 1
    if s.jobs_i[JI.RETRIES, j] < s.istate[IS.RETRY_LIMIT]:
        # Room for its second queue entry behind every arrival still to come?
        room = s.istate[IS.Q_TAIL] + (s.jobs_f.shape[1] - s.istate[IS.NEXT_ARRIVAL]) < s.queue.size
        if s.istate[IS.LIFT_CODE] == 0 or not room:
            s.istate[IS.OOM_JOB] = j
            return True
        hit = s.jobs_f[JF.REQ_MEM, j]
        new = lifted_request(s, s.jobs_i[JI.CLS, j], hit)
        if new > hit:
            if not _some_node_holds(s, s.jobs_f[JF.REQ_CPU, j], new, s.jobs_f[JF.REQ_GPU, j]):
                s.istate[IS.OOM_JOB] = j
                return True
            kill_job(s, j, t, True)
            s.jobs_f[JF.REQ_MEM, j] = new
            return False
    kill_job(s, j, t, False)
    return False


@inline_function
def _some_node_holds(s, cpu: float, mem: float, gpu: float) -> bool:  # type: ignore[no-untyped-def]
    """Whether a node row handed out so far (any status) could hold the request when empty."""
    nodes_f = s.nodes_f
    for k in range(s.istate[IS.NODES_USED]):
        if holds_request(
            nodes_f[NF.CAP_CPU, k],
            nodes_f[NF.CAP_MEM, k],
            nodes_f[NF.CAP_GPU, k],
            nodes_f[NF.CAP_SLOTS, k],
            cpu,
            mem,
            gpu,
        ):
            return True
    return False


@inline_function
def lifted_request(s, c: int, hit: float) -> float:  # type: ignore[no-untyped-def]
    """The compiled `LiftRule`: the next memory request (GB) of class c after hitting `hit`
    GB (not above `hit` when its cap is reached)."""
    want = max(s.fstate[FS.LIFT_MULT] * hit, hit + s.fstate[FS.LIFT_ADD_GB])
    edges = s.lift_edges
    if c < edges.shape[0]:
        for e in range(1, edges.shape[1]):
            if edges[c, e] >= want:
                if edges[c, e] < math.inf:
                    want = edges[c, e]
                break
        want = min(want, edges[c, 0])
    return want


@inline_function
def node_up(s, k: int) -> bool:  # type: ignore[no-untyped-def]
    """A booting node finishes starting up and takes jobs (False: it was not booting)."""
    if s.nodes_i[NI.STATUS, k] != NodeStatus.BOOTING:
        return False
    set_status(s, k, NodeStatus.UP)
    if s.istate[IS.Q_HEAD] < s.istate[IS.Q_TAIL]:
        s.istate[IS.NEED_PLACE] = 1
    s.istate[IS.NEED_SCALE] = 1
    return True


@inline_function
def set_status(s, k: int, status: int) -> None:  # type: ignore[no-untyped-def]
    """Node row k's status becomes `status` (a `NodeStatus`); the index follows."""
    s.nodes_i[NI.STATUS, k] = status
    s.istate[IS.STATUS_CHANGES] += 1  # a Python placer's view rereads the statuses
    index_update(s, k)


@inline_function
def on_node_ready(s, k: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """A rented node finishes starting up and takes jobs (its failures start counting)."""
    if node_up(s, k) and s.nodes_i[NI.FAILS, k] == 1:
        schedule_fault(s, k, t, Event.FAIL)


# --- node faults (docs/faults.md) ----------------------------------------------------------


@internal_function
def schedule_fault(s, k: int, t: float, kind: int) -> None:  # type: ignore[no-untyped-def]
    """Schedule node k's next random `Event.FAIL` (after an up time) or `Event.RECOVER`
    (after a down time) from its own draws; when they ran out, an `Event.DRAW_UP` /
    `DRAW_DOWN` now, on which Python refills them and calls this again."""
    half = s.fault_draws.shape[1] // 2
    epoch = s.nodes_i[NI.EPOCH, k] << KIND_BITS
    row = NI.UP_POS if kind == Event.FAIL else NI.DOWN_POS
    pos = s.nodes_i[row, k]
    if pos >= half:
        heap_push(s, t, k, (Event.DRAW_UP if kind == Event.FAIL else Event.DRAW_DOWN) | epoch)
        return
    s.nodes_i[row, k] = pos + 1
    d = s.fault_draws[k, pos if kind == Event.FAIL else half + pos]
    heap_push(s, t + d, k, kind | epoch)


@inline_function
def _make_queue_room(s) -> None:  # type: ignore[no-untyped-def]
    """Room at the queue's tail for one more entry: entries of jobs that left or were
    queued again are dropped (each job has at most one live entry, so this always frees
    room for a running job's new entry behind every arrival still to come)."""
    istate = s.istate
    if istate[IS.Q_TAIL] + 1 + (s.jobs_f.shape[1] - istate[IS.NEXT_ARRIVAL]) <= s.queue.size:
        return
    w = 0
    for h in range(istate[IS.Q_HEAD], istate[IS.Q_TAIL]):
        if _live(s, h):
            j = s.queue[h]
            s.queue[w] = j
            s.jobs_i[JI.QPOS, j] = w
            w += 1
    istate[IS.Q_HEAD] = 0
    istate[IS.Q_TAIL] = w


@internal_function
def release_node(s, k: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """Node k (running no job) leaves at t: its price stops, its fault events go stale."""
    set_status(s, k, NodeStatus.RELEASED)
    s.nodes_f[NF.RELEASED_AT, k] = t
    if s.nodes_f[NF.READY_AT, k] > t:
        s.nodes_f[NF.READY_AT, k] = t  # never ready: no operating time
    s.nodes_i[NI.EPOCH, k] += 1
    s.istate[IS.NEED_SCALE] = 1


@inline_function
def _close_down_time(s, k: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """Add node k's down time up to t (since the warm-up ended) to DOWN_S."""
    nodes_f = s.nodes_f
    lo = max(nodes_f[NF.DOWN_SINCE, k], nodes_f[NF.READY_AT, k], s.fstate[FS.WIN_START])
    if t > lo:
        nodes_f[NF.DOWN_S, k] += t - lo
    nodes_f[NF.DOWN_SINCE, k] = -1.0


@internal_function
def fail_node(s, k: int, t: float, random: bool) -> None:  # type: ignore[no-untyped-def]
    """Node k fails at t: the jobs running there are killed (their work is lost, counted
    as waste) and re-queued or failed (`IS.ON_FAILURE`); the node takes no placement until
    it recovers (after a random down time when `random`, else at a timeline `recover`)."""
    status = s.nodes_i[NI.STATUS, k]
    if status == NodeStatus.DOWN and not random:
        # Down after a random failure: the timeline takes it over, and it stays down
        # until the timeline's `recover` (its random repair goes stale).
        s.nodes_i[NI.EPOCH, k] += 1
        return
    if status != NodeStatus.UP and status != NodeStatus.DRAINING and status != NodeStatus.BOOTING:
        return
    if t >= s.fstate[FS.WIN_START]:
        s.istate[IS.NODE_FAILURES] += 1
    requeue = s.istate[IS.ON_FAILURE] == 0
    while s.nodes_i[NI.JOB_HEAD, k] >= 0:
        # The killed jobs join the queue in arrival order (their numbers): the earliest
        # first, whatever order they started in.
        j = s.nodes_i[NI.JOB_HEAD, k]
        other = s.jobs_i[JI.NEXT, j]
        while other >= 0:
            j = min(j, other)
            other = s.jobs_i[JI.NEXT, other]
        s.jobs_i[JI.FAIL_KILLS, j] += 1
        s.istate[IS.FAILURE_KILLS] += 1
        s.jobs_f[JF.LOST_CORE_S, j] += s.jobs_f[JF.REQ_CPU, j] * (t - s.jobs_f[JF.START, j])
        if requeue:
            _make_queue_room(s)
        kill_job(s, j, t, requeue)  # takes j off the node's list
        if requeue and s.istate[IS.REDRAW] == 1:  # Python draws its new work
            s.members[s.istate[IS.REDRAW_N]] = j
            s.istate[IS.REDRAW_N] += 1
    s.istate[IS.NEED_SCALE] = 1
    if s.nodes_i[NI.STATUS, k] == NodeStatus.RELEASED:
        return  # a draining node: its last job is gone, so it left
    s.nodes_i[NI.EPOCH, k] += 1
    if status == NodeStatus.DRAINING:
        release_node(s, k, t)
        return
    set_status(s, k, NodeStatus.DOWN)
    s.nodes_f[NF.DOWN_SINCE, k] = t
    if random and s.nodes_i[NI.FAILS, k] == 1:
        schedule_fault(s, k, t, Event.RECOVER)


@internal_function
def recover_node(s, k: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """Down node k comes back at t, empty (booting still if its start-up is not over); with
    a failure model its next up time starts."""
    if s.nodes_i[NI.STATUS, k] != NodeStatus.DOWN:
        return
    _close_down_time(s, k, t)
    s.nodes_i[NI.EPOCH, k] += 1
    s.istate[IS.NEED_SCALE] = 1
    if s.nodes_f[NF.READY_AT, k] > t:
        set_status(s, k, NodeStatus.BOOTING)  # its NODE_READY event is still due
        return
    set_status(s, k, NodeStatus.UP)
    if s.istate[IS.Q_HEAD] < s.istate[IS.Q_TAIL]:
        s.istate[IS.NEED_PLACE] = 1
    if s.nodes_i[NI.FAILS, k] == 1:
        schedule_fault(s, k, t, Event.FAIL)


@internal_function
def drain_node(s, k: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """Node k takes no new placement from t; released when its last running job leaves
    (at once if it runs none, is down or still booting)."""
    status = s.nodes_i[NI.STATUS, k]
    if status == NodeStatus.DOWN:
        _close_down_time(s, k, t)
    elif status != NodeStatus.UP and status != NodeStatus.BOOTING:
        return
    if status == NodeStatus.UP and s.nodes_f[NF.RUNNING_JOBS, k] > 0:
        set_status(s, k, NodeStatus.DRAINING)
        s.istate[IS.NEED_SCALE] = 1
    else:
        release_node(s, k, t)


@inline_function
def _acts_on(status: int, action: int) -> bool:
    """Whether a timeline action by type and count picks a node in this status."""
    if action == Action.RECOVER:
        return status == NodeStatus.DOWN
    if action == Action.FAIL:
        return (
            status == NodeStatus.UP or status == NodeStatus.DRAINING or status == NodeStatus.BOOTING
        )
    return status == NodeStatus.UP  # a drain by type takes nodes that take placements


@inline_function
def _node_action(s, k: int, action: int, t: float) -> None:  # type: ignore[no-untyped-def]
    if action == Action.FAIL:
        fail_node(s, k, t, False)
    elif action == Action.RECOVER:
        recover_node(s, k, t)
    else:
        drain_node(s, k, t)


@internal_function
def on_timeline(s, e: int, t: float) -> bool:  # type: ignore[no-untyped-def]
    """Timeline event e at t: fail, recover or drain nodes, or set a class's speed-up
    (pools are brought up to t and their rates follow; placed jobs started from now on
    use it). Returns True when Python carries it out (`join` rents nodes)."""
    tl = s.timeline
    action = int(tl[TL.ACTION, e])
    if action == Action.JOIN:
        s.istate[IS.TL_EVENT] = e
        return True
    if action == Action.SET_RATE:
        return False  # arrivals are drawn before the run, with the new rate from at_s
    if action == Action.SET_SPEEDUP:
        c = int(tl[TL.CLS, e])
        s.classes_f[CF.SP_PARAM, c] = tl[TL.P0, e]
        if not math.isnan(tl[TL.P1, e]):
            s.classes_f[CF.SP_PARAM2, c] = tl[TL.P1, e]
        for p in range(s.pools_f.shape[1]):
            advance_pool(s, p, t)
            apply_allocation(s, p, t)
        return False
    node = int(tl[TL.NODE, e])
    if node >= 0:
        if node < s.istate[IS.NODES_USED]:
            _node_action(s, node, action, t)
        return False
    left = int(tl[TL.COUNT, e])
    typ = int(tl[TL.TYPE, e])
    for k in range(s.istate[IS.NODES_USED]):
        if left <= 0:
            break
        if s.nodes_i[NI.NODE_TYPE, k] == typ and _acts_on(s.nodes_i[NI.STATUS, k], action):
            _node_action(s, k, action, t)
            left -= 1
    return False


@inline_function
def on_pool_completion(s, p: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """A malleable job finishes its work in pool p."""
    j = s.pools_i[PI.NEXT_J, p]
    advance_pool(s, p, t)
    s.jobs_f[JF.REM, j] = 0.0
    s.jobs_f[JF.COST, j] = (
        s.pools_f[PF.PRICE_PER_S, p]
        * s.jobs_f[JF.CORE_SECONDS, j]
        / max(s.pools_f[PF.CORES, p], 1e-300)
    )
    _pool_remove(s, p, j)
    _leave(s, j, t, JobState.DONE)
    s.pools_i[PI.NEXT_J, p] = -1
    s.pools_i[PI.NEED_ALLOC, p] = 1


@inline_function
def on_arrival(s, j: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """An arrival: malleable jobs join their pool, others the placement queue."""
    c = s.jobs_i[JI.CLS, j]
    s.n_class[c] += 1
    s.istate[IS.N_SYSTEM] += 1
    p = s.classes_i[CI.POOL, c]
    if p >= 0:
        advance_pool(s, p, t)
        s.jobs_i[JI.POOL, j] = p
        s.jobs_i[JI.STATE, j] = JobState.RUNNING
        s.jobs_f[JF.REM, j] = s.jobs_f[JF.SIZE, j]
        s.jobs_f[JF.START, j] = -1.0
        s.jobs_f[JF.CORES, j] = 0.0
        s.jobs_f[JF.RATE, j] = 0.0
        _pool_append(s, p, j)
        s.pools_i[PI.NEED_ALLOC, p] = 1
    else:
        _enqueue(s, j)
        patience = s.classes_f[CF.TIMEOUT_S, c]
        if patience < math.inf:
            heap_push(s, t + patience, j, Event.TIMER)
        s.istate[IS.NEED_SCALE] = 1


@inline_function
def start_if_fits(  # type: ignore[no-untyped-def]
    s, j: int, k: int, now: float, setup_s: float, gpu_mask: int
) -> int:
    """Start job j on node k if it waits and fits (`node_fits`); else the `Refusal`."""
    if j < 0 or j >= s.jobs_f.shape[1] or s.jobs_i[JI.STATE, j] != JobState.QUEUED:
        return 1
    if k < 0 or k >= s.nodes_f.shape[1] or s.nodes_i[NI.STATUS, k] != NodeStatus.UP:
        return 2
    if not node_fits(
        s.nodes_f,
        s.nodes_i,
        s.gpu_free,
        k,
        s.jobs_f[JF.REQ_CPU, j],
        s.jobs_f[JF.REQ_MEM, j],
        s.jobs_f[JF.REQ_GPU, j],
    ):
        return 3
    start_job(s, j, k, now, -1.0, setup_s, gpu_mask)
    return 0


@internal_function
def start_checked(  # type: ignore[no-untyped-def]
    s, j: int, k: int, now: float, setup_s: float, gpu_mask: int
) -> int:
    """`start_if_fits`, called (not inlined) where a placement is rare."""
    return start_if_fits(s, j, k, now, setup_s, gpu_mask)


@internal_function
def apply_decisions(s, now: float) -> bool:  # type: ignore[no-untyped-def]
    """Apply the Python placer's placements in order; stop at the first refused one."""
    d = s.decisions
    n = s.istate[IS.DEC_N]
    s.istate[IS.DEC_N] = 0
    s.istate[IS.NEED_PLACE] = 0
    for i in range(n):
        why = start_checked(s, d[0, i], d[1, i], now, s.decision_setup_s[i], d[2, i])
        if why != 0:
            s.istate[IS.DEC_BAD] = i
            s.istate[IS.DEC_WHY] = why
            return False
    next_queued(s)
    return True


# --- the loop ------------------------------------------------------------------------------


@internal_function
def allocate_compiled(s, p: int, now: float, fns) -> bool:  # type: ignore[no-untyped-def]
    """The compiled allocator (`fns[FN_ALLOCATOR]`) gives pool p's jobs cores, checked
    like a Python allocation (finite, non-negative, at most the pool's cores) before they
    are applied. False on a refused allocation (IS.STATUS_POOL, IS.DEC_BAD)."""
    n = pool_members(s, p)
    if n > 0:
        out = s.alloc_out
        for i in range(n):
            out[s.members[i]] = math.nan
        allocate = as_allocator(fns[FN_ALLOCATOR, 0], fns[FN_ALLOCATOR, 1], fns[FN_ALLOCATOR, 2])
        pool_cores = s.pools_f[PF.CORES, p]
        allocate(s.members, n, pool_cores, now, allocator_view(s), out)
        total = 0.0
        j = s.pools_i[PI.HEAD, p]
        while j >= 0:
            c = out[j]
            if not (c >= 0.0 and c < math.inf):  # NaN (not written), negative or inf
                s.istate[IS.STATUS_POOL] = p
                s.istate[IS.DEC_BAD] = j
                return False
            total += c
            j = s.jobs_i[JI.NEXT, j]
        if total > pool_cores * (1.0 + _ALLOC_EPS) + _ALLOC_EPS:
            s.istate[IS.STATUS_POOL] = p
            s.istate[IS.DEC_BAD] = -1
            return False
        j = s.pools_i[PI.HEAD, p]
        while j >= 0:
            s.jobs_f[JF.CORES, j] = out[j]
            j = s.jobs_i[JI.NEXT, j]
    apply_allocation(s, p, now)
    return True


@inline_function
def scale_compiled(s, now: float, fns) -> int:  # type: ignore[no-untyped-def]
    """Ask the compiled scaler (`fns[FN_SCALER]`); the number of actions it wrote."""
    scale = as_scaler(fns[FN_SCALER, 0], fns[FN_SCALER, 1], fns[FN_SCALER, 2])
    istate = s.istate
    view = scaler_view(s, istate[IS.Q_HEAD], istate[IS.Q_TAIL], istate[IS.NODES_USED])
    return scale(now, view, s.scale_actions)


@internal_function
def next_event_time(s) -> float:  # type: ignore[no-untyped-def]
    """Time of the next event (after dropping stale heap entries), or +inf."""
    while s.istate[IS.HEAP_N] > 0 and _stale(s, 0):
        heap_pop(s)
    a = s.istate[IS.NEXT_ARRIVAL]
    t = s.jobs_f[JF.ARRIVAL, a] if a < s.jobs_f.shape[1] else math.inf
    if s.istate[IS.HEAP_N] > 0:
        t = min(t, s.heap_t[0])
    e = s.istate[IS.TL_NEXT]
    if e < s.timeline.shape[1]:
        t = min(t, s.timeline[TL.AT, e])
    for p in range(s.pools_f.shape[1]):
        if s.pools_i[PI.NEXT_J, p] >= 0:
            t = min(t, s.pools_f[PF.NEXT_T, p])
    return t


def _make_loop(pools: bool, python_placer: bool, events: bool):  # type: ignore[no-untyped-def]
    """The event loop, compiled with or without malleable pools, a Python placer and the
    rarer events (node failures and recoveries, the timeline, out-of-memory kills).

    All three are compile-time constants (numba prunes the branches they decide before
    typing): a scenario without pools never compiles the pool transitions, one with a
    compiled placer never compiles the hand-over of Python placements, one without faults,
    a timeline or a usage model never compiles the kills and node failures. A first run of
    a plain node scenario compiles in about a third of the time of the full loop.
    """

    def run_kernel(t, fns, until_s: float, max_events: int) -> int:  # type: ignore[no-untyped-def]
        """Run events until the end, a Python decision, time `until_s` or `max_events` events.

        `fns` holds the compiled policies' function addresses, a row per extension point
        (`FN_PLACER`, ...; see `clusteremu.cluster.policies.compiled_table.function_addresses`), and
        the engine's callback for a Python placer (`FN_PYTHON_PLACER`): the loop calls it
        with the number of waiting jobs gathered in `members` and goes on with its answer,
        without returning. Returns a `Status`. `t` is the state as a plain tuple
        (`tuple(EngineState)`: numba's dispatcher types a plain tuple of arrays in C, about
        1 us a call, a NamedTuple through Python, about 2.4 us).
        """
        s = EngineState(*t)
        if not python_placer:  # the compiled placer and its view, for the whole call
            place = as_placer(fns[FN_PLACER, 0], fns[FN_PLACER, 1], fns[FN_PLACER, 2])
            placer_view_ = placer_view(s)
        n_jobs = s.jobs_f.shape[1]
        n_pools = s.pools_f.shape[1]
        istate, fstate = s.istate, s.fstate
        events_at_entry = istate[IS.EVENTS]
        while True:
            now = fstate[FS.NOW]
            # 0. Placements a Python placer returned at the last call.
            if python_placer and istate[IS.DEC_N] > 0 and not apply_decisions(s, now):
                return _BAD_DECISION
            # 1. Decisions owed since the last event: scaling, placement, allocation.
            if istate[IS.NEED_SCALE] == 1:
                scaler = istate[IS.SCALER_CODE]  # 0: Python, < 0: static (never acts)
                if scaler == 0:
                    return _NEED_SCALE_DECISION
                istate[IS.NEED_SCALE] = 0
                if scaler > 0:
                    m = scale_compiled(s, now, fns)
                    if m != 0:
                        istate[IS.SCALE_N] = m
                        return _NEED_SCALE_ACTIONS
            if istate[IS.NEED_PLACE] == 1:
                if python_placer:
                    # A placer that decides once per instant waits for its last event.
                    if istate[IS.PLACE_AFTER_TIES] == 0 or next_event_time(s) > now:
                        if istate[IS.PLACER_ASK_ALWAYS] == 1 or may_place(s):
                            n = gather_waiting(s)
                            if n > 0:
                                answer = call_c(fns[FN_PYTHON_PLACER, 0], n)
                                if answer >= 0:  # one placement: job << 32 | node
                                    j, k = answer >> 32, answer & _NODE_BITS
                                    why = start_checked(s, j, k, now, 0.0, -1)
                                    if why != 0:
                                        istate[IS.DEC_BAD] = 0
                                        istate[IS.DEC_WHY] = why
                                        return _BAD_DECISION
                                    next_queued(s)
                                elif answer == HANDED_BACK:
                                    return _PLACER_HANDED_BACK
                                # PLACEMENTS_QUEUED: applied first thing (0.) of the next round
                                if answer != PLACEMENTS_QUEUED:
                                    istate[IS.NEED_PLACE] = 0
                                continue
                        istate[IS.NEED_PLACE] = 0
                else:  # the compiled placer places queue heads until one fits nowhere
                    while True:
                        j = next_queued(s)
                        if j < 0:
                            break
                        k = place(j, now, placer_view_)
                        if k < 0:
                            break
                        why = start_if_fits(s, j, k, now, 0.0, -1)
                        if why != 0:
                            istate[IS.DEC_BAD] = j
                            istate[IS.BAD_NODE] = k
                            istate[IS.DEC_WHY] = why
                            return _BAD_COMPILED_DECISION
                        istate[IS.Q_HEAD] += 1
                    istate[IS.NEED_PLACE] = 0
            if pools:
                for p in range(n_pools):
                    if s.pools_i[PI.NEED_ALLOC, p] == 1:
                        if istate[IS.ALLOC_CODE] == 0:
                            istate[IS.STATUS_POOL] = p
                            return _NEED_ALLOC_DECISION
                        if not allocate_compiled(s, p, now, fns):
                            return _BAD_ALLOCATION

            # 2. The next event.
            while istate[IS.HEAP_N] > 0 and _stale(s, 0):
                heap_pop(s)
            a = istate[IS.NEXT_ARRIVAL]
            t_arrival = s.jobs_f[JF.ARRIVAL, a] if a < n_jobs else math.inf
            t_heap = s.heap_t[0] if istate[IS.HEAP_N] > 0 else math.inf
            t_pool = math.inf
            p_min = -1
            for p in range(n_pools):
                if s.pools_i[PI.NEXT_J, p] >= 0 and s.pools_f[PF.NEXT_T, p] < t_pool:
                    t_pool = s.pools_f[PF.NEXT_T, p]
                    p_min = p
            e = istate[IS.TL_NEXT]
            t_tl = math.inf
            if events and e < s.timeline.shape[1]:
                t_tl = s.timeline[TL.AT, e]
            t = min(min(t_arrival, t_tl), min(t_heap, t_pool))
            if (
                istate[IS.FAULTS] == 1
                and t_arrival == math.inf
                and istate[IS.N_SYSTEM] == 0
                and fstate[FS.HORIZON] == math.inf
            ):
                return _FINISHED  # every job has left: node events no longer matter
            if t > fstate[FS.HORIZON]:
                advance_to(s, fstate[FS.HORIZON])
                return _FINISHED
            if t == math.inf:
                return _FINISHED
            if t > until_s:
                return _PAUSED
            if istate[IS.EVENTS] - events_at_entry >= max_events:
                return _YIELDED
            advance_to(s, t)
            istate[IS.EVENTS] += 1

            # Ties (docs/engine.md): placed jobs' completions, pools' completions, the
            # heap's other kinds (`tie_rank`), timeline events in list order, arrivals.
            heap_first = True  # without pools: t_pool is +inf
            if pools:
                heap_first = t_heap < t_pool or (
                    t_heap == t_pool and (s.heap_k[0] & KIND_MASK) == Event.COMPLETE
                )
            if heap_first and t_heap <= t_arrival and t_heap <= t_tl:
                i = heap_id(s, 0)
                kind = s.heap_k[0] & KIND_MASK
                heap_pop(s)
                prefetch_heap_top(s)
                if kind == Event.COMPLETE:
                    on_complete(s, i, t)
                elif kind == Event.TIMER:
                    on_timer(s, i, t)
                elif kind == Event.NODE_READY:
                    if events:
                        on_node_ready(s, i, t)
                    else:
                        node_up(s, i)
                elif events:
                    if kind == Event.OOM:
                        if on_oom(s, i, t):
                            return _NEED_LIFT_DECISION
                    elif kind == Event.FAIL:
                        fail_node(s, i, t, True)
                        if istate[IS.REDRAW_N] > 0:
                            return _NEED_SIZE_REDRAWS
                    elif kind == Event.RECOVER:
                        recover_node(s, i, t)
                    elif kind == Event.DRAW_UP or kind == Event.DRAW_DOWN:
                        istate[IS.DRAW_NODE] = i
                        istate[IS.DRAW_KIND] = (
                            Event.FAIL if kind == Event.DRAW_UP else Event.RECOVER
                        )
                        return _NEED_FAULT_DRAWS
            elif t_pool <= t_arrival and t_pool <= t_tl:
                if pools:
                    on_pool_completion(s, p_min, t)
            elif t_tl <= t_arrival:
                if events:
                    istate[IS.TL_NEXT] = e + 1
                    if on_timeline(s, e, t):
                        return _NEED_TIMELINE_ACTION
                    if istate[IS.REDRAW_N] > 0:
                        return _NEED_SIZE_REDRAWS
            else:
                istate[IS.NEXT_ARRIVAL] = a + 1
                on_arrival(s, a, t)

    # Each variant gets its own name: numba names compiled symbols by qualified name, and
    # two cached variants loaded into one process must not share a symbol.
    variant = (
        ("pools" if pools else "nodes")
        + ("_python_placer" if python_placer else "")
        + ("" if events else "_plain")
    )
    run_kernel.__name__ = f"run_kernel_{variant}"
    run_kernel.__qualname__ = f"run_kernel_{variant}"
    return kernel_function(run_kernel)


#: The loops by (pools, Python placer, rarer events); each compiles only what its
#: scenarios use, on first use.
LOOPS = {
    (pools, python, events): _make_loop(pools, python, events)
    for pools in (True, False)
    for python in (False, True)
    for events in (True, False)
}
run_kernel = LOOPS[True, False, True]
run_kernel_py = LOOPS[True, True, True]
run_kernel_nodes = LOOPS[False, False, True]
run_kernel_nodes_py = LOOPS[False, True, True]


# --- entries from Python ---------------------------------------------------------------------
# The engine passes its state as a plain tuple: numba's dispatcher types a plain tuple of
# arrays in C (about 1 us a call), a NamedTuple through Python (about 2.4 us); each entry
# rebuilds the NamedTuple inside compiled code, where it costs nothing. The loops take the
# tuple themselves: a wrapper entry would be a second compilation of the whole loop (numba
# links and re-optimises a callee's code into each caller: about 40% of a cold start).


def loop_entry(pools: bool, python_placer: bool, events: bool = True) -> object:
    """The compiled loop variant a scenario needs (it takes the state as a plain tuple):
    `events` for node failures, a timeline or out-of-memory kills."""
    return LOOPS[pools, python_placer, events]


@kernel_function
def try_start(  # type: ignore[no-untyped-def]
    t, j: int, k: int, now: float, setup_s: float, gpu_mask: int
) -> int:
    """Start job j on node k if it waits and fits; else the `Refusal` (see `start_checked`)."""
    s = EngineState(*t)
    why = start_checked(s, j, k, now, setup_s, gpu_mask)
    if why == 0:
        next_queued(s)  # the head moves past started jobs
    return why


@kernel_function
def kill_entry(t, j: int, now: float, requeue: bool) -> None:  # type: ignore[no-untyped-def]
    kill_job(EngineState(*t), j, now, requeue)


@kernel_function
def drop_entry(t, j: int, now: float) -> None:  # type: ignore[no-untyped-def]
    """Waiting job j leaves the queue unplaced, failed; the queue moves on."""
    s = EngineState(*t)
    _leave(s, j, now, JobState.FAILED)
    s.istate[IS.DROPPED_COUNT] += 1
    s.istate[IS.NEED_SCALE] = 1
    if next_queued(s) >= 0:
        s.istate[IS.NEED_PLACE] = 1


@kernel_function
def advance_entry(t, time_s: float) -> None:  # type: ignore[no-untyped-def]
    """Bring every pool and the integrals up to `time_s` and move the clock there."""
    s = EngineState(*t)
    for p in range(s.pools_f.shape[1]):
        advance_pool(s, p, time_s)
    advance_to(s, time_s)


@kernel_function
def accumulate_entry(t, time_s: float) -> None:  # type: ignore[no-untyped-def]
    accumulate(EngineState(*t), time_s)


@kernel_function
def reallocate_entry(t, now: float) -> None:  # type: ignore[no-untyped-def]
    """Bring every pool up to now and recompute its rates (after a speed-up change)."""
    s = EngineState(*t)
    for p in range(s.pools_f.shape[1]):
        advance_pool(s, p, now)
        apply_allocation(s, p, now)


@kernel_function
def apply_allocation_entry(t, p: int, now: float) -> None:  # type: ignore[no-untyped-def]
    apply_allocation(EngineState(*t), p, now)


@kernel_function
def pool_members_entry(t, p: int) -> int:  # type: ignore[no-untyped-def]
    return pool_members(EngineState(*t), p)


@kernel_function
def push_entry(t, time_s: float, i: int, kind: int) -> None:  # type: ignore[no-untyped-def]
    heap_push(EngineState(*t), time_s, i, kind)


@kernel_function
def gather_entry(t) -> int:  # type: ignore[no-untyped-def]
    return gather_waiting(EngineState(*t))


@kernel_function
def peek_entry(t) -> float:  # type: ignore[no-untyped-def]
    return next_event_time(EngineState(*t))


@kernel_function
def node_changed_entry(t, k: int) -> None:  # type: ignore[no-untyped-def]
    """Python changed node row k (rented, released): the index follows."""
    index_update(EngineState(*t), k)


@kernel_function
def schedule_fault_entry(t, k: int, now: float, kind: int) -> None:  # type: ignore[no-untyped-def]
    """`schedule_fault` from Python (after refilling node k's draws)."""
    schedule_fault(EngineState(*t), k, now, kind)
