"""The scoring framework: filter and score plugins, shaped like kube-scheduler's.

One scheduling *cycle* places one pod (job): every filter plugin returns a boolean mask over
all nodes, the feasible nodes are their conjunction, every score plugin returns one score in
[0, 100] per feasible node (after its own normalisation), the total is the weighted sum,
and the best total wins; ties go to a seeded generator (kube-scheduler
`runtime/framework.go`, `RunScorePlugins` + `selectHost`; docs/scoring.md).
Scores outside [0, 100] raise `ScoreRangeError` naming the plugin, as kube-scheduler does.

Everything is vectorised over nodes: a `NodeTable` holds static per-node arrays (capacities,
node type, locality, architecture, bandwidths), a `ClusterState` the dynamic ones (free
resources, worker slots, image caches), a `CompiledPod` the pod's per-node precomputations
(the image it would run on each node, static filter masks). Plugins only do numpy work on
these arrays; there is no Python loop over nodes. The built-in plugins also have compiled
forms (`kernels.py`): when every configured plugin has one, a cycle runs as one compiled pass
for the filters and one for all scorers, with the same results as the numpy plugins.

Node label conventions (the faas family and the docs use them):
``locality`` (``edge`` | ``cloud``), ``arch`` (``x86`` | ``aarch64`` | ``arm32``),
``accelerator`` (``gpu`` | ``tpu``), ``capability.<name>`` (e.g. ``capability.cuda: "true"``),
``role: storage`` (a storage node, never a placement target). Bandwidths (Mbit/s from the
image registry and from the storage nodes) are node type fields (`NodeType.registry_mbps`,
`storage_mbps`, the world model's); the old labels ``bandwidth.registry_mbps`` and
``bandwidth.storage_mbps`` are still read when a field is unset.

The scoring placer fills the dynamic state from the engine's view at every call (free
resources, per-GPU milli, worker slots, node status and the image caches of the world model,
`PlacementView.cached`); node rows may grow when a scaler rents nodes (`NodeTable.from_rows`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.layout import GPU_MILLI
from clusteremu.cluster.model import NodeType
from clusteremu.cluster.policies import compiled_table
from clusteremu.cluster.policies.registry import registrar
from clusteremu.cluster.policies.scoring import kernels
from clusteremu.cluster.policies.scoring.skippy_compat import COMPAT_SCALE, check_compat

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Resource rows of the capacity / free arrays: cores, GB of memory, GPUs.
RESOURCES: tuple[str, ...] = ("cpu", "memory", "gpu")
#: Integer units of Kubernetes' arithmetic per resource row: millicores, bytes (GiB), milli-GPU.
INTEGER_SCALE = np.array([1000.0, float(2**30), 1000.0])
MAX_NODE_SCORE = 100
#: Tolerance on capacity checks (cores, GB, GPUs); the engine uses the same.
FIT_EPS = 1e-9


class ScoreRangeError(ValueError):
    """A score plugin returned a score outside [0, 100]."""


# --- the cluster: static node table and dynamic state ---------------------------------------


def _label_float(labels: Mapping[str, str], key: str, default: float) -> float:
    raw = labels.get(key)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"node label {key!r}: expected a number, got {raw!r}") from None
    if not value > 0:
        raise ValueError(f"node label {key!r}: expected a positive bandwidth, got {raw!r}")
    return value


def _bandwidth(t: NodeType, field_name: str, label: str) -> float:
    """A node type's bandwidth (Mbit/s): its field, else its old label, else inf."""
    value = float(getattr(t, field_name, math.inf))
    if math.isfinite(value):
        return value
    return _label_float(t.labels, label, math.inf)


#: The placeholder type of node rows not handed out yet (`NodeTable.from_rows`).
UNUSED_ROW_TYPE = NodeType("(unused row)", cpu=0.0, memory_gb=0.0)


