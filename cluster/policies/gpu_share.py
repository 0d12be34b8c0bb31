"""GPU-sharing placement (the ATC'23 "Beware of Fragmentation" policies), compiled.

A node has whole GPUs of 1,000 milli-GPU each. A pod asks for c milli-CPU, some memory,
k GPUs and d milli-GPU per GPU: with k = 1 and d < 1000 it may share a GPU that has d free;
otherwise it takes k wholly free GPUs; k = 0 is CPU-only. `model_mask` restricts the
node's GPU model (a node without GPUs takes CPU-only pods only). Which node and which
GPU(s) is the policy's decision; ties between equal scores go to the first node of a
per-seed random node order (`order`).

Policies (scores; the best node wins):

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
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from numba import njit

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

POLICIES = ("random-fit", "best-fit", "dot-product", "gpu-packing", "gpu-clustering", "fgd")
CODES = {name: i for i, name in enumerate(POLICIES)}
GPU = 1000.0
#: Best-fit, dot-product and clustering normalisers on the trace: the largest node's
#: milli-CPU and milli-GPU (the published simulator's `MaxSpecCpu`, `MaxSpecGpu`); `choose`
#: takes them as arguments (a scenario's placers use its largest node type).
CPU_NORM = 128000.0
GPU_NORM = 8000.0


@dataclass(frozen=True)
class TypicalPods:
    """The most frequent pod request types covering `coverage` of the pods, with their
    renormalised frequencies p (the FGD workload model)."""

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


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
def _whole_mask(free: FloatArray, gpus: int, k: int) -> int:
    mask = 0
    taken = 0
    for g in range(gpus):
        if taken < k and free[g] >= GPU:
            mask |= 1 << g
            taken += 1
    return mask


@njit(cache=True)
def _tightest(free: FloatArray, gpus: int, d: int) -> int:
    best, best_free = -1, 1e300
    for g in range(gpus):
        if free[g] >= d and free[g] < best_free:
            best, best_free = g, free[g]
    return best


@njit(cache=True)
def choose(  # noqa: PLR0912, PLR0915
    code: int,
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
    u1: float,
    u2: float,
    cpu_norm: float,
    gpu_norm: float,
) -> tuple[int, int]:
    """The node and GPU mask (bit g: GPU g) for one pod, or (-1, 0) if it fits nowhere.

    `cpu_free` in milli-CPU, `mem_free` and `mem` in GB; only the nodes of `order` are
    considered, in that order (ties: the first); `f_cache[n]` holds F_n or -1 (stale:
    recomputed); `affinity[n, 0]` counts the sharing pods on node n, `affinity[n, k]` its
    pods of k whole GPUs; `cpu_norm` and `gpu_norm` normalise best-fit, dot-product and
    gpu-clustering (milli-CPU and milli-GPU, `CPU_NORM` and `GPU_NORM` on the trace).
    """
    n_nodes = order.size
    best_node, best_mask = -1, 0
    best_score = -1e300
    feasible = 0
    scratch = np.empty(gpu_free.shape[1])
    cand = np.empty(n_nodes, dtype=np.int64)
    for i in range(n_nodes):
        n = order[i]
        gpus = n_gpus[n]
        free = gpu_free[n]
        if c > cpu_free[n] + 1e-6 or mem > mem_free[n] + 1e-9:
            continue
        bit = 0 if node_model[n] < 0 else (1 << node_model[n])
        if k > 0 and (gpus == 0 or (mask & bit) == 0):
            continue
        if not _fits(free, gpus, k, d):
            continue
        feasible += 1
        sharing = k == 1 and d < GPU
        total = 0.0
        for g in range(gpus):
            total += free[g]
        node_mask = 0
        score = 0.0
        if code == 0:  # random-fit: collect, pick one after the loop
            cand[feasible - 1] = n
            continue
        if k == 0:
            node_mask = 0
        elif sharing:
            node_mask = 1 << _tightest(free, gpus, d)
        else:
            node_mask = _whole_mask(free, gpus, k)
        if code == 1:  # best-fit
            left = 0.5 * (cpu_free[n] - c) / cpu_norm + 0.5 * (total - k * d) / gpu_norm
            score = math.floor(100.0 * (1.0 - left))
        elif code == 2:  # dot-product: the simulator's integer score (truncated)
            cpu_left = math.floor(cpu_free[n] + 0.5)  # whole milli-CPU, as the simulator's
            dot = (cpu_left / cpu_norm) * (c / cpu_norm) + (total / gpu_norm) * (k * d / gpu_norm)
            score = float(math.trunc(100.0 * (1.0 - dot / 2.0)))
        elif code == 3:  # gpu-packing (the published simulator's three cases)
            if k == 0:
                score = 0.0
            else:
                fully = 0
                for g in range(gpus):
                    if free[g] >= GPU:
                        fully += 1
                if fully == gpus:  # an idle node: fewer GPUs first
                    score = float(max(33 - gpus, gpus))
                    node_mask = _whole_mask(free, gpus, max(k, 1)) if not sharing else 1
                else:
                    # GPUs by free milli ascending (index order on ties), k that fit.
                    node_mask = 0
                    fully_used = 0
                    ratio = 0
                    want = k
                    taken = np.zeros(gpus, dtype=np.bool_)
                    while want > 0:
                        pick = -1
                        for g in range(gpus):
                            if not taken[g] and free[g] >= d and (pick < 0 or free[g] < free[pick]):
                                pick = g
                        taken[pick] = True
                        node_mask |= 1 << pick
                        if free[pick] >= GPU:
                            fully_used += 1
                        ratio += int(free[pick]) * 100 // 1000
                        want -= 1
                    if fully_used > 0:
                        score = float(max(50 - fully_used, 33))
                    else:
                        score = float(max(100 - ratio // 10, 50))
        elif code == 4:  # gpu-clustering (the published simulator's four tiers)
            if k == 0:
                score = 0.0
            else:
                tag = 0 if sharing else k
                tags = 0
                for a in range(affinity.shape[1]):
                    if affinity[n, a] > 0:
                        tags += 1
                used_part = (25 * int(gpu_norm - total)) // int(gpu_norm)
                if affinity[n, tag] > 0:
                    score = float(used_part + (75 if tags == 1 else 50))
                else:
                    score = float(used_part + (25 if tags == 0 else 0))
        else:  # fgd
            if f_cache[n] < 0.0:
                f_cache[n] = fragment(free, gpus, cpu_free[n], bit, t_cpu, t_d, t_k, t_mask, t_p)
            before = f_cache[n]
            for g in range(gpus):
                scratch[g] = free[g]
            if sharing:
                best_g, best_g_score = -1, -1e300
                for g in range(gpus):
                    if free[g] < d:
                        continue
                    scratch[g] = free[g] - d
                    after = fragment(
                        scratch, gpus, cpu_free[n] - c, bit, t_cpu, t_d, t_k, t_mask, t_p
                    )
                    scratch[g] = free[g]
                    s = math.floor(100.0 / (1.0 + math.exp(-(before - after) / 1000.0)))
                    if s > best_g_score:
                        best_g, best_g_score = g, s
                node_mask = 1 << best_g
                score = best_g_score
            else:
                for g in range(gpus):
                    if (node_mask >> g) & 1:
                        scratch[g] = 0.0
                after = fragment(scratch, gpus, cpu_free[n] - c, bit, t_cpu, t_d, t_k, t_mask, t_p)
                score = math.floor(100.0 / (1.0 + math.exp(-(before - after) / 1000.0)))
        if score > best_score:
            best_node, best_mask, best_score = n, node_mask, score
    if code == 0 and feasible > 0:
        n = cand[min(int(u1 * feasible), feasible - 1)]
        free = gpu_free[n]
        gpus = n_gpus[n]
        best_node, best_mask = n, 0
        if k == 1 and d < GPU:
            fits = 0
            for g in range(gpus):
                if free[g] >= d:
                    fits += 1
            pick = min(int(u2 * fits), fits - 1)
            for g in range(gpus):
                if free[g] >= d:
                    if pick == 0:
                        best_mask = 1 << g
                        break
                    pick -= 1
        elif k > 0:
            best_mask = _whole_mask(free, gpus, k)
    return best_node, best_mask
