"""Node failures and the scenario's timeline, as engine data (docs/faults.md).

The compiled loop (`clusteremu.cluster.kernel`) owns every fault event: random failures and
recoveries are heap events of the node (`Event.FAIL`, `Event.RECOVER`), timeline events a
sorted array it walks beside the arrivals. This module prepares their data:

- `timeline_array(spec)`: the `timeline` rows (`clusteremu.cluster.layout.TL`) of a scenario;
- `FaultDraws`: each node's up and down times, drawn ahead in blocks of `FAULT_DRAWS` from
  the node's own streams, keyed by (node type name, purpose, the node's ordinal among the
  nodes of its type): adding a failure model to a type changes no other draw.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.jobs import Purpose, name_key
from clusteremu.cluster.layout import TL, Action
from clusteremu.cluster.model import SimulationSpec

FloatArray = npt.NDArray[np.float64]

#: Up (and down) times drawn ahead per node; the loop asks for more when they run out.
FAULT_DRAWS = 16


def timeline_array(spec: SimulationSpec) -> FloatArray:
    """(len(TL), events): the timeline by time (ties keep the scenario's order)."""
    types = {t.name: i for i, t in enumerate(spec.node_types)}
    classes = {c.name: i for i, c in enumerate(spec.classes)}
    events = sorted(spec.events, key=lambda e: e.at_s)  # stable: list order on ties
    out = np.full((len(TL), len(events)), -1.0)
    for e, ev in enumerate(events):
        out[TL.AT, e] = ev.at_s
        out[TL.ACTION, e] = Action[ev.action.upper()]
        out[TL.NODE, e] = -1 if ev.node is None else ev.node
        out[TL.TYPE, e] = -1 if ev.node_type is None else types[ev.node_type]
        out[TL.COUNT, e] = ev.count
        out[TL.CLS, e] = -1 if ev.cls is None else classes[ev.cls]
        out[TL.P0, e] = ev.params[0] if ev.params else math.nan
        out[TL.P1, e] = ev.params[1] if len(ev.params) > 1 else math.nan
    return out


class FaultDraws:
    """The up and down times of every node row with a failure model, from its own streams.

    A node's streams are keyed by its type's name, the purpose (up or down times) and its
    ordinal among the node rows of its type (static nodes first, then rented ones), so a
    node's failures do not depend on any other draw of the replication.
    """

    def __init__(self, spec: SimulationSpec, seq: np.random.SeedSequence) -> None:
        self.spec = spec
        self.seq = seq
        self._rngs: dict[tuple[int, int], np.random.Generator] = {}
        self._ordinal: dict[int, int] = {}
        self._seen: dict[int, int] = {}

    @property
    def enabled(self) -> bool:
        return any(t.failures is not None for t in self.spec.node_types)

    def width(self) -> int:
        """Columns of `fault_draws` (up times, then down times); 0 without failure models."""
        return 2 * FAULT_DRAWS if self.enabled else 0

    def add_node(self, k: int, type_index: int) -> None:
        """Node row k of type `type_index` joins (its ordinal among its type's rows)."""
        self._ordinal[k] = self._seen.get(type_index, 0)
        self._seen[type_index] = self._ordinal[k] + 1

    def _rng(self, k: int, type_index: int, purpose: Purpose) -> np.random.Generator:
        key = (k, int(purpose))
        rng = self._rngs.get(key)
        if rng is None:
            seq = self.seq
            child = np.random.SeedSequence(
                entropy=seq.entropy,
                spawn_key=(
                    *seq.spawn_key,
                    int(purpose),
                    name_key(self.spec.node_types[type_index].name),
                    self._ordinal[k],
                ),
                pool_size=seq.pool_size,
            )
            rng = self._rngs[key] = np.random.default_rng(child)
        return rng

    def next_block(self, k: int, type_index: int, up: bool) -> FloatArray:
        """Node k's next `FAULT_DRAWS` up (or down) times, s; the engine stores them in its
        row of `fault_draws`: up times in the first half, down times in the second."""
        failures = self.spec.node_types[type_index].failures
        if failures is None:
            raise ValueError(f"node type {type_index} has no failure model")
        dist, purpose = (
            (failures.up, Purpose.FAILURE_UP) if up else (failures.down, Purpose.FAILURE_DOWN)
        )
        values = dist.sample(self._rng(k, type_index, purpose), FAULT_DRAWS)
        return np.asarray(values, dtype=np.float64)


__all__ = ["FAULT_DRAWS", "FaultDraws", "timeline_array"]
