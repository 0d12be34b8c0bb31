"""`EngineActor`: the one `clusteremu.cluster.engine.Engine` of an exact run, hosted in an actor.

Exact mode runs the single-process engine itself (the scenario's policies, its queue, its
timers, its tie-breaks), so its per-job table is `clusteremu run`'s by construction. The
coordinator drives it through the engine's API: `advance` steps it (`Engine.step`) for
about a wall-clock budget and reports its load (for progress and the live gauges);
`result` returns the engine's result (`Engine.result`, built on its frozen `RunState`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import ray

from clusteremu.actors.node_shard import ShardState, engine_state
from clusteremu.actors.reusable import Reusable
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import NI, Status
from clusteremu.cluster.metrics import RunResult
from clusteremu.cluster.model import SimulationSpec

#: Events per `Engine.step` call between two looks at the wall clock.
EVENTS_PER_STEP = 1 << 16


@dataclass(frozen=True)
class EngineReport:
    """Where the hosted engine stands: its load, the fraction done (0..1), finished."""

    state: ShardState
    fraction: float
    finished: bool


class EngineHost(Reusable):
    """Hosts one replication's `Engine` (built as `clusteremu run` builds it)."""

    def __init__(self, spec: SimulationSpec, replication: int, label: str = "") -> None:
        self.label = label
        self.spec = spec
        self.replication = replication
        self._engine: Engine | None = None
        self.status = -1

    @property
    def engine(self) -> Engine:
        """The hosted engine, built on first use: in a method call, not in the actor's
        constructor, so a bad policy reaches the driver as the policy's own exception
        (a constructor error would surface as Ray's `ActorDiedError`)."""
        if self._engine is None:
            self._engine = Engine(self.spec, self.replication)
        return self._engine

    def __repr__(self) -> str:
        return f"EngineHost({getattr(self, 'label', '')})"  # even if __init__ failed

    def ready(self) -> bool:
        """Builds the engine; answers once the actor is up (the coordinator waits for it
        before timing)."""
        return self.engine is not None

    def advance(self, budget_s: float = 0.5, until_s: float = float("inf")) -> EngineReport:
        """Step the engine for about `budget_s` wall seconds (at least one step), up to
        simulated time `until_s` or the end; report where it stands."""
        e = self.engine
        deadline = time.monotonic() + budget_s
        while True:
            self.status = e.step(until_s=until_s, max_events=EVENTS_PER_STEP)
            if self.status != Status.YIELDED or time.monotonic() >= deadline:
                break
        return self.report()

    def report(self) -> EngineReport:
        e = self.engine
        s = e.state
        node_type = s.nodes_i[NI.NODE_TYPE, : e.nodes_used]  # rented rows too
        horizon = self.spec.stop.time_s
        total = max(e.jobs.arrival_s.size, 1)
        done = e.now / horizon if horizon else e.jobs_done / total
        finished = self.status == Status.FINISHED
        return EngineReport(
            state=engine_state(e, 0, node_type, len(self.spec.node_types), snapshot=False),
            fraction=1.0 if finished else min(float(done), 1.0),
            finished=finished,
        )

    def result(self) -> RunResult:
        """The replication's per-job table and summary (run it to the end first)."""
        return self.engine.result()


#: The Ray actor; named `clusteremu/<run>/engine` by the launcher.
EngineActor = ray.remote(num_cpus=1)(EngineHost)
