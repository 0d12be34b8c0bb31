"""Compiled kernels of the built-in scorers: per-plugin and fused (all scorers, one call).

The formulas are those of `scorers.py` (kube-scheduler ``plugins/noderesources`` and
``imagelocality``, Skippy ``core/priorities.py``; docs/scoring.md), in the default mode and
in the Skippy compatibility mode (`skippy_compat.py`: Skippy 0.1.1 and the Kubernetes 1.13
priorities it follows, scores 0..10 returned x 10). Kubernetes' integer
arithmetic is kept exactly but in float64: every value involved is an integer below 2^53, where
floor(a / b) computed in floating point equals the integer quotient a // b (the rounding error
of the division is below 1/b) and trunc(a / b) equals Go's truncating division -- without the
slow integer-division instruction.

Kernels never allocate (callers pass output and scratch arrays), so they are compiled without
numba's reference-counting runtime: with it, every call of a helper taking arrays pays atomic
increments and decrements per array, which dominated the per-node cost (see cluster/jit.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from clusteremu.cluster.policies.compiled import has_room

_KERNEL: dict[str, Any] = {"cache": True, "_nrt": False, "error_model": "numpy"}
_INLINE: dict[str, Any] = {**_KERNEL, "inline": "always"}

LEAST, MOST, RTC, BALANCED = 0, 1, 2, 3
MAX_NODE_SCORE = 100.0

#: Kernel codes of the built-in scorers (ScorePlugin.kernel_code); -1 = no compiled form.
K_LEAST, K_MOST, K_RTC, K_BALANCED_ALLOC = LEAST, MOST, RTC, BALANCED
K_BALANCED_RES, K_IMAGE, K_LATENCY_IMAGE, K_DATA, K_LOCALITY, K_CAPABILITY = 4, 5, 6, 7, 8, 9
N_KERNEL_SCORERS = 10
#: ImageLocality clamps (kube-scheduler image_locality.go): 23 MiB and 1000 MiB per container
#: (a pod here runs one container, so the cap is 1000 MiB).
IMAGE_MIN = 23.0 * 1024 * 1024
IMAGE_MAX = 1000.0 * 1024 * 1024
#: Resource rows from this one on are Kubernetes *extended* resources (the gpu row): skipped by
#: the resource scorers when the pod does not request them (resource_allocation.go).
FIRST_EXTENDED_ROW = 2
#: Image and data sizes are in MB (10^6 bytes); bandwidths in Mbit/s = 125,000 bytes/s.
BYTES_PER_MB = 1e6
BYTES_PER_S_PER_MBPS = 125_000.0
#: Skippy / Kubernetes 1.13 priorities score 0..10; the framework's scale is 0..100.
COMPAT_MAX_SCORE = 10.0
COMPAT_SCALE = 10.0


@njit(**_INLINE)
def broken_linear_float(p: float, util: np.ndarray, score: np.ndarray) -> float:
    """Piecewise-linear interpolation through the shape points, constant outside them."""
    n = util.size
    for i in range(n):
        if p <= util[i]:
            if i == 0:
                return float(score[0])
            slope = (score[i] - score[i - 1]) / (util[i] - util[i - 1])
            return score[i - 1] + slope * (p - util[i - 1])
    return float(score[n - 1])


@njit(**_KERNEL)
def resource_units(
    capacity: np.ndarray,
    free: np.ndarray,
    nodes: np.ndarray,
    request: np.ndarray,
    scale: np.ndarray,
    integer: bool,
    rows: np.ndarray,
    cap_u: np.ndarray,
    req_u: np.ndarray,
) -> None:
    """Capacity and requested-after-placement (capacity - free + request) of `nodes` in the
    resource `rows` (< 0: padding), rounded to integer units (millicores, bytes, milli-GPU)
    when `integer`; written to rows of the (3, m) arrays `cap_u`, `req_u`. An extended
    resource (row >= FIRST_EXTENDED_ROW) the pod does not request gets capacity and request 0,
    so that every resource scorer skips it, as kube-scheduler's
    ``calculateResourceAllocatableRequest`` does."""
    for r in rows:
        if r < 0:
            continue
        sc = scale[r]
        rq = request[r]
        if r >= FIRST_EXTENDED_ROW and rq == 0.0:
            for j in range(nodes.size):
                cap_u[r, j] = 0.0
                req_u[r, j] = 0.0
            continue
        for j in range(nodes.size):
            k = nodes[j]
            cap = capacity[r, k]
            req = cap - free[r, k] + rq
            if integer:
                cap = np.floor(cap * sc + 0.5)
                req = np.floor(req * sc + 0.5)
            cap_u[r, j] = cap
            req_u[r, j] = req


@njit(**_KERNEL)
def resource_block(
    kind: int,
    cap_u: np.ndarray,
    req_u: np.ndarray,
    rows: np.ndarray,
    weights: np.ndarray,
    integer: bool,
    shape_util: np.ndarray,
    shape_score: np.ndarray,
    out: np.ndarray,
    acc: np.ndarray,
) -> None:
    """LeastAllocated, MostAllocated, RequestedToCapacityRatio or BalancedAllocation (`kind`)
    of every node from its units; `rows` < 0 are padding; `acc` (2, m) is scratch."""
    n_rows = 0
    for q in range(rows.size):
        if rows[q] < 0:
            break
        n_rows += 1
    if kind == BALANCED and n_rows == 2:  # the usual cpu + memory case, branch-free
        r0, r1 = rows[0], rows[1]
        for j in range(out.size):
            c0, c1 = cap_u[r0, j], cap_u[r1, j]
            f0 = min(req_u[r0, j] / c0, 1.0)
            f1 = min(req_u[r1, j] / c1, 1.0)
            std = abs((f0 - f1) / 2.0) if (c0 > 0 and c1 > 0) else 0.0
            raw = (1.0 - std) * MAX_NODE_SCORE
            out[j] = np.trunc(raw) if integer else raw
        return
    for j in range(out.size if kind == BALANCED else 0):
        if kind == BALANCED:
            count = 0
            a = b = c = 0.0
            for q in range(n_rows):
                r = rows[q]
                cap = cap_u[r, j]
                if cap > 0:
                    f = min(req_u[r, j] / cap, 1.0)
                    if count == 0:
                        a = f
                    elif count == 1:
                        b = f
                    else:
                        c = f
                    count += 1
            std = 0.0
            if count == 2:
                std = abs((a - b) / 2.0)
            elif count == 3:
                mean = (a + b + c) / 3.0
                std = math.sqrt(((a - mean) ** 2 + (b - mean) ** 2 + (c - mean) ** 2) / 3.0)
            raw = (1.0 - std) * MAX_NODE_SCORE
            out[j] = np.trunc(raw) if integer else raw
    if kind == BALANCED:
        return
    # Least / Most / RTC: resources outer, nodes inner (branch-free, so it vectorises).
    num, den = acc[0], acc[1]
    for j in range(out.size):
        num[j] = 0.0
        den[j] = 0.0
    for q in range(n_rows):
        r = rows[q]
        w = weights[q]
        # One loop per kind and mode keeps each loop simple enough for LLVM to vectorise.
        if kind == LEAST:
            for j in range(out.size):
                cap, req = cap_u[r, j], req_u[r, j]
                s = 0.0 if req > cap else (cap - req) * MAX_NODE_SCORE / cap
                if integer:
                    s = np.floor(s)
                num[j] += s * w if cap > 0 else 0.0
                den[j] += w if cap > 0 else 0.0
        elif kind == MOST:
            for j in range(out.size):
                cap, req = cap_u[r, j], req_u[r, j]
                s = min(req, cap) * MAX_NODE_SCORE / cap
                if integer:
                    s = np.floor(s)
                num[j] += s * w if cap > 0 else 0.0
                den[j] += w if cap > 0 else 0.0
        elif integer:  # RTC; `shape_score` tabulates the shape at utilisation 0..100
            for j in range(out.size):
                cap, req = cap_u[r, j], req_u[r, j]
                util = 100.0 if req > cap else req * 100.0 / cap
                s = shape_score[min(max(int(util), 0), 100)] if cap > 0 else 0.0
                # Kubernetes counts a resource only with capacity and a positive score.
                num[j] += s * w if s > 0 else 0.0
                den[j] += w if s > 0 else 0.0
        else:  # RTC, floating point
            for j in range(out.size):
                cap, req = cap_u[r, j], req_u[r, j]
                util = 100.0 if req > cap else req * 100.0 / cap
                s = broken_linear_float(util, shape_util, shape_score)
                num[j] += s * w if cap > 0 else 0.0
                den[j] += w if cap > 0 else 0.0
    for j in range(out.size):
        if den[j] <= 0:
            out[j] = 0.0
        elif not integer:
            out[j] = num[j] / den[j]
        elif kind == RTC:  # math.Round(float64(num) / float64(den)), values >= 0
            out[j] = np.floor(num[j] / den[j] + 0.5)
        else:
            out[j] = np.floor(num[j] / den[j])


@njit(**_KERNEL)
def resource_block_compat(
    kind: int,
    cap_u: np.ndarray,
    req_u: np.ndarray,
    rows: np.ndarray,
    weights: np.ndarray,
    shape_score: np.ndarray,
    out: np.ndarray,
    acc: np.ndarray,
) -> None:
    """The Kubernetes 1.13 priorities Skippy follows, 0..10 per node, written x 10 to `out`:
    LeastRequested (cap - req)*10 // cap and MostRequested req*10 // cap, each 0 when cap is 0
    or req > cap, truncated per resource before the (weighted) integer mean; RequestedToCapacity
    Ratio through `shape_score` (the 1.13 broken-linear shape tabulated at utilisation 0..100,
    scores 0..10) at utilisation 100 - (cap - req)*100 // cap (100 when cap is 0 or req > cap),
    integer mean; BalancedResourceAllocation on the first two `rows` (cpu, memory): fractions
    req / cap (1 when cap is 0), 0 if either >= 1, else int((1 - |fc - fm|) * 10).
    Units are integers (millicores, bytes); `acc` (2, m) is scratch."""
    n_rows = 0
    for q in range(rows.size):
        if rows[q] < 0:
            break
        n_rows += 1
    if kind == BALANCED:
        r0, r1 = rows[0], rows[1]
        for j in range(out.size):
            c0, c1 = cap_u[r0, j], cap_u[r1, j]
            f0 = 1.0 if c0 == 0 else req_u[r0, j] / c0
            f1 = 1.0 if c1 == 0 else req_u[r1, j] / c1
            if f0 >= 1.0 or f1 >= 1.0:
                out[j] = 0.0
            else:
                out[j] = math.trunc((1.0 - abs(f0 - f1)) * COMPAT_MAX_SCORE) * COMPAT_SCALE
        return
    num, den = acc[0], acc[1]
    for j in range(out.size):
        num[j] = 0.0
        den[j] = 0.0
    for q in range(n_rows):
        r = rows[q]
        w = weights[q]
        for j in range(out.size):
            cap, req = cap_u[r, j], req_u[r, j]
            over = cap <= 0.0 or req > cap
            if kind == LEAST:
                s = 0.0 if over else math.floor((cap - req) * COMPAT_MAX_SCORE / cap)
            elif kind == MOST:
                s = 0.0 if over else math.floor(req * COMPAT_MAX_SCORE / cap)
            else:
                p = 100.0 if over else 100.0 - math.floor((cap - req) * 100.0 / cap)
                s = shape_score[int(p)]
            num[j] += s * w
            den[j] += w
    for j in range(out.size):
        out[j] = math.floor(num[j] / den[j]) * COMPAT_SCALE if den[j] > 0 else 0.0


@njit(**_KERNEL)
def resource_scores(
    kind: int,
    capacity: np.ndarray,
    free: np.ndarray,
    nodes: np.ndarray,
    rows: np.ndarray,
    weights: np.ndarray,
    request: np.ndarray,
    scale: np.ndarray,
    integer: bool,
    shape_util: np.ndarray,
    shape_score: np.ndarray,
    out: np.ndarray,
    units: np.ndarray,
    compat: bool = False,
) -> None:
    """One Kubernetes resource scorer on `nodes` into `out` (`units`: (4, 3, m) scratch);
    `compat`: the Kubernetes 1.13 form Skippy follows (integer units)."""
    resource_units(
        capacity, free, nodes, request, scale, integer or compat, rows, units[0], units[1]
    )
    if compat:
        resource_block_compat(kind, units[0], units[1], rows, weights, shape_score, out, units[2])
    else:
        resource_block(
            kind, units[0], units[1], rows, weights, integer, shape_util, shape_score, out, units[2]
        )


@njit(**_INLINE)
def _has(has_image: np.ndarray, img: int, k: int) -> bool:
    return img >= 0 and has_image.shape[0] > 0 and has_image[img, k]


@njit(**_INLINE)
def _image_bytes(
    k: int,
    integer: bool,
    pod_image: np.ndarray,
    pod_image_size: np.ndarray,
    has_image: np.ndarray,
    image_nodes: np.ndarray,
    n_total: int,
) -> float:
    """ImageLocality's scaled size of the pod's image on node `k` (0 when it is not there),
    clamped to [IMAGE_MIN, IMAGE_MAX]; `integer`: int64(float64(size in bytes) * spread)."""
    img = pod_image[k]
    t = 0.0
    if _has(has_image, img, k):
        spread = image_nodes[img] / max(n_total, 1)
        if integer:
            t = np.trunc(np.floor(pod_image_size[k] * BYTES_PER_MB + 0.5) * spread)
        else:
            t = pod_image_size[k] * BYTES_PER_MB * spread
    return min(max(t, IMAGE_MIN), IMAGE_MAX)


@njit(**_KERNEL)
def fused_total(
    nodes: np.ndarray,
    order: np.ndarray,
    weights: np.ndarray,
    integer: np.ndarray,
    capacity: np.ndarray,
    free: np.ndarray,
    request: np.ndarray,
    scale: np.ndarray,
    res_rows: np.ndarray,
    res_weights: np.ndarray,
    unit_rows: np.ndarray,
    shape_util: np.ndarray,
    shape_score: np.ndarray,
    pod_image: np.ndarray,
    pod_image_size: np.ndarray,
    has_image: np.ndarray,
    image_nodes: np.ndarray,
    registry_mbps: np.ndarray,
    storage_mbps: np.ndarray,
    data_mb: float,
    is_edge: np.ndarray,
    capability_count: np.ndarray,
    total: np.ndarray,
    raw: np.ndarray,
    units: np.ndarray,
    compat: bool,
    data_in_mb: float,
    data_out_mb: float,
) -> int:
    """Weighted sum of the scorers `order` (kernel codes, in the framework's order) with
    `weights` into `total` over `nodes`; returns -1, or the code of a scorer whose score left
    [0, 100]. Scorer by scorer, so the sum runs in the same order as the numpy path.
    Scratch: `raw` (m,) and `units` (5, 3, m): float and integer resource units, accumulators.
    `compat`: Skippy 0.1.1's arithmetic (scores 0..10, returned x 10; the total sums
    weight x score / 10, Skippy's own sum); `data_in_mb` / `data_out_mb` are the two transfer
    directions DataLocality truncates separately there.
    """
    m = nodes.size
    n_total = capacity.shape[1]
    bad = -1
    for j in range(m):
        total[j] = 0.0
    done_float = done_int = False
    for q in range(order.size):
        c = order[q]
        w = weights[q]
        integ = integer[c] or compat
        if c <= K_BALANCED_ALLOC:
            u = 2 if integ else 0
            if integ and not done_int:
                resource_units(
                    capacity, free, nodes, request, scale, True, unit_rows, units[2], units[3]
                )
                done_int = True
            elif not integ and not done_float:
                resource_units(
                    capacity, free, nodes, request, scale, False, unit_rows, units[0], units[1]
                )
                done_float = True
            if compat:
                resource_block_compat(
                    c,
                    units[u],
                    units[u + 1],
                    res_rows[c],
                    res_weights[c],
                    shape_score,
                    raw,
                    units[4],
                )
            else:
                resource_block(
                    c,
                    units[u],
                    units[u + 1],
                    res_rows[c],
                    res_weights[c],
                    integ,
                    shape_util,
                    shape_score,
                    raw,
                    units[4],
                )
        elif c == K_BALANCED_RES:
            f0, f1 = request[0], request[1]
            if integ:  # millicores and bytes, as Skippy's Capacity holds them
                s0, s1 = scale[0], scale[1]
                f0 = math.floor(f0 * s0 + 0.5)
                f1 = math.floor(f1 * s1 + 0.5)
                for j in range(m):
                    k = nodes[j]
                    # np.floor stays in float64 (no round trip through int64): the same
                    # whole numbers, all below 2^53.
                    a = np.floor(free[0, k] * s0 + 0.5)
                    b = np.floor(free[1, k] * s1 + 0.5)
                    fc = f0 / (1.0 if a == 0 else a)
                    fm = f1 / (1.0 if b == 0 else b)
                    s = np.trunc((1.0 - abs(fc - fm)) * 10.0)
                    raw[j] = 0.0 if (fc >= 1 or fm >= 1) else s * 10.0
            else:
                for j in range(m):
                    k = nodes[j]
                    a, b = free[0, k], free[1, k]
                    fc = f0 / (1.0 if a == 0 else a)
                    fm = f1 / (1.0 if b == 0 else b)
                    s = (1.0 - abs(fc - fm)) * 10.0
                    raw[j] = 0.0 if (fc >= 1 or fm >= 1) else s * 10.0
        elif c == K_IMAGE:
            if compat:
                for j in range(m):
                    t = _image_bytes(
                        nodes[j], True, pod_image, pod_image_size, has_image, image_nodes, n_total
                    )
                    s = math.floor(COMPAT_MAX_SCORE * (t - IMAGE_MIN) / (IMAGE_MAX - IMAGE_MIN))
                    raw[j] = s * COMPAT_SCALE
            else:
                for j in range(m):
                    t = _image_bytes(
                        nodes[j], integ, pod_image, pod_image_size, has_image, image_nodes, n_total
                    )
                    s = MAX_NODE_SCORE * (t - IMAGE_MIN) / (IMAGE_MAX - IMAGE_MIN)
                    raw[j] = np.floor(s) if integ else s
        elif c == K_LOCALITY:
            for j in range(m):
                raw[j] = MAX_NODE_SCORE if is_edge[nodes[j]] else 0.0
        elif c == K_DATA and data_mb == 0.0:
            for j in range(m):
                raw[j] = 0.0
        else:  # normalised over the nodes: LatencyAwareImageLocality, DataLocality, Capability
            # One loop per scorer and mode, the tests hoisted out of the loops.
            lo, hi = np.inf, -np.inf
            if c == K_LATENCY_IMAGE and compat:  # whole seconds per pull
                for j in range(m):
                    k = nodes[j]
                    mb = 0.0 if _has(has_image, pod_image[k], k) else pod_image_size[k]
                    bw = registry_mbps[k] * BYTES_PER_S_PER_MBPS
                    x = math.floor(math.floor(mb * BYTES_PER_MB + 0.5) / bw)
                    raw[j] = x
                    lo = min(lo, x)
                    hi = max(hi, x)
            elif c == K_LATENCY_IMAGE:
                for j in range(m):
                    k = nodes[j]
                    mb = 0.0 if _has(has_image, pod_image[k], k) else pod_image_size[k]
                    x = mb * 8.0 / registry_mbps[k]
                    raw[j] = x
                    lo = min(lo, x)
                    hi = max(hi, x)
            elif c == K_DATA and compat:  # whole seconds per direction
                in_bytes = math.floor(data_in_mb * BYTES_PER_MB + 0.5)
                out_bytes = math.floor(data_out_mb * BYTES_PER_MB + 0.5)
                for j in range(m):
                    bw = storage_mbps[nodes[j]] * BYTES_PER_S_PER_MBPS
                    x = math.floor(in_bytes / bw) + math.floor(out_bytes / bw)
                    raw[j] = x
                    lo = min(lo, x)
                    hi = max(hi, x)
            elif c == K_DATA:
                for j in range(m):
                    x = data_mb * 8.0 / storage_mbps[nodes[j]]
                    raw[j] = x
                    lo = min(lo, x)
                    hi = max(hi, x)
            else:
                for j in range(m):
                    x = float(capability_count[nodes[j]])
                    raw[j] = x
                    lo = min(lo, x)
                    hi = max(hi, x)
            if compat and c == K_LATENCY_IMAGE:  # Skippy: (max - x + min) / max
                for j in range(m):
                    if hi == 0:
                        raw[j] = 0.0
                    else:
                        s = math.floor(COMPAT_MAX_SCORE * (hi - raw[j] + lo) / hi)
                        raw[j] = s * COMPAT_SCALE
            elif not hi > lo:
                for j in range(m):
                    raw[j] = 0.0
            elif compat and c == K_DATA:  # Skippy's _scale_scores_inverse
                for j in range(m):
                    s = math.trunc(((raw[j] - hi) / (lo - hi)) * COMPAT_MAX_SCORE)
                    raw[j] = s * COMPAT_SCALE
            elif compat:  # Skippy's _scale_scores
                for j in range(m):
                    s = math.trunc(((raw[j] - lo) / (hi - lo)) * COMPAT_MAX_SCORE)
                    raw[j] = s * COMPAT_SCALE
            elif c != K_CAPABILITY:
                for j in range(m):
                    raw[j] = MAX_NODE_SCORE * ((hi - raw[j]) / (hi - lo))
            else:
                for j in range(m):
                    raw[j] = MAX_NODE_SCORE * ((raw[j] - lo) / (hi - lo))
        # One loop per mode (the mode test hoisted out of the loop): the default mode pays
        # nothing for compat.
        if compat:  # Skippy's sum: weight x score on 0..10
            for j in range(m):
                s = raw[j]
                if not (s >= 0.0 and s <= MAX_NODE_SCORE):
                    bad = c
                total[j] += w * (s / COMPAT_SCALE)
        else:
            for j in range(m):
                s = raw[j]
                if not (s >= 0.0 and s <= MAX_NODE_SCORE):
                    bad = c
                total[j] += w * s
    return bad


@njit(**_KERNEL)
def fit_nodes(
    free: np.ndarray,
    free_slots: np.ndarray,
    active: np.ndarray,
    static: np.ndarray,
    request: np.ndarray,
    gpu_free: np.ndarray,
    out: np.ndarray,
) -> int:
    """ResourceFit and the static filters in one pass: writes the feasible node indices to
    `out` in node order and returns how many there are. The fit rule is the engine's own
    (`clusteremu.cluster.policies.compiled.has_room`: a worker slot, cores, GB, and per-GPU
    milli-GPU:
    a share of one GPU, or wholly free GPUs)."""
    count = 0
    for k in range(static.size):
        if (
            static[k]
            and active[k]
            and has_room(
                free[0, k],
                free[1, k],
                free_slots[k],
                gpu_free,
                k,
                request[0],
                request[1],
                request[2],
            )
        ):
            out[count] = k
            count += 1
    return count


@njit(**_KERNEL)
def best_and_ties(total: np.ndarray) -> tuple[int, int]:
    """(index of the first maximum, number of entries equal to the maximum)."""
    first = 0
    ties = 0
    best = -np.inf
    for j in range(total.size):
        v = total[j]
        if v > best:
            best = v
            first = j
            ties = 1
        elif v == best:
            ties += 1
    return first, ties
