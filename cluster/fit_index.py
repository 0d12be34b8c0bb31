"""The one fit rule (`node_fits`) and an index of free capacity that finds the first node
row it admits in O(log N) instead of a scan of every row.

The index (`EngineState.fit_index`, columns named by `clusteremu.cluster.layout.FX`) is a segment
tree
over node rows: row L + k holds node row k's free cores, free GB, free worker slots and,
when some node type has GPUs, the most free milli-GPU on one of its GPUs and its wholly free
GPUs (-inf everywhere for a node that is not up), every inner row the most of each column
over its two children. Each column
is one of `node_fits`' conditions made monotone, so a subtree whose maxima do not cover a
request holds no node that fits it; `first_fit` walks to the leftmost leaf whose maxima
cover the request, confirms it with `node_fits` and goes on to the right when a leaf fails
(the maxima of a subtree may come from different nodes). It returns exactly the node that a
scan in node order returns; `search_from` does the same from a given node row on, so that a
compiled placer visits every node that fits, in node order (`compiled_table.next_fit`).

Only the engine's transitions write node rows; each one that changes a node's free cores,
GB, slots, GPUs or status calls `index_update` for it (`clusteremu.cluster.kernel`; `Engine.rent`,
`Engine.release`). An empty index ((0, 0): small clusters, placers that do not use it) costs
those transitions one branch.
"""

from __future__ import annotations

import math

import numpy as np

from clusteremu.cluster.jit import (
    inline_function,
    internal_function,
    kernel_function,
    trailing_zeros,
)
from clusteremu.cluster.layout import FS, FX, GPU_MILLI, NF, NI, NodeStatus
from clusteremu.cluster.state import EngineState

#: Tolerance on capacity checks (cores, GB, GPUs).
FIT_EPS = 1e-9

#: Node rows from which the engine keeps an index for the compiled first-fit placer: below
#: it a scan of the rows costs less than keeping the tree up to date (M/M/c at load 0.9:
#: the scan 165 ns a job on 100 nodes, the index 225; the same on 512; on 1,000 405 and 305).
MIN_ROWS = 512


@inline_function
def gpu_fits(gpu_free: np.ndarray, k: int, gpu: float) -> bool:
    """Whether node k has GPUs for a request: a share (< 1) fits one GPU with that much
    milli-GPU free; n >= 1 GPUs need n wholly free GPUs."""
    if gpu <= 0.0:
        return True
    if gpu < 1.0:
        milli = np.floor(gpu * GPU_MILLI + 0.5)
        for g in range(gpu_free.shape[1]):  # noqa: SIM110 (compiled: no generators)
            if gpu_free[k, g] >= milli - FIT_EPS:
                return True
        return False
    need = int(np.floor(gpu + 0.5))
    have = 0
    for g in range(gpu_free.shape[1]):
        if gpu_free[k, g] >= GPU_MILLI - FIT_EPS:
            have += 1
    return have >= need


@inline_function
def has_room(
    free_cpu: float,
    free_mem: float,
    free_slots: float,
    gpu_free: np.ndarray,
    k: int,
    cpu: float,
    mem: float,
    gpu: float,
) -> bool:
    """The one fit rule: a free worker slot and room for the request (cores, GB, GPUs)."""
    return (
        free_cpu >= cpu - FIT_EPS
        and free_mem >= mem - FIT_EPS
        and free_slots >= 1.0
        and gpu_fits(gpu_free, k, gpu)
    )


@inline_function
def node_fits(
    nodes_f: np.ndarray,
    nodes_i: np.ndarray,
    gpu_free: np.ndarray,
    k: int,
    cpu: float,
    mem: float,
    gpu: float,
) -> bool:
    """Node k is up and `has_room` for the request. Compiled placers, the Python placers
    (`fit_mask`, `first_fit`), the index and the engine's check of Python decisions all
    use it."""
    # Free cores first: the test that rejects most nodes of a busy cluster, so that a scan
    # of node rows mostly reads one row of `nodes_f`.
    return (
        has_room(
            nodes_f[NF.FREE_CPU, k],
            nodes_f[NF.FREE_MEM, k],
            nodes_f[NF.FREE_SLOTS, k],
            gpu_free,
            k,
            cpu,
            mem,
            gpu,
        )
        and nodes_i[NI.STATUS, k] == NodeStatus.UP
    )