@dataclass
class NodeTable:
    """Static attributes of every node, as arrays indexed by node (plus per node type).

    `capacity` is (3, n): cores, GB, GPUs. Bandwidths are Mbit/s (inf = no transfer cost).
    """

    capacity: FloatArray
    node_type: IntArray
    type_labels: tuple[dict[str, str], ...]
    type_names: tuple[str, ...]
    is_edge: BoolArray
    is_storage: BoolArray
    arch: IntArray
    arch_names: tuple[str, ...]
    registry_mbps: FloatArray
    storage_mbps: FloatArray

    @property
    def n(self) -> int:
        return int(self.node_type.size)

    @classmethod
    def from_types(cls, node_types: Sequence[NodeType], nodes: Sequence[str]) -> NodeTable:
        """Build the table from node types and a node type name per node."""
        index = {t.name: i for i, t in enumerate(node_types)}
        return cls._build(node_types, np.array([index[name] for name in nodes], dtype=np.int64))

    @classmethod
    def from_rows(cls, node_types: Sequence[NodeType], rows: npt.ArrayLike) -> NodeTable:
        """Build the table from the engine's node rows: a node type index per row, -1 for a
        row not handed out yet (a placeholder type of no capacity: the engine marks such rows
        inactive). The placeholder is the last entry of `type_names`."""
        node_type = np.asarray(rows, dtype=np.int64).copy()
        types = list(node_types)
        if np.any(node_type < 0):
            node_type[node_type < 0] = len(types)
            types.append(UNUSED_ROW_TYPE)
        return cls._build(types, node_type)

    @classmethod
    def _build(cls, node_types: Sequence[NodeType], node_type: IntArray) -> NodeTable:
        labels = tuple(dict(t.labels) for t in node_types)
        caps = np.array([[t.cpu, t.memory_gb, t.gpu] for t in node_types], dtype=np.float64)
        caps = caps.reshape(len(node_types), 3)
        arch_names = tuple(sorted({lab.get("arch", "") for lab in labels}))
        per_type = {
            "edge": np.array([lab.get("locality") == "edge" for lab in labels], dtype=bool),
            "storage": np.array([lab.get("role") == "storage" for lab in labels], dtype=bool),
            "arch": np.array(
                [arch_names.index(lab.get("arch", "")) for lab in labels], dtype=np.int64
            ),
            "registry": np.array(
                [_bandwidth(t, "registry_mbps", "bandwidth.registry_mbps") for t in node_types]
            ),
            "storage_bw": np.array(
                [_bandwidth(t, "storage_mbps", "bandwidth.storage_mbps") for t in node_types]
            ),
        }
        return cls(
            capacity=np.ascontiguousarray(caps[node_type].T)
            if node_type.size
            else np.zeros((3, 0)),
            node_type=node_type,
            type_labels=labels,
            type_names=tuple(t.name for t in node_types),
            is_edge=per_type["edge"][node_type],
            is_storage=per_type["storage"][node_type],
            arch=per_type["arch"][node_type],
            arch_names=arch_names,
            registry_mbps=per_type["registry"][node_type],
            storage_mbps=per_type["storage_bw"][node_type],
        )

    def types_matching(self, selector: Mapping[str, Sequence[str]]) -> BoolArray:
        """Per node type: do its labels carry one of the allowed values for every key?"""
        return np.array(
            [
                all(lab.get(k) in allowed for k, allowed in selector.items())
                for lab in self.type_labels
            ],
            dtype=bool,
        )


@dataclass
class ClusterState:
    """Dynamic per-node state: free resources (3, n), free worker slots, image caches and
    the free milli-GPU of each GPU (n, GPUs per node; 1000 = a wholly free GPU).

    `has_image[i, k]` says node k holds image (or item) i; `image_nodes[i]` counts the nodes
    that do.
    """

    free: FloatArray
    free_slots: FloatArray
    active: BoolArray
    has_image: BoolArray
    image_nodes: IntArray
    gpu_free: FloatArray = field(default_factory=lambda: np.zeros((0, 1)))

    @classmethod
    def empty(cls, table: NodeTable, n_images: int, gpus: int | None = None) -> ClusterState:
        """Every node empty and up; each node's whole GPUs (floor of its capacity) free."""
        whole = np.floor(table.capacity[2] + FIT_EPS).astype(np.int64)
        width = max(int(whole.max(initial=0)) if gpus is None else gpus, 1)
        gpu_free = np.where(np.arange(width)[None, :] < whole[:, None], float(GPU_MILLI), 0.0)
        return cls(
            free=table.capacity.copy(),
            free_slots=np.full(table.n, math.inf),
            active=np.ones(table.n, dtype=bool),
            has_image=np.zeros((n_images, table.n), dtype=bool),
            image_nodes=np.zeros(n_images, dtype=np.int64),
            gpu_free=gpu_free,
        )

    def add_image(self, image: int, node: int) -> None:
        if image >= 0 and not self.has_image[image, node]:
            self.has_image[image, node] = True
            self.image_nodes[image] += 1


