"""The scoring placer: kube-scheduler's filter / score / weighted-sum cycle as a `Placer`.

Registered as ``scoring``. Scenario parameters (``scheduler.placer.params``):

- ``scorers``: score plugin names (default: the Learning to Score paper's eight,
  `SEED_SCORERS`);
- ``weights``: ``{scorer: weight}``, non-negative, not all zero; unnamed scorers keep the
  paper's "Fixed" weights (1, and 0 for LeastAllocated and RequestedToCapacityRatio);
- ``filters``: filter plugin names (default ResourceFit, NodeLabels, Capability, NotStorageNode);
- ``scorer_params``: ``{scorer: {param: value}}``, e.g. RequestedToCapacityRatio ``shape``;
- ``integer``: Kubernetes' integer arithmetic in the Kubernetes scorers (default true);
- ``compat``: ``skippy`` reproduces Skippy 0.1.1's scores, sums and choices exactly (scores
  0..10, whole-second transfer times, Skippy's rescaling and first-best tie-break; see
  `skippy_compat.py`); default none (the continuous scorers);
- ``pods``, ``goodput``, ``score_bounds`` (deprecated): the world model and the score's
  bounds used to live here; they are scenario fields now (``world``, the classes'
  ``containers`` / data / model / ``node_selector`` / ``capabilities``, the node types'
  bandwidths, ``metrics.score``) and the scenario loader translates them through the
  placer's `migrate` hook (`old_params.py`);
- ``percentage_of_nodes_to_score``: kube-scheduler's option (the paper varies it 10-100):
  each cycle scores only the first feasible nodes found, searching round robin from where the
  last cycle stopped (at least 100 nodes; 0 = adaptive); default 100 (all);
- ``replicas``: ``{min, max, scale_factor}``, faas-sim's per-function scaling options (the
  paper's "min / max # nodes per function" and "scale factor", Table II): each function (job
  class) runs only on its replica nodes. The first request of a function places ``min``
  replicas on the best-scored feasible nodes; a request that finds no replica with room
  scales the function up by ``scale_factor`` replicas (the best-scored feasible other nodes,
  at most ``max`` in all) and runs on the best of them; replicas are never removed. Requests
  are routed among a function's replicas by the same weighted score. Default none: every
  node may run every function (one replica per request, as kube-scheduler places pods).
- ``compiled``: score with the fused compiled kernel when every scorer has one (default true;
  false runs the numpy plugins, the reference path -- the two give identical runs).

Queue discipline: every waiting job is tried in arrival order and placed on its best node if
one is feasible (kube-scheduler does not block on an unschedulable pod); within one call a
class with no feasible node is not retried.

The world is the engine's (`clusteremu.cluster.world`): the placer reads the scenario's images,
sizes and
bandwidths through `World.from_spec` and the nodes' image caches from the view
(`PlacementView.cached`) at every call; within a call it books its own placements (resources,
GPUs, the items a start will fetch) so that later jobs of the call see them. It returns no
set-up delay: the engine computes it at every start, whatever the placer. Node rows may grow
(nodes rented by a scaler): the placer rebuilds its node table when the view's rows change.
The summary's ``score`` is a metric the scenario selects (`clusteremu.cluster.score_metric`).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.layout import GPU_MILLI
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import Migration, Placement, PlacementView, Placer
from clusteremu.cluster.policies.registry import register
from clusteremu.cluster.policies.scoring import filters as _filters
from clusteremu.cluster.policies.scoring import scorers as _scorers
from clusteremu.cluster.policies.scoring.framework import (
    FIT_EPS,
    ClusterState,
    CompiledPod,
    Cycle,
    Framework,
    ImageSpec,
    NodeTable,
    PodSpec,
    check_not_all_zero,
    check_weights,
    compile_pod,
    make_filter,
    make_scorer,
)
from clusteremu.cluster.policies.scoring.old_params import migrate as _migrate_old_params
from clusteremu.cluster.policies.scoring.old_params import parse_pod
from clusteremu.cluster.policies.scoring.score import check_bounds
from clusteremu.cluster.policies.scoring.skippy_compat import check_compat
from clusteremu.cluster.world import World

log = logging.getLogger(__name__)

#: Scorers that accept the `integer` switch.
_INTEGER_SCORERS = {
    "LeastAllocated",
    "MostAllocated",
    "RequestedToCapacityRatio",
    "BalancedAllocation",
    "BalancedResource",
    "ImageLocality",
}
#: Scorers that accept the `compat` switch (every built-in).
_COMPAT_SCORERS = _INTEGER_SCORERS | {
    "LatencyAwareImageLocality",
    "DataLocality",
    "LocalityType",
    "Capability",
}


@register("placer", "scoring")
class ScoringPlacer(Placer):
    """Filter feasible nodes, score them with weighted plugins, take the best (seeded ties)."""

    #: A call seeds replicas and moves the round-robin search start even when no node fits.
    ask_when_nothing_fits = True

    def __init__(
        self,
        scorers: Sequence[str] | None = None,
        weights: Mapping[str, float] | None = None,
        filters: Sequence[str] | None = None,
        scorer_params: Mapping[str, Mapping[str, Any]] | None = None,
        integer: bool = True,
        pods: Mapping[str, Mapping[str, Any]] | None = None,
        goodput: float | None = None,
        score_bounds: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
        check_scores: bool = True,
        compiled: bool = True,
        percentage_of_nodes_to_score: float = 100.0,
        compat: str | None = None,
        replicas: Mapping[str, Any] | None = None,
    ) -> None:
        self.compat = compat
        self.replicas = check_replicas(replicas)
        if check_compat(compat) and not integer:
            raise ValueError("integer: compat: skippy uses integer arithmetic; drop integer: false")
        self.scorer_names = tuple(_scorers.SEED_SCORERS if scorers is None else scorers)
        if len(set(self.scorer_names)) != len(self.scorer_names):
            raise ValueError(f"scorers: names must be unique, got {list(self.scorer_names)}")
        self.filter_names = tuple(_filters.DEFAULT_FILTERS if filters is None else filters)
        params = {k: dict(v) for k, v in (scorer_params or {}).items()}
        for name in params:
            if name not in self.scorer_names:
                raise ValueError(f"scorer_params.{name}: not one of the configured scorers")
        self.integer = bool(integer)
        self.scorer_plugins = []
        for name in self.scorer_names:
            p = dict(params.get(name, {}))
            if name in _INTEGER_SCORERS:
                p.setdefault("integer", self.integer)
            if name in _COMPAT_SCORERS:
                p.setdefault("compat", compat)
            self.scorer_plugins.append(make_scorer(name, **p))
        self.filter_plugins = [make_filter(name) for name in self.filter_names]
        self._count_holders = "ImageLocality" in self.scorer_names
        given = check_weights(weights or {}, self.scorer_names)
        self.weights = {
            n: given.get(n, _scorers.FIXED_WEIGHTS.get(n, 1.0)) for n in self.scorer_names
        }
        check_not_all_zero(self.weights)
        self.framework = Framework(
            self.filter_plugins,
            self.scorer_plugins,
            [self.weights[n] for n in self.scorer_names],
            check_scores,
            fused=compiled,
            percentage_of_nodes_to_score=percentage_of_nodes_to_score,
            compat=compat,
        )
        # Deprecated: the world model's old home. Validated here (clear errors); the scenario
        # loader moves them into the scenario (the `migrate` hook below: old_params.py).
        self.pod_specs = {str(k): parse_pod(str(k), v) for k, v in (pods or {}).items()}
        if goodput is not None and not (0 < float(goodput) <= 1):
            raise ValueError(f"goodput: expected a fraction in (0, 1], got {goodput!r}")
        for name, b in (score_bounds or {}).items():
            if not isinstance(b, Mapping) or set(b) - {"exec_s", "wait_s"}:
                raise ValueError(
                    f"score_bounds.{name}: expected {{exec_s: [lo, hi], wait_s: [lo, hi]}}"
                )
            for key, pair in b.items():
                check_bounds(f"{name}.{key}", pair)
        self._deprecated = [
            name
            for name, value in (
                ("pods", pods),
                ("goodput", goodput),
                ("score_bounds", score_bounds),
            )
            if value is not None
        ]
        if self._deprecated:
            warnings.warn(
                FutureWarning(
                    f"scoring placer: {', '.join(self._deprecated)} moved to the scenario "
                    "(world.images, workload.classes[*].containers / data_in_mb / data_out_mb "
                    "/ model_mb / node_selector / capabilities, world.goodput, "
                    "metrics.score.bounds; see docs/scenarios.md)"
                ),
                stacklevel=2,
            )

    @classmethod
    def migrate(cls, data: dict[str, Any], migration: Migration) -> dict[str, Any]:
        """Old scenarios: ``pods``, ``goodput`` and ``score_bounds`` moved out of the params
        into the scenario's world model and metrics (`old_params.migrate`)."""
        return _migrate_old_params(data, migration)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scorers": list(self.scorer_names),
            "weights": dict(self.weights),
            "filters": list(self.filter_names),
            **({"replicas": dict(self.replicas)} if self.replicas else {}),
        }

    # -- set-up --------------------------------------------------------------------------

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        class_names = [c.name for c in spec.classes]
        for name in self.pod_specs:
            if name not in class_names:
                raise ValueError(
                    f"pods.{name}: expected the name of a job class ({', '.join(class_names)})"
                )
        self.world = World.from_spec(spec)
        if self.pod_specs and not self.world.active:
            raise ValueError(
                "pods: the world model is scenario data now: give the images, data and models "
                "as world.images and workload.classes[*].containers / data_in_mb / data_out_mb "
                "/ model_mb (the scenario loader translates scheduler.placer.params.pods)"
            )
        self.rng = rng
        self.class_names = class_names
        self._class_of = {name: c for c, name in enumerate(class_names)}
        self.node_types = spec.node_types
        catalogue = {img.name: img for img in spec.world.images}
        self.pod_bases = [
            PodSpec(
                c.name,
                (c.request.cpu, c.request.memory_gb, c.request.gpu),
                tuple(
                    ImageSpec(n, dict(catalogue[n].size_mb), dict(catalogue[n].requires))
                    for n in (c.containers[0].images if c.containers else ())
                ),
                dict(c.node_selector),
                dict(c.capabilities),
                c.data_in_mb,
                c.data_out_mb,
                c.model_mb,
            )
            for c in spec.classes
        ]
        self.image_ids = {name: i for i, name in enumerate(self.world.items)}
        index = {t.name: i for i, t in enumerate(spec.node_types)}
        self._rebuild(np.array([index[n] for n in spec.nodes], dtype=np.int64))
        self.placements = 0

    def _rebuild(self, rows: npt.NDArray[np.int64]) -> None:
        """Node table, compiled pods and state for these node rows (a type index per row,
        -1 for a row not handed out)."""
        self._rows = rows.copy()
        self.table = NodeTable.from_rows(self.node_types, rows)
        n_types = len(self.node_types)
        type_rows = np.where(rows >= 0, rows, n_types)
        self.pods: list[CompiledPod] = []
        for c, base in enumerate(self.pod_bases):
            pod = compile_pod(base, self.table, self.image_ids)
            # Every container must have an image for the node (the world's rule).
            runnable = np.append(self.world.runnable[c], False) if n_types else np.zeros(1, bool)
            pod.runnable = pod.runnable & runnable[type_rows]
            self.pods.append(pod)
        self.state = ClusterState.empty(self.table, self.world.n_items)
        # The caches as (rows, items), like the engine's: the state's (items, rows) matrix is
        # its transpose (a view), so that copying the view's caches in is one fast pass.
        self._held = np.zeros((rows.size, self.world.n_items), dtype=bool)
        self.state.has_image = self._held.T
        self._rows_seen: object = None
        # The items a start of class c on a node of type t fetches (rows: unused -> none).
        self.needs = [[*per_class, ()] for per_class in self.world.needs]
        # Replica nodes per class (the ``replicas`` option); kept over row changes.
        old = getattr(self, "replica_of", None)
        self.replica_of = np.zeros((len(self.pods), rows.size), dtype=bool)
        if old is not None:
            keep = min(old.shape[1], rows.size)
            self.replica_of[:, :keep] = old[:, :keep]
        self._seeded = getattr(self, "_seeded", np.zeros(len(self.pods), dtype=bool))

    # -- decisions -----------------------------------------------------------------------

    def set_view(self, view: PlacementView) -> None:
        """Copy the engine's state into the placer's (the view is not mutated): free
        resources, worker slots, node status, per-GPU milli and the image caches."""
        rows = view.node_type
        if rows is not self._rows_seen:  # the engine shares one array until rows change
            rows = np.asarray(rows)
            if rows.size != self._rows.size or not np.array_equal(rows, self._rows):
                self._rebuild(rows)
            self._rows_seen = view.node_type
        st = self.state
        st.free[0], st.free[1], st.free[2] = view.free_cpu, view.free_memory_gb, view.free_gpu
        st.free_slots[:] = view.free_slots
        st.active[:] = view.active
        gpus = np.asarray(view.gpu_free_milli)
        if st.gpu_free.shape != gpus.shape:
            st.gpu_free = np.array(gpus, dtype=np.float64)
        else:
            st.gpu_free[:] = gpus
        cached = np.asarray(view.cached)
        n_items = self._held.shape[1]
        if n_items and cached.shape[0] == self._held.shape[0] and cached.shape[1] >= n_items:
            np.greater(cached[:, :n_items], 0.0, out=self._held)
            if self._count_holders:  # only ImageLocality reads how many nodes hold an image
                st.image_nodes[:] = np.count_nonzero(self._held, axis=0)

    def commit(self, pod: CompiledPod, node: int, request: np.ndarray) -> None:
        """Book a placement in the placer's state for the rest of the call: its resources,
        a worker slot, its GPUs (the engine's default choice) and the items it fetches."""
        st = self.state
        c = self._class_of.get(pod.spec.name, -1)
        if c >= 0:
            t = int(self._rows[node])
            for i in self.needs[c][t if t >= 0 else -1]:
                st.add_image(int(i), node)
        else:  # a pod outside the scenario's classes: its first image only
            st.add_image(int(pod.image[node]), node)
            st.add_image(pod.model_id, node)
        st.free[:, node] -= request
        st.free_slots[node] -= 1.0
        gpu = float(request[2])
        if gpu > 0.0:
            take_gpus(st.gpu_free, node, gpu)
        self.placements += 1

    def place(self, view: PlacementView) -> list[Placement]:
        if view.queue.size == 0:
            return []
        self.set_view(view)
        out: list[Placement] = []
        # The view's per-job fields are read once per call (each access builds a slice);
        # when a job finds no node, the waiting jobs of its class that ask at least as much
        # of every resource cannot find one either in this call: they are dropped in bulk.
        jobs = np.asarray(view.queue)
        cls = np.asarray(view.class_index)
        req = np.stack(
            (
                np.asarray(view.request_cpu, dtype=np.float64),
                np.asarray(view.request_memory_gb, dtype=np.float64),
                np.asarray(view.request_gpu, dtype=np.float64),
            ),
            axis=1,
        )
        todo = np.arange(jobs.size)
        pos = 0
        while pos < todo.size:
            i = int(todo[pos])
            pos += 1
            c = int(cls[i])
            request = req[i].copy()
            pod = self.pods[c]
            if self.replicas:
                k = self.select_replica(c, pod, request)
            else:
                k = self.framework.select(Cycle(self.table, self.state, pod, request), self.rng)
            if k < 0:
                rest = todo[pos:]
                same = (cls[rest] == c) & np.all(req[rest] >= req[i], axis=1)
                todo, pos = rest[~same], 0
                continue
            self.commit(pod, k, request)
            out.append(Placement(int(jobs[i]), k))
        return out

    def select_replica(self, c: int, pod: CompiledPod, request: np.ndarray) -> int:
        """The node for a job of class `c` under the ``replicas`` option (-1: none): the
        best-scored replica with room, else the best node of a scale-up."""
        assert self.replicas is not None
        mine = self.replica_of[c]
        if not self._seeded[c]:
            self._seeded[c] = True
            self.add_replicas(c, pod, request, self.replicas["min"])
        k = self.framework.select(Cycle(self.table, self.state, pod, request), self.rng, mine)
        if k >= 0:
            return k
        room = self.replicas["max"] - int(np.count_nonzero(mine))
        added = self.add_replicas(c, pod, request, min(self.replicas["scale_factor"], room))
        return int(added[0]) if added.size else -1

    def add_replicas(
        self, c: int, pod: CompiledPod, request: np.ndarray, count: int
    ) -> npt.NDArray[np.int64]:
        """Make the `count` best-scored feasible nodes without a replica of class `c` its
        replicas (fewer when fewer are feasible); returns them, best first."""
        if count <= 0:
            return np.zeros(0, dtype=np.int64)
        cycle = Cycle(self.table, self.state, pod, request)
        nodes = self.framework.feasible(cycle, ~self.replica_of[c])
        if nodes.size == 0:
            return nodes
        if nodes.size > 1 and self.framework.scorers:
            order = np.argsort(-self.framework.total(cycle), kind="stable")
            nodes = nodes[order]
        chosen = nodes[:count]
        self.replica_of[c, chosen] = True
        return chosen


