"""Compiled decision function of the `mdp` allocator (the MDP paper, section 2.2).

The allocator's parameter array (`MdpAllocator.kernel_params()`, handed unchanged to the
engine's compiled loop) holds a small header and the policy's shares. At every event in its
pool the function counts the jobs x_j of each of the m classes the policy covers, looks up
the shares of the state (min(x_1, B), ..., min(x_m, B)) and gives each class-j job
share_j k / x_j cores (EQUI within a class); jobs of any other class get nothing. With two
classes the shares are (a(x1, x2), 1 - a(x1, x2)).

Nothing is recorded here: the estimator rebuilds the piecewise-constant state path from the
per-job arrival and end times the engine keeps anyway, plus the table in force (see
`cluster.policies.mdp.estimator.path_from_jobs`), so ordinary runs pay nothing.

Layout of the parameter array (float64):
    [0] B    [1] m    [2 : 2 + m] the engine class index of each policy class
    [2 + m : 2 + 2m] scratch: the class counts of the current decision (the hot path
                     allocates nothing, see `cluster.jit`)
    [2 + 2m :]  the shares, row-major over (x_1, ..., x_m, class): (B+1)^m * m values
"""

from __future__ import annotations

import numpy as np

from cluster.jit import kernel_function
from cluster.layout import JF, JI

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


@kernel_function
def allocate_mdp(
    params: np.ndarray,
    members: np.ndarray,
    n: int,
    pool_cores: float,
    now: float,
    jobs_f: np.ndarray,
    jobs_i: np.ndarray,
) -> None:
    """Write cores per job (jobs_f[JF.CORES]) for the first n entries of `members`."""
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
            jobs_f[JF.CORES, j] = params[base + s] * pool_cores / params[count + s]
        else:
            jobs_f[JF.CORES, j] = 0.0
