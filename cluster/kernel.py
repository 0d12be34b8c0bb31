"""The compiled event loop: piecewise-constant rates, one clock, no time steps.

`run_kernel` advances the state arrays (see `cluster.layout`) event by event. Between two
events every rate is constant, so time jumps straight to the next arrival, completion or
pool completion. Decisions are made at the top of the loop: by a compiled policy
(`cluster.policies.compiled`) inside the loop, or by returning to Python
(`NEED_PLACE_DECISION`, `NEED_ALLOC_DECISION`) when the policy is plain Python; the engine
applies the Python decision with `start_job` / `apply_allocation` and calls the loop again.
The loop also returns when the next event lies beyond `until_s` (windows of the Ray
coordinator) or after `max_events` events (progress bars), so a run can be resumed at any
point with exactly the same result.
"""

from __future__ import annotations

import math

import numpy as np

from cluster.jit import kernel_function
from cluster.layout import (
    ALLOC_CODE,
    AMDAHL_CODE,
    ARRIVAL,
    BUSY_AREA,
    BUSY_CPU,
    CLASS_POOL,
    CLS,
    CORE_SECONDS,
    CORES,
    COST,
    DECISIONS,
    DONE,
    DONE_COUNT,
    END,
    EV_COMPLETE,
    EV_TIMER,
    EVENTS,
    FAILED,
    FAILED_COUNT,
    FINISHED,
    FREE_CPU,
    FREE_GPU,
    FREE_MEM,
    FREE_SLOTS,
    HEAP_N,
    HORIZON,
    MEASURED_TIME,
    N_SYSTEM,
    NEED_ALLOC_DECISION,
    NEED_PLACE,
    NEED_PLACE_DECISION,
    NEXT,
    NEXT_ARRIVAL,
    NODE,
    NODE_TYPE,
    NOW,
    P_ALLOCATED,
    P_BUSY_AREA,
    P_CORES,
    P_COUNT,
    P_HEAD,
    P_LAST,
    P_NEED_ALLOC,
    P_NEXT_J,
    P_NEXT_T,
    P_PRICE_PER_S,
    P_SPEED,
    P_TAIL,
    PAUSED,
    PLACER_CODE,
    POOL,
    POWER_CODE,
    PREV,
    Q_HEAD,
    Q_TAIL,
    QUEUED,
    RATE,
    REM,
    REQ_CPU,
    REQ_GPU,
    REQ_MEM,
    ROOFTOP_CODE,
    RUNNING,
    SETUP_S,
    SIZE,
    SMOOTH_ROOFTOP_CODE,
    SP_KIND,
    SP_NPTS,
    SP_PARAM,
    SP_PARAM2,
    SPEED,
    START,
    STATE,
    STATUS_POOL,
    TABLE_CODE,
    TIMEOUT_S,
    WIN_END,
    WIN_START,
    YIELDED,
)
from cluster.policies.compiled import ALLOC_PYTHON, PLACE_PYTHON, allocate, place


@kernel_function
def speedup_value(
    c: int,
    cores: float,
    classes_f: np.ndarray,
    classes_i: np.ndarray,
    tx: np.ndarray,
    ty: np.ndarray,
) -> float:
    """s_c(cores) for class c; linear below one core (see cluster.speedup)."""
    if cores <= 1.0:
        return cores
    kind = classes_i[SP_KIND, c]
    a = classes_f[SP_PARAM, c]
    if kind == AMDAHL_CODE:
        return 1.0 / ((1.0 - a) + a / cores)
    if kind == POWER_CODE:
        return cores**a
    if kind == ROOFTOP_CODE:
        return min(cores, a)
    if kind == SMOOTH_ROOFTOP_CODE:
        q = classes_f[SP_PARAM2, c]
        return ((cores**-q + a**-q) / (1.0 + a**-q)) ** (-1.0 / q)
    if kind == TABLE_CODE:
        npts = classes_i[SP_NPTS, c]
        if cores >= tx[c, npts - 1]:
            return ty[c, npts - 1]
        for i in range(1, npts):
            if cores <= tx[c, i]:
                x0, x1 = tx[c, i - 1], tx[c, i]
                y0, y1 = ty[c, i - 1], ty[c, i]
                return y0 + (y1 - y0) * (cores - x0) / (x1 - x0)
        return ty[c, npts - 1]
    return cores


