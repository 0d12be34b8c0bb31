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

The loop's parts live in sibling modules, all re-exported here: `kernel_heap` (the event
heap and its tie ranks), `kernel_jobs` (job transitions, the queue, pools, the common
events), `kernel_faults` (out-of-memory kills, node start-up and faults, the timeline)
and `kernel_placement` (the decisions: Python and compiled placers, allocators, scalers).
This module holds the loop itself, in its variants (`LOOPS`, `loop_entry`: numba names
their cache files `kernel.run_kernel_*`, which `clusteremu.progress` looks for), and the
entries the engine calls.
"""

from __future__ import annotations

import math

from clusteremu.cluster.fit_index import index_update, lower_floor
from clusteremu.cluster.jit import call_c, kernel_function
from clusteremu.cluster.kernel_faults import (
    fail_node,
    node_up,
    on_node_ready,
    on_oom,
    on_timeline,
    recover_node,
    schedule_fault,
)
from clusteremu.cluster.kernel_heap import (
    KIND_MASK,
    _stale,
    heap_id,
    heap_pop,
    heap_push,
    next_event_time,
    prefetch_heap_top,
    purge_heap,
    tie_rank,
)
from clusteremu.cluster.kernel_jobs import (
    _account_usage,
    _leave,
    accumulate,
    advance_pool,
    advance_to,
    apply_allocation,
    gpu_milli,
    gpus_wanted,
    kill_job,
    next_queued,
    on_arrival,
    on_complete,
    on_pool_completion,
    on_timer,
    pool_members,
    speedup_value,
    start_job,
)
from clusteremu.cluster.kernel_placement import (
    _NODE_BITS,
    FN_ALLOCATOR,
    FN_PLACER,
    FN_PYTHON_PLACER,
    FN_SCALER,
    HANDED_BACK,
    NO_PLACEMENT,
    PLACEMENTS_QUEUED,
    allocate_compiled,
    apply_decisions,
    gather_waiting,
    may_place,
    scale_compiled,
    start_checked,
    start_if_fits,
)
from clusteremu.cluster.layout import FS, IS, JF, PF, PI, TL, Event, JobState, Status
from clusteremu.cluster.policies.compiled_table import as_placer, placer_view
from clusteremu.cluster.state import EngineState

#: What other modules, the tests, benchmarks and docs use as `kernel.X`: the loops and the
#: entries the engine calls, and the parts re-exported from the sibling modules.
__all__ = [
    "FN_ALLOCATOR",
    "FN_PLACER",
    "FN_PYTHON_PLACER",
    "FN_SCALER",
    "HANDED_BACK",
    "LOOPS",
    "NO_PLACEMENT",
    "PLACEMENTS_QUEUED",
    "Event",
    "_account_usage",
    "accumulate",
    "accumulate_entry",
    "advance_entry",
    "advance_pool",
    "apply_allocation",
    "apply_allocation_entry",
    "drop_entry",
    "gather_entry",
    "gpu_milli",
    "gpus_wanted",
    "kill_entry",
    "loop_entry",
    "may_place",
    "node_changed_entry",
    "peek_entry",
    "purge_entry",
    "pool_members_entry",
    "purge_heap",
    "push_entry",
    "reallocate_entry",
    "run_kernel",
    "run_kernel_nodes",
    "run_kernel_nodes_py",
    "run_kernel_py",
    "schedule_fault_entry",
    "speedup_value",
    "start_job",
    "tie_rank",
    "try_start",
]


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


# --- the loop ------------------------------------------------------------------------------


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
                        lower_floor(s, s.jobs_f[JF.REQ_CPU, j])  # the free-node bits hold for j
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


@kernel_function
def purge_entry(t) -> None:  # type: ignore[no-untyped-def]
    """Drop every stale heap entry (before job rows are renumbered: `engine.compaction`)."""
    purge_heap(EngineState(*t))
