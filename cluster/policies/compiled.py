"""Compiled decision functions of the built-in policies, dispatched by integer code.

A policy class opts into the compiled path by setting `kernel_code` (see `base.py`); the
engine's loop then calls these functions instead of returning to Python for each decision.
Both paths run through the same loop and the same checks in tests (conformance suite).

To add a compiled allocator: write an `@njit` function with the signature of
`allocate_equi` in your policy module, give it a new code in the one table of codes
(`cluster.policies.codes`), and add one branch to `allocate`. Placers likewise with `place`:
a compiled placer gets the job at the head of the queue and the whole `EngineState` (read
only by convention), so it sees the clock (`fstate[FS.NOW]`), the queue (`queue`,
`istate[IS.Q_HEAD]`..`istate[IS.Q_TAIL]`), the jobs' arrivals and the nodes: a compiled
learned policy (a decision tree) can compute waiting-time features. The engine refuses a
code that is not in the table when it is built.
"""

from __future__ import annotations

import numpy as np

from cluster import fit_index
from cluster.fit_index import FIT_EPS, has_room, node_fits
from cluster.jit import inline_function, kernel_function
from cluster.layout import GPU_MILLI, JF
from cluster.policies.codes import AllocatorCode, PlacerCode, ScalerCode
from cluster.policies.mdp.kernel import allocate_mdp
from cluster.policies.wham import allocate_fw_cam, allocate_greedy, allocate_wham

PLACE_PYTHON, PLACE_FIRST_FIT, PLACE_RANDOM_FIT = PlacerCode
ALLOC_PYTHON, ALLOC_EQUI, ALLOC_FCFS_ONE_CORE = (
    AllocatorCode.PYTHON,
    AllocatorCode.EQUI,
    AllocatorCode.FCFS_ONE_CORE,
)
ALLOC_WHAM, ALLOC_FW_CAM, ALLOC_GREEDY = (
    AllocatorCode.WHAM,
    AllocatorCode.FW_CAM,
    AllocatorCode.GREEDY,
)
ALLOC_MDP = AllocatorCode.MDP
SCALE_PYTHON, SCALE_STATIC = ScalerCode


@kernel_function
def splitmix64(state: np.ndarray) -> np.uint64:
    """Advance a one-element uint64 state and return 64 random bits (SplitMix64)."""
    state[0] = state[0] + np.uint64(0x9E3779B97F4A7C15)
    z = state[0]
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@kernel_function
def uniform_index(state: np.ndarray, n: int) -> int:
    """A uniform integer in [0, n) from the SplitMix64 stream."""
    return int(splitmix64(state) % np.uint64(n))


@inline_function
def choose_gpus(gpu_free: np.ndarray, k: int, gpu: float) -> int:
    """The default GPU choice as a bit mask: the first GPU with room for a share, or the
    first wholly free GPUs; 0 if none (callers check `gpu_fits` first)."""
    if gpu <= 0.0:
        return 0
    if gpu < 1.0:
        milli = np.floor(gpu * GPU_MILLI + 0.5)
        for g in range(gpu_free.shape[1]):
            if gpu_free[k, g] >= milli - FIT_EPS:
                return 1 << g
        return 0
    need = int(np.floor(gpu + 0.5))
    mask = 0
    for g in range(gpu_free.shape[1]):
        if need > 0 and gpu_free[k, g] >= GPU_MILLI - FIT_EPS:
            mask |= 1 << g
            need -= 1
    return mask


@inline_function
def holds_request(
    cap_cpu: float,
    cap_mem: float,
    cap_gpu: float,
    cap_slots: float,
    cpu: float,
    mem: float,
    gpu: float,
) -> bool:
    """Whether an empty node of these capacities (cores, GB, whole GPUs, worker slots)
    could hold the request (cores, GB, GPUs: a share of one below 1): `has_room` when free."""
    if gpu <= 0.0:
        gpus = 0.0
    elif gpu < 1.0:
        gpus = 1.0
    else:
        gpus = np.floor(gpu + 0.5)
    return (
        cap_slots >= 1.0
        and cap_cpu >= cpu - FIT_EPS
        and cap_mem >= mem - FIT_EPS
        and cap_gpu >= gpus - FIT_EPS
    )


@kernel_function
def fit_mask(
    active: np.ndarray,
    free_cpu: np.ndarray,
    free_mem: np.ndarray,
    free_slots: np.ndarray,
    gpu_free: np.ndarray,
    cpu: float,
    mem: float,
    gpu: float,
    out: np.ndarray,
) -> int:
    """For a Python placer's view: write whether each node fits into `out`; return the
    count. Same rule as `node_fits` (`active` = node up)."""
    count = 0
    for k in range(free_cpu.shape[0]):
        ok = active[k] and has_room(
            free_cpu[k], free_mem[k], free_slots[k], gpu_free, k, cpu, mem, gpu
        )
        out[k] = ok
        count += ok
    return count