@kernel_function
def fitting_rows(  # type: ignore[no-untyped-def]
    free_cpu, free_mem, free_slots, active, gpu_free, cpu: float, mem: float, gpu: float, out
) -> int:
    """Write to `out` the node rows, in order, that are `active` (up) and `has_room` for
    the request (cores, GB, GPUs); return how many (`PlacementView.fitting_nodes`)."""
    m = 0
    for k in range(free_cpu.shape[0]):
        if active[k] and has_room(
            free_cpu[k], free_mem[k], free_slots[k], gpu_free, k, cpu, mem, gpu
        ):
            out[m] = k
            m += 1
    return m


@kernel_function
def fitting_waiting(  # type: ignore[no-untyped-def]
    nodes_f, nodes_i, gpu_free, wait_f, i: int, out
) -> int:
    """`fitting_rows` for the engine's i-th gathered waiting job (`wait_f` column i: its
    cores, GB and GPUs) over its node rows (`node_fits`)."""
    cpu, mem, gpu = wait_f[0, i], wait_f[1, i], wait_f[2, i]
    m = 0
    for k in range(nodes_f.shape[1]):
        if node_fits(nodes_f, nodes_i, gpu_free, k, cpu, mem, gpu):
            out[m] = k
            m += 1
    return m


@kernel_function
def fit_mask_waiting(  # type: ignore[no-untyped-def]
    nodes_f, nodes_i, gpu_free, wait_f, i: int, out
) -> int:
    """`fitting_waiting` as a mask: out[k] is whether the engine's i-th gathered waiting
    job fits node row k (`node_fits`); returns how many do
    (`PlacementView.fit_mask`)."""
    cpu, mem, gpu = wait_f[0, i], wait_f[1, i], wait_f[2, i]
    m = 0
    for k in range(out.shape[0]):
        fits = node_fits(nodes_f, nodes_i, gpu_free, k, cpu, mem, gpu)
        out[k] = fits
        m += fits
    return m


@kernel_function
def fit_mask_rows(  # type: ignore[no-untyped-def]
    free_cpu, free_mem, free_slots, active, gpu_free, cpu: float, mem: float, gpu: float, out
) -> int:
    """`fitting_rows` as a mask: out[k] is whether node row k is `active` and `has_room`
    for the request; returns how many are (`PlacementView.fit_mask`)."""
    m = 0
    for k in range(free_cpu.shape[0]):
        fits = bool(active[k]) and has_room(
            free_cpu[k], free_mem[k], free_slots[k], gpu_free, k, cpu, mem, gpu
        )
        out[k] = fits
        m += fits
    return m


# --- the index ---------------------------------------------------------------------------


def new_index(rows: int, gpus: bool = True) -> np.ndarray:
    """An index for `rows` node rows, every row without room (fill it with `build`); without
    `gpus` (no node type has a GPU) it leaves out the GPU columns."""
    leaves = 1 << max(rows - 1, 0).bit_length()
    return np.full((2 * leaves, len(FX) if gpus else int(FX.GPU_SHARE)), -math.inf)


@inline_function
def _put(fx: np.ndarray, i: int, c: int, value: float, bit: int) -> int:
    """Write `value` into column c of row i; `bit` if that changed it, else 0."""
    if fx[i, c] == value:
        return 0
    fx[i, c] = value
    return bit


