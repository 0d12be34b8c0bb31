"""`LiveView`: the engine's reusable `PlacementView` (read-only views of its arrays,
re-filled at each call), and the node arrays that change only when nodes are rented."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.layout import (
    CI,
    FS,
    IS,
    JF,
    JI,
    NF,
    NI,
    JobState,
    NodeStatus,
)
from clusteremu.cluster.policies.base import (
    PlacementView,
)
from clusteremu.cluster.state import (
    EngineState,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


# Plain ints for the per-call path (reading an IntEnum member costs a dictionary lookup).
_NOW, _STATUS, _UP = int(FS.NOW), int(NI.STATUS), int(NodeStatus.UP)
_CHANGES = int(IS.STATUS_CHANGES)
#: `job_column` names: (table, row) of the engine's job arrays.
_JOB_COLUMNS = {
    "arrival_s": ("f", int(JF.ARRIVAL)),
    "size": ("f", int(JF.SIZE)),
    "estimate_s": ("f", int(JF.ESTIMATE)),
    "start_s": ("f", int(JF.START)),
    "node": ("i", int(JI.NODE)),
    "state": ("i", int(JI.STATE)),
}
#: Queue lengths up to this keep their read-only slices for later calls (longer queues are
#: sliced again at each call, so the kept slices stay few).
KEEP_SLICES = 1024


class LiveView(PlacementView):
    """The engine's reusable `PlacementView`: re-filled at each call, valid during it.

    Free resources and node statuses are read-only views of the engine's arrays (no
    copies); the queued jobs, their classes and requests are read-only slices of what the
    loop gathered (made once per queue length and kept); `active` is recomputed only after
    the loop changed a node's status (the engine's own node operations build a new view);
    `running_by_class` is counted on its first read in a call (then kept for the call).
    Every field is a plain attribute but `time_s` and `running_by_class`: a placer pays
    only for what it reads, and little for that.
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
            ("node_status", s.nodes_i[_STATUS]),
        ):
            view = array.view()
            view.flags.writeable = False
            put(self, name, view)
        for name in ("capacity_cpu", "capacity_memory_gb", "capacity_gpu", "speed", "node_type"):
            put(self, name, static[name])
        put(self, "_s", s)
        put(self, "_slices", {})  # queue length -> its fields' read-only slices
        put(self, "_n", -1)
        put(self, "_changes", -1)  # the loop's STATUS_CHANGES when `active` was computed
        put(self, "_running", None)  # running_by_class of this call, once read
        put(self, "_ended", 0)  # every job row below this one has ended
        put(self, "_rows", None)  # fitting_nodes' output rows, once used
        put(self, "_fit_entry", None)  # fitting_nodes' compiled entry, once used
        put(self, "_mask_entry", None)  # fit_mask's compiled entry, once used

    def refill(self, n: int) -> LiveView:
        """Ready the view for a new call with `n` waiting jobs gathered by the loop:
        `running_by_class` is counted again on the call's first read."""
        d = self.__dict__
        s = d["_s"]
        d["_running"] = None
        if n != d["_n"]:
            d["_n"] = n
            d.update(d["_slices"].get(n) or self._slice(n))
        changes = s.istate.item(_CHANGES)
        if changes != d["_changes"]:
            d["_changes"] = changes
            active = s.nodes_i[_STATUS] == _UP
            active.flags.writeable = False
            d["active"] = active
        return self

    def _slice(self, n: int) -> dict[str, npt.NDArray[Any]]:
        """The first `n` entries of the loop's gathered jobs, read-only, by field."""
        s = self.__dict__["_s"]
        got = {
            "queue": s.members[:n],
            "class_index": s.wait_i[:n],
            "request_cpu": s.wait_f[0, :n],
            "request_memory_gb": s.wait_f[1, :n],
            "request_gpu": s.wait_f[2, :n],
        }
        for array in got.values():
            array.flags.writeable = False
        if n <= KEEP_SLICES:
            self.__dict__["_slices"][n] = got
        return got

    def fitting_nodes(self, i: int) -> list[int]:
        """`PlacementView.fitting_nodes`, read from the engine's node rows through the
        compiled function's entry for their types (no type dispatch: about 0.3 us a call
        on a hundred nodes)."""
        d = self.__dict__
        if not 0 <= i < d["_n"]:
            raise IndexError(f"waiting job {i} of {d['_n']}")
        rows, entry = d["_rows"], d["_fit_entry"]
        if entry is None:
            from clusteremu.cluster.fit_index import (
                fitting_waiting,  # compiled: imported on first use
            )
            from clusteremu.cluster.jit import direct_entry

            s = d["_s"]
            rows = d["_rows"] = np.empty(s.nodes_f.shape[1], dtype=np.int64)
            arrays = (s.nodes_f, s.nodes_i, s.gpu_free, s.wait_f)
            entry = direct_entry(fitting_waiting, *arrays, i, rows)
            entry = d["_fit_entry"] = partial(entry, *arrays)
        return rows[: entry(i, rows)].tolist()  # type: ignore[no-any-return]

    def fit_mask(self, i: int) -> npt.NDArray[np.bool_]:
        """`PlacementView.fit_mask`, read from the engine's node rows through the compiled
        function's entry for their types (a new array each call, the caller's)."""
        d = self.__dict__
        if not 0 <= i < d["_n"]:
            raise IndexError(f"waiting job {i} of {d['_n']}")
        entry = d["_mask_entry"]
        s = d["_s"]
        out = np.empty(s.nodes_f.shape[1], dtype=np.bool_)
        if entry is None:
            from clusteremu.cluster.fit_index import (
                fit_mask_waiting,  # compiled: imported on first use
            )
            from clusteremu.cluster.jit import direct_entry

            arrays = (s.nodes_f, s.nodes_i, s.gpu_free, s.wait_f)
            entry = direct_entry(fit_mask_waiting, *arrays, i, out)
            entry = d["_mask_entry"] = partial(entry, *arrays)
        entry(i, out)
        return out

    def job_column(self, name: str) -> npt.NDArray[Any]:
        """`PlacementView.job_column`: a read-only view of the engine's job row."""
        s = self.__dict__["_s"]
        rows = _JOB_COLUMNS.get(name)
        if rows is None:
            raise KeyError(f"job column {name!r}; expected one of {', '.join(_JOB_COLUMNS)}")
        table, row = rows
        view = (s.jobs_f if table == "f" else s.jobs_i)[row].view()
        view.flags.writeable = False
        return view

    @property
    def time_s(self) -> float:
        return self.__dict__["_s"].fstate.item(_NOW)  # type: ignore[no-any-return]

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
