"""`ActorSet`: the named actors of one run, started once and reused by its replications.

Exact mode runs one `EngineActor` (`clusteremu/<run>/engine`): the single-process engine,
hosted. Windowed (and real-time) mode runs an `ArrivalActor` (`clusteremu/<run>/arrivals`),
a `SchedulerActor` (`.../scheduler`, only when it routes between several node shards),
node shards (`.../node-shard-<i>`, contiguous slices of the nodes) and one shard per
malleable pool (`.../pool-shard-<pool>`). Starting an actor costs a process, its imports
and the compiled kernel loaded from numba's cache (about a second on a laptop core), so
the replications of a run reuse them: before each replication every actor is `reset` to
it, as Ray Tune's `reuse_actors` does for trials. A reset actor is the freshly built one
(`reset` re-runs `__init__`): results do not depend on reuse.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import ray

from clusteremu.actors.arrivals import ArrivalActor
from clusteremu.actors.engine_host import EngineActor
from clusteremu.actors.node_shard import NodeShardActor
from clusteremu.actors.options import RayRunOptions
from clusteremu.actors.scheduler import SchedulerActor
from clusteremu.cluster.model import SimulationSpec


def node_slices(n_nodes: int, shards: int) -> list[np.ndarray]:
    """Contiguous node slices, one per shard (no empty slice)."""
    return [s for s in np.array_split(np.arange(n_nodes, dtype=np.int64), shards) if s.size]


def type_mix(spec: SimulationSpec, nodes: np.ndarray) -> str:
    """`small x8, large x4`: the node types of a slice, for actor labels."""
    names = [spec.nodes[int(k)] for k in nodes]
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{t} x{c}" for t, c in counts.items())


#: Prefix of the Ray resources that mark machines standing in for a node type.
TYPE_RESOURCE_PREFIX = "node-type-"
#: How much of such a resource a shard takes (many shards fit on one machine).
TYPE_RESOURCE_SHARE = 0.001


def type_resource(spec: SimulationSpec, nodes: np.ndarray, available: set[str]) -> str | None:
    """`node-type-<name>` when every node of the slice has type <name> and the Ray
    cluster offers that resource (see monitoring/fake-multinode.yaml), else None."""
    names = {spec.nodes[int(k)] for k in nodes}
    if len(names) != 1:
        return None
    resource = TYPE_RESOURCE_PREFIX + names.pop()
    return resource if resource in available else None


class ActorSet:
    """The actors of run `run` (Ray must be initialised); `start` them for a replication,
    `close` them when the run is over."""

    def __init__(self, spec: SimulationSpec, options: RayRunOptions, run: str) -> None:
        self.spec, self.options, self.run = spec, options, run
        self.slices = node_slices(len(spec.nodes), options.shards)
        self.shard_of_node = np.zeros(len(spec.nodes), dtype=np.int64)
        for i, nodes in enumerate(self.slices):
            self.shard_of_node[nodes] = i
        self.class_pool = np.array(
            [spec.pool_index(c.pool) if c.pool else -1 for c in spec.classes], dtype=np.int64
        )
        self.engine: Any = None
        self.arrivals: Any = None
        self.scheduler: Any = None
        self.shards: list[Any] = []
        self.pool_shards: dict[int, Any] = {}
        self.mode: str | None = None
        self.replications = 0

    def demands(self, exact: bool) -> list[dict[str, float]]:
        """The Ray resources each actor of the mode asks for (all alive at once): exact
        mode's engine, or windowed mode's node shards and pool shards (the arrival stream
        and the router ask for none). A `node-type-` pin takes a share of one, so it never
        decides whether the run fits."""
        res, cpus = self.options.shard_resources, self.options.shard_cpus
        if exact:
            return [{"CPU": cpus, **(res[0] if res else {})}]
        shards = [
            {"CPU": cpus, **(res[i % len(res)] if res else {})} for i in range(len(self.slices))
        ]
        pools = [{"CPU": cpus} for p in range(len(self.spec.pools)) if np.any(self.class_pool == p)]
        return shards + pools

    @property
    def all(self) -> list[Any]:
        """Every live actor of the set."""
        return [
            a
            for a in [
                self.engine,
                self.arrivals,
                self.scheduler,
                *self.shards,
                *self.pool_shards.values(),
            ]
            if a is not None
        ]

    def start(self, replication: int, exact: bool) -> None:
        """Start (or reset) every actor of the mode for `replication`."""
        mode = "exact" if exact else "windowed"
        if self.mode not in (None, mode):
            self.close()  # the actors of another mode are not the ones this mode needs
        self.mode = mode
        if exact:
            self._start_engine(replication)
        else:
            self._start_windowed(replication)
        self.replications += 1

    def _start_engine(self, replication: int) -> None:
        args = (self.spec, replication, f"{self.run}/engine")
        if self.engine is not None:
            self.engine.reset.remote(*args)
            return
        opts: dict[str, Any] = {
            "name": f"clusteremu/{self.run}/engine",
            "num_cpus": self.options.shard_cpus,
        }
        if self.options.shard_resources:  # pinned like the first node shard
            opts["resources"] = dict(self.options.shard_resources[0])
        self.engine = EngineActor.options(**opts).remote(*args)

    def _start_windowed(self, replication: int) -> None:
        spec, run = self.spec, self.run
        reuse = self.arrivals is not None
        if reuse:
            self.arrivals.reset.remote(spec, replication)
        else:
            self.arrivals = ArrivalActor.options(name=f"clusteremu/{run}/arrivals").remote(
                spec, replication
            )
        routed = len(self.slices) > 1
        if routed:
            scheduler_args = (spec, replication, self.slices, f"{run}/scheduler")
            if reuse:
                self.scheduler.reset.remote(*scheduler_args)
            else:
                self.scheduler = SchedulerActor.options(name=f"clusteremu/{run}/scheduler").remote(
                    *scheduler_args
                )
        res = self.options.shard_resources
        available = set(ray.cluster_resources()) if not (res or reuse) else set()
        for i, nodes in enumerate(self.slices):
            label = f"{run}/node-shard-{i}: {type_mix(spec, nodes)}"
            args = (spec, replication, i, nodes, label, routed)
            if reuse:
                self.shards[i].reset.remote(*args)
                continue
            opts: dict[str, Any] = {
                "name": f"clusteremu/{run}/node-shard-{i}",
                "num_cpus": self.options.shard_cpus,
            }
            if res:
                opts["resources"] = dict(res[i % len(res)])
            elif (pin := type_resource(spec, nodes, available)) is not None:
                opts["resources"] = {pin: TYPE_RESOURCE_SHARE}
            self.shards.append(NodeShardActor.options(**opts).remote(*args))
        for p, pool in enumerate(spec.pools):
            if not np.any(self.class_pool == p):
                continue
            pool_args = (
                spec,
                replication,
                len(self.slices) + p,
                np.zeros(0, np.int64),
                f"{run}/pool-shard-{pool.name}: {pool.cores:g} cores",
                False,
            )
            if reuse:
                self.pool_shards[p].reset.remote(*pool_args)
            else:
                self.pool_shards[p] = NodeShardActor.options(
                    name=f"clusteremu/{run}/pool-shard-{pool.name}",
                    num_cpus=self.options.shard_cpus,
                ).remote(*pool_args)

    def close(self) -> None:
        """Kill every actor (a later `start` starts new ones)."""
        for actor in self.all:
            ray.kill(actor)
        self.engine, self.arrivals, self.scheduler = None, None, None
        self.shards, self.pool_shards = [], {}
        self.mode = None
