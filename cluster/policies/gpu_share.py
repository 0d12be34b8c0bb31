"""GPU-sharing placement (the ATC'23 "Beware of Fragmentation" policies), compiled.

A node has whole GPUs of 1,000 milli-GPU each. A pod asks for c milli-CPU, some memory,
k GPUs and d milli-GPU per GPU: with k = 1 and d < 1000 it may share a GPU that has d free;
otherwise it takes k wholly free GPUs; k = 0 is CPU-only. `model_mask` restricts the
node's GPU model (a node without GPUs takes CPU-only pods only). Which node and which
GPU(s) is the policy's decision; ties between equal scores go to the first node of a
per-seed random node order (`order`).

Policies (`SCORERS`: each one's compiled node score, `choose` takes the best node;
random-fit has none, `choose_random` draws):

- `random-fit`: a uniformly random feasible node, a random GPU with room.
- `best-fit`: floor(100 (1 - [0.5 (C - c) / 128000 + 0.5 (R - k d) / 8000])), C and R
  the node's free milli-CPU and milli-GPU before the pod (the least leftover); the
  tightest GPU for a sharing pod.
- `dot-product`: trunc(100 (1 - dot / 2)), dot = (C / 128000)(c / 128000) +
  (R / 8000)(k d / 8000) (the published simulator's `DotProductScorePlugin` with its
  `merge` dimensions and `max` normalisation: the mean of the two products; C in whole
  milli-CPU); equal integer scores tie; the tightest GPU.
- `gpu-packing`: a partly used GPU first (100 - its free % / 10, at least 50), then idle
  GPUs on a used node (50 - how many, at least 33), then an idle node with fewer GPUs
  (max(33 - GPUs, GPUs)); the GPUs with the least free milli that fit; CPU-only pods 0
  (the published simulator's `getPackingScore`).
- `gpu-clustering`: nodes hosting only pods of the pod's kind (`share-gpu`, or `k-gpu`
  for k whole GPUs) score 75..100, nodes hosting that kind among others 50..75, nodes
  with no GPU pod 25..50, the others 0..25; within a tier 25 x the node's used milli-GPU
  / 8000 (the published simulator's `GpuClusteringScorePlugin`).
- `fgd`: fragmentation gradient descent: the placement that grows the node's expected
  fragmentation F_n = sum_m p_m f_n(m) over the typical pods m least; score
  floor(100 sigma((F_before - F_after) / 1000)), the best GPU of the node (lowest index on
  ties); whole-GPU pods take the k free GPUs in index order.

f_n(m), the fragment of node n for typical pod m (the FGD paper; docs/gpu-frag.md): all of
the node's free milli-GPU if m is CPU-only, or the node's model is not allowed for m, or
fewer than k_m of its GPUs have d_m free, or the node lacks CPU for m; else the free
milli-GPU of its GPUs with less than d_m free. Memory is ignored there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from numba import njit

from clusteremu.cluster.jit import argument_function, kernel_function

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

GPU = 1000.0
#: Best-fit, dot-product and clustering normalisers on the trace: the largest node's
#: milli-CPU and milli-GPU (the published simulator's `MaxSpecCpu`, `MaxSpecGpu`); `choose`
#: takes them as arguments (a scenario's placers use its largest node type).
CPU_NORM = 128000.0
GPU_NORM = 8000.0


class TypicalPods(NamedTuple):
    """The most frequent pod request types covering `coverage` of the pods, with their
    renormalised frequencies p (the FGD workload model). A NamedTuple: the scorers take it
    in compiled code (`choose` builds it from its `t_*` arguments)."""

    cpu_milli: IntArray
    gpu_milli: IntArray
    num_gpu: IntArray
    model_mask: IntArray
    p: FloatArray


def typical_pods(
    cpu_milli: IntArray,
    num_gpu: IntArray,
    gpu_milli: IntArray,
    model_mask: IntArray,
    coverage: float = 0.95,
    weight: FloatArray | None = None,
) -> TypicalPods:
    """Request types (cpu, d, k, gpu_spec) by descending frequency (ties: first seen),
    kept until they cover `coverage` of the pods; frequencies renormalised. `weight` (one
    per entry, default 1) counts an entry as that many pods (a scenario's job classes)."""
    keys = list(
        zip(
            cpu_milli.tolist(),
            gpu_milli.tolist(),
            num_gpu.tolist(),
            model_mask.tolist(),
            strict=True,
        )
    )
    weights = [1.0] * len(keys) if weight is None else [float(w) for w in weight]
    counts: dict[tuple[int, int, int, int], float] = {}
    for key, w in zip(keys, weights, strict=True):
        counts[key] = counts.get(key, 0.0) + w
    order = sorted(counts.items(), key=lambda kv: -kv[1])  # stable: first seen wins ties
    total = sum(weights)
    kept: list[tuple[tuple[int, int, int, int], float]] = []
    covered = 0.0
    for key, n in order:
        kept.append((key, n))
        covered += n
        if covered >= coverage * total:
            break
    n_kept = np.array([n for _, n in kept], dtype=np.float64)
    a = np.array([k for k, _ in kept], dtype=np.int64).reshape(-1, 4)
    return TypicalPods(a[:, 0], a[:, 1], a[:, 2], a[:, 3], n_kept / n_kept.sum())


@kernel_function
def fragment(
    free: FloatArray,
    gpus: int,
    cpu_free: float,
    model_bit: int,
    t_cpu: IntArray,
    t_d: IntArray,
    t_k: IntArray,
    t_mask: IntArray,
    t_p: FloatArray,
) -> float:
    """F_n: the expected fragmented milli-GPU of one node (`free`: its GPUs' free milli)."""
    total = 0.0
    for g in range(gpus):
        total += free[g]
    if gpus == 0:
        return 0.0
    out = 0.0
    for m in range(t_p.size):
        d = t_d[m]
        frag = total
        if d > 0 and (t_mask[m] & model_bit) != 0 and t_cpu[m] <= cpu_free:
            cnt = 0
            low = 0.0
            for g in range(gpus):
                if free[g] >= d:
                    cnt += 1
                else:
                    low += free[g]
            if cnt >= t_k[m]:
                frag = low
        out += t_p[m] * frag
    return out


@kernel_function
def _fits(free: FloatArray, gpus: int, k: int, d: int) -> bool:
    if k == 0:
        return True
    if k == 1 and d < GPU:
        for g in range(gpus):  # noqa: SIM110 (numba compiles loops, not generators)
            if free[g] >= d:
                return True
        return False
    whole = 0
    for g in range(gpus):
        if free[g] >= GPU:
            whole += 1
    return whole >= k


@kernel_function
def _whole_mask(free: FloatArray, gpus: int, k: int) -> int:
    mask = 0
    taken = 0
    for g in range(gpus):
        if taken < k and free[g] >= GPU:
            mask |= 1 << g
            taken += 1
    return mask


@kernel_function
def _tightest(free: FloatArray, gpus: int, d: int) -> int:
    best, best_free = -1, 1e300
    for g in range(gpus):
        if free[g] >= d and free[g] < best_free:
            best, best_free = g, free[g]
    return best


@kernel_function
def _feasible(
    free: FloatArray,
    gpus: int,
    bit: int,
    cpu_left: float,
    mem_left: float,
    c: int,
    mem: float,
    k: int,
    d: int,
    mask: int,
) -> bool:
    """The pod fits the node: CPU (milli) and memory (GB) left, an allowed GPU model for a
    GPU pod (`bit`: the node's model bit, 0 without GPUs), and GPUs with room."""
    if c > cpu_left + 1e-6 or mem > mem_left + 1e-9:
        return False
    if k > 0 and (gpus == 0 or (mask & bit) == 0):
        return False
    return _fits(free, gpus, k, d)


@kernel_function
def _model_bit(node_model: IntArray, n: int) -> int:
    """Node n's GPU model as a mask bit (0: no GPUs)."""
    return 0 if node_model[n] < 0 else (1 << node_model[n])


@kernel_function
def _default_mask(free: FloatArray, gpus: int, k: int, d: int) -> int:
    """The GPUs most policies give the pod on a node: none (CPU-only), the tightest GPU with
    room (sharing), or the first k wholly free GPUs."""
    if k == 0:
        return 0
    if k == 1 and d < GPU:
        return 1 << _tightest(free, gpus, d)
    return _whole_mask(free, gpus, k)


# -- the scores ---------------------------------------------------------------------------
#
# One compiled function per policy, all with the same four arguments (NamedTuples, which
# numba passes field by field): the candidate node (`NodeCandidate`), the pod
# (`PodRequest`), FGD's typical pods (`TypicalPods`) and the rest (`ScoreContext`). Each
# returns the node's score (an integer, as a float; the highest wins) and the GPUs the pod
# takes there, and allocates no array (`argument_function`: compiled without reference
# counting).


class NodeCandidate(NamedTuple):
    """A node a pod fits, as `choose` hands it to a score."""

    n: int  #: the node (its row in `ScoreContext.f_cache` and `.affinity`)
    free: FloatArray  #: its GPUs' free milli-GPU (the first `gpus` entries)
    gpus: int
    total: float  #: the sum of `free`
    bit: int  #: its GPU model bit (0 without GPUs)
    cpu_left: float  #: its free milli-CPU before the pod
    node_mask: int  #: the GPUs `_default_mask` gives the pod there


class PodRequest(NamedTuple):
    """The pod to place: c milli-CPU, k GPUs, d milli-GPU on each."""

    c: int
    k: int
    d: int


class ScoreContext(NamedTuple):
    """What a score reads besides the node, the pod and the typical pods."""

    f_cache: FloatArray  #: F_n per node, or -1 (stale: fgd recomputes and stores it)
    affinity: IntArray  #: the pods of each kind per node (`choose`)
    scratch: FloatArray  #: a row of the GPU width (fgd's trial placements)
    cpu_norm: float  #: the normalisers: milli-CPU,
    gpu_norm: float  #: and milli-GPU


#: A policy's compiled node score (the arguments above): (score, GPU mask).
Scorer = Callable[[NodeCandidate, PodRequest, TypicalPods, ScoreContext], tuple[float, int]]


@argument_function
def score_best_fit(
    node: NodeCandidate, pod: PodRequest, typical: TypicalPods, ctx: ScoreContext
) -> tuple[float, int]:
    """best-fit: the least leftover CPU and GPU, the tightest GPU (module doc)."""
    total, cpu_left, node_mask = node.total, node.cpu_left, node.node_mask
    c, k, d = pod.c, pod.k, pod.d
    cpu_norm, gpu_norm = ctx.cpu_norm, ctx.gpu_norm
    left = 0.5 * (cpu_left - c) / cpu_norm + 0.5 * (total - k * d) / gpu_norm
    return float(math.floor(100.0 * (1.0 - left))), node_mask


@argument_function
def score_dot_product(
    node: NodeCandidate, pod: PodRequest, typical: TypicalPods, ctx: ScoreContext
) -> tuple[float, int]:
    """dot-product: the simulator's integer score (truncated), the tightest GPU."""
    total, cpu_left, node_mask = node.total, node.cpu_left, node.node_mask
    c, k, d = pod.c, pod.k, pod.d
    cpu_norm, gpu_norm = ctx.cpu_norm, ctx.gpu_norm
    cpu_whole = math.floor(cpu_left + 0.5)  # whole milli-CPU, as the simulator's
    dot = (cpu_whole / cpu_norm) * (c / cpu_norm) + (total / gpu_norm) * (k * d / gpu_norm)
    return float(math.trunc(100.0 * (1.0 - dot / 2.0))), node_mask


@kernel_function
def _least_free_gpus(free: FloatArray, gpus: int, k: int, d: int) -> tuple[int, int, int]:
    """gpu-packing's GPUs on a used node: k GPUs with room by free milli ascending (index
    order on ties); (their mask, how many of them are idle, sum of their free % (0..100))."""
    node_mask = 0
    idle = 0
    ratio = 0
    for _ in range(k):
        pick = -1
        for g in range(gpus):
            if not (node_mask >> g) & 1 and free[g] >= d and (pick < 0 or free[g] < free[pick]):
                pick = g
        node_mask |= 1 << pick
        if free[pick] >= GPU:
            idle += 1
        ratio += int(free[pick]) * 100 // 1000
    return node_mask, idle, ratio


@argument_function
def score_gpu_packing(
    node: NodeCandidate, pod: PodRequest, typical: TypicalPods, ctx: ScoreContext
) -> tuple[float, int]:
    """gpu-packing: the published simulator's three cases (module doc)."""
    free, gpus, node_mask = node.free, node.gpus, node.node_mask
    k, d = pod.k, pod.d
    if k == 0:
        return 0.0, node_mask
    idle_gpus = 0
    for g in range(gpus):
        if free[g] >= GPU:
            idle_gpus += 1
    if idle_gpus == gpus:  # an idle node: fewer GPUs first
        sharing = k == 1 and d < GPU
        return float(max(33 - gpus, gpus)), (1 if sharing else _whole_mask(free, gpus, k))
    mask, idle, ratio = _least_free_gpus(free, gpus, k, d)
    if idle > 0:
        return float(max(50 - idle, 33)), mask
    return float(max(100 - ratio // 10, 50)), mask


@argument_function
def score_gpu_clustering(
    node: NodeCandidate, pod: PodRequest, typical: TypicalPods, ctx: ScoreContext
) -> tuple[float, int]:
    """gpu-clustering: the published simulator's four tiers by the kinds of GPU pods on
    the node (`affinity[n]`), the tightest GPU."""
    n, total, node_mask = node.n, node.total, node.node_mask
    k, d = pod.k, pod.d
    affinity, gpu_norm = ctx.affinity, ctx.gpu_norm
    if k == 0:
        return 0.0, node_mask
    tag = 0 if (k == 1 and d < GPU) else k
    tags = 0
    for a in range(affinity.shape[1]):
        if affinity[n, a] > 0:
            tags += 1
    used_part = (25 * int(gpu_norm - total)) // int(gpu_norm)
    if affinity[n, tag] > 0:
        return float(used_part + (75 if tags == 1 else 50)), node_mask
    return float(used_part + (25 if tags == 0 else 0)), node_mask


@kernel_function
def _fgd_score(before: float, after: float) -> float:
    """floor(100 sigma((F_before - F_after) / 1000)): FGD's score of a placement."""
    return float(math.floor(100.0 / (1.0 + math.exp(-(before - after) / 1000.0))))


@argument_function
def score_fgd(
    node: NodeCandidate, pod: PodRequest, typical: TypicalPods, ctx: ScoreContext
) -> tuple[float, int]:
    """fgd: the placement that grows F_n least; a sharing pod's best GPU (lowest index on
    ties), a whole-GPU pod's first k free GPUs. Fills `f_cache[n]` when stale (< 0)."""
    n, free, gpus, bit, cpu_left, node_mask = (
        node.n,
        node.free,
        node.gpus,
        node.bit,
        node.cpu_left,
        node.node_mask,
    )
    c, k, d = pod.c, pod.k, pod.d
    t_cpu, t_d, t_k = typical.cpu_milli, typical.gpu_milli, typical.num_gpu
    t_mask, t_p = typical.model_mask, typical.p
    f_cache, scratch = ctx.f_cache, ctx.scratch
    if f_cache[n] < 0.0:
        f_cache[n] = fragment(free, gpus, cpu_left, bit, t_cpu, t_d, t_k, t_mask, t_p)
    before = f_cache[n]
    for g in range(gpus):
        scratch[g] = free[g]
    if k == 1 and d < GPU:
        best_g, best_score = -1, -1e300
        for g in range(gpus):
            if free[g] < d:
                continue
            scratch[g] = free[g] - d
            after = fragment(scratch, gpus, cpu_left - c, bit, t_cpu, t_d, t_k, t_mask, t_p)
            scratch[g] = free[g]
            s = _fgd_score(before, after)
            if s > best_score:
                best_g, best_score = g, s
        return best_score, 1 << best_g
    for g in range(gpus):
        if (node_mask >> g) & 1:
            scratch[g] = 0.0
    after = fragment(scratch, gpus, cpu_left - c, bit, t_cpu, t_d, t_k, t_mask, t_p)
    return _fgd_score(before, after), node_mask


#: The six policies by name (as users name them): the compiled node score `choose`
#: maximises, or None for random-fit, which draws a feasible node (`choose_random`).
SCORERS: dict[str, Scorer | None] = {
    "random-fit": None,
    "best-fit": score_best_fit,
    "dot-product": score_dot_product,
    "gpu-packing": score_gpu_packing,
    "gpu-clustering": score_gpu_clustering,
    "fgd": score_fgd,
}


class UnknownPolicyError(ValueError):
    """A GPU-sharing policy name that is not in `SCORERS`."""

    def __init__(self, policy: str) -> None:
        super().__init__(f"unknown GPU policy {policy!r}; expected one of {', '.join(SCORERS)}")
        self.policy = policy


def scorer(policy: str) -> Scorer | None:
    """The compiled score of `policy` (None for random-fit); `UnknownPolicyError` if the
    table has no such policy."""
    try:
        return SCORERS[policy]
    except (KeyError, TypeError):
        raise UnknownPolicyError(policy) from None


@njit(cache=True)
def choose(
    score: Scorer,
    gpu_free: FloatArray,
    n_gpus: IntArray,
    node_model: IntArray,
    cpu_free: FloatArray,
    mem_free: FloatArray,
    order: IntArray,
    c: int,
    mem: float,
    k: int,
    d: int,
    mask: int,
    t_cpu: IntArray,
    t_d: IntArray,
    t_k: IntArray,
    t_mask: IntArray,
    t_p: FloatArray,
    f_cache: FloatArray,
    affinity: IntArray,
    cpu_norm: float,
    gpu_norm: float,
) -> tuple[int, int]:
    """The node and GPU mask (bit g: GPU g) with the best `score` (a `SCORERS` function;
    compiled once per function) for one pod, or (-1, 0) if it fits nowhere.

    `cpu_free` in milli-CPU, `mem_free` and `mem` in GB; only the nodes of `order` are
    considered, in that order (ties: the first); `f_cache[n]` holds F_n or -1 (stale:
    recomputed); `affinity[n, 0]` counts the sharing pods on node n, `affinity[n, k]` its
    pods of k whole GPUs; `cpu_norm` and `gpu_norm` normalise best-fit, dot-product and
    gpu-clustering (milli-CPU and milli-GPU, `CPU_NORM` and `GPU_NORM` on the trace).
    """
    best_node, best_mask = -1, 0
    best_score = -1e300
    pod = PodRequest(c, k, d)
    typical = TypicalPods(t_cpu, t_d, t_k, t_mask, t_p)
    ctx = ScoreContext(f_cache, affinity, np.empty(gpu_free.shape[1]), cpu_norm, gpu_norm)
    for i in range(order.size):
        n = order[i]
        gpus = n_gpus[n]
        free = gpu_free[n]
        bit = _model_bit(node_model, n)
        if not _feasible(free, gpus, bit, cpu_free[n], mem_free[n], c, mem, k, d, mask):
            continue
        total = 0.0
        for g in range(gpus):
            total += free[g]
        node = NodeCandidate(
            n, free, gpus, total, bit, cpu_free[n], _default_mask(free, gpus, k, d)
        )
        s, node_mask = score(node, pod, typical, ctx)
        if s > best_score:
            best_node, best_mask, best_score = n, node_mask, s
    return best_node, best_mask


@kernel_function
def _random_gpu(free: FloatArray, gpus: int, d: int, u: float) -> int:
    """The mask of a uniformly random GPU (by `u` in [0, 1)) with d milli-GPU free."""
    fits = 0
    for g in range(gpus):
        if free[g] >= d:
            fits += 1
    pick = min(int(u * fits), fits - 1)
    for g in range(gpus):
        if free[g] >= d:
            if pick == 0:
                return 1 << g
            pick -= 1
    return 0


@njit(cache=True)
def choose_random(
    gpu_free: FloatArray,
    n_gpus: IntArray,
    node_model: IntArray,
    cpu_free: FloatArray,
    mem_free: FloatArray,
    order: IntArray,
    c: int,
    mem: float,
    k: int,
    d: int,
    mask: int,
    u1: float,
    u2: float,
) -> tuple[int, int]:
    """random-fit: a uniformly random feasible node (by `u1` in [0, 1), over the feasible
    nodes in `order`) and a random GPU with room (by `u2`) or its first k free GPUs; (-1, 0)
    if the pod fits nowhere. Arguments as `choose`'s."""
    cand = np.empty(order.size, dtype=np.int64)
    feasible = 0
    for i in range(order.size):
        n = order[i]
        bit = _model_bit(node_model, n)
        if _feasible(gpu_free[n], n_gpus[n], bit, cpu_free[n], mem_free[n], c, mem, k, d, mask):
            cand[feasible] = n
            feasible += 1
    if feasible == 0:
        return -1, 0
    n = cand[min(int(u1 * feasible), feasible - 1)]
    if k == 1 and d < GPU:
        return n, _random_gpu(gpu_free[n], n_gpus[n], d, u2)
    if k > 0:
        return n, _whole_mask(gpu_free[n], n_gpus[n], k)
    return n, 0
