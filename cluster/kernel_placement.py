"""The compiled event loop's decisions (`clusteremu.cluster.kernel`).

The rows of the loop's `fns` array (the policies' function addresses) and what the Python
placer's callback may answer; the waiting jobs gathered for a Python placer, and whether
it could place any (`may_place`); placements checked and started (`start_if_fits`, and a
Python placer's queued placements, `apply_decisions`); the compiled allocator's and
scaler's calls.
"""

from __future__ import annotations

import math

from clusteremu.cluster.fit_index import bits_search, lower_floor
from clusteremu.cluster.jit import inline_function, internal_function
from clusteremu.cluster.kernel_jobs import (
    _live,
    apply_allocation,
    next_queued,
    pool_members,
    start_job,
)
from clusteremu.cluster.layout import IS, JF, JI, NF, NI, PF, PI, JobState, NodeStatus
from clusteremu.cluster.policies.compiled import FIT_EPS, node_fits
from clusteremu.cluster.policies.compiled_table import (
    allocator_view,
    as_allocator,
    as_scaler,
    scaler_view,
)

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


# --- the waiting jobs, for a Python placer ------------------------------------------------


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
        if s.fit_bits.shape[0] > 0:  # only the rows whose free-node bit is set
            lower_floor(s, cpu)
            k = bits_search(
                s.fit_bits,
                nodes_f[NF.FREE_CPU],
                nodes_f[NF.FREE_MEM],
                nodes_f[NF.FREE_SLOTS],
                nodes_i[NI.STATUS],
                s.gpu_free,
                cpu,
                mem,
                gpu,
                0,
            )
            return 0 <= k < used
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


# --- placements -------------------------------------------------------------------------


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


# --- the compiled allocator and scaler ---------------------------------------------------


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
