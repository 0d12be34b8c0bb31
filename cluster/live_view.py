"""`LiveView`: the engine's reusable `PlacementView` (read-only views of its arrays,
re-filled at each call), and the node arrays that change only when nodes are rented."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from cluster.layout import (
    CI,
    FS,
    IS,
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
    jobs' classes and requests and the `active` mask are gathered on first read, and
    `running_by_class` is counted on its first read in a call (then kept for the call).
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
        put(self, "_running", None)  # running_by_class of this call, once read
        put(self, "_ended", 0)  # every job row below this one has ended

    def refill(self, n: int) -> LiveView:
        """Ready the view for a new call with `n` waiting jobs gathered by the loop:
        `running_by_class` is counted again on the call's first read."""
        d = self.__dict__
        d["_n"] = n
        d["_running"] = None
        return self

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
        """(node rows, classes): jobs of each class holding resources on each node now,
        counted at the first read in a call (read-only)."""
        d = self.__dict__
        got = d["_running"]
        if got is None:
            got, d["_ended"] = running_by_class(d["_s"], d["_ended"])
            d["_running"] = got
        return got


def running_by_class(s: EngineState, ended: int = 0) -> tuple[IntArray, int]:
    """(node rows, classes): how many placed jobs of each class run or set up (state
    RUNNING, i.e. hold their request) on each node row; read-only.

    Jobs arrive in row order, so only the rows from `ended` (every row below it has ended:
    done or failed) up to the next arrival are read. Returns the counts and the new such
    row, for the next count to start from. A malleable pool's jobs (RUNNING too, but on no
    node: their node row is never set) count nowhere.
    """
    hi = int(s.istate[IS.NEXT_ARRIVAL])
    state = s.jobs_i[JI.STATE, ended:hi]
    live = (state != JobState.DONE) & (state != JobState.FAILED)
    first = int(np.argmax(live)) if live.size and live.any() else live.size
    ended += first
    running = state[first:] == JobState.RUNNING
    node = s.jobs_i[JI.NODE, ended:hi][running]
    cls = s.jobs_i[JI.CLS, ended:hi][running]
    n_nodes, n_classes = s.nodes_f.shape[1], s.classes_i.shape[1]
    counts = np.bincount(node * n_classes + cls, minlength=n_nodes * n_classes).astype(
        np.int64, copy=False
    )
    counts = counts.reshape(n_nodes, n_classes)
    counts[:, s.classes_i[CI.POOL] >= 0] = 0  # a pool's jobs are on no node
    counts.flags.writeable = False
    return counts, ended


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