@inline_function
def _set_leaf(
    fx: np.ndarray, nodes_f: np.ndarray, nodes_i: np.ndarray, gpu_free: np.ndarray, k: int
) -> int:
    """Write node row k's leaf (its free capacity if it is up, else -inf); return the
    columns that changed, as bits."""
    i = (fx.shape[0] >> 1) + k
    up = nodes_i[NI.STATUS, k] == NodeStatus.UP
    changed = _put(fx, i, FX.CPU, nodes_f[NF.FREE_CPU, k] if up else -math.inf, 1)
    changed |= _put(fx, i, FX.MEM, nodes_f[NF.FREE_MEM, k] if up else -math.inf, 2)
    changed |= _put(fx, i, FX.SLOTS, nodes_f[NF.FREE_SLOTS, k] if up else -math.inf, 4)
    if fx.shape[1] > FX.GPU_SHARE:
        share = whole = -math.inf
        if up:
            share = whole = 0.0
            for g in range(gpu_free.shape[1]):
                free = gpu_free[k, g]
                share = max(share, free)
                if free >= GPU_MILLI - FIT_EPS:  # `gpu_fits`' rule for a whole GPU
                    whole += 1.0
        changed |= _put(fx, i, FX.GPU_SHARE, share, 8)
        changed |= _put(fx, i, FX.GPU_WHOLE, whole, 16)
    return changed


@kernel_function
def build(fx: np.ndarray, nodes_f: np.ndarray, nodes_i: np.ndarray, gpu_free: np.ndarray) -> None:
    """Fill index `fx` (from `new_index`) from the node rows."""
    leaves = fx.shape[0] >> 1
    for k in range(leaves):
        if k < nodes_f.shape[1]:
            _set_leaf(fx, nodes_f, nodes_i, gpu_free, k)
        else:
            for c in range(fx.shape[1]):
                fx[leaves + k, c] = -math.inf
    for i in range(leaves - 1, 0, -1):
        for c in range(fx.shape[1]):
            fx[i, c] = max(fx[2 * i, c], fx[2 * i + 1, c])


@internal_function
def update(
    fx: np.ndarray, nodes_f: np.ndarray, nodes_i: np.ndarray, gpu_free: np.ndarray, k: int
) -> None:
    """Node row k changed: its leaf, then, column by column, its ancestors up to the first
    whose most does not change (nor then any above it). A call, not inlined: inlined at
    every transition that changes a node, it made a first run compile the loop half as
    long again (`benchmarks/startup.py`)."""
    changed = _set_leaf(fx, nodes_f, nodes_i, gpu_free, k)
    i = ((fx.shape[0] >> 1) + k) >> 1
    while changed != 0 and i >= 1:
        for c in range(fx.shape[1]):
            bit = 1 << c
            if changed & bit and _put(fx, i, c, max(fx[2 * i, c], fx[2 * i + 1, c]), bit) == 0:
                changed ^= bit
        i >>= 1


@inline_function
def index_update(s, k: int) -> None:  # type: ignore[no-untyped-def]
    """Node row k's free capacity or status changed: bring the index, or the free-node
    bits, up to date (no-op without either)."""
    if s.fit_bits.shape[0] > 0:
        bits_update(s.fit_bits, s.nodes_f, s.nodes_i, k, s.fstate[FS.FIT_FLOOR])
    if s.fit_index.shape[0] > 0:
        update(s.fit_index, s.nodes_f, s.nodes_i, s.gpu_free, k)


@inline_function
def covers(fx: np.ndarray, i: int, cpu: float, mem: float, gpu: float) -> bool:
    """Whether the maxima of index row i cover the request: `node_fits`' conditions, each on
    its column (so a subtree where this fails holds no node that fits)."""
    if not (
        fx[i, FX.CPU] >= cpu - FIT_EPS and fx[i, FX.MEM] >= mem - FIT_EPS and fx[i, FX.SLOTS] >= 1.0
    ):
        return False
    if gpu <= 0.0:
        return True
    if fx.shape[1] <= FX.GPU_SHARE:
        return False  # no node has a GPU
    if gpu < 1.0:
        return fx[i, FX.GPU_SHARE] >= np.floor(gpu * GPU_MILLI + 0.5) - FIT_EPS
    return fx[i, FX.GPU_WHOLE] >= np.floor(gpu + 0.5)