# --- pods --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImageSpec:
    """A container image: size in MB per architecture (an architecture missing = the image
    has no build for it) and node labels it requires (label -> allowed values)."""

    name: str
    size_mb: Mapping[str, float]
    requires: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class PodSpec:
    """What a job of one class asks of the scheduler.

    `request` is (cores, GB, GPUs); `images` are ranked (a node runs the first one it can);
    `node_selector` are required labels; `capabilities` are the capability labels the pod
    would like (Capability scorer); data sizes in MB per invocation (DataLocality), the model
    in MB is downloaded once per node (cached like an image).
    """

    name: str
    request: tuple[float, float, float] = (1.0, 0.0, 0.0)
    images: tuple[ImageSpec, ...] = ()
    node_selector: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    capabilities: Mapping[str, str] = field(default_factory=dict)
    data_in_mb: float = 0.0
    data_out_mb: float = 0.0
    model_mb: float = 0.0


@dataclass
class CompiledPod:
    """A pod's static per-node arrays against one NodeTable.

    `image[k]` is the global id of the image the pod would run on node k (-1: none; every
    node when the pod names no image), `image_size_mb[k]` its size for k's architecture,
    `runnable[k]` whether k can run one of the pod's images, `selector_ok[k]` whether k
    carries the required labels, `capability_count[k]` how many requested capabilities k has.
    """

    spec: PodSpec
    request: FloatArray
    image: IntArray
    image_size_mb: FloatArray
    runnable: BoolArray
    selector_ok: BoolArray
    capability_count: FloatArray
    data_mb: float
    model_id: int
    #: Conjunctions of static filter masks, by filter names (filled by the framework).
    static_masks: dict[tuple[str, ...], BoolArray] = field(default_factory=dict)


def compile_pod(spec: PodSpec, table: NodeTable, image_ids: Mapping[str, int]) -> CompiledPod:
    """Precompute a pod's per-node arrays (vectorised by node type, then gathered)."""
    n_types = len(table.type_labels)
    image_of_type = np.full(n_types, -1, dtype=np.int64)
    size_of_type = np.zeros(n_types)
    for t, lab in enumerate(table.type_labels):
        arch = lab.get("arch", "")
        for img in spec.images:
            size = img.size_mb.get(arch, img.size_mb.get("*"))  # "*": every architecture
            if size is not None and all(lab.get(k) in v for k, v in img.requires.items()):
                image_of_type[t] = image_ids[img.name]
                size_of_type[t] = float(size)
                break
    runnable_type = image_of_type >= 0 if spec.images else np.ones(n_types, dtype=bool)
    caps_type = np.array(
        [sum(lab.get(k) == v for k, v in spec.capabilities.items()) for lab in table.type_labels],
        dtype=np.float64,
    )
    nt = table.node_type
    model_key = f"model:{spec.name}"
    return CompiledPod(
        spec=spec,
        request=np.asarray(spec.request, dtype=np.float64),
        image=image_of_type[nt],
        image_size_mb=size_of_type[nt],
        runnable=runnable_type[nt],
        selector_ok=table.types_matching(spec.node_selector)[nt],
        capability_count=caps_type[nt],
        data_mb=float(spec.data_in_mb + spec.data_out_mb),
        model_id=image_ids.get(model_key, -1),
    )


# --- one scheduling cycle ------------------------------------------------------------------------


