"""Builders for small hand-computed clusters and scheduling cycles."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from clusteremu.cluster.model import NodeType
from clusteremu.cluster.policies.scoring.framework import (
    ClusterState,
    Cycle,
    ImageSpec,
    NodeTable,
    PodSpec,
    compile_pod,
)


def node(name: str, cpu: float, mem: float, gpu: float = 0.0, **labels: str) -> NodeType:
    return NodeType(
        name,
        cpu=cpu,
        memory_gb=mem,
        gpu=gpu,
        labels={k.replace("__", "."): v for k, v in labels.items()},
    )


def cluster(
    types: Sequence[NodeType], nodes: Sequence[str] | None = None, pods: Sequence[PodSpec] = ()
) -> tuple[NodeTable, ClusterState, dict[str, int]]:
    """A node table (one node per type unless `nodes` is given) and an empty state."""
    table = NodeTable.from_types(types, [t.name for t in types] if nodes is None else nodes)
    names = sorted(
        {img.name for p in pods for img in p.images}
        | {f"model:{p.name}" for p in pods if p.model_mb > 0}
    )
    ids = {n: i for i, n in enumerate(names)}
    return table, ClusterState.empty(table, len(names)), ids


def cycle(
    table: NodeTable,
    state: ClusterState,
    pod: PodSpec,
    ids: dict[str, int] | None = None,
    nodes: Sequence[int] | None = None,
) -> Cycle:
    """A cycle whose feasible set is `nodes` (default: all nodes)."""
    c = Cycle(table, state, compile_pod(pod, table, ids or {}))
    c.nodes = np.arange(table.n) if nodes is None else np.asarray(nodes, dtype=np.int64)
    return c


def image(name: str, mb: float, **requires: Sequence[str]) -> ImageSpec:
    return ImageSpec(name, {"x86": mb, "aarch64": mb}, {k: tuple(v) for k, v in requires.items()})
