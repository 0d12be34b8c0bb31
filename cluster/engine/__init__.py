"""The event engine: the one owner of simulated time and state.

An `Engine` holds one replication's `EngineState` (typed groups of arrays,
`clusteremu.cluster.state`) and drives the compiled loop (`clusteremu.cluster.kernel`). Only the
engine moves
time and writes state; policies, actors, learners and tuners use its API (SimPy's rule):

- `peek()` the time of the next event, `step(until_s)` advance, `run()` to the end;
- `start(job, node, gpus=...)` a queued job on a node, `kill(job, ...)` a running one
  (work lost, re-queued with a new request or failed);
- `rent(node_type)` a node (ready after the type's start-up delay), `release(node)`;
- `set_speedup(class, params)`, `advance(t)`, `set_window(...)`, `add_jobs(jobs)`;
- `snapshot()` a frozen, read-only `RunState` that metrics and results read.

Arrays read through the engine's properties (`engine.jobs_f`, ...) are read-only views:
writing them raises. Policies are called back through four extension points (scaler,
placer, allocator, provisioner) when they have no compiled path.

The engine is composed of parts, each a module of this package, each given what it needs
in its constructor (no part reaches into another's private state):

- `store`: `StateStore`, the arrays of one replication, their growth and the cache of
  views built on them;
- `builder`: the first state, built from the scenario, jobs and policies (pure);
- `fault_feed`: `FaultFeed`, the nodes' random up and down times and their refills;
- `feeding`: `JobFeed`, jobs handed over after the start and a streamed trace table;
- `operations`: `Operations`, start, kill, drop, rent, release and what the loop asks;
- `policy_bridge`: `PolicyBridge`, Python policies' views, decisions and refusals;
- `loop`: `Loop`, the compiled loop driven until it stops, a table from what it hands
  back to the part that answers;
- `compaction`: the rows of jobs that have left taken out of the state, live rows
  renumbered in order (`JobIds` keeps each row's job number in the run);
- `sinks`: where those rows go (`KeepSink` keeps them; `StreamSink` aggregates and
  streams them to a Parquet table);
- `streaming`: whether a run can stream its results, from its scenario and policies
  alone, asked before any job is drawn;
- `facade`: `Engine`, the public API over them.

`clusteremu.cluster.live_view` is the placers' reusable view and
`clusteremu.cluster.decision_checks` the checks of their decisions.

>>> from clusteremu.cluster.model import *
>>> from clusteremu.cluster.distributions import Exponential
>>> from clusteremu.cluster.speedup import LinearSpeedup
>>> from clusteremu.cluster.workload import poisson_arrivals
>>> spec = SimulationSpec(
...     name="mm1", seed=1, stop=StopRule(jobs=1000),
...     node_types=(NodeType("core", cpu=1, memory_gb=1),), nodes=("core",), pools=(),
...     classes=(JobClass("a", poisson_arrivals(0.5), Exponential(1.0), LinearSpeedup()),))
>>> run = Engine(spec).run()
>>> run.summary["jobs_completed"]
1000
"""

from __future__ import annotations

from clusteremu.cluster.decision_checks import ALLOC_EPS, check_allocation
from clusteremu.cluster.engine.builder import job_rows, job_state, lift_table
from clusteremu.cluster.engine.facade import EVENTS_PER_CALL, Engine, FloatArray, IntArray
from clusteremu.cluster.jobs import Jobs, generate_jobs, replication_seeds, runtime_table

__all__ = [
    "ALLOC_EPS",
    "EVENTS_PER_CALL",
    "Engine",
    "FloatArray",
    "IntArray",
    "Jobs",
    "check_allocation",
    "generate_jobs",
    "job_rows",
    "job_state",
    "lift_table",
    "replication_seeds",
    "runtime_table",
]
