"""Compiled decision function of the `mdp` allocator (seed 001, section 2.2).

The allocator's parameter array (`MdpAllocator.kernel_params()`, handed unchanged to the
engine's compiled loop) holds a small header and the policy table a(x1, x2). At every event
in its pool the function counts the jobs of the two classes, looks up
a = table[min(x1, B), min(x2, B)], and gives each class-1 job a k / x1 cores and each class-2
job (1 - a) k / x2 (EQUI within a class); jobs of any other class get nothing.

Nothing is recorded here: the estimator rebuilds the piecewise-constant state path from the
per-job arrival and end times the engine keeps anyway, plus the table in force (see
`cluster.policies.mdp.estimator.exposure_from_jobs`), so ordinary runs pay nothing.

Layout of the parameter array (float64):
    [0] B    [1] class index of "class 1"    [2] class index of "class 2"    [3] reserved
    [HEADER : HEADER + (B+1)^2]   the table, row-major a[x1, x2]
"""

from __future__ import annotations

import numpy as np
from numba import njit

from cluster.layout import CLS, CORES

P_B, P_C1, P_C2 = 0, 1, 2
HEADER = 4


@njit(cache=True)
def allocate_mdp(params: np.ndarray, members: np.ndarray, n: int, pool_cores: float,
                 now: float, jobs_f: np.ndarray, jobs_i: np.ndarray) -> None:
    """Write cores per job (jobs_f[CORES]) for the first n entries of `members`."""
    b = int(params[P_B])
    c1 = int(params[P_C1])
    c2 = int(params[P_C2])
    x1 = 0
    x2 = 0
    for i in range(n):
        c = jobs_i[CLS, members[i]]
        if c == c1:
            x1 += 1
        elif c == c2:
            x2 += 1
    a = params[HEADER + min(x1, b) * (b + 1) + min(x2, b)]
    share1 = a * pool_cores / x1 if x1 > 0 else 0.0
    share2 = (1.0 - a) * pool_cores / x2 if x2 > 0 else 0.0
    for i in range(n):
        j = members[i]
        c = jobs_i[CLS, j]
        if c == c1:
            jobs_f[CORES, j] = share1
        elif c == c2:
            jobs_f[CORES, j] = share2
        else:
            jobs_f[CORES, j] = 0.0
