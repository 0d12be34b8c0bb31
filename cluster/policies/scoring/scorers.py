"""Score plugins: each maps the feasible nodes to scores in [0, 100] (docs/scoring.md).

Kubernetes scorers (kube-scheduler ``plugins/noderesources``, ``imagelocality``) follow its
integer arithmetic when `integer=True` (the default): cpu in millicores, memory in bytes
(GB taken as GiB), GPUs in milli-units, Go's truncating integer division, per-resource
weights (integers 1..100, kube-scheduler's ``validateResources``). With `integer=False` the
same formulas run in floating point. The gpu row is an *extended* resource: a pod that does
not request it is scored on the other resources only (``calculateResourceAllocatableRequest``).

- LeastAllocated (least_allocated.go): s_r = (cap_r - req_r)*100 / cap_r (0 if req_r > cap_r),
  node = sum w_r s_r / sum w_r over resources with cap_r > 0; req_r = requested + request.
- MostAllocated (most_allocated.go): s_r = min(req_r, cap_r)*100 / cap_r, same mean.
- RequestedToCapacityRatio (requested_to_capacity_ratio.go): u = req*100/cap (100 if
  req > cap), a broken-linear shape through (utilisation, score 0..10) points, scores x 10,
  node = round(sum w_r s_r / sum w_r) over resources with cap_r > 0 and s_r > 0.
- BalancedAllocation (balanced_allocation.go): f_r = min(req_r/cap_r, 1); score =
  (1 - std(f))*100, std of two resources = |f1 - f2|/2, population std for more.
- ImageLocality (image_locality.go): sum = bytes * (nodes with the image / all nodes) if the
  node holds the pod's image, clamped to [23 MiB, 1000 MiB x containers], score =
  100*(sum - min)/(max - min) (`image_locality_score`; a pod here runs one container).

Skippy scorers (skippy-core 0.1.1 ``core/priorities.py``), as scores 0..100:

- BalancedResource: fc = request.cpu / free.cpu, fm = request.mem / free.mem in millicores and
  bytes (free before this placement, 0 counts as 1); 0 if either >= 1, else
  (1 - |fc - fm|)*10 truncated (integer mode), x 10.
- LatencyAwareImageLocality: raw = MB of the image missing on the node * 8 / registry Mbit/s.
- DataLocality: raw = (MB received + MB sent per invocation) * 8 / storage Mbit/s.
  Both are lower-is-better and scaled by *inverse min-max* over the feasible nodes,
  100*(max - x)/(max - min) (all equal -> 0). Skippy itself uses (max - x + min)/max; the
  min-max inverse keeps the full [0, 100] range.
- LocalityType: 100 on edge nodes (label ``locality: edge``), 0 otherwise.
- Capability: number of the pod's requested capability labels the node carries, min-max
  scaled to [0, 100] (all equal -> 0, as Skippy's ``_scale_scores``).

With ``compat="skippy"`` every built-in scorer reproduces Skippy 0.1.1 exactly (and the
Kubernetes 1.13 priorities it follows for the Kubernetes scorers): see `skippy_compat.py`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.policies.scoring import kernels
from clusteremu.cluster.policies.scoring.framework import (
    INTEGER_SCALE,
    MAX_NODE_SCORE,
    RESOURCES,
    Cycle,
    FloatArray,
    ScorePlugin,
    register_scorer,
)
from clusteremu.cluster.policies.scoring.skippy_compat import (
    COMPAT_MAX_SCORE,
    COMPAT_SCALE,
    check_compat,
    skippy_inverse_scale,
    skippy_latency_scale,
    skippy_scale,
)

I64 = npt.NDArray[np.int64]
MB = 1024 * 1024
#: ImageLocality clamps (kube-scheduler image_locality.go): 23 MiB and 1000 MiB per container.
IMAGE_MIN_BYTES = 23 * MB
IMAGE_MAX_BYTES_PER_CONTAINER = 1000 * MB
#: Image and data sizes are in MB (10^6 bytes), as the faas-sim tables give them.
BYTES_PER_MB = 1_000_000
#: Bandwidths are in Mbit/s: 125,000 bytes per second each.
BYTES_PER_S_PER_MBPS = 125_000.0
#: Kubernetes' range for a resource weight (``validateResources``: (0, 100]).
MAX_RESOURCE_WEIGHT = 100
#: Kubernetes' custom-shape scores run 0..10 and are multiplied by 100 / 10.
MAX_CUSTOM_SCORE = 10


def _go_div(num: I64, den: I64) -> I64:
    """Go's integer division (truncates toward zero); `den` > 0."""
    q: I64 = np.abs(num) // den
    return np.where(num < 0, -q, q)


