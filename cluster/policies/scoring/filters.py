"""Filter plugins: hard constraints, each a boolean mask over all nodes.

- `ResourceFit` (kube-scheduler NodeResourcesFit; Skippy PodFitsResourcesPred): free cores,
  memory and GPUs cover the request, a worker slot is free, the node is up.
- `NodeLabels` (kube NodeAffinity / nodeSelector): the node carries every required label
  (one of the allowed values), e.g. ``accelerator: [gpu]``.
- `Capability`: the node can run one of the pod's images (a build for its architecture and
  the labels the image requires, e.g. a GPU or TPU; faas-sim's image/device matching).
- `NotStorageNode` (Skippy CheckNodeLabelPresencePred on ``data.skippy.io/storage``): nodes
  labelled ``role: storage`` host data, never functions.

Static masks (labels, capability, storage) are precomputed per pod and node type.
"""

from __future__ import annotations

from cluster.policies.scoring.framework import (
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
            & (free[2] >= req[2] - FIT_EPS)
            & (cycle.state.free_slots >= 1.0)
            & cycle.state.active
        )


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
