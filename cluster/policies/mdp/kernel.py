"""Compiled decision function of the `mdp` allocator (the MDP paper, section 2.2).

The allocator's parameter array (`MdpAllocator.kernel_params()`, the compiled function's
`view.params`) holds a small header and the policy's shares. At every event in its
pool the function counts the jobs x_j of each of the m classes the policy covers, looks up
the shares of the state (min(x_1, B), ..., min(x_m, B)) and gives each class-j job
share_j k / x_j cores (EQUI within a class); jobs of any other class get nothing. With two
classes the shares are (a(x1, x2), 1 - a(x1, x2)).

Nothing is recorded here: the estimator rebuilds the piecewise-constant state path from the
per-job arrival and end times the engine keeps anyway, plus the table in force (see
`clusteremu.cluster.policies.mdp.estimator.path_from_jobs`), so ordinary runs pay nothing.

Layout of the parameter array (float64):
    [0] B    [1] m    [2 : 2 + m] the engine class index of each policy class
    [2 + m : 2 + 2m] scratch: the class counts of the current decision (the hot path
                     allocates nothing, see `clusteremu.cluster.jit`)
    [2 + 2m :]  the shares, row-major over (x_1, ..., x_m, class): (B+1)^m * m values
"""

from __future__ import annotations

import numpy as np

from clusteremu.cluster.jit import kernel_function
from clusteremu.cluster.layout import JI
from clusteremu.cluster.policies.compiled_table import AllocatorView, compiled_allocator

P_B, P_M, P_CLASSES = 0, 1, 2


def shares_offset(n_classes: int) -> int:
    """Index of the first share in the parameter array."""
    return P_CLASSES + 2 * n_classes


@kernel_function
def _slot(params: np.ndarray, m: int, c: int) -> int:
    for s in range(m):
        if int(params[P_CLASSES + s]) == c:
            return s
    return -1


@compiled_allocator
def allocate_mdp(
    members: np.ndarray,
    n: int,
    pool_cores: float,
    now_s: float,
    view: AllocatorView,
    cores: np.ndarray,
) -> None:
    """Write cores per job (`cores[j]`) for the first n entries of `members`."""
    params, jobs_i = view.params, view.jobs_i
    b = int(params[P_B])
    m = int(params[P_M])
    count = P_CLASSES + m  # scratch counts
    for s in range(m):
        params[count + s] = 0.0
    for i in range(n):
        s = _slot(params, m, jobs_i[JI.CLS, members[i]])
        if s >= 0:
            params[count + s] += 1.0
    idx = 0
    for s in range(m):
        idx = idx * (b + 1) + min(int(params[count + s]), b)
    base = P_CLASSES + 2 * m + idx * m
    for i in range(n):
        j = members[i]
        s = _slot(params, m, jobs_i[JI.CLS, j])
        if s >= 0:
            cores[j] = params[base + s] * pool_cores / params[count + s]
        else:
            cores[j] = 0.0