class Cycle:
    """The inputs of one placement decision; gathered per-feasible-node arrays are cached.

    `request` is this job's (cores, GB, GPUs). After filtering, `nodes` holds the feasible
    node indices and scorers read gathered arrays through the cached helpers.
    """

    __slots__ = ("table", "state", "pod", "request", "nodes", "_cache")

    def __init__(
        self,
        table: NodeTable,
        state: ClusterState,
        pod: CompiledPod,
        request: FloatArray | None = None,
    ) -> None:
        self.table = table
        self.state = state
        self.pod = pod
        self.request = pod.request if request is None else np.asarray(request, dtype=np.float64)
        self.nodes: IntArray = np.zeros(0, dtype=np.int64)
        self._cache: dict[str, Any] = {}

    def cached(self, key: str, make: Callable[[], Any]) -> Any:
        """Compute `make()` once per cycle (after filtering) and reuse it."""
        value = self._cache.get(key)
        if value is None:
            value = make()
            self._cache[key] = value
        return value

    def capacity(self) -> FloatArray:
        """(3, m) capacities of the feasible nodes."""
        return self.cached("cap", lambda: self.table.capacity[:, self.nodes])

    def free(self) -> FloatArray:
        """(3, m) free resources of the feasible nodes before this placement."""
        return self.cached("free", lambda: self.state.free[:, self.nodes])

    def requested(self) -> FloatArray:
        """(3, m) requested resources after this placement: (capacity - free) + request."""
        return self.cached("req", lambda: self.capacity() - self.free() + self.request[:, None])

    def missing_image_mb(self) -> FloatArray:
        """MB of the pod's image each feasible node would have to pull (0 if cached)."""

        def make() -> FloatArray:
            img = self.pod.image[self.nodes]
            size = self.pod.image_size_mb[self.nodes]
            if self.state.has_image.shape[0] == 0:
                return size.copy()
            present = self.state.has_image[np.maximum(img, 0), self.nodes] & (img >= 0)
            return np.where(present, 0.0, size)

        return self.cached("missing", make)


# --- plugins and their registries ----------------------------------------------------------------


class FilterPlugin:
    """A hard constraint: `filter(cycle)` returns a boolean mask over *all* nodes.

    A `static` filter depends only on the pod and the node table (labels, images), not on the
    cluster state: the framework computes its mask once per pod and caches it.
    """

    name: ClassVar[str] = "filter"
    static: ClassVar[bool] = False

    def filter(self, cycle: Cycle) -> BoolArray:
        raise NotImplementedError


class ScorePlugin:
    """A preference: `score(cycle)` returns one score in [0, 100] per node of `cycle.nodes`.

    A plugin that needs a normalisation over the feasible nodes (min-max) does it inside
    `score`, like kube-scheduler's NormalizeScore extension. Built-in plugins also have a
    compiled form (`kernel_code` >= 0, see `kernels.fused_total`); the framework then scores
    all of them in one pass, and the numpy `score` stays the reference (tests compare both).
    A plugin of your own can be a numba function instead (`compiled`, registered with
    `@compiled_scorer` in `clusteremu.cluster.policies.compiled_table`): `score` then runs it over
    the
    feasible nodes in one compiled call.
    """

    name: ClassVar[str] = "scorer"
    #: Code of the plugin in `kernels.fused_total`; -1 = not one of the fused scorers.
    kernel_code: ClassVar[int] = -1
    #: A compiled score function (`@compiled_scorer`), or None.
    compiled: ClassVar[Any] = None

    def kernel_params(self) -> FloatArray:
        """The compiled function's `view.params`."""
        return np.zeros(1)

    def score(self, cycle: Cycle) -> FloatArray:
        function = compiled_table.compiled_of(self)
        if function is None:
            raise NotImplementedError(f"score plugin {self.name!r} has no score()")
        addresses = compiled_table.address_row("scorer", function)
        out = np.empty(cycle.nodes.size)
        compiled_table.call_scorer(
            addresses, _read_only(cycle.nodes), scorer_view(self, cycle), out
        )
        return out