def to_units(x: FloatArray | float, row: int) -> FloatArray:
    """Cores, GB or GPUs (resource `row`) in integer units: millicores, bytes, milli-GPUs."""
    return np.floor(np.asarray(x, dtype=np.float64) * INTEGER_SCALE[row] + 0.5)


def mb_to_bytes(mb: FloatArray | float) -> FloatArray:
    """MB (10^6 bytes) as whole bytes."""
    return np.floor(np.asarray(mb, dtype=np.float64) * BYTES_PER_MB + 0.5)


def minmax(x: FloatArray) -> FloatArray:
    """100 * (x - min) / (max - min); all equal -> 0."""
    if x.size == 0:
        return np.zeros(0)
    lo, hi = float(x.min()), float(x.max())
    if not hi > lo:
        return np.zeros(x.size)
    return MAX_NODE_SCORE * ((x - lo) / (hi - lo))


def inverse_minmax(x: FloatArray) -> FloatArray:
    """100 * (max - x) / (max - min): lower raw values score higher; all equal -> 0."""
    if x.size == 0:
        return np.zeros(0)
    lo, hi = float(x.min()), float(x.max())
    if not hi > lo:
        return np.zeros(x.size)
    return MAX_NODE_SCORE * ((hi - x) / (hi - lo))


def check_resource_weight(where: str, w: object) -> int:
    """A Kubernetes resource weight: an integer in 1..100 (kube-scheduler ``validateResources``
    refuses weights outside (0, 100]); integral floats such as 2.0 are accepted."""
    if (
        isinstance(w, bool)
        or not isinstance(w, int | float)
        or not math.isfinite(w)
        or float(w) != int(w)
        or not 1 <= w <= MAX_RESOURCE_WEIGHT
    ):
        raise ValueError(
            f"{where}: expected an integer weight in 1..{MAX_RESOURCE_WEIGHT} "
            f"(kube-scheduler's range), got {w!r}"
        )
    return int(w)


class ResourceScorer(ScorePlugin):
    """Common part of the Kubernetes resource scorers: resources and their weights.

    `resources` maps resource names (cpu, memory, gpu) to integer weights 1..100; `integer`
    selects Kubernetes' integer arithmetic; `compat="skippy"` the Kubernetes 1.13 priorities
    (scores 0..10, x 10) that Skippy 0.1.1 follows, on cpu and memory only.
    """

    def __init__(
        self,
        resources: Mapping[str, float] | None = None,
        integer: bool = True,
        compat: str | None = None,
    ) -> None:
        resources = {"cpu": 1, "memory": 1} if resources is None else dict(resources)
        if not resources:
            raise ValueError(f"{self.name}.resources: expected at least one resource")
        self.compat = check_compat(compat)
        rows, weights = [], []
        for r, w in resources.items():
            if r not in RESOURCES:
                raise ValueError(
                    f"{self.name}.resources.{r}: expected one of {', '.join(RESOURCES)}"
                )
            if self.compat and r not in ("cpu", "memory"):
                raise ValueError(
                    f"{self.name}.resources.{r}: compat: skippy follows Kubernetes 1.13, whose "
                    "resource priorities read cpu and memory only"
                )
            rows.append(RESOURCES.index(r))
            weights.append(check_resource_weight(f"{self.name}.resources.{r}", w))
        self.rows = np.array(rows, dtype=np.int64)
        self.integer = bool(integer) or self.compat
        self.weights = np.array(weights, dtype=np.float64)

    #: Kernel kind (clusteremu.cluster.policies.scoring.kernels).
    kind: int = kernels.LEAST
    shape_util: FloatArray = np.zeros(1)
    shape_score: FloatArray = np.zeros(1)

    def score(self, cycle: Cycle) -> FloatArray:
        m = cycle.nodes.size
        out = np.empty(m)
        kernels.resource_scores(
            self.kind,
            cycle.table.capacity,
            cycle.state.free,
            cycle.nodes,
            self.rows,
            self.weights,
            cycle.request,
            INTEGER_SCALE,
            self.integer,
            self.shape_util,
            self.shape_score,
            out,
            np.empty((4, 3, m)),
            self.compat,
        )
        return out


