"""The engine's fault feed: each node's random up and down times, drawn in blocks from the
node's own streams (`clusteremu.cluster.faults.FaultDraws`), written into the state's
`fault_draws` rows, refilled when the loop has used a block, and the static nodes' first
failures scheduled."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster import kernel
from clusteremu.cluster.engine.store import StateStore
from clusteremu.cluster.faults import FaultDraws, timeline_array
from clusteremu.cluster.layout import IS, NI
from clusteremu.cluster.model import SimulationSpec

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class FaultFeed:
    """The failure draws of one replication (`seq`: its seed sequence)."""

    def __init__(self, spec: SimulationSpec, seq: np.random.SeedSequence) -> None:
        self.spec = spec
        self.draws = FaultDraws(spec, seq)

    def initial_arrays(
        self, nodes_f: FloatArray, nodes_i: IntArray, istate: IntArray
    ) -> dict[str, Any]:
        """The fault arrays of a new state: the static nodes' first up and down times and
        the timeline (and the run's fault flags in `istate`).

        Each static node with a failure model fails first after its first up time (the
        `Event.FAIL` entries are pushed by `first_failures` once the state exists)."""
        spec = self.spec
        istate[IS.FAULTS] = int(spec.has_faults)
        istate[IS.ON_FAILURE] = int(spec.on_node_failure == "fail")
        istate[IS.REDRAW] = int(spec.restart_work == "redraw")
        draws = np.zeros((nodes_f.shape[1], self.draws.width()))
        # Without a failure model nothing draws (a node's ordinal only keys its streams).
        for k in range(len(spec.nodes) if self.draws.enabled else 0):
            self._add(draws, nodes_i, k, int(nodes_i[NI.NODE_TYPE, k]))
        return {"fault_draws": draws, "timeline": timeline_array(spec)}

    def first_failures(self, store: StateStore) -> None:
        """Schedule each static node's first random failure (after its first up time)."""
        s = store.s
        for k in np.flatnonzero(s.nodes_i[NI.FAILS, : len(self.spec.nodes)]).tolist():
            kernel.schedule_fault_entry(store.t, k, 0.0, int(kernel.Event.FAIL))

    def add_node(self, store: StateStore, k: int, node_type: int) -> None:
        """A node row just handed out (a rented node): its streams, and its first draws
        when it can fail."""
        s = store.s
        self._add(s.fault_draws, s.nodes_i, k, node_type)

    def refill(self, store: StateStore) -> None:
        """A node's up (or down) times ran out (the loop asks): draw the next block and
        schedule its event."""
        s = store.s
        k, kind = int(s.istate[IS.DRAW_NODE]), int(s.istate[IS.DRAW_KIND])
        self._store(s.fault_draws, s.nodes_i, k, up=kind == int(kernel.Event.FAIL))
        kernel.schedule_fault_entry(store.t, k, store.now, kind)

    def _add(self, draws: FloatArray, nodes_i: IntArray, k: int, node_type: int) -> None:
        self.draws.add_node(k, node_type)
        if nodes_i[NI.FAILS, k]:
            for up in (True, False):
                self._store(draws, nodes_i, k, up)

    def _store(self, draws: FloatArray, nodes_i: IntArray, k: int, up: bool) -> None:
        """Node k's next block of up (or down) times into its row; its cursor to 0."""
        block = self.draws.next_block(k, int(nodes_i[NI.NODE_TYPE, k]), up)
        lo = 0 if up else block.size
        draws[k, lo : lo + block.size] = block
        nodes_i[NI.UP_POS if up else NI.DOWN_POS, k] = 0