# --- binary heap of (time, kind, id), ordered by time then id ---------------------------


@kernel_function
def _heap_less(ht: np.ndarray, hj: np.ndarray, a: int, b: int) -> bool:
    return ht[a] < ht[b] or (ht[a] == ht[b] and hj[a] < hj[b])


@kernel_function
def _heap_swap(ht: np.ndarray, hj: np.ndarray, hk: np.ndarray, a: int, b: int) -> None:
    ht[a], ht[b] = ht[b], ht[a]
    hj[a], hj[b] = hj[b], hj[a]
    hk[a], hk[b] = hk[b], hk[a]


@kernel_function
def heap_push(
    ht: np.ndarray, hj: np.ndarray, hk: np.ndarray, istate: np.ndarray, t: float, j: int, kind: int
) -> None:
    i = istate[HEAP_N]
    ht[i], hj[i], hk[i] = t, j, kind
    istate[HEAP_N] = i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if _heap_less(ht, hj, i, parent):
            _heap_swap(ht, hj, hk, i, parent)
            i = parent
        else:
            break


@kernel_function
def heap_pop(ht: np.ndarray, hj: np.ndarray, hk: np.ndarray, istate: np.ndarray) -> None:
    n = istate[HEAP_N] - 1
    istate[HEAP_N] = n
    ht[0], hj[0], hk[0] = ht[n], hj[n], hk[n]
    i = 0
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


# --- state transitions -------------------------------------------------------------------


@kernel_function
def accumulate(
    t: float,
    fstate: np.ndarray,
    istate: np.ndarray,
    n_class: np.ndarray,
    area_class: np.ndarray,
    pools_f: np.ndarray,
) -> None:
    """Add the time-integrals of jobs in system and busy cores from NOW up to t."""
    lo = max(fstate[NOW], fstate[WIN_START])
    hi = min(t, fstate[WIN_END])
    if hi > lo:
        dt = hi - lo
        for c in range(n_class.shape[0]):
            area_class[c] += n_class[c] * dt
        fstate[BUSY_AREA] += fstate[BUSY_CPU] * dt
        for p in range(pools_f.shape[1]):
            pools_f[P_BUSY_AREA, p] += pools_f[P_ALLOCATED, p] * dt
        fstate[MEASURED_TIME] += dt


@kernel_function
def start_job(
    j: int,
    k: int,
    now: float,
    jobs_f: np.ndarray,
    jobs_i: np.ndarray,
    nodes_f: np.ndarray,
    nodes_i: np.ndarray,
    classes_f: np.ndarray,
    classes_i: np.ndarray,
    class_tx: np.ndarray,
    class_ty: np.ndarray,
    ht: np.ndarray,
    hj: np.ndarray,
    hk: np.ndarray,
    istate: np.ndarray,
    fstate: np.ndarray,
    run_by_type: np.ndarray,
    run_s: float,
    setup_s: float,
) -> None:
    """Start queued job j on node k at time now: reserve its request, schedule its end.

    The job runs for `run_s` seconds (size / (node speed * s(cpu)) when negative) after a
    set-up delay of `setup_s` seconds (image pull, data transfer) during which it already
    holds its request. `run_by_type[node type, j]`, when present and not negative, is the
    job's run time on that node type (per-node-type execution-time distributions).
    """
    c = jobs_i[CLS, j]
    cpu = jobs_f[REQ_CPU, j]
    if run_s < 0.0 and run_by_type.shape[0] > 0:
        run_s = run_by_type[nodes_i[NODE_TYPE, k], j]
    # A job that requests no cores is not CPU-bound: it runs at the node's speed.
    cores = cpu if cpu > 0.0 else 1.0
    rate = nodes_f[SPEED, k] * speedup_value(c, cores, classes_f, classes_i, class_tx, class_ty)
    duration = (jobs_f[SIZE, j] / rate if run_s < 0.0 else run_s) + setup_s
    if setup_s > 0.0:
        jobs_f[SETUP_S, j] = setup_s
    jobs_f[START, j] = now
    # Cores, core-seconds and cost of placed jobs follow from start, end and the node;
    # cluster.metrics derives them, so the loop touches as little memory as possible.
    jobs_i[NODE, j] = k
    jobs_i[STATE, j] = RUNNING
    nodes_f[FREE_CPU, k] -= cpu
    nodes_f[FREE_MEM, k] -= jobs_f[REQ_MEM, j]
    nodes_f[FREE_GPU, k] -= jobs_f[REQ_GPU, j]
    nodes_f[FREE_SLOTS, k] -= 1.0
    fstate[BUSY_CPU] += cpu
    heap_push(ht, hj, hk, istate, now + duration, j, EV_COMPLETE)
    istate[DECISIONS] += 1


