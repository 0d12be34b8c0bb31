"""The engine's checks of Python decisions: a placement against the node's free resources
(the compiled placers' own fit rule, `compiled.node_fits`) and an allocation against its
pool; a violation is a `PolicyError` naming the policy, the time and the decision."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from clusteremu.cluster import kernel
from clusteremu.cluster.layout import (
    JF,
    NF,
    NI,
    NodeStatus,
)
from clusteremu.cluster.policies import compiled
from clusteremu.cluster.policies.base import (
    Allocation,
    Placement,
    PolicyError,
    PoolView,
)
from clusteremu.cluster.state import (
    EngineState,
)

FloatArray = npt.NDArray[np.float64]

#: Tolerance on over-allocation of a pool (cores).
ALLOC_EPS = 1e-9


def check_placement(policy: str, now: float, decision: Placement, s: EngineState) -> int:
    """Validate one placement of a waiting job against the node's free resources.

    Returns the GPU mask the job gets; raises PolicyError naming the policy, the time and
    the decision otherwise. The fit rule is `compiled.node_fits`, the compiled placers' own.
    """
    j, k = int(decision.job), int(decision.node)
    nodes_f = s.nodes_f
    if not 0 <= k < nodes_f.shape[1] or s.nodes_i[NI.STATUS, k] != NodeStatus.UP:
        raise PolicyError(policy, now, f"node {k} does not exist or is not up", decision)
    cpu, mem, gpu = (float(s.jobs_f[r, j]) for r in (JF.REQ_CPU, JF.REQ_MEM, JF.REQ_GPU))
    if not compiled.node_fits(nodes_f, s.nodes_i, s.gpu_free, k, cpu, mem, gpu):
        free = tuple(float(nodes_f[r, k]) for r in (NF.FREE_CPU, NF.FREE_MEM, NF.FREE_GPU))
        raise PolicyError(
            policy,
            now,
            f"job {j} (cpu, GB, gpu) = {(cpu, mem, gpu)} does not fit node {k} "
            f"with free {free} and {nodes_f[NF.FREE_SLOTS, k]:g} slots",
            decision,
        )
    setup_s = float(decision.setup_s)
    if not (math.isfinite(setup_s) and setup_s >= 0):
        raise PolicyError(policy, now, "setup_s must be finite and non-negative", decision)
    if decision.gpus is None or gpu <= 0:
        return -1
    return _gpu_mask(policy, now, decision, s, k, gpu)


def _gpu_mask(
    policy: str, now: float, decision: Placement, s: EngineState, k: int, gpu: float
) -> int:
    gpus = [int(g) for g in decision.gpus or ()]
    want = int(kernel.gpus_wanted(gpu))
    milli = float(kernel.gpu_milli(gpu))
    n_gpus = int(s.nodes_f[NF.CAP_GPU, k])
    if len(gpus) != want or len(set(gpus)) != want:
        raise PolicyError(policy, now, f"the job needs {want} distinct GPU(s)", decision)
    mask = 0
    for g in gpus:
        if not 0 <= g < n_gpus or s.gpu_free[k, g] < milli - compiled.FIT_EPS:
            raise PolicyError(
                policy, now, f"GPU {g} of node {k} has no {milli:g} milli-GPU free", decision
            )
        mask |= 1 << g
    return mask


def check_allocation(policy: str, view: PoolView, decision: Allocation) -> FloatArray:
    """Validate an allocator's decision; return the cores as a float array."""
    if not isinstance(decision, Allocation):
        raise PolicyError(policy, view.time_s, "allocate() must return an Allocation", decision)
    cores = np.asarray(decision.cores, dtype=np.float64)
    if cores.shape != view.job_ids.shape:
        raise PolicyError(
            policy, view.time_s, f"{cores.size} core counts for {view.job_ids.size} jobs", decision
        )
    if not np.all(np.isfinite(cores)) or np.any(cores < 0):
        raise PolicyError(
            policy, view.time_s, "core counts must be finite and non-negative", decision
        )
    if cores.sum() > view.cores * (1 + ALLOC_EPS) + ALLOC_EPS:
        raise PolicyError(
            policy,
            view.time_s,
            f"allocated {cores.sum():.6g} cores in pool {view.pool!r} of {view.cores:g}",
            decision,
        )
    return cores