def _read_only(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    v = np.ascontiguousarray(a).view()
    v.flags.writeable = False
    return v


def scorer_view(plugin: ScorePlugin, cycle: Cycle) -> compiled_table.ScorerView:
    """A compiled score plugin's read-only view of a scheduling cycle."""
    table, state = cycle.table, cycle.state
    return compiled_table.ScorerView(
        request=_read_only(np.asarray(cycle.request, dtype=np.float64)),
        capacity=_read_only(table.capacity.astype(np.float64, copy=False)),
        free=_read_only(state.free.astype(np.float64, copy=False)),
        free_slots=_read_only(state.free_slots.astype(np.float64, copy=False)),
        node_type=_read_only(table.node_type.astype(np.int64, copy=False)),
        is_edge=_read_only(table.is_edge.astype(np.bool_, copy=False)),
        missing_image_mb=_read_only(cycle.missing_image_mb().astype(np.float64, copy=False)),
        params=np.ascontiguousarray(plugin.kernel_params(), dtype=np.float64),
    )


F = TypeVar("F", bound=type[FilterPlugin])
S = TypeVar("S", bound=type[ScorePlugin])
FILTERS: dict[str, type[FilterPlugin]] = {}
SCORERS: dict[str, type[ScorePlugin]] = {}


def register_filter(name: str) -> Callable[[F], F]:
    """Class decorator: register a filter plugin under `name` (duplicates refused)."""
    return registrar(FILTERS, "filter plugin")(name)


def register_scorer(name: str) -> Callable[[S], S]:
    """Class decorator: register a score plugin under `name` (duplicates refused)."""
    return registrar(SCORERS, "score plugin")(name)


def make_filter(name: str, **params: Any) -> FilterPlugin:
    if name not in FILTERS:
        raise ValueError(
            f"filters: unknown filter plugin {name!r}; known: {', '.join(sorted(FILTERS))}"
        )
    try:
        return FILTERS[name](**params)
    except TypeError as exc:
        raise ValueError(f"filter {name!r} does not accept parameters {params}: {exc}") from None


def make_scorer(name: str, **params: Any) -> ScorePlugin:
    if name not in SCORERS:
        raise ValueError(
            f"scorers: unknown score plugin {name!r}; known: {', '.join(sorted(SCORERS))}"
        )
    try:
        return SCORERS[name](**params)
    except TypeError as exc:
        raise ValueError(f"scorer {name!r} does not accept parameters {params}: {exc}") from None


def check_weights(weights: Mapping[str, float], scorers: Sequence[str]) -> dict[str, float]:
    """Validate a weight per scorer: known names, finite and non-negative."""
    out: dict[str, float] = {}
    for name, w in weights.items():
        if name not in scorers:
            known = ", ".join(scorers)
            raise ValueError(f"weights.{name}: not one of the configured scorers ({known})")
        try:
            value = float(w)
        except (TypeError, ValueError):
            raise ValueError(f"weights.{name}: expected a number, got {w!r}") from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"weights.{name}: expected a finite, non-negative weight, got {w!r}")
        out[name] = value
    return out


#: kube-scheduler's floor on nodes to score and on the adaptive percentage.
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE = 5


def nodes_to_find(n_nodes: int, percentage: float) -> int:
    """How many feasible nodes a cycle scores (kube-scheduler ``numFeasibleNodesToFind``):
    all below 100 nodes or at 100%; 0% is adaptive, 50% - n/125 but at least 5%; never
    fewer than 100 nodes."""
    if n_nodes < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return n_nodes
    adaptive = percentage
    if adaptive <= 0:
        adaptive = max(50.0 - n_nodes / 125.0, MIN_FEASIBLE_NODES_PERCENTAGE)
    return max(int(n_nodes * adaptive / 100), MIN_FEASIBLE_NODES_TO_FIND)


def check_not_all_zero(weights: Mapping[str, float]) -> None:
    """The effective weights must give at least one scorer a positive weight."""
    if weights and not any(w > 0 for w in weights.values()):
        raise ValueError(
            "weights: all weights are zero; at least one scorer needs a positive weight"
        )