@register_scorer("LeastAllocated")
class LeastAllocated(ResourceScorer):
    """Prefer nodes with the most free capacity after the placement (spreading)."""

    kernel_code = kernels.K_LEAST

    kind = kernels.LEAST


@register_scorer("MostAllocated")
class MostAllocated(ResourceScorer):
    """Prefer nodes with the least free capacity after the placement (bin packing)."""

    kernel_code = kernels.K_MOST

    kind = kernels.MOST


def check_shape(
    shape: Sequence[Sequence[float]], name: str = "RequestedToCapacityRatio"
) -> tuple[FloatArray, FloatArray]:
    """Validate (utilisation 0..100, score 0..10) points: strictly increasing utilisation."""
    try:
        pts = np.array([[float(u), float(s)] for u, s in shape], dtype=np.float64).reshape(-1, 2)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name}.shape: expected a list of [utilisation, score] pairs, got {shape!r}"
        ) from None
    if pts.shape[0] == 0:
        raise ValueError(f"{name}.shape: expected at least one [utilisation, score] point")
    u, s = pts[:, 0], pts[:, 1]
    if not np.all(np.isfinite(pts)):
        raise ValueError(f"{name}.shape: expected finite numbers, got {shape!r}")
    if np.any(np.diff(u) <= 0):
        raise ValueError(
            f"{name}.shape: utilisation must be strictly increasing (monotone), got {u.tolist()}"
        )
    if u[0] < 0 or u[-1] > 100:
        raise ValueError(f"{name}.shape: utilisation must lie in [0, 100], got {u.tolist()}")
    if s.min() < 0 or s.max() > MAX_CUSTOM_SCORE:
        raise ValueError(
            f"{name}.shape: scores must lie in [0, {MAX_CUSTOM_SCORE}], got {s.tolist()}"
        )
    return u, s


@register_scorer("RequestedToCapacityRatio")
class RequestedToCapacityRatio(ResourceScorer):
    """A user shape through (utilisation %, score 0..10) points; default packs ([0,0],[100,10])."""

    kernel_code = kernels.K_RTC

    kind = kernels.RTC

    def __init__(
        self,
        shape: Sequence[Sequence[float]] | None = None,
        resources: Mapping[str, float] | None = None,
        integer: bool = True,
        compat: str | None = None,
    ) -> None:
        super().__init__(resources, integer, compat)
        u, s = check_shape([[0, 0], [100, MAX_CUSTOM_SCORE]] if shape is None else shape)
        if self.integer and (np.any(u != np.rint(u)) or np.any(s != np.rint(s))):
            raise ValueError(
                f"{self.name}.shape: Kubernetes shape points are integers, got {shape!r}"
            )
        scale = MAX_NODE_SCORE // MAX_CUSTOM_SCORE
        self.util_i = np.rint(u).astype(np.int64)
        # Kubernetes 1.13 (compat) keeps the shape's scores on 0..10; later versions scale them.
        self.score_i = np.rint(s).astype(np.int64) * (1 if self.compat else scale)
        # The kernel's shape: in integer mode the broken-linear function tabulated at every
        # integer utilisation 0..100 (exact, and a lookup per node); else the points.
        if self.integer:
            self.shape_util = np.arange(101, dtype=np.float64)
            self.shape_score = self.broken_linear(np.arange(101, dtype=np.int64)).astype(np.float64)
        else:
            self.shape_util, self.shape_score = u, s * scale

    def broken_linear(self, p: I64) -> I64:
        """The configured shape at integer utilisations `p` (`broken_linear`)."""
        return broken_linear(np.asarray(p, dtype=np.int64), self.util_i, self.score_i)


