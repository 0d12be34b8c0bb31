"""The plain-data model a simulation runs on: node types, nodes, pools, job classes.

`scenarios/` validates YAML and builds these objects; the engine only reads them. Units:
cores (cpu), GB (memory_gb), whole GPUs (gpu), seconds, dollars, MB (images and data),
Mbit/s (bandwidths).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from clusteremu.cluster.distributions import Distribution
from clusteremu.cluster.speedup import Speedup
from clusteremu.cluster.workload import ArrivalProcess


@dataclass(frozen=True)
class NodeFailures:
    """Random failures of every node of a type: each node alternates up times and down
    times drawn from `up` and `down` (seconds), whether or not it runs a job, each node
    from its own streams (`clusteremu.cluster.faults`)."""

    up: Distribution
    down: Distribution


@dataclass(frozen=True)
class TimelineEvent:
    """One event of the scenario's timeline at `at_s` seconds (`docs/faults.md`).

    `action` names a timeline action (`layout.Action`, docs/faults.md); `node` (an index) or
    `node_type` and `count` name the nodes acted on; `cls` the class (set_rate,
    set_speedup); `rate_per_s` the new arrival rate; `params` the new speed-up parameters.
    """

    at_s: float
    action: str
    node: int | None = None
    node_type: str | None = None
    count: int = 1
    cls: str | None = None
    rate_per_s: float = 0.0
    params: tuple[float, ...] = ()


@dataclass(frozen=True)
class NodeType:
    """A kind of machine: capacities, relative speed and price."""

    name: str
    cpu: float
    memory_gb: float
    gpu: float = 0.0
    speed: float = 1.0
    labels: dict[str, str] = field(default_factory=dict)
    price_per_hour: float = 0.0
    startup_cost: float = 0.0
    startup_delay_s: float = 0.0
    #: Most jobs running at once on one node (worker slots); unlimited by default.
    max_jobs: float = math.inf
    #: Bandwidth from the image registry (images, models), Mbit/s; inf = pulls take no time.
    registry_mbps: float = math.inf
    #: Bandwidth from and to the storage nodes (data), Mbit/s; inf = transfers take no time.
    storage_mbps: float = math.inf
    #: Images and data items (`WorldSpec` names) a node of this type holds when it joins.
    cached: tuple[str, ...] = ()
    #: Whether a policy may rent nodes of this type (Pennyworth's VM types).
    rentable: bool = False
    #: Random failures of its nodes (None: they never fail on their own).
    failures: NodeFailures | None = None
    #: Kubernetes taints (key, value, effect) and cordon (read by `kube-default`).
    taints: tuple[tuple[str, str, str], ...] = ()
    unschedulable: bool = False


@dataclass(frozen=True)
class Pool:
    """A shared pool of cores for malleable jobs; an allocator splits it at every event."""

    name: str
    cores: float
    speed: float = 1.0
    price_per_hour: float = 0.0


@dataclass(frozen=True)
class Request:
    """What a placed job reserves on its node while it runs."""

    cpu: float = 1.0
    memory_gb: float = 0.0
    gpu: float = 0.0


@dataclass(frozen=True)
class Container:
    """One container of a job: its image, as ranked alternatives (names of `Image`s).

    On a node the container runs the first image with a build for the node's architecture
    and whose required labels the node carries.
    """

    images: tuple[str, ...]
    name: str = ""


@dataclass(frozen=True)
class ClassUsage:
    """What a class's jobs really use, drawn per job (the `independent` usage model).

    `memory_gb`: peak memory, GB (a job whose peak exceeds its request is killed,
    out-of-memory, when the peak occurs); `cpu`: cores it would keep busy (a request below
    stretches its run time, see `UsageSpec.cpu_rule`); `peak_at`: fraction of its run time
    at which the memory peak occurs, in [0, 1]. An absent distribution means "exactly as
    requested".
    """

    memory_gb: Distribution | None = None
    cpu: Distribution | None = None
    peak_at: float = 1.0


@dataclass(frozen=True)
class UsageSpec:
    """How jobs' real usages are drawn (`clusteremu.cluster.usage`) and what under-provisioning
    does.

    `model` names a registered usage model (`independent`: each class's `ClassUsage`);
    `params` are its parameters; `cpu_rule` is `proportional` (a job granted r cores that
    needs c > r runs c / r times longer) or `none`.
    """

    model: str = "independent"
    params: Mapping[str, Any] = field(default_factory=dict)
    cpu_rule: str = "proportional"


@dataclass(frozen=True)
class JobClass:
    """A class of jobs: how they arrive, how big they are, how they parallelise.

    `pool` names the malleable pool the class runs in; `None` means placement on nodes.
    `size` is work in core-seconds at speed 1.
    """

    name: str
    arrival: ArrivalProcess
    size: Distribution
    speedup: Speedup
    holding_cost: float = 1.0
    request: Request = field(default_factory=Request)
    pool: str | None = None
    #: Seconds a job may wait in the placement queue before it leaves unserved (failed).
    timeout_s: float = math.inf
    #: Execution time (seconds) on a given node type, replacing size / (speed * s(cpu)) there.
    #: Each job draws one uniform u; on node type t it runs for quantile_t(u) seconds.
    runtime_by_node_type: dict[str, Distribution] = field(default_factory=dict)
    #: The job's containers (each pulls its image onto the node unless cached there).
    containers: tuple[Container, ...] = ()
    #: MB read from storage when a job starts, and MB written back (every start).
    data_in_mb: float = 0.0
    data_out_mb: float = 0.0
    #: MB of the class's model, downloaded from the registry once per node, then cached.
    model_mb: float = 0.0
    #: Data items (`WorldSpec.data_items` names) fetched once per node, then cached.
    data_items: tuple[str, ...] = ()
    #: Required node labels: label -> allowed values (read by label-aware placers).
    node_selector: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Capability labels the job would like its node to carry (label -> value).
    capabilities: Mapping[str, str] = field(default_factory=dict)
    #: What its jobs really use (memory peak, cores), for the `independent` usage model.
    usage: ClassUsage | None = None
    #: Kubernetes required node affinity (read by `kube-default`): terms ORed, each a tuple
    #: of (label, operator In / NotIn / Exists / DoesNotExist, values) ANDed.
    node_affinity: tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...] = ()
    #: Kubernetes tolerations (read by `kube-default`): (key, operator, value, effect).
    tolerations: tuple[tuple[str, str, str, str], ...] = ()

    def mean_runtime_on(self, type_name: str) -> float:
        """Mean execution time of a job on a node type (s): its `runtime_by_node_type`
        mean there, else the mean of its size (the `rtpt` SLO's task mean)."""
        dist = self.runtime_by_node_type.get(type_name)
        return float(dist.mean) if dist is not None else float(self.size.mean)


@dataclass(frozen=True)
class Image:
    """A container image: size in MB per architecture (the node type label ``arch``; the
    key ``*`` stands for every architecture; an architecture missing = no build for it) and
    node labels it requires (label -> allowed values)."""

    name: str
    size_mb: Mapping[str, float]
    requires: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class DataItem:
    """A data set fetched once per node and then cached: size in MB, and where it comes
    from (``registry`` or ``storage``: which of the node type's bandwidths applies)."""

    name: str
    size_mb: float
    source: str = "storage"


@dataclass(frozen=True)
class WorldSpec:
    """The scenario's catalogue of images and data items, and the transfers' goodput (the
    fraction of a link's bandwidth a transfer gets, 0 < goodput <= 1)."""

    images: tuple[Image, ...] = ()
    data_items: tuple[DataItem, ...] = ()
    goodput: float = 1.0


@dataclass(frozen=True)
class ScoreBounds:
    """Eq. 2 normalisation bounds of one class (function): execution and wait, seconds."""

    exec_s: tuple[float, float]
    wait_s: tuple[float, float]


@dataclass(frozen=True)
class ScoreMetric:
    """The Learning to Score paper's `score` (eq. 2) as a summary metric; bounds per class
    name (a class without bounds gets exec [0, 2 x its largest mean run time], wait [0, its
    timeout])."""

    bounds: Mapping[str, ScoreBounds] = field(default_factory=dict)


@dataclass(frozen=True)
class MetricsSpec:
    """Summary metrics a scenario selects beyond the standard ones."""

    score: ScoreMetric | None = None


@dataclass(frozen=True)
class StopRule:
    """When a run ends: after `jobs` arrivals (all of them served), or at `time_s`.

    Jobs with index below `warmup_jobs`, or arriving before `warmup_s`, are excluded from
    the statistics, and time averages start at the first measured arrival.
    """

    jobs: int | None = None
    warmup_jobs: int = 0
    time_s: float | None = None
    warmup_s: float = 0.0

    @property
    def horizon_s(self) -> float:
        return math.inf if self.time_s is None else self.time_s


@dataclass(frozen=True)
class PolicyRef:
    """A policy named in the registry plus its keyword parameters."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SchedulerSpec:
    placer: PolicyRef = field(default_factory=lambda: PolicyRef("first-fit"))
    allocator: PolicyRef = field(default_factory=lambda: PolicyRef("equi"))
    provisioner: PolicyRef = field(default_factory=lambda: PolicyRef("static"))
    scaler: PolicyRef = field(default_factory=lambda: PolicyRef("static"))


@dataclass(frozen=True)
class SimulationSpec:
    """Everything one run needs. `nodes` lists a node type name per node, in node order."""

    name: str
    seed: int
    stop: StopRule
    node_types: tuple[NodeType, ...]
    nodes: tuple[str, ...]
    pools: tuple[Pool, ...]
    classes: tuple[JobClass, ...]
    scheduler: SchedulerSpec = field(default_factory=SchedulerSpec)
    replications: int = 1
    #: Images, data items and goodput (`clusteremu.cluster.world` turns them into engine state).
    world: WorldSpec = field(default_factory=WorldSpec)
    metrics: MetricsSpec = field(default_factory=MetricsSpec)
    #: Real usages of the jobs (None: every job uses exactly what it requests).
    usage: UsageSpec | None = None
    #: The service-level objective whose loss the summary reports (`clusteremu.cluster.slo`).
    slo: Any = None
    #: The timeline: events at set times (`layout.Action`: fail, drain, set_rate, ...),
    #: sorted by time.
    events: tuple[TimelineEvent, ...] = ()
    #: What a node failure does to the jobs running there: "requeue" or "fail".
    on_node_failure: str = "requeue"
    #: The work a job re-queued after a failure does: "same" (its own size again, from the
    #: start) or "redraw" (a fresh size from its class's distribution).
    restart_work: str = "redraw"

    @property
    def has_faults(self) -> bool:
        """Whether nodes may fail, recover or drain (random failures or a timeline)."""
        return bool(self.events) or any(t.failures is not None for t in self.node_types)

    def node_type(self, name: str) -> NodeType:
        """The node type named `name` (KeyError if none); a dictionary lookup, so that
        scenarios with many node types stay linear."""
        by_name = self.__dict__.get("_types_by_name")
        if by_name is None:
            by_name = {nt.name: nt for nt in reversed(self.node_types)}  # the first one wins
            object.__setattr__(self, "_types_by_name", by_name)
        return by_name[name]

    def pool_index(self, name: str) -> int:
        for i, p in enumerate(self.pools):
            if p.name == name:
                return i
        raise KeyError(name)


def replays_table(spec: SimulationSpec) -> bool:
    """Whether some class replays a trace table (`workload.jobs`, docs/traces.md)."""
    return any(c.arrival.job_rows(0) is not None for c in spec.classes)