@kernel_function
def first_fit(
    active: np.ndarray,
    free_cpu: np.ndarray,
    free_mem: np.ndarray,
    free_slots: np.ndarray,
    gpu_free: np.ndarray,
    cpu: float,
    mem: float,
    gpu: float,
) -> int:
    """For a Python placer's view: the first node that fits (`fit_mask`'s rule), or -1."""
    for k in range(free_cpu.shape[0]):
        if active[k] and has_room(
            free_cpu[k], free_mem[k], free_slots[k], gpu_free, k, cpu, mem, gpu
        ):
            return k
    return -1


@inline_function
def place_first_fit(j: int, s) -> int:  # type: ignore[no-untyped-def]
    """The first node in node order with room for job j, or -1: through the engine's index
    of free capacity when it keeps one (`cluster.fit_index`: the same node), else a scan."""
    cpu, mem, gpu = s.jobs_f[JF.REQ_CPU, j], s.jobs_f[JF.REQ_MEM, j], s.jobs_f[JF.REQ_GPU, j]
    if s.fit_index.shape[0] > 0:
        return fit_index.first_fit(s, cpu, mem, gpu)
    for k in range(s.nodes_f.shape[1]):
        if node_fits(s.nodes_f, s.nodes_i, s.gpu_free, k, cpu, mem, gpu):
            return k
    return -1


@inline_function
def place_random_fit(j: int, s) -> int:  # type: ignore[no-untyped-def]
    """A uniformly random node with room for job j (seeded), or -1."""
    cpu, mem, gpu = s.jobs_f[JF.REQ_CPU, j], s.jobs_f[JF.REQ_MEM, j], s.jobs_f[JF.REQ_GPU, j]
    count = 0
    for k in range(s.nodes_f.shape[1]):
        if node_fits(s.nodes_f, s.nodes_i, s.gpu_free, k, cpu, mem, gpu):
            count += 1
    if count == 0:
        return -1
    pick = uniform_index(s.rng, count)
    for k in range(s.nodes_f.shape[1]):
        if node_fits(s.nodes_f, s.nodes_i, s.gpu_free, k, cpu, mem, gpu):
            if pick == 0:
                return k
            pick -= 1
    return -1


@inline_function
def place(code: int, params: np.ndarray, j: int, s) -> int:  # type: ignore[no-untyped-def]
    """Node for the job at the head of the queue, or -1 to leave it waiting."""
    if code == PLACE_FIRST_FIT:
        return place_first_fit(j, s)
    if code == PLACE_RANDOM_FIT:
        return place_random_fit(j, s)
    return -1


@kernel_function
def allocate_equi(members: np.ndarray, n: int, pool_cores: float, jobs_f: np.ndarray) -> None:
    """EQUI: every job in the pool gets pool_cores / n cores (fractions below 1 allowed)."""
    share = pool_cores / n
    for i in range(n):
        jobs_f[JF.CORES, members[i]] = share


@kernel_function
def allocate_fcfs_one_core(
    members: np.ndarray, n: int, pool_cores: float, jobs_f: np.ndarray
) -> None:
    """One core per job in arrival order until the pool is used up; the rest wait."""
    left = pool_cores
    for i in range(n):
        give = min(1.0, left)
        if give < FIT_EPS:
            give = 0.0
        jobs_f[JF.CORES, members[i]] = give
        left -= give


@kernel_function
def allocate(
    code: int,
    params: np.ndarray,
    members: np.ndarray,
    n: int,
    pool_cores: float,
    now: float,
    jobs_f: np.ndarray,
    jobs_i: np.ndarray,
    classes_f: np.ndarray,
    classes_i: np.ndarray,
    class_tx: np.ndarray,
    class_ty: np.ndarray,
) -> None:
    """Write cores per job (jobs_f[CORES]) for the first n entries of `members`."""
    if code == ALLOC_EQUI:
        allocate_equi(members, n, pool_cores, jobs_f)
    elif code == ALLOC_FCFS_ONE_CORE:
        allocate_fcfs_one_core(members, n, pool_cores, jobs_f)
    elif code == ALLOC_MDP:
        allocate_mdp(params, members, n, pool_cores, now, jobs_f, jobs_i)
    elif code == ALLOC_WHAM:  # WHAM, FW-CAM, GREEDY: cluster.policies.wham (codes 41-43)
        allocate_wham(
            params, members, n, pool_cores, jobs_f, jobs_i, classes_f, classes_i, class_tx, class_ty
        )
    elif code == ALLOC_FW_CAM:
        allocate_fw_cam(params, members, n, jobs_f, jobs_i)
    elif code == ALLOC_GREEDY:
        allocate_greedy(
            params, members, n, pool_cores, jobs_f, jobs_i, classes_f, classes_i, class_tx, class_ty
        )