def broken_linear(p: I64, util: I64, score: I64) -> I64:
    """kube-scheduler ``helper.BuildBrokenLinearFunction``, vectorised: the first point's score
    up to its utilisation, linear between points with Go's truncating integer division, the
    last point's score beyond it. `util` strictly increasing; all integers."""
    p = np.asarray(p, dtype=np.int64)
    i = np.searchsorted(util, p, side="left")  # first point with utilisation >= p
    inner = (i > 0) & (i < util.size)
    lo = np.clip(i - 1, 0, util.size - 1)
    hi = np.clip(i, 0, util.size - 1)
    span = np.maximum(util[hi] - util[lo], 1)
    interp = score[lo] + _go_div((score[hi] - score[lo]) * (p - util[lo]), span)
    return np.where(i == 0, score[0], np.where(inner, interp, score[-1]))


@register_scorer("BalancedAllocation")
class BalancedAllocation(ResourceScorer):
    """Kubernetes: prefer nodes whose resource fractions after placement are balanced."""

    kernel_code = kernels.K_BALANCED_ALLOC

    kind = kernels.BALANCED

    def __init__(
        self,
        resources: Mapping[str, float] | None = None,
        integer: bool = True,
        compat: str | None = None,
    ) -> None:
        super().__init__(resources, integer, compat)
        for r, w in zip(self.rows.tolist(), self.weights.tolist(), strict=True):
            if w != 1:  # ValidateNodeResourcesBalancedAllocationArgs: "must be 1"
                raise ValueError(
                    f"{self.name}.resources.{RESOURCES[r]}: BalancedAllocation weights must "
                    f"be 1 (kube-scheduler ignores them), got {w:g}"
                )
        if self.compat and self.rows.tolist() != [0, 1]:
            raise ValueError(
                f"{self.name}.resources: compat: skippy (Kubernetes 1.13) balances cpu and "
                "memory only; expected {cpu: 1, memory: 1}"
            )


