"""The compiled event loop's event heap (`clusteremu.cluster.kernel`).

A binary heap of (time, key, kind) in the state's `heap_t`, `heap_j` and `heap_k`,
ordered by time, then by kind (`tie_rank`: docs/engine.md, "Ties"), then by id (a job's
number or a node's row): push, pop, the purge of stale entries (a killed attempt's
completion, the timer of a job no longer waiting, a fault event of a node that moved on),
the prefetch of the rows the next completion reads, and the time of the next event of
any source (`next_event_time`: arrivals, the heap, the timeline, pools).
"""

from __future__ import annotations

import math

import numpy as np

from clusteremu.cluster.jit import inline_function, internal_function, prefetch
from clusteremu.cluster.layout import IS, JF, JI, NI, PF, PI, TL, Event, JobState, NodeStatus

#: Heap kinds carry the job's attempt number above these bits (stale entries are skipped).
KIND_BITS = 4
KIND_MASK = (1 << KIND_BITS) - 1


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
        purge_heap(s)
        i = s.istate[IS.HEAP_N]
        if i >= ht.size:
            s.istate[IS.HEAP_OVERFLOW] = 1
            return
    key = (tie_rank(kind & KIND_MASK) << RANK_SHIFT) | j
    s.istate[IS.HEAP_N] = i + 1
    # A hole from the new last slot up to where the entry belongs: each parent later than
    # it moves down one level (one write per level instead of a swap of three arrays).
    while i > 0:
        parent = (i - 1) >> 1
        if t < ht[parent] or (t == ht[parent] and key < hj[parent]):
            ht[i], hj[i], hk[i] = ht[parent], hj[parent], hk[parent]
            i = parent
        else:
            break
    ht[i], hj[i], hk[i] = t, key, kind


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
    """Remove the first entry (Floyd's method: the hole at the root goes down along the
    earlier child to a leaf, one comparison a level, then the last entry rises from there;
    the same entries in heap order as the classic sift-down, which compares twice a level)."""
    ht, hj, hk = s.heap_t, s.heap_j, s.heap_k
    n = s.istate[IS.HEAP_N] - 1
    s.istate[IS.HEAP_N] = n
    if n <= 0:
        return
    t, key, kind = ht[n], hj[n], hk[n]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and _heap_less(ht, hj, child + 1, child):
            child += 1
        ht[i], hj[i], hk[i] = ht[child], hj[child], hk[child]
        i = child
    while i > 0:
        parent = (i - 1) >> 1
        if t < ht[parent] or (t == ht[parent] and key < hj[parent]):
            ht[i], hj[i], hk[i] = ht[parent], hj[parent], hk[parent]
            i = parent
        else:
            break
    ht[i], hj[i], hk[i] = t, key, kind


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


# --- the next event ----------------------------------------------------------------------


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