@kernel_function
def advance_pool(
    p: int,
    now: float,
    pools_f: np.ndarray,
    pools_i: np.ndarray,
    jobs_f: np.ndarray,
    jobs_i: np.ndarray,
) -> None:
    """Bring the remaining work of every job in pool p up to time now."""
    dt = now - pools_f[P_LAST, p]
    if dt > 0.0:
        j = pools_i[P_HEAD, p]
        while j >= 0:
            jobs_f[REM, j] -= jobs_f[RATE, j] * dt
            jobs_f[CORE_SECONDS, j] += jobs_f[CORES, j] * dt
            j = jobs_i[NEXT, j]
    pools_f[P_LAST, p] = now


@kernel_function
def pool_members(p: int, pools_i: np.ndarray, jobs_i: np.ndarray, out: np.ndarray) -> int:
    """Write the jobs of pool p in arrival order into out; return how many."""
    n = 0
    j = pools_i[P_HEAD, p]
    while j >= 0:
        out[n] = j
        n += 1
        j = jobs_i[NEXT, j]
    return n


@kernel_function
def apply_allocation(
    p: int,
    now: float,
    jobs_f: np.ndarray,
    jobs_i: np.ndarray,
    pools_f: np.ndarray,
    pools_i: np.ndarray,
    classes_f: np.ndarray,
    classes_i: np.ndarray,
    class_tx: np.ndarray,
    class_ty: np.ndarray,
    fstate: np.ndarray,
    istate: np.ndarray,
) -> None:
    """Turn the cores in jobs_f[CORES] of pool p's jobs into rates and its next completion."""
    speed = pools_f[P_SPEED, p]
    best_t = math.inf
    best_j = -1
    total = 0.0
    j = pools_i[P_HEAD, p]
    while j >= 0:
        k = jobs_f[CORES, j]
        total += k
        rate = speed * speedup_value(jobs_i[CLS, j], k, classes_f, classes_i, class_tx, class_ty)
        jobs_f[RATE, j] = rate
        if k > 0.0 and jobs_f[START, j] < 0.0:
            jobs_f[START, j] = now
        if rate > 0.0:
            left = jobs_f[REM, j] / rate
            if left < best_t:
                best_t = left
                best_j = j
        j = jobs_i[NEXT, j]
    fstate[BUSY_CPU] += total - pools_f[P_ALLOCATED, p]
    pools_f[P_ALLOCATED, p] = total
    pools_f[P_NEXT_T, p] = now + max(best_t, 0.0)
    pools_i[P_NEXT_J, p] = best_j
    pools_i[P_NEED_ALLOC, p] = 0
    istate[DECISIONS] += 1


@kernel_function
def _pool_append(p: int, j: int, pools_i: np.ndarray, jobs_i: np.ndarray) -> None:
    tail = pools_i[P_TAIL, p]
    jobs_i[PREV, j] = tail
    jobs_i[NEXT, j] = -1
    if tail >= 0:
        jobs_i[NEXT, tail] = j
    else:
        pools_i[P_HEAD, p] = j
    pools_i[P_TAIL, p] = j
    pools_i[P_COUNT, p] += 1


@kernel_function
def _pool_remove(p: int, j: int, pools_i: np.ndarray, jobs_i: np.ndarray) -> None:
    prev, nxt = jobs_i[PREV, j], jobs_i[NEXT, j]
    if prev >= 0:
        jobs_i[NEXT, prev] = nxt
    else:
        pools_i[P_HEAD, p] = nxt
    if nxt >= 0:
        jobs_i[PREV, nxt] = prev
    else:
        pools_i[P_TAIL, p] = prev
    jobs_i[NEXT, j] = -1
    jobs_i[PREV, j] = -1
    pools_i[P_COUNT, p] -= 1


