"""Compiled decision functions of the built-in policies, dispatched by integer code.

A policy class opts into the compiled path by setting `kernel_code` (see `base.py`); the
engine's loop then calls these functions instead of returning to Python for each decision.
Both paths run through the same loop and the same checks in tests (conformance suite).

To add a compiled allocator: write an `@njit` function with the signature of
`allocate_equi` in your policy module, give it a new code below, and add one branch to
`allocate`. Placers likewise with `place`.
"""

from __future__ import annotations

import numpy as np

from cluster.jit import kernel_function
from cluster.layout import (
    ACTIVE,
    CORES,
    FREE_CPU,
    FREE_GPU,
    FREE_MEM,
    FREE_SLOTS,
    REQ_CPU,
    REQ_GPU,
    REQ_MEM,
)
from cluster.policies.mdp.kernel import allocate_mdp
from cluster.policies.wham import (
    ALLOC_FW_CAM,
    ALLOC_GREEDY,
    ALLOC_WHAM,
    allocate_fw_cam,
    allocate_greedy,
    allocate_wham,
)

# Allocator codes (0 = Python policy, called back).
ALLOC_PYTHON, ALLOC_EQUI, ALLOC_FCFS_ONE_CORE = 0, 1, 2
#: The learned speed-up MDP allocator (cluster.policies.mdp.kernel).
ALLOC_MDP = 51
# Placer codes (0 = Python policy, called back).
PLACE_PYTHON, PLACE_FIRST_FIT, PLACE_RANDOM_FIT = 0, 1, 2

#: Tolerance on capacity checks (cores, GB, GPUs).
FIT_EPS = 1e-9


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


@kernel_function
def fits(
    nodes_f: np.ndarray, nodes_i: np.ndarray, k: int, cpu: float, mem: float, gpu: float
) -> bool:
    return (
        nodes_i[ACTIVE, k] == 1
        and nodes_f[FREE_CPU, k] >= cpu - FIT_EPS
        and nodes_f[FREE_MEM, k] >= mem - FIT_EPS
        and nodes_f[FREE_GPU, k] >= gpu - FIT_EPS
        and nodes_f[FREE_SLOTS, k] >= 1.0
    )


@kernel_function
def place_first_fit(j: int, nodes_f: np.ndarray, nodes_i: np.ndarray, jobs_f: np.ndarray) -> int:
    """The first node in node order with room for job j, or -1."""
    cpu, mem, gpu = jobs_f[REQ_CPU, j], jobs_f[REQ_MEM, j], jobs_f[REQ_GPU, j]
    for k in range(nodes_f.shape[1]):
        if fits(nodes_f, nodes_i, k, cpu, mem, gpu):
            return k
    return -1


@kernel_function
def place_random_fit(
    j: int, nodes_f: np.ndarray, nodes_i: np.ndarray, jobs_f: np.ndarray, rng: np.ndarray
) -> int:
    """A uniformly random node with room for job j (seeded), or -1."""
    cpu, mem, gpu = jobs_f[REQ_CPU, j], jobs_f[REQ_MEM, j], jobs_f[REQ_GPU, j]
    count = 0
    for k in range(nodes_f.shape[1]):
        if fits(nodes_f, nodes_i, k, cpu, mem, gpu):
            count += 1
    if count == 0:
        return -1
    pick = uniform_index(rng, count)
    for k in range(nodes_f.shape[1]):
        if fits(nodes_f, nodes_i, k, cpu, mem, gpu):
            if pick == 0:
                return k
            pick -= 1
    return -1


@kernel_function
def place(
    code: int,
    params: np.ndarray,
    j: int,
    nodes_f: np.ndarray,
    nodes_i: np.ndarray,
    jobs_f: np.ndarray,
    rng: np.ndarray,
) -> int:
    """Node for the job at the head of the queue, or -1 to leave it waiting."""
    if code == PLACE_FIRST_FIT:
        return place_first_fit(j, nodes_f, nodes_i, jobs_f)
    if code == PLACE_RANDOM_FIT:
        return place_random_fit(j, nodes_f, nodes_i, jobs_f, rng)
    return -1


@kernel_function
def allocate_equi(members: np.ndarray, n: int, pool_cores: float, jobs_f: np.ndarray) -> None:
    """EQUI: every job in the pool gets pool_cores / n cores (fractions below 1 allowed)."""
    share = pool_cores / n
    for i in range(n):
        jobs_f[CORES, members[i]] = share


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
        jobs_f[CORES, members[i]] = give
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