@internal_function
def search(
    fx: np.ndarray,
    free_cpu: np.ndarray,
    free_mem: np.ndarray,
    free_slots: np.ndarray,
    status: np.ndarray,
    gpu_free: np.ndarray,
    cpu: float,
    mem: float,
    gpu: float,
) -> int:
    """The first node row in node order that fits the request (`node_fits`' rule on the
    node rows `free_*`, `status`, `gpu_free`), or -1, through index `fx`: a depth-first walk
    that skips every subtree whose maxima do not cover the request, and goes on to the right
    when a leaf does not fit. The engine's state and a compiled placer's view
    (`compiled_table.first_fit`) both search through it.

    A call, not inlined into the placer: inlined, its loop made the compiled scan of small
    clusters (no index) about 5% slower."""
    leaves = fx.shape[0] >> 1
    i = 1
    while True:
        if covers(fx, i, cpu, mem, gpu):
            if i < leaves:
                i = 2 * i  # the left subtree first
                continue
            k = i - leaves
            up = k < status.shape[0] and status[k] == NodeStatus.UP
            if up and has_room(free_cpu[k], free_mem[k], free_slots[k], gpu_free, k, cpu, mem, gpu):
                return k
        # Nothing here: the next subtree to the right (climb past right children).
        while i & 1:
            i >>= 1
        if i == 0:
            return -1
        i += 1


@internal_function
def search_from(
    fx: np.ndarray,
    free_cpu: np.ndarray,
    free_mem: np.ndarray,
    free_slots: np.ndarray,
    status: np.ndarray,
    gpu_free: np.ndarray,
    cpu: float,
    mem: float,
    gpu: float,
    start: int,
) -> int:
    """`search` from node row `start` on: the first node row >= `start` (negative: 0) that
    fits the request, or -1. The walk starts at the largest subtree whose leftmost leaf is
    `start` and goes right as `search` does, so every subtree it enters holds only rows >=
    `start`, and a subtree whose maxima do not cover the request is skipped whole: asked
    again from each found row + 1, it lists the fitting rows in node order in O(log N)
    steps each (a compiled placer's `compiled_table.next_fit`)."""
    leaves = fx.shape[0] >> 1
    if start < 0:
        start = 0
    if start >= leaves or start >= status.shape[0]:
        return -1
    i = leaves + start
    while i > 1 and i & 1 == 0:  # up while `start` stays the leftmost leaf
        i >>= 1
    while True:
        if covers(fx, i, cpu, mem, gpu):
            if i < leaves:
                i = 2 * i
                continue
            k = i - leaves
            up = k < status.shape[0] and status[k] == NodeStatus.UP
            if up and has_room(free_cpu[k], free_mem[k], free_slots[k], gpu_free, k, cpu, mem, gpu):
                return k
        while i & 1:
            i >>= 1
        if i == 0:
            return -1
        i += 1


@inline_function
def first_fit(s, cpu: float, mem: float, gpu: float) -> int:  # type: ignore[no-untyped-def]
    """`search` in the engine's index (which must exist)."""
    nodes_f = s.nodes_f
    return search(
        s.fit_index,
        nodes_f[NF.FREE_CPU],
        nodes_f[NF.FREE_MEM],
        nodes_f[NF.FREE_SLOTS],
        s.nodes_i[NI.STATUS],
        s.gpu_free,
        cpu,
        mem,
        gpu,
    )


@kernel_function
def first_fit_entry(t, cpu: float, mem: float, gpu: float) -> int:  # type: ignore[no-untyped-def]
    """`first_fit` from Python (the engine's state as a plain tuple; tests)."""
    return first_fit(EngineState(*t), cpu, mem, gpu)