@kernel_function
def next_queued(queue: np.ndarray, istate: np.ndarray, jobs_i: np.ndarray) -> int:
    """The earliest job still waiting for a node (skipping ones placed out of order), or -1."""
    h = istate[Q_HEAD]
    while h < istate[Q_TAIL] and jobs_i[STATE, queue[h]] != QUEUED:
        h += 1
    istate[Q_HEAD] = h
    return queue[h] if h < istate[Q_TAIL] else -1


@kernel_function
def run_kernel(
    jobs_f: np.ndarray,
    jobs_i: np.ndarray,
    nodes_f: np.ndarray,
    nodes_i: np.ndarray,
    pools_f: np.ndarray,
    pools_i: np.ndarray,
    classes_f: np.ndarray,
    classes_i: np.ndarray,
    class_tx: np.ndarray,
    class_ty: np.ndarray,
    ht: np.ndarray,
    hj: np.ndarray,
    hk: np.ndarray,
    run_by_type: np.ndarray,
    queue: np.ndarray,
    members: np.ndarray,
    n_class: np.ndarray,
    area_class: np.ndarray,
    istate: np.ndarray,
    fstate: np.ndarray,
    rng: np.ndarray,
    placer_params: np.ndarray,
    alloc_params: np.ndarray,
    until_s: float,
    max_events: int,
) -> int:
    """Run events until the end, a Python decision, time `until_s` or `max_events` events."""
    n_jobs = jobs_f.shape[1]
    n_pools = pools_f.shape[1]
    events_at_entry = istate[EVENTS]
    while True:
        now = fstate[NOW]
        # 1. Decisions owed since the last event.
        if istate[NEED_PLACE] == 1:
            if istate[PLACER_CODE] == PLACE_PYTHON:
                return NEED_PLACE_DECISION
            while True:
                j = next_queued(queue, istate, jobs_i)
                if j < 0:
                    break
                k = place(istate[PLACER_CODE], placer_params, j, nodes_f, nodes_i, jobs_f, rng)
                if k < 0:
                    break
                start_job(
                    j,
                    k,
                    now,
                    jobs_f,
                    jobs_i,
                    nodes_f,
                    nodes_i,
                    classes_f,
                    classes_i,
                    class_tx,
                    class_ty,
                    ht,
                    hj,
                    hk,
                    istate,
                    fstate,
                    run_by_type,
                    -1.0,
                    0.0,
                )
                istate[Q_HEAD] += 1
            istate[NEED_PLACE] = 0
        for p in range(n_pools):
            if pools_i[P_NEED_ALLOC, p] == 1:
                if istate[ALLOC_CODE] == ALLOC_PYTHON:
                    istate[STATUS_POOL] = p
                    return NEED_ALLOC_DECISION
                n = pool_members(p, pools_i, jobs_i, members)
                if n > 0:
                    allocate(
                        istate[ALLOC_CODE],
                        alloc_params,
                        members,
                        n,
                        pools_f[P_CORES, p],
                        now,
                        jobs_f,
                        jobs_i,
                        classes_f,
                        classes_i,
                        class_tx,
                        class_ty,
                    )
                apply_allocation(
                    p,
                    now,
                    jobs_f,
                    jobs_i,
                    pools_f,
                    pools_i,
                    classes_f,
                    classes_i,
                    class_tx,
                    class_ty,
                    fstate,
                    istate,
                )

        # 2. The next event.
        a = istate[NEXT_ARRIVAL]
        t_arrival = jobs_f[ARRIVAL, a] if a < n_jobs else math.inf
        t_heap = ht[0] if istate[HEAP_N] > 0 else math.inf
        t_pool = math.inf
        p_min = -1
        for p in range(n_pools):
            if pools_i[P_NEXT_J, p] >= 0 and pools_f[P_NEXT_T, p] < t_pool:
                t_pool = pools_f[P_NEXT_T, p]
                p_min = p
        t = min(t_arrival, min(t_heap, t_pool))
        if t > fstate[HORIZON]:
            accumulate(fstate[HORIZON], fstate, istate, n_class, area_class, pools_f)
            fstate[NOW] = fstate[HORIZON]
            return FINISHED
        if t == math.inf:
            return FINISHED
        if t > until_s:
            return PAUSED
        if istate[EVENTS] - events_at_entry >= max_events:
            return YIELDED
        accumulate(t, fstate, istate, n_class, area_class, pools_f)
        fstate[NOW] = t
        istate[EVENTS] += 1

        if t_heap <= t_pool and t_heap <= t_arrival and hk[0] == EV_TIMER:
            # A queued job's patience runs out: it leaves unserved (counted as failed).
            j = hj[0]
            heap_pop(ht, hj, hk, istate)
            if jobs_i[STATE, j] == QUEUED:
                jobs_i[STATE, j] = FAILED
                jobs_f[END, j] = t
                n_class[jobs_i[CLS, j]] -= 1
                istate[N_SYSTEM] -= 1
                istate[DONE_COUNT] += 1
                istate[FAILED_COUNT] += 1
        elif t_heap <= t_pool and t_heap <= t_arrival:
            # A placed job completes and frees its node.
            j = hj[0]
            heap_pop(ht, hj, hk, istate)
            k = jobs_i[NODE, j]
            nodes_f[FREE_SLOTS, k] += 1.0
            nodes_f[FREE_CPU, k] += jobs_f[REQ_CPU, j]
            nodes_f[FREE_MEM, k] += jobs_f[REQ_MEM, j]
            nodes_f[FREE_GPU, k] += jobs_f[REQ_GPU, j]
            fstate[BUSY_CPU] -= jobs_f[REQ_CPU, j]
            jobs_f[END, j] = t
            jobs_i[STATE, j] = DONE
            n_class[jobs_i[CLS, j]] -= 1
            istate[N_SYSTEM] -= 1
            istate[DONE_COUNT] += 1
            if istate[Q_HEAD] < istate[Q_TAIL]:
                istate[NEED_PLACE] = 1
        elif t_pool <= t_arrival:
            # A malleable job finishes its work in pool p_min.
            p = p_min
            j = pools_i[P_NEXT_J, p]
            advance_pool(p, t, pools_f, pools_i, jobs_f, jobs_i)
            jobs_f[REM, j] = 0.0
            jobs_f[END, j] = t
            jobs_f[COST, j] = (
                pools_f[P_PRICE_PER_S, p]
                * jobs_f[CORE_SECONDS, j]
                / max(pools_f[P_CORES, p], 1e-300)
            )
            jobs_i[STATE, j] = DONE
            _pool_remove(p, j, pools_i, jobs_i)
            n_class[jobs_i[CLS, j]] -= 1
            istate[N_SYSTEM] -= 1
            istate[DONE_COUNT] += 1
            pools_i[P_NEXT_J, p] = -1
            pools_i[P_NEED_ALLOC, p] = 1
        else:
            # An arrival: malleable jobs join their pool, others the placement queue.
            j = a
            istate[NEXT_ARRIVAL] = a + 1
            c = jobs_i[CLS, j]
            n_class[c] += 1
            istate[N_SYSTEM] += 1
            p = classes_i[CLASS_POOL, c]
            if p >= 0:
                advance_pool(p, t, pools_f, pools_i, jobs_f, jobs_i)
                jobs_i[POOL, j] = p
                jobs_i[STATE, j] = RUNNING
                jobs_f[REM, j] = jobs_f[SIZE, j]
                jobs_f[START, j] = -1.0
                jobs_f[CORES, j] = 0.0
                jobs_f[RATE, j] = 0.0
                _pool_append(p, j, pools_i, jobs_i)
                pools_i[P_NEED_ALLOC, p] = 1
            else:
                jobs_i[STATE, j] = QUEUED
                # A compiled placer is strict FCFS: behind a blocked head nothing can start,
                # so only an arrival to an empty queue needs a decision. Python placers may
                # backfill, so they are asked at every arrival.
                if next_queued(queue, istate, jobs_i) < 0 or istate[PLACER_CODE] == PLACE_PYTHON:
                    istate[NEED_PLACE] = 1
                queue[istate[Q_TAIL]] = j
                istate[Q_TAIL] += 1
                patience = classes_f[TIMEOUT_S, c]
                if patience < math.inf:
                    heap_push(ht, hj, hk, istate, t + patience, j, EV_TIMER)
