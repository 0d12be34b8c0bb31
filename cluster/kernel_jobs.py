"""The compiled event loop's job transitions (`clusteremu.cluster.kernel`).

A class's speed-up; the time integrals and the clock; a placed job started on a node (its
request reserved, its end scheduled on the heap) and its node given back when it leaves,
completed, failed or killed (and re-queued); the placement queue; malleable jobs' pools
(processor sharing: their remaining work, their allocation's rates and next completion);
a node row's status and its release (a draining node leaves with its last job); and the
handlers of the common events: completions, patience timeouts, pool completions and
arrivals.
"""

from __future__ import annotations

import math

import numpy as np

from clusteremu.cluster.fit_index import index_update
from clusteremu.cluster.jit import inline_function, internal_function
from clusteremu.cluster.kernel_heap import KIND_BITS, heap_push
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
    Event,
    JobState,
    NodeStatus,
)
from clusteremu.cluster.policies.compiled import choose_gpus
from clusteremu.cluster.speedup import AMDAHL, POWER, RIGID, ROOFTOP, SMOOTH_ROOFTOP, TABLE
from clusteremu.cluster.world import setup_delay


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


# --- node rows' status -------------------------------------------------------------------


@inline_function
def set_status(s, k: int, status: int) -> None:  # type: ignore[no-untyped-def]
    """Node row k's status becomes `status` (a `NodeStatus`); the index follows."""
    s.nodes_i[NI.STATUS, k] = status
    s.istate[IS.STATUS_CHANGES] += 1  # a Python placer's view rereads the statuses
    index_update(s, k)


@internal_function
def release_node(s, k: int, t: float) -> None:  # type: ignore[no-untyped-def]
    """Node k (running no job) leaves at t: its price stops, its fault events go stale."""
    set_status(s, k, NodeStatus.RELEASED)
    s.nodes_f[NF.RELEASED_AT, k] = t
    if s.nodes_f[NF.READY_AT, k] > t:
        s.nodes_f[NF.READY_AT, k] = t  # never ready: no operating time
    s.nodes_i[NI.EPOCH, k] += 1
    s.istate[IS.NEED_SCALE] = 1


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
