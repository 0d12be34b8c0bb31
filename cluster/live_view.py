"""`LiveView`: the engine's reusable `PlacementView` (read-only views of its arrays,
re-filled at each call), and the node arrays that change only when nodes are rented."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from cluster.layout import (
    FS,
    JI,
    NF,
    NI,
    JobState,
    NodeStatus,
)
from cluster.policies.base import (
    PlacementView,
)
from cluster.state import (
    EngineState,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class LiveView(PlacementView):
    """The engine's reusable `PlacementView`: re-filled at each call, valid during it.

    Free resources are read-only views of the engine's arrays (no copies); the queued
    jobs' classes and requests and the `active` mask are gathered on first read.
    """

    def __init__(self, s: EngineState, static: dict[str, npt.NDArray[Any]]) -> None:
        put = object.__setattr__
        for name, array in (
            ("free_cpu", s.nodes_f[NF.FREE_CPU]),
            ("free_memory_gb", s.nodes_f[NF.FREE_MEM]),
            ("free_gpu", s.nodes_f[NF.FREE_GPU]),
            ("free_slots", s.nodes_f[NF.FREE_SLOTS]),
            ("gpu_free_milli", s.gpu_free),
            ("cached", s.cached if s.world_i.shape[0] else np.zeros((0, 0))),
        ):
            view = array.view()
            view.flags.writeable = False
            put(self, name, view)
        for name in ("capacity_cpu", "capacity_memory_gb", "capacity_gpu", "speed", "node_type"):
            put(self, name, static[name])
        put(self, "_s", s)
        put(self, "_slices", {})
        put(self, "_n", 0)

    def _slice(self, key: int, array: npt.NDArray[Any]) -> Any:
        """The first `_n` entries of `array`, read-only (one slice object per length)."""
        d = self.__dict__
        n = d["_n"]
        slices = d["_slices"]
        got = slices.get((key, n))
        if got is None:
            got = slices[(key, n)] = array[:n]
            got.flags.writeable = False
        return got

    @property
    def time_s(self) -> float:
        return float(self.__dict__["_s"].fstate[FS.NOW])

    @property
    def queue(self) -> IntArray:
        return self._slice(0, self.__dict__["_s"].members)

    @property
    def class_index(self) -> IntArray:
        return self._slice(1, self.__dict__["_s"].wait_i)

    @property
    def request_cpu(self) -> FloatArray:
        return self._slice(2, self.__dict__["_s"].wait_f[0])

    @property
    def request_memory_gb(self) -> FloatArray:
        return self._slice(3, self.__dict__["_s"].wait_f[1])

    @property
    def request_gpu(self) -> FloatArray:
        return self._slice(4, self.__dict__["_s"].wait_f[2])

    @property
    def active(self) -> npt.NDArray[np.bool_]:
        """Node rows that are up now (computed at each read: nodes boot and leave)."""
        return self.__dict__["_s"].nodes_i[NI.STATUS] == NodeStatus.UP

    @property
    def node_status(self) -> IntArray:
        """Every node row's `NodeStatus` now (read-only)."""
        status = self.__dict__["_s"].nodes_i[NI.STATUS].view()
        status.flags.writeable = False
        return status

    @property
    def running_by_class(self) -> IntArray:
        """(node rows, classes): jobs of each class running (or setting up) on each node,
        counted from the jobs' states at this read (nothing is kept between calls)."""
        s = self.__dict__["_s"]
        n_nodes, n_classes = s.nodes_f.shape[1], s.classes_i.shape[1]
        running = np.flatnonzero(s.jobs_i[JI.STATE] == JobState.RUNNING)
        cell = s.jobs_i[JI.NODE, running] * n_classes + s.jobs_i[JI.CLS, running]
        counts = np.bincount(cell, minlength=n_nodes * n_classes)
        out = counts[: n_nodes * n_classes].reshape(n_nodes, n_classes).astype(np.int64)
        out.flags.writeable = False
        return out


def static_node_arrays(nodes_f: FloatArray, nodes_i: IntArray) -> dict[str, npt.NDArray[Any]]:
    """Node arrays that change only when nodes are rented, as read-only copies."""
    arrays: dict[str, npt.NDArray[Any]] = {
        "capacity_cpu": nodes_f[NF.CAP_CPU].copy(),
        "capacity_memory_gb": nodes_f[NF.CAP_MEM].copy(),
        "capacity_gpu": nodes_f[NF.CAP_GPU].copy(),
        "speed": nodes_f[NF.SPEED].copy(),
        "node_type": nodes_i[NI.NODE_TYPE].copy(),
        "active": nodes_i[NI.STATUS] == NodeStatus.UP,
    }
    for array in arrays.values():
        array.flags.writeable = False
    return arrays