class Framework:
    """Filters, weighted scorers and a seeded tie-break: one `select` per pod.

    `compat="skippy"` (`skippy_compat.py`): Skippy 0.1.1's combination -- the scorers must be
    built with the same `compat`; the total is Skippy's sum of weight x score on 0..10, and ties
    go to the first best node in the round-robin order of the feasible search (the search
    always starts where the previous cycle stopped), not to the generator.
    """

    def __init__(
        self,
        filters: Sequence[FilterPlugin],
        scorers: Sequence[ScorePlugin],
        weights: Sequence[float],
        check_scores: bool = True,
        fused: bool = True,
        percentage_of_nodes_to_score: float = 100.0,
        compat: str | None = None,
    ) -> None:
        if len(scorers) != len(weights):
            raise ValueError("one weight per scorer")
        self.compat = check_compat(compat)
        for s in scorers:
            mine = getattr(s, "compat", None)
            if mine is not None and bool(mine) != self.compat:
                raise ValueError(
                    f"compat: scorer {s.name!r} was built with compat "
                    f"{'skippy' if mine else 'none'}, the framework with {compat!r}"
                )
        pct = float(percentage_of_nodes_to_score)
        if not (math.isfinite(pct) and 0 <= pct <= 100):
            raise ValueError(
                f"percentage_of_nodes_to_score: expected 0..100 (0 = adaptive), got {pct!r}"
            )
        self.percentage = pct
        self.filters = list(filters)
        self._static = [f for f in self.filters if f.static]
        self._static_key = tuple(f.name for f in self._static)
        self._dynamic = [f for f in self.filters if not f.static]
        #: Only ResourceFit is dynamic: find the feasible nodes in one compiled pass.
        self._fit_kernel = fused and [f.name for f in self._dynamic] == ["ResourceFit"]
        #: Where the next search for feasible nodes starts (round robin, as kube-scheduler).
        self.next_start = 0
        #: Zero-weight scorers are skipped: they cannot change the ranking.
        self.scorers = [(s, float(w)) for s, w in zip(scorers, weights, strict=True) if w != 0.0]
        self.check_scores = check_scores
        codes = [s.kernel_code for s, _ in self.scorers]
        for (plugin, _), code in zip(self.scorers, codes, strict=True):
            if not -1 <= code < kernels.N_KERNEL_SCORERS:
                raise ValueError(
                    f"score plugin {plugin.name!r}: kernel_code {code} is not a fused "
                    f"scorer (0..{kernels.N_KERNEL_SCORERS - 1}, or -1 for none)"
                )
            function = compiled_table.compiled_of(plugin)
            if function is not None:
                try:
                    compiled_table.code_of("scorer", function)
                except ValueError as exc:
                    raise ValueError(f"score plugin {plugin.name!r}: {exc}") from None
        #: All scorers compiled and distinct: score them in one fused kernel pass.
        self.fused = fused and all(c >= 0 for c in codes) and len(set(codes)) == len(codes)
        if self.fused:
            self._fused_config()

    def _fused_config(self) -> None:
        self._order = np.array([s.kernel_code for s, _ in self.scorers], dtype=np.int64)
        self._weights = np.array([w for _, w in self.scorers], dtype=np.float64)
        self._integer = np.ones(kernels.N_KERNEL_SCORERS, dtype=np.bool_)
        self._res_rows = np.full((4, len(RESOURCES)), -1, dtype=np.int64)
        self._res_weights = np.zeros((4, len(RESOURCES)))
        self._shape_util, self._shape_score = np.zeros(1), np.zeros(1)
        for s, _ in self.scorers:
            c = s.kernel_code
            self._integer[c] = bool(getattr(s, "integer", True))
            if c <= kernels.K_BALANCED_ALLOC:
                rows = np.asarray(s.rows, dtype=np.int64)  # type: ignore[attr-defined]
                self._res_rows[c, : rows.size] = rows
                self._res_weights[c, : rows.size] = s.weights  # type: ignore[attr-defined]
            if c == kernels.K_RTC:
                self._shape_util = np.asarray(s.shape_util, dtype=np.float64)  # type: ignore[attr-defined]
                self._shape_score = np.asarray(s.shape_score, dtype=np.float64)  # type: ignore[attr-defined]
        self._names = {s.kernel_code: s.name for s, _ in self.scorers}
        self._work = np.empty(0)
        #: The resource rows any resource scorer reads (the others are not converted).
        self._unit_rows = np.unique(self._res_rows[self._res_rows >= 0]).astype(np.int64)

    def feasible(self, cycle: Cycle, allowed: BoolArray | None = None) -> IntArray:
        """Indices of the nodes passing every filter; also stored in `cycle.nodes`.

        `allowed` (a mask over the nodes) restricts the search further, e.g. to a function's
        replicas (the scoring placer's ``replicas`` option)."""
        static = cycle.pod.static_masks.get(self._static_key)
        if static is None:
            static = np.ones(cycle.table.n, dtype=bool)
            for f in self._static:
                static = static & f.filter(cycle)
            cycle.pod.static_masks[self._static_key] = static
        if self._fit_kernel:
            out = np.empty(cycle.table.n, dtype=np.int64)
            st = cycle.state
            count = kernels.fit_nodes(
                st.free, st.free_slots, st.active, static, cycle.request, st.gpu_free, out
            )
            nodes = out[:count]
        else:
            mask = static
            for f in self._dynamic:
                mask = mask & f.filter(cycle)
            nodes = np.flatnonzero(mask)
        if allowed is not None:
            nodes = nodes[allowed[nodes]]
        want = nodes_to_find(cycle.table.n, self.percentage)
        if want < nodes.size or (self.compat and nodes.size):
            # Search from where the last cycle stopped, keep the first `want` feasible nodes.
            first = int(np.searchsorted(nodes, self.next_start))
            nodes = np.concatenate((nodes[first:], nodes[:first]))[:want]
            self.next_start = (int(nodes[-1]) + 1) % cycle.table.n
        cycle.nodes = nodes
        cycle._cache.clear()
        return cycle.nodes

    def scores(self, cycle: Cycle) -> dict[str, FloatArray]:
        """Each scorer's [0, 100] scores on the feasible nodes (checked), by scorer name."""
        out: dict[str, FloatArray] = {}
        for s, _ in self.scorers:
            out[s.name] = self._checked(s, cycle)
        return out

    def _checked(self, plugin: ScorePlugin, cycle: Cycle) -> FloatArray:
        v = plugin.score(cycle)
        if self.check_scores and v.size and not (v.min() >= 0.0 and v.max() <= MAX_NODE_SCORE):
            bad = v[(v < 0) | (v > MAX_NODE_SCORE) | np.isnan(v)]
            raise ScoreRangeError(
                f"score plugin {plugin.name!r} returned {bad[:3].tolist()} "
                f"outside [0, {MAX_NODE_SCORE}]"
            )
        return v

    def total(self, cycle: Cycle) -> FloatArray:
        """Weighted sum of the scores on the feasible nodes."""
        if self.fused:
            return self._total_fused(cycle)
        return self.total_numpy(cycle)

    def _total_fused(self, cycle: Cycle) -> FloatArray:
        table, state, pod = cycle.table, cycle.state, cycle.pod
        m = cycle.nodes.size
        if self._work.size < 16 * m:  # scratch: raw scores (m) and resource units (5, 3, m)
            self._work = np.empty(16 * m)
        total = np.empty(m)
        bad = kernels.fused_total(
            cycle.nodes,
            self._order,
            self._weights,
            self._integer,
            table.capacity,
            state.free,
            cycle.request,
            INTEGER_SCALE,
            self._res_rows,
            self._res_weights,
            self._unit_rows,
            self._shape_util,
            self._shape_score,
            pod.image,
            pod.image_size_mb,
            state.has_image,
            state.image_nodes,
            table.registry_mbps,
            table.storage_mbps,
            pod.data_mb,
            table.is_edge,
            pod.capability_count,
            total,
            self._work[:m],
            self._work[m : 16 * m].reshape(5, 3, m),
            self.compat,
            float(pod.spec.data_in_mb),
            float(pod.spec.data_out_mb),
        )
        if bad >= 0 and self.check_scores:
            raise ScoreRangeError(
                f"score plugin {self._names[bad]!r} returned a score outside [0, {MAX_NODE_SCORE}]"
            )
        return total

    def total_numpy(self, cycle: Cycle) -> FloatArray:
        """Weighted sum computed plugin by plugin with numpy (the reference path)."""
        total = np.zeros(cycle.nodes.size)
        for s, w in self.scorers:
            if self.compat:  # Skippy's sum: weight x score on 0..10
                total += w * (self._checked(s, cycle) / COMPAT_SCALE)
            else:
                total += w * self._checked(s, cycle)
        return total

    def select(
        self, cycle: Cycle, rng: np.random.Generator, allowed: BoolArray | None = None
    ) -> int:
        """The chosen node index, or -1 when no node is feasible. Ties: uniform, seeded.
        `allowed`: see `feasible`."""
        nodes = self.feasible(cycle, allowed)
        if nodes.size == 0:
            return -1
        if self.compat:  # Skippy: the first best node in the search order
            if nodes.size == 1 or not self.scorers:
                return int(nodes[0])
            return int(nodes[kernels.best_and_ties(self.total(cycle))[0]])
        if nodes.size == 1 or not self.scorers:
            return int(nodes[0]) if nodes.size == 1 else int(nodes[rng.integers(nodes.size)])
        total = self.total(cycle)
        first, ties = kernels.best_and_ties(total)
        if ties == 1:
            return int(nodes[first])
        best = np.flatnonzero(total == total[first])
        return int(nodes[best[rng.integers(best.size)]])