# --- free-node bits ------------------------------------------------------------------------
#
# Where the engine keeps no index (fewer than `MIN_ROWS` rows, or a placer that does not use
# it), a bit per node row says whether the row may fit a request of at least `FS.FIT_FLOOR`
# cores: up, a free worker slot and that many free cores. A row whose bit is clear fits no
# such request, so a first-fit visits only the set bits, a word of 64 rows at a time
# (`bits_search`: on M/M/c's one-core nodes the first set bit fits, where a scan passes every
# busy row before it). The floor is the smallest request asked about so far: a request
# below it lowers it and the bits are counted again (`lower_floor`; once per distinct
# smaller request). `index_update` keeps each row's bit at every change of the row.


def new_bits(rows: int) -> np.ndarray:
    """Free-node bits for `rows` node rows, every bit clear (valid for a floor of +inf)."""
    return np.zeros((rows + 63) >> 6, dtype=np.int64)


@inline_function
def _may_fit(nodes_f: np.ndarray, nodes_i: np.ndarray, k: int, floor: float) -> bool:
    """Node row k is up, has a free worker slot and `floor` free cores."""
    return (
        nodes_i[NI.STATUS, k] == NodeStatus.UP
        and nodes_f[NF.FREE_SLOTS, k] >= 1.0
        and nodes_f[NF.FREE_CPU, k] >= floor - FIT_EPS
    )


@inline_function
def bits_update(
    bits: np.ndarray, nodes_f: np.ndarray, nodes_i: np.ndarray, k: int, floor: float
) -> None:
    """Node row k's bit, from its row now."""
    bit = np.int64(1) << np.int64(k & 63)
    if _may_fit(nodes_f, nodes_i, k, floor):
        bits[k >> 6] |= bit
    else:
        bits[k >> 6] &= ~bit


@kernel_function
def bits_build(bits: np.ndarray, nodes_f: np.ndarray, nodes_i: np.ndarray, floor: float) -> None:
    """Every node row's bit for `floor` cores."""
    bits[:] = 0
    for k in range(min(nodes_f.shape[1], bits.shape[0] * 64)):
        if _may_fit(nodes_f, nodes_i, k, floor):
            bits[k >> 6] |= np.int64(1) << np.int64(k & 63)


@inline_function
def lower_floor(s, cpu: float) -> None:  # type: ignore[no-untyped-def]
    """Make the free-node bits valid for a request of `cpu` cores (before asking where it
    fits): a request below the floor lowers it and counts the bits again."""
    if s.fit_bits.shape[0] > 0 and cpu < s.fstate[FS.FIT_FLOOR]:
        s.fstate[FS.FIT_FLOOR] = cpu
        bits_build(s.fit_bits, s.nodes_f, s.nodes_i, cpu)


@internal_function
def bits_search(
    bits: np.ndarray,
    free_cpu: np.ndarray,
    free_mem: np.ndarray,
    free_slots: np.ndarray,
    status: np.ndarray,
    gpu_free: np.ndarray,
    cpu: float,
    mem: float,
    gpu: float,
    start: int,
) -> int:
    """The first node row >= `start` (negative: 0) that fits the request, or -1, visiting
    only rows whose bit is set (the caller makes sure that the request is at least the
    floor: `lower_floor`). The same row as a scan in node order."""
    n = free_cpu.shape[0]
    if start < 0:
        start = 0
    w = start >> 6
    if w >= bits.shape[0]:
        return -1
    word = bits[w] & (np.int64(-1) << np.int64(start & 63))
    while True:
        while word != 0:
            k = (w << 6) + trailing_zeros(word)
            if k >= n:
                return -1
            if status[k] == NodeStatus.UP and has_room(
                free_cpu[k], free_mem[k], free_slots[k], gpu_free, k, cpu, mem, gpu
            ):
                return k
            word &= word - np.int64(1)
        w += 1
        if w >= bits.shape[0]:
            return -1
        word = bits[w]
