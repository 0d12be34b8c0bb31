"""Filter plugins: hard constraints, each a boolean mask over all nodes.

- `ResourceFit` (kube-scheduler NodeResourcesFit; Skippy PodFitsResourcesPred): free cores
  and memory cover the request, a GPU has the milli-GPU of a shared request (or enough GPUs
  are wholly free), a worker slot is free, the node is up.
- `NodeLabels` (kube NodeAffinity / nodeSelector): the node carries every required label
  (one of the allowed values), e.g. ``accelerator: [gpu]``.
- `Capability`: the node can run one of the pod's images (a build for its architecture and
  the labels the image requires, e.g. a GPU or TPU; faas-sim's image/device matching).
- `NotStorageNode` (Skippy CheckNodeLabelPresencePred on ``data.skippy.io/storage``): nodes
  labelled ``role: storage`` host data, never functions.

Static masks (labels, capability, storage) are precomputed per pod and node type.
"""

from __future__ import annotations

import numpy as np

from clusteremu.cluster.layout import GPU_MILLI
from clusteremu.cluster.policies.scoring.framework import (
    FIT_EPS,
    BoolArray,
    Cycle,
    FilterPlugin,
    register_filter,
)


@register_filter("ResourceFit")
class ResourceFit(FilterPlugin):
    """Free cpu, memory and gpu >= the request, at least one free worker slot, node up."""

    def filter(self, cycle: Cycle) -> BoolArray:
        free, req = cycle.state.free, cycle.request
        return (
            (free[0] >= req[0] - FIT_EPS)
            & (free[1] >= req[1] - FIT_EPS)
            & gpu_fit(cycle.state.gpu_free, float(req[2]))
            & (cycle.state.free_slots >= 1.0)
            & cycle.state.active
        )


def gpu_fit(gpu_free: np.ndarray, gpu: float) -> BoolArray:
    """Per node: room for a GPU request in the free milli-GPU of each GPU (n, GPUs): a share
    (< 1) fits one GPU with that much free; n >= 1 GPUs need n wholly free GPUs (the
    engine's rule, `clusteremu.cluster.fit_index.gpu_fits`)."""
    if gpu <= 0.0:
        return np.ones(gpu_free.shape[0], dtype=bool)
    if gpu < 1.0:
        milli = np.floor(gpu * GPU_MILLI + 0.5)
        return np.any(gpu_free >= milli - FIT_EPS, axis=1)
    need = int(np.floor(gpu + 0.5))
    return np.count_nonzero(gpu_free >= GPU_MILLI - FIT_EPS, axis=1) >= need


@register_filter("NodeLabels")
class NodeLabels(FilterPlugin):
    """Required labels (the pod's `node_selector`): every key present with an allowed value."""

    static = True

    def filter(self, cycle: Cycle) -> BoolArray:
        return cycle.pod.selector_ok


@register_filter("Capability")
class Capability(FilterPlugin):
    """The node can run one of the pod's ranked images (architecture and accelerator)."""

    static = True

    def filter(self, cycle: Cycle) -> BoolArray:
        return cycle.pod.runnable


@register_filter("NotStorageNode")
class NotStorageNode(FilterPlugin):
    """Storage nodes (label ``role: storage``) never host jobs."""

    static = True

    def filter(self, cycle: Cycle) -> BoolArray:
        return ~cycle.table.is_storage


#: The filters a scoring placer runs by default, in order.
DEFAULT_FILTERS: tuple[str, ...] = ("ResourceFit", "NodeLabels", "Capability", "NotStorageNode")
