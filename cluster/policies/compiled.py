"""The compiled fit rules every path shares, and the seeded random stream of compiled policies.

`has_room` is the one fit rule (a free worker slot, cores, GB, GPUs per GPU): the compiled
placers (`clusteremu.cluster.policies.compiled_table.fits`), the Python placers' helpers
(`fit_mask`,
`first_fit`) and the engine's check of every placement use it. The compiled policies
themselves are registered in the one table, `clusteremu.cluster.policies.compiled_table`.
"""

from __future__ import annotations

import numpy as np

from clusteremu.cluster.fit_index import FIT_EPS, gpu_fits, has_room, node_fits
from clusteremu.cluster.jit import inline_function, kernel_function
from clusteremu.cluster.layout import GPU_MILLI

#: The fit rule lives with the index of free capacity (`clusteremu.cluster.fit_index`); re-exported.
__all__ = [
    "FIT_EPS",
    "choose_gpus",
    "first_fit",
    "fit_mask",
    "gpu_fits",
    "has_room",
    "holds_request",
    "node_fits",
    "splitmix64",
    "uniform_index",
]


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