def check_replicas(replicas: Mapping[str, Any] | None) -> dict[str, int] | None:
    """The ``replicas`` option checked: integers min >= 0, max >= max(min, 1),
    scale_factor >= 1 (default 1); min defaults to 0 and max to unlimited."""
    if replicas is None:
        return None
    if not isinstance(replicas, Mapping):
        raise ValueError(f"replicas: expected {{min, max, scale_factor}}, got {replicas!r}")
    unknown = set(replicas) - {"min", "max", "scale_factor"}
    if unknown:
        raise ValueError(
            f"replicas.{sorted(unknown)[0]}: unknown key; expected min, max, scale_factor"
        )
    out: dict[str, int] = {}
    for key, default, lowest in (("min", 0, 0), ("max", 2**62, 1), ("scale_factor", 1, 1)):
        value = replicas.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < lowest:
            raise ValueError(f"replicas.{key}: expected an integer >= {lowest}, got {value!r}")
        out[key] = value
    if out["max"] < out["min"]:
        raise ValueError(f"replicas.max: expected at least min ({out['min']}), got {out['max']}")
    return out


def take_gpus(gpu_free: np.ndarray, k: int, gpu: float) -> None:
    """Book a GPU request on node k as the engine does when a placement names no GPUs: the
    first GPU with room for a share, or the first wholly free GPUs."""
    if gpu < 1.0:
        milli = math.floor(gpu * GPU_MILLI + 0.5)
        for g in range(gpu_free.shape[1]):
            if gpu_free[k, g] >= milli - FIT_EPS:
                gpu_free[k, g] -= milli
                return
        return
    need = int(math.floor(gpu + 0.5))
    for g in range(gpu_free.shape[1]):
        if need > 0 and gpu_free[k, g] >= GPU_MILLI - FIT_EPS:
            gpu_free[k, g] -= GPU_MILLI
            need -= 1
