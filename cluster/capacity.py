"""Which node types a run may hold, and whether a request fits an empty node of one (the
engine's admission check and the summary's count of jobs no node could ever run)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies import compiled

IntArray = npt.NDArray[np.int64]


def node_types_of_run(spec: SimulationSpec, rows_types: Sequence[int] | IntArray = ()) -> list[int]:
    """The node types (indices) a run may hold: its static nodes', the rentable ones, those
    its timeline's `join` events add and those of the node rows it has handed out
    (`rows_types`)."""
    index = {t.name: i for i, t in enumerate(spec.node_types)}
    types = {index[name] for name in spec.nodes}
    types |= {i for i, t in enumerate(spec.node_types) if t.rentable}
    types |= {
        index[e.node_type]
        for e in spec.events
        if e.action == "join" and e.node_type is not None and e.node_type in index
    }
    types |= {int(t) for t in rows_types if t >= 0}
    return sorted(types)


def fits_a_node_type(
    spec: SimulationSpec, types: Sequence[int], cpu: float, mem: float, gpu: float
) -> bool:
    """Whether an empty node of one of `types` could hold the request (cores, GB, GPUs)."""
    for t in types:
        nt = spec.node_types[t]
        if compiled.holds_request(
            float(nt.cpu), float(nt.memory_gb), float(nt.gpu), float(nt.max_jobs), cpu, mem, gpu
        ):
            return True
    return False