@register_scorer("BalancedResource")
class BalancedResource(ScorePlugin):
    """Skippy: fractions of the *remaining* cpu and memory the request takes, balanced.

    In integer mode (and compat) the fractions divide integer millicores and bytes, as Skippy's
    ``Capacity`` holds them: a pod of 100m / 512 MiB on 150m / 768 MiB free has fractions
    100/150 and 536870912/805306368, both exactly 2/3, and scores 100 (float cores would give
    0.1/0.15 = 0.6666666666666667 and a truncated 90).
    """

    kernel_code = kernels.K_BALANCED_RES

    def __init__(self, integer: bool = True, compat: str | None = None) -> None:
        self.compat = check_compat(compat)
        self.integer = bool(integer) or self.compat

    def score(self, cycle: Cycle) -> FloatArray:
        free = cycle.free()
        req = cycle.request
        if self.integer:
            req_c, req_m = to_units(req[0], 0), to_units(req[1], 1)
            free_c, free_m = to_units(free[0], 0), to_units(free[1], 1)
        else:
            req_c, req_m, free_c, free_m = req[0], req[1], free[0], free[1]
        fc = req_c / np.where(free_c == 0, 1.0, free_c)
        fm = req_m / np.where(free_m == 0, 1.0, free_m)
        raw = (1.0 - np.abs(fc - fm)) * MAX_CUSTOM_SCORE
        if self.integer:
            raw = np.trunc(raw)
        return np.where((fc >= 1) | (fm >= 1), 0.0, raw * (MAX_NODE_SCORE // MAX_CUSTOM_SCORE))


def image_locality_score(
    sum_bytes: npt.ArrayLike, containers: int = 1, integer: bool = True
) -> FloatArray:
    """kube-scheduler ``calculatePriority``: the sum of the scaled sizes (bytes) of the pod's
    images on a node, clamped to [23 MiB, 1000 MiB x containers], as 0..100 (Go's integer
    division in integer mode). The cap scales with the pod's number of containers (init
    containers included) since Kubernetes 1.19."""
    if containers < 1:
        raise ValueError(f"containers: expected at least 1, got {containers!r}")
    lo, hi = float(IMAGE_MIN_BYTES), float(IMAGE_MAX_BYTES_PER_CONTAINER * containers)
    total = np.clip(np.asarray(sum_bytes, dtype=np.float64), lo, hi)
    if integer:
        return np.floor(MAX_NODE_SCORE * (total - lo) / (hi - lo))
    return MAX_NODE_SCORE * (total - lo) / (hi - lo)


def scaled_image_bytes(
    size_bytes: npt.ArrayLike, nodes_with_image: npt.ArrayLike, n_nodes: int
) -> I64:
    """kube-scheduler ``scaledImageScore``: int64(float64(size) * nodes with it / all nodes)."""
    spread = np.asarray(nodes_with_image, dtype=np.float64) / max(n_nodes, 1)
    return np.trunc(np.asarray(size_bytes, dtype=np.float64) * spread).astype(np.int64)


@register_scorer("ImageLocality")
class ImageLocality(ScorePlugin):
    """Kubernetes: prefer nodes that already hold the pod's image, weighted by its spread.

    One container per pod (the job's image), so the cap is 1000 MiB; `image_locality_score`
    has the general rule. `compat="skippy"`: Skippy's copy of Kubernetes 1.13, int(10 * (sum -
    min) / (max - min)) on 0..10, x 10.
    """

    kernel_code = kernels.K_IMAGE
    #: Containers per pod in this model: one (the job's image).
    containers = 1

    def __init__(self, integer: bool = True, compat: str | None = None) -> None:
        self.compat = check_compat(compat)
        self.integer = bool(integer) or self.compat

    def score(self, cycle: Cycle) -> FloatArray:
        nodes = cycle.nodes
        img = cycle.pod.image[nodes]
        state = cycle.state
        if state.has_image.shape[0] == 0:
            return np.zeros(nodes.size)
        safe = np.maximum(img, 0)
        present = state.has_image[safe, nodes] & (img >= 0)
        size_mb = cycle.pod.image_size_mb[nodes]
        if self.integer:
            raw = scaled_image_bytes(
                mb_to_bytes(size_mb), state.image_nodes[safe], cycle.table.n
            ).astype(np.float64)
        else:
            raw = size_mb * BYTES_PER_MB * (state.image_nodes[safe] / max(cycle.table.n, 1))
        total = np.where(present, raw, 0.0)
        if self.compat:
            lo, hi = float(IMAGE_MIN_BYTES), float(IMAGE_MAX_BYTES_PER_CONTAINER)
            t = np.clip(total, lo, hi)
            return np.floor(COMPAT_MAX_SCORE * (t - lo) / (hi - lo)) * COMPAT_SCALE
        return image_locality_score(total, self.containers, self.integer)


class SkippyScorer(ScorePlugin):
    """A Skippy scorer with the `compat` switch (no integer / float choice of its own)."""

    def __init__(self, compat: str | None = None) -> None:
        self.compat = check_compat(compat)


@register_scorer("LatencyAwareImageLocality")
class LatencyAwareImageLocality(SkippyScorer):
    """Skippy: prefer nodes that pull the missing image fastest from the registry.

    Default: pull seconds (MB * 8 / Mbit/s), inverse min-max. `compat="skippy"`: whole seconds
    per pull, int(size in bytes / bytes per s), rescaled as int(10 (max - x + min) / max).
    """

    kernel_code = kernels.K_LATENCY_IMAGE

    def score(self, cycle: Cycle) -> FloatArray:
        mbps = cycle.table.registry_mbps[cycle.nodes]
        if self.compat:
            whole_s = np.floor(
                mb_to_bytes(cycle.missing_image_mb()) / (mbps * BYTES_PER_S_PER_MBPS)
            )
            return skippy_latency_scale(whole_s) * COMPAT_SCALE
        seconds = cycle.missing_image_mb() * 8.0 / mbps
        return inverse_minmax(seconds)


@register_scorer("DataLocality")
class DataLocality(SkippyScorer):
    """Skippy: prefer nodes with the fastest transfer of the invocation's data from/to storage.

    Default: (MB in + MB out) * 8 / storage Mbit/s, inverse min-max. `compat="skippy"`: whole
    seconds per direction, int(in bytes / bytes per s) + int(out bytes / bytes per s), and
    Skippy's ``_scale_scores_inverse``.
    """

    kernel_code = kernels.K_DATA

    def score(self, cycle: Cycle) -> FloatArray:
        if cycle.pod.data_mb == 0:
            return np.zeros(cycle.nodes.size)
        mbps = cycle.table.storage_mbps[cycle.nodes]
        if self.compat:
            spec = cycle.pod.spec
            bw = mbps * BYTES_PER_S_PER_MBPS
            whole_s = np.floor(mb_to_bytes(spec.data_in_mb) / bw) + np.floor(
                mb_to_bytes(spec.data_out_mb) / bw
            )
            return skippy_inverse_scale(whole_s) * COMPAT_SCALE
        seconds = cycle.pod.data_mb * 8.0 / mbps
        return inverse_minmax(seconds)


@register_scorer("LocalityType")
class LocalityType(SkippyScorer):
    """Skippy: 100 on edge nodes, 0 on cloud nodes (compat: 10 and 0, x 10 -- the same)."""

    kernel_code = kernels.K_LOCALITY

    def score(self, cycle: Cycle) -> FloatArray:
        return np.where(cycle.table.is_edge[cycle.nodes], float(MAX_NODE_SCORE), 0.0)


@register_scorer("Capability")
class CapabilityScore(SkippyScorer):
    """Skippy: how many of the pod's requested capability labels the node has, min-max scaled
    (compat: Skippy's ``_scale_scores``, truncated to 0..10, x 10)."""

    kernel_code = kernels.K_CAPABILITY

    def score(self, cycle: Cycle) -> FloatArray:
        count = cycle.pod.capability_count[cycle.nodes]
        if self.compat:
            return skippy_scale(count) * COMPAT_SCALE
        return minmax(count)


#: The eight scorers of the Learning to Score paper (Skippy's five plus three Kubernetes
#: resource scorers).
SEED_SCORERS: tuple[str, ...] = (
    "BalancedResource",
    "LatencyAwareImageLocality",
    "LocalityType",
    "DataLocality",
    "Capability",
    "LeastAllocated",
    "MostAllocated",
    "RequestedToCapacityRatio",
)
#: The Learning to Score paper's "Fixed" weights: 1 for every scorer, 0 for LeastAllocated
#: and RTC.
FIXED_WEIGHTS: dict[str, float] = {
    name: 0.0 if name in ("LeastAllocated", "RequestedToCapacityRatio") else 1.0
    for name in SEED_SCORERS
}
#: Every registered scorer (the benchmark scores with all of them).
ALL_SCORERS: tuple[str, ...] = SEED_SCORERS + ("BalancedAllocation", "ImageLocality")
