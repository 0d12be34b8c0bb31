"""The scoring placer: kube-scheduler's filter / score / weighted-sum cycle as a `Placer`.

Registered as ``scoring``. Scenario parameters (``scheduler.placer.params``):

- ``scorers``: score plugin names (default: the seed's eight, `SEED_SCORERS`);
- ``weights``: ``{scorer: weight}``, non-negative, not all zero; unnamed scorers keep the
  seed's "Fixed" weights (1, and 0 for LeastAllocated and RequestedToCapacityRatio);
- ``filters``: filter plugin names (default ResourceFit, NodeLabels, Capability, NotStorageNode);
- ``scorer_params``: ``{scorer: {param: value}}``, e.g. RequestedToCapacityRatio ``shape``;
- ``integer``: Kubernetes' integer arithmetic in the Kubernetes scorers (default true);
- ``compat``: ``skippy`` reproduces Skippy 0.1.1's scores, sums and choices exactly (scores
  0..10, whole-second transfer times, Skippy's rescaling and first-best tie-break; see
  `skippy_compat.py`); default none (the continuous scorers);
- ``pods``: per job class, the images (ranked, size per architecture, required labels), required
  node labels, requested capabilities, data MB per invocation and model MB (see `PodSpec`);
- ``goodput``: fraction of a link's bandwidth a transfer gets (faas-sim: 0.97);
- ``score_bounds``: per class ``{exec_s: [lo, hi], wait_s: [lo, hi]}`` for the seed's score;
- ``percentage_of_nodes_to_score``: kube-scheduler's option (the seed varies it 10-100):
  each cycle scores only the first feasible nodes found, searching round robin from where the
  last cycle stopped (at least 100 nodes; 0 = adaptive); default 100 (all);
- ``compiled``: score with the fused compiled kernel when every scorer has one (default true;
  false runs the numpy plugins, the reference path -- the two give identical runs).

Queue discipline: every waiting job is tried in arrival order and placed on its best node if
one is feasible (kube-scheduler does not block on an unschedulable pod); within one call a
class with no feasible node is not retried. The placer owns the image caches: a placement
pulls the job's image and the class's model onto the node (they stay cached), and its set-up
delay is pull time + model download + data transfer, from the node's bandwidth labels.

The run summary gains ``per_function`` and ``score`` (eq. 2 of Asenov et al., `score.py`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from cluster.model import SimulationSpec
from cluster.policies.base import Placement, PlacementView, Placer
from cluster.policies.registry import register
from cluster.policies.scoring import filters as _filters
from cluster.policies.scoring import scorers as _scorers
from cluster.policies.scoring.framework import (
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
from cluster.policies.scoring.score import Bounds, check_bounds, per_function, seed_score
from cluster.policies.scoring.skippy_compat import check_compat

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
#: Keys a pod description may carry.
_POD_KEYS = {"images", "node_selector", "capabilities", "data_in_mb", "data_out_mb", "model_mb"}


def _values(where: str, v: Any) -> tuple[str, ...]:
    if isinstance(v, str):
        return (v,)
    if isinstance(v, list | tuple) and all(isinstance(x, str) for x in v):
        return tuple(v)
    raise ValueError(f"{where}: expected a label value or a list of them, got {v!r}")


def _non_negative(where: str, v: Any) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected a number, got {v!r}") from None
    if not (math.isfinite(x) and x >= 0):
        raise ValueError(f"{where}: expected a finite, non-negative number, got {v!r}")
    return x


def parse_pod(name: str, raw: Mapping[str, Any]) -> PodSpec:
    """A `PodSpec` from scenario data (request filled in later from the job class)."""
    where = f"pods.{name}"
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where}: expected a mapping, got {raw!r}")
    unknown = set(raw) - _POD_KEYS
    if unknown:
        raise ValueError(
            f"{where}: unknown keys {sorted(unknown)}; expected some of {sorted(_POD_KEYS)}"
        )
    images = []
    for i, img in enumerate(raw.get("images", [])):
        w = f"{where}.images.{i}"
        if not isinstance(img, Mapping) or "name" not in img or "size_mb" not in img:
            raise ValueError(
                f"{w}: expected {{name, size_mb: {{arch: MB}}, requires}}, got {img!r}"
            )
        sizes = img["size_mb"]
        if not isinstance(sizes, Mapping) or not sizes:
            raise ValueError(f"{w}.size_mb: expected {{architecture: MB}}, got {sizes!r}")
        size_mb = {str(a): _non_negative(f"{w}.size_mb.{a}", s) for a, s in sizes.items()}
        requires = {
            str(k): _values(f"{w}.requires.{k}", v)
            for k, v in dict(img.get("requires", {})).items()
        }
        images.append(ImageSpec(str(img["name"]), size_mb, requires))
    selector = {
        str(k): _values(f"{where}.node_selector.{k}", v)
        for k, v in dict(raw.get("node_selector", {})).items()
    }
    caps = {str(k): str(v) for k, v in dict(raw.get("capabilities", {})).items()}
    return PodSpec(
        name=name,
        images=tuple(images),
        node_selector=selector,
        capabilities=caps,
        data_in_mb=_non_negative(f"{where}.data_in_mb", raw.get("data_in_mb", 0.0)),
        data_out_mb=_non_negative(f"{where}.data_out_mb", raw.get("data_out_mb", 0.0)),
        model_mb=_non_negative(f"{where}.model_mb", raw.get("model_mb", 0.0)),
    )


@register("placer", "scoring")
class ScoringPlacer(Placer):
    """Filter feasible nodes, score them with weighted plugins, take the best (seeded ties)."""

    def __init__(
        self,
        scorers: Sequence[str] | None = None,
        weights: Mapping[str, float] | None = None,
        filters: Sequence[str] | None = None,
        scorer_params: Mapping[str, Mapping[str, Any]] | None = None,
        integer: bool = True,
        pods: Mapping[str, Mapping[str, Any]] | None = None,
        goodput: float = 0.97,
        score_bounds: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
        check_scores: bool = True,
        compiled: bool = True,
        percentage_of_nodes_to_score: float = 100.0,
        compat: str | None = None,
    ) -> None:
        self.compat = compat
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
        self.pod_specs = {str(k): parse_pod(str(k), v) for k, v in (pods or {}).items()}
        if not (0 < float(goodput) <= 1):
            raise ValueError(f"goodput: expected a fraction in (0, 1], got {goodput!r}")
        self.goodput = float(goodput)
        self.score_bounds: dict[str, Bounds] = {}
        for name, b in (score_bounds or {}).items():
            if not isinstance(b, Mapping) or set(b) - {"exec_s", "wait_s"}:
                raise ValueError(
                    f"score_bounds.{name}: expected {{exec_s: [lo, hi], wait_s: [lo, hi]}}"
                )
            self.score_bounds[str(name)] = Bounds(
                check_bounds(f"{name}.exec_s", b.get("exec_s", (0.0, 60.0))),
                check_bounds(f"{name}.wait_s", b.get("wait_s", (0.0, 60.0))),
            )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "scorers": list(self.scorer_names),
            "weights": dict(self.weights),
            "filters": list(self.filter_names),
        }

    # -- set-up --------------------------------------------------------------------------

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        class_names = [c.name for c in spec.classes]
        for name in self.pod_specs:
            if name not in class_names:
                raise ValueError(
                    f"pods.{name}: expected the name of a job class ({', '.join(class_names)})"
                )
        self.rng = rng
        self.spec_stop = spec.stop
        self.class_names = class_names
        self.table = NodeTable.from_types(spec.node_types, spec.nodes)
        pods = []
        for c in spec.classes:
            base = self.pod_specs.get(c.name, PodSpec(c.name))
            pods.append(
                PodSpec(
                    c.name,
                    (c.request.cpu, c.request.memory_gb, c.request.gpu),
                    base.images,
                    base.node_selector,
                    base.capabilities,
                    base.data_in_mb,
                    base.data_out_mb,
                    base.model_mb,
                )
            )
        names = sorted(
            {img.name for p in pods for img in p.images}
            | {f"model:{p.name}" for p in pods if p.model_mb > 0}
        )
        self.image_ids = {n: i for i, n in enumerate(names)}
        self.pods: list[CompiledPod] = [compile_pod(p, self.table, self.image_ids) for p in pods]
        self.state = ClusterState.empty(self.table, len(names))
        self.bounds = [self.score_bounds.get(c.name) or _default_bounds(c) for c in spec.classes]
        self.placements = 0
        self.pulls = 0

    # -- decisions -----------------------------------------------------------------------

    def set_view(self, view: PlacementView) -> None:
        """Copy the engine's free resources into the placer's state (the view is not mutated)."""
        st = self.state
        st.free[0], st.free[1], st.free[2] = view.free_cpu, view.free_memory_gb, view.free_gpu
        st.free_slots[:] = view.free_slots
        st.active[:] = view.active

    def setup_seconds(self, pod: CompiledPod, node: int) -> float:
        """Image pull + model download + data transfer time on `node`, seconds."""
        st, table = self.state, self.table
        registry = table.registry_mbps[node] * self.goodput
        storage = table.storage_mbps[node] * self.goodput
        mb = 0.0
        img = int(pod.image[node])
        if img >= 0 and not st.has_image[img, node]:
            mb += float(pod.image_size_mb[node])
        if pod.model_id >= 0 and not st.has_image[pod.model_id, node]:
            mb += pod.spec.model_mb
        seconds = mb * 8.0 / registry if mb else 0.0
        if pod.data_mb:
            seconds += pod.data_mb * 8.0 / storage
        return seconds

    def commit(self, pod: CompiledPod, node: int, request: np.ndarray) -> float:
        """Book a placement in the placer's state; return its set-up delay in seconds."""
        setup_s = self.setup_seconds(pod, node)
        st = self.state
        if int(pod.image[node]) >= 0 and not st.has_image[pod.image[node], node]:
            self.pulls += 1
        st.add_image(int(pod.image[node]), node)
        st.add_image(pod.model_id, node)
        st.free[:, node] -= request
        st.free_slots[node] -= 1.0
        self.placements += 1
        return setup_s

    def place(self, view: PlacementView) -> list[Placement]:
        if view.queue.size == 0:
            return []
        self.set_view(view)
        out: list[Placement] = []
        blocked: set[tuple[int, float, float, float]] = set()
        for i, job in enumerate(view.queue.tolist()):
            c = int(view.class_index[i])
            request = np.array(
                [view.request_cpu[i], view.request_memory_gb[i], view.request_gpu[i]]
            )
            key = (c, float(request[0]), float(request[1]), float(request[2]))
            if key in blocked:
                continue
            pod = self.pods[c]
            k = self.framework.select(Cycle(self.table, self.state, pod, request), self.rng)
            if k < 0:
                blocked.add(key)
                continue
            out.append(Placement(int(job), k, setup_s=self.commit(pod, k, request)))
        return out

    # -- results -------------------------------------------------------------------------

    def extra_summary(self, jobs: Any, summary: dict[str, Any]) -> dict[str, Any]:
        """`per_function` (mean_exec_s, mean_wait_s, success_ratio) and eq. 2's `score`."""
        if not isinstance(jobs, pa.Table) or jobs.num_rows == 0:
            return {}
        stop = self.spec_stop
        arrival = jobs["arrival_s"].to_numpy()
        if stop.time_s is not None:
            in_window = (arrival >= stop.warmup_s) & (arrival <= stop.time_s)
        else:
            in_window = jobs["job"].to_numpy() >= stop.warmup_jobs
        stats = per_function(jobs, self.class_names, in_window)
        bounds = dict(zip(self.class_names, self.bounds, strict=True))
        for name, s in stats.items():
            s["exec_bounds_s"] = list(bounds[name].exec_s)
            s["wait_bounds_s"] = list(bounds[name].wait_s)
        return {
            "per_function": stats,
            "score": seed_score(stats, bounds),
            "image_pulls": self.pulls,
        }


def _default_bounds(jc: Any) -> Bounds:
    """Bounds when the scenario names none: exec [0, 2 x the largest mean run time], wait
    [0, the class timeout] (60 s when it has none)."""
    means = [d.mean for d in jc.runtime_by_node_type.values()] or [jc.size.mean]
    hi = 2.0 * max(means) if max(means) > 0 else 1.0
    wait_hi = jc.timeout_s if math.isfinite(jc.timeout_s) else 60.0
    return Bounds((0.0, hi), (0.0, wait_hi))
