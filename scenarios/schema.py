"""The scenario schema: pydantic v2 models with `extra="forbid"`, one per YAML block.

Field names and meanings are a public contract (docs/scenarios.md). Units: seconds (`_s`),
cores (`cpu`, `cores`), GB (`memory_gb`), GPUs (`gpu`), dollars (`price_per_hour`,
`startup_cost`). Work (`size`) is in core-seconds at speed 1.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from clusteremu.scenarios.world_schema import (
    Bandwidth,
    ContainerModel,
    LabelValues,
    MegaBytes,
    MetricsModel,
    StrictNumbers,
    WorldModel,
)

PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]

#: The largest holding cost, price or start-up cost accepted: these are weights and rates
#: that the summary multiplies by job counts and hours; beyond this their sums overflow.
MAX_COST = 1e12
#: The largest exponent a lognormal's moments may reach (exp(709) is a double's limit).
MAX_LOG_MOMENT = 700.0


def _at_most_max_cost(value: float) -> float:
    if value > MAX_COST:
        raise ValueError(
            f"expected at most {MAX_COST:g} (costs are weights and rates; larger ones overflow "
            f"the summary's sums), got {value:g}"
        )
    return value


#: The largest capacity or request accepted (cores, GB, GPUs): sums over nodes and pools
#: must stay finite; no machine comes near it.
MAX_CAPACITY = 1e12


def _at_most_max_capacity(value: float) -> float:
    if value > MAX_CAPACITY:
        raise ValueError(
            f"expected at most {MAX_CAPACITY:g} (capacities are summed over nodes; larger "
            f"ones overflow), got {value:g}"
        )
    return value


Capacity = Annotated[float, Field(ge=0, allow_inf_nan=False), AfterValidator(_at_most_max_capacity)]
PositiveCapacity = Annotated[
    float, Field(gt=0, allow_inf_nan=False), AfterValidator(_at_most_max_capacity)
]
Cost = Annotated[float, Field(ge=0, allow_inf_nan=False), AfterValidator(_at_most_max_cost)]
PositiveCost = Annotated[float, Field(gt=0, allow_inf_nan=False), AfterValidator(_at_most_max_cost)]


class Strict(StrictNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- distributions -----------------------------------------------------------------------


class ExponentialDist(Strict):
    kind: Literal["exponential"]
    mean_s: PositiveFloat = Field(description="mean, seconds (or core-seconds for sizes)")


class HyperExponentialDist(Strict):
    kind: Literal["hyperexponential"]
    probabilities: list[PositiveFloat] = Field(min_length=1)
    means_s: list[PositiveFloat] = Field(min_length=1)

    @model_validator(mode="after")
    def _same_length(self) -> HyperExponentialDist:
        if len(self.probabilities) != len(self.means_s):
            raise ValueError("probabilities and means_s must have the same length")
        if not math.isclose(sum(self.probabilities), 1.0, rel_tol=1e-6):
            raise ValueError(f"probabilities must sum to 1, got {sum(self.probabilities):g}")
        return self


class LognormalDist(Strict):
    kind: Literal["lognormal"]
    mu: float = Field(allow_inf_nan=False, description="mean of log(X)")
    sigma: PositiveFloat = Field(description="standard deviation of log(X)")
    min_s: NonNegFloat = 0.0
    max_s: float = Field(default=math.inf, gt=0)

    @model_validator(mode="after")
    def _bounds(self) -> LognormalDist:
        if self.max_s <= self.min_s:
            raise ValueError(f"max_s ({self.max_s}) must exceed min_s ({self.min_s})")
        variance = self.sigma * self.sigma  # inf, never OverflowError, for a huge sigma
        exponent = max(self.mu + variance / 2.0, 2.0 * self.mu + 2.0 * variance)
        if not exponent <= MAX_LOG_MOMENT:
            raise ValueError(
                f"mu = {self.mu:g} and sigma = {self.sigma:g} give a mean exp(mu + sigma^2/2) "
                "or second moment exp(2 mu + 2 sigma^2) beyond a double's range; expected "
                f"2 mu + 2 sigma^2 <= {MAX_LOG_MOMENT:g}"
            )
        low = -math.inf if self.min_s <= 0 else (math.log(self.min_s) - self.mu) / self.sigma
        high = math.inf if math.isinf(self.max_s) else (math.log(self.max_s) - self.mu) / self.sigma
        mass = 0.5 * (math.erfc(-high / math.sqrt(2.0)) - math.erfc(-low / math.sqrt(2.0)))
        if not mass > 1e-12:
            raise ValueError(
                f"the lognormal (mu = {self.mu:g}, sigma = {self.sigma:g}) puts no probability "
                f"between min_s = {self.min_s:g} and max_s = {self.max_s:g}; expected bounds "
                "around exp(mu)"
            )
        return self


class DeterministicDist(Strict):
    kind: Literal["deterministic"]
    value_s: PositiveFloat


class EmpiricalDist(Strict):
    kind: Literal["empirical"]
    values_s: list[NonNegFloat] = Field(min_length=1)


Distribution = Annotated[
    ExponentialDist | HyperExponentialDist | LognormalDist | DeterministicDist | EmpiricalDist,
    Field(discriminator="kind"),
]


def _kinds(union: Any) -> tuple[str, ...]:
    """The `kind` values of a discriminated union of models, in declaration order."""
    members = get_args(get_args(union)[0])
    return tuple(get_args(m.model_fields["kind"].annotation)[0] for m in members)


# --- arrivals ------------------------------------------------------------------------------


class PoissonArrival(Strict):
    kind: Literal["poisson"]
    rate_per_s: PositiveFloat | None = None
    rate_per_s_per_core: PositiveFloat | None = Field(
        default=None,
        description="mean-field scaling: jobs/s per core of the class's pool (or of all node "
        "cores); the rate is this times the core count, so sweeping cores keeps the load fixed",
    )

    @model_validator(mode="after")
    def _one_rate(self) -> PoissonArrival:
        if (self.rate_per_s is None) == (self.rate_per_s_per_core is None):
            raise ValueError("give exactly one of rate_per_s or rate_per_s_per_core")
        return self


class BatchArrival(Strict):
    kind: Literal["batch"]
    count: int = Field(ge=0)
    at_s: NonNegFloat = 0.0


class RenewalArrival(Strict):
    kind: Literal["renewal"]
    interarrival: Distribution


class TableArrival(Strict):
    """The class's jobs are the rows of the workload's trace table (`workload.jobs`) whose
    `class` column names it: arrival, run time, requests and estimate per job."""

    kind: Literal["table"]


class TraceArrival(Strict):
    kind: Literal["trace"]
    path: str = Field(description="Parquet or CSV file, relative to the scenario file")
    column: str = "arrival_s"
    size_column: str | None = Field(default=None, description="optional per-job size column")
    time_scale: PositiveFloat = 1.0


Arrival = Annotated[
    PoissonArrival | BatchArrival | RenewalArrival | TraceArrival | TableArrival,
    Field(discriminator="kind"),
]

# --- speed-ups -----------------------------------------------------------------------------


class LinearSpeedupModel(Strict):
    kind: Literal["linear"]


class AmdahlSpeedupModel(Strict):
    kind: Literal["amdahl"]
    parallel_fraction: float = Field(ge=0, le=1)


class PowerSpeedupModel(Strict):
    kind: Literal["power"]
    exponent: float = Field(gt=0, le=1)


class RooftopSpeedupModel(Strict):
    kind: Literal["rooftop"]
    max_cores: float = Field(ge=1, allow_inf_nan=False)


class SmoothRooftopSpeedupModel(Strict):
    kind: Literal["smooth-rooftop"]
    max_cores: float = Field(ge=1, allow_inf_nan=False)
    sharpness: float = Field(default=4.0, gt=0, le=64, description="knee sharpness q")


class RigidSpeedupModel(Strict):
    """A rigid job: it runs `size` seconds (at speed 1) on whatever cores it holds, below
    one core too (a trace's jobs: docs/traces.md)."""

    kind: Literal["rigid"]


class TableSpeedupModel(Strict):
    kind: Literal["table"]
    points: list[tuple[float, float]] = Field(
        min_length=1, description="(cores, speed-up) pairs; the curve is their upper concave hull"
    )


Speedup = Annotated[
    LinearSpeedupModel
    | AmdahlSpeedupModel
    | PowerSpeedupModel
    | RooftopSpeedupModel
    | SmoothRooftopSpeedupModel
    | TableSpeedupModel
    | RigidSpeedupModel,
    Field(discriminator="kind"),
]

#: The `kind` values of each discriminated union (named in error messages).
DISTRIBUTION_KINDS = _kinds(Distribution)
ARRIVAL_KINDS = _kinds(Arrival)
SPEEDUP_KINDS = _kinds(Speedup)

# --- cluster -------------------------------------------------------------------------------


class FailuresModel(Strict):
    """Random failures of every node of a type (docs/faults.md): up times with mean
    `mtbf_s` and down times with mean `mttr_s` (exponential), or any distribution as
    `up:` / `down:`."""

    mtbf_s: PositiveFloat | None = Field(default=None, description="mean up time, s")
    mttr_s: PositiveFloat | None = Field(default=None, description="mean down time, s")
    up: Distribution | None = None
    down: Distribution | None = None

    @model_validator(mode="after")
    def _one_each(self) -> FailuresModel:
        if (self.mtbf_s is None) == (self.up is None):
            raise ValueError("give exactly one of mtbf_s or up")
        if (self.mttr_s is None) == (self.down is None):
            raise ValueError("give exactly one of mttr_s or down")
        for name in ("up", "down"):
            d = getattr(self, name)
            if isinstance(d, EmpiricalDist) and min(d.values_s) <= 0:
                raise ValueError(f"{name}: expected times > 0 (a node cannot fail at once)")
        return self


class TaintModel(Strict):
    """A Kubernetes taint of a node type (`docs/traces.md`): pods that do not tolerate a
    `NoSchedule` or `NoExecute` taint are not placed there by `kube-default`."""

    key: str = Field(min_length=1, max_length=317)
    value: str = Field(default="", max_length=63)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class TolerationModel(Strict):
    """A Kubernetes toleration of a class: `Exists` with an empty key tolerates every taint;
    an empty effect matches every effect."""

    key: str = Field(default="", max_length=317)
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = Field(default="", max_length=63)
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""


class NodeSelectorRequirementModel(Strict):
    """One expression of a required node-affinity term (labels of the node type)."""

    key: str = Field(min_length=1, max_length=317)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list, max_length=10_000)

    @model_validator(mode="after")
    def _values_of_operator(self) -> NodeSelectorRequirementModel:
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError(f"operator {self.operator} needs values")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError(f"operator {self.operator} takes no values")
        return self


class NodeTypeModel(Strict):
    name: str = Field(min_length=1)
    cpu: Capacity = Field(description="cores")
    memory_gb: Capacity = 0.0
    gpu: Capacity = 0.0
    speed: PositiveFloat = 1.0
    labels: dict[str, str] = Field(default_factory=dict)
    price_per_hour: Cost = 0.0
    startup_cost: Cost = 0.0
    startup_delay_s: NonNegFloat = 0.0
    max_jobs: int | None = Field(default=None, ge=1, description="worker slots per node")
    rentable: bool = Field(default=False, description="a policy may rent nodes of this type")
    # The world model (scenarios/world_schema.py): bandwidths (Mbit/s, absent = unlimited)
    # and the images / data items a node holds when it joins.
    registry_mbps: Bandwidth | None = None
    storage_mbps: Bandwidth | None = None
    cached: list[str] = Field(default_factory=list)
    failures: FailuresModel | None = None
    # Kubernetes node filters (docs/traces.md), read by the kube-default placer.
    taints: list[TaintModel] = Field(default_factory=list, max_length=1000)
    unschedulable: bool = Field(default=False, description="cordoned: takes no new pods")


class NodeGroupModel(Strict):
    type: str
    count: int = Field(ge=0)


class PoolModel(Strict):
    name: str = Field(min_length=1)
    cores: PositiveCapacity
    speed: PositiveFloat = 1.0
    price_per_hour: Cost = 0.0


class ClusterGeneratorModel(Strict):
    """A generated cluster (scenarios/faas.py setups), expanded into node types and nodes."""

    name: str = Field(min_length=1, description="setup name, e.g. hybrid_balanced")
    nodes: int = Field(ge=1, description="number of nodes")
    seed: int = Field(default=0, ge=0, le=2**63 - 1)
    params: dict[str, Any] = Field(default_factory=dict)


#: The most node types (and node groups) a scenario may list: run set-up and the placers'
#: per-type tables grow with types x nodes (a cloud offers under a thousand VM types).
MAX_NODE_TYPES = 4096


class ClusterModel(Strict):
    node_types: list[NodeTypeModel] = Field(default_factory=list, max_length=MAX_NODE_TYPES)
    nodes: list[NodeGroupModel] = Field(default_factory=list, max_length=MAX_NODE_TYPES)
    pools: list[PoolModel] = Field(default_factory=list)
    generator: ClusterGeneratorModel | None = None


# --- workload ------------------------------------------------------------------------------


class RequestModel(Strict):
    cpu: Capacity = 1.0
    memory_gb: Capacity = 0.0
    gpu: Capacity = 0.0


class ClassUsageModel(Strict):
    """What a class's jobs really use (the `independent` usage model,
    `clusteremu.cluster.usage`)."""

    memory_gb: Distribution | None = Field(default=None, description="memory peak, GB")
    cpu: Distribution | None = Field(default=None, description="cores kept busy")
    peak_at: float = Field(
        default=1.0, ge=0, le=1, allow_inf_nan=False, description="fraction of the run time"
    )


class WorkloadUsageModel(Strict):
    """How the jobs' real usages are drawn, and what CPU under-provisioning does."""

    model: str = Field(default="independent", min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)
    cpu_rule: Literal["proportional", "none"] = "proportional"


class JobClassModel(Strict):
    name: str = Field(min_length=1)
    arrival: Arrival
    size: Distribution | None = Field(
        default=None, description="work; required but for a table class (its rows' run times)"
    )
    speedup: Speedup = Field(default_factory=lambda: LinearSpeedupModel(kind="linear"))
    holding_cost: PositiveCost = 1.0
    request: RequestModel = Field(default_factory=RequestModel)
    pool: str | None = Field(
        default=None, description="malleable pool the class runs in; absent = placed on nodes"
    )
    timeout_s: PositiveFloat | None = Field(
        default=None, description="seconds a job may wait for a node before it fails"
    )
    runtime_by_node_type: dict[str, Distribution] = Field(
        default_factory=dict,
        description="execution time (seconds) per node type, replacing size/speed there",
    )
    # The world model (scenarios/world_schema.py): containers' images, data (MB), model (MB),
    # cached data items, required node labels and wished-for capabilities.
    containers: list[ContainerModel] = Field(default_factory=list)
    data_in_mb: MegaBytes = 0.0
    data_out_mb: MegaBytes = 0.0
    model_mb: MegaBytes = 0.0
    data_items: list[str] = Field(default_factory=list)
    node_selector: dict[str, LabelValues] = Field(default_factory=dict)
    capabilities: dict[str, str] = Field(default_factory=dict)
    usage: ClassUsageModel | None = None
    # Kubernetes pod filters (docs/traces.md), read by the kube-default placer: required
    # node affinity (terms ORed, each a list of expressions ANDed) and tolerations.
    node_affinity: list[list[NodeSelectorRequirementModel]] = Field(
        default_factory=list, max_length=1000
    )
    tolerations: list[TolerationModel] = Field(default_factory=list, max_length=1000)

    @model_validator(mode="after")
    def _size_unless_table(self) -> JobClassModel:
        if self.size is None and self.arrival.kind != "table":
            raise ValueError(
                "size is required (only a class of kind table takes its rows' run times)"
            )
        if self.size is not None and self.arrival.kind == "table":
            raise ValueError("a class of kind table takes its rows' run times: remove size")
        return self


class JobsTableModel(Strict):
    """A trace table (`clusteremu import`, docs/traces.md): one row per job."""

    path: str = Field(min_length=1, description="Parquet file, relative to the scenario file")


class WorkloadModel(Strict):
    classes: list[JobClassModel] = Field(min_length=1)
    usage: WorkloadUsageModel | None = None
    jobs: JobsTableModel | None = Field(
        default=None, description="the trace table the classes of kind table replay"
    )

    @model_validator(mode="after")
    def _table_for_table_classes(self) -> WorkloadModel:
        table = [c.name for c in self.classes if c.arrival.kind == "table"]
        if table and self.jobs is None:
            raise ValueError(
                f"class {table[0]!r} is of kind table: give workload.jobs.path (a trace table)"
            )
        if self.jobs is not None and not table:
            raise ValueError("workload.jobs is given but no class is of arrival kind table")
        return self


# --- run control ---------------------------------------------------------------------------


class StopModel(Strict):
    jobs: int | None = Field(default=None, ge=1)
    warmup_jobs: int = Field(default=0, ge=0)
    time_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    warmup_s: NonNegFloat = 0.0

    @model_validator(mode="after")
    def _one_rule(self) -> StopModel:
        if (self.jobs is None) == (self.time_s is None):
            raise ValueError("give exactly one of stop.jobs or stop.time_s")
        if self.jobs is not None and self.warmup_jobs >= self.jobs:
            raise ValueError(f"warmup_jobs ({self.warmup_jobs}) must be below jobs ({self.jobs})")
        if self.time_s is not None and self.warmup_s >= self.time_s:
            raise ValueError(f"warmup_s ({self.warmup_s}) must be below time_s ({self.time_s})")
        return self


class PolicyModel(Strict):
    """A policy by registered name and its parameters: under `params:`, or written beside
    the name (`{name: pennyworth, tree: trees/max.json}`)."""

    name: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _flat_params(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        extra = {k: v for k, v in data.items() if k not in ("name", "params")}
        if not extra:
            return data
        params = data.get("params", {})
        if not isinstance(params, dict):
            return data  # the params field's own error
        both = sorted(set(extra) & set(params))
        if both:
            raise ValueError(f"parameter {both[0]!r} is given both beside the name and in params")
        return {"name": data.get("name"), "params": {**params, **extra}}


class SchedulerModel(Strict):
    placer: PolicyModel = Field(default_factory=lambda: PolicyModel(name="first-fit"))
    allocator: PolicyModel = Field(default_factory=lambda: PolicyModel(name="equi"))
    provisioner: PolicyModel = Field(default_factory=lambda: PolicyModel(name="static"))
    scaler: PolicyModel = Field(default_factory=lambda: PolicyModel(name="static"))


class SloModel(Strict):
    """A service-level objective and the dollars it costs to miss (`clusteremu.cluster.slo`)."""

    kind: Literal["max", "rtpt", "avg", "percentile"]
    penalty_per_s: float = Field(ge=0, allow_inf_nan=False, description="dollars per second late")
    deadline_s: PositiveFloat | None = None
    factor: PositiveFloat | None = None
    target_s: PositiveFloat | None = None
    percentile: float | None = Field(default=None, gt=0, le=100, allow_inf_nan=False)
    count_startup_delay: bool = False
    #: rtpt: the node type whose task means set every job's bound (default: the type the
    #: job runs on).
    reference_type: str | None = Field(default=None, min_length=1, max_length=256)

    @model_validator(mode="after")
    def _fields_of_kind(self) -> SloModel:
        need = {
            "max": ("deadline_s",),
            "rtpt": ("factor",),
            "avg": ("target_s",),
            "percentile": ("percentile", "target_s"),
        }[self.kind]
        missing = [f for f in need if getattr(self, f) is None]
        if missing:
            raise ValueError(f"an slo of kind {self.kind} needs {', '.join(missing)}")
        if self.reference_type is not None and self.kind != "rtpt":
            raise ValueError(f"reference_type applies to kind rtpt only, not {self.kind}")
        return self


# --- the timeline (docs/faults.md) ---------------------------------------------------------

#: The most nodes one `join` event adds (each is a node row of the run).
MAX_JOIN = 1_000_000
#: The most events in a timeline.
MAX_EVENTS = 100_000


class NodesTarget(Strict):
    """The nodes a fail, recover or drain acts on: one node by index, or `count` nodes of a
    type (the first in node order whose state allows the action)."""

    node: int | None = Field(default=None, ge=0, description="node index")
    type: str | None = Field(default=None, min_length=1)
    count: int = Field(default=1, ge=1, le=MAX_JOIN)

    @model_validator(mode="after")
    def _node_or_type(self) -> NodesTarget:
        if (self.node is None) == (self.type is None):
            raise ValueError("give exactly one of node or type")
        return self


class JoinAction(Strict):
    type: str = Field(min_length=1)
    count: int = Field(default=1, ge=1, le=MAX_JOIN)


class SetRateAction(Strict):
    class_: str = Field(alias="class", min_length=1)
    rate_per_s: NonNegFloat


class SetSpeedupAction(Strict):
    class_: str = Field(alias="class", min_length=1)
    speedup: Speedup


class EventModel(Strict):
    """One timeline event: `at_s` and exactly one action.

    The table of actions: each field after `at_s` is one action (its name, and the model
    of what it takes), in the order the docs list them; its code in the compiled loop is
    the member of `clusteremu.cluster.layout.Action` of the same name (upper case), which
    `kernel_faults.on_timeline` carries out (tests/scenarios/test_timeline_actions.py
    checks that the two agree). A new action is a field here, a member there, and its
    kernel code.
    """

    at_s: NonNegFloat
    fail: NodesTarget | None = None
    recover: NodesTarget | None = None
    join: JoinAction | None = None
    drain: NodesTarget | None = None
    set_rate: SetRateAction | None = None
    set_speedup: SetSpeedupAction | None = None
    undrain: NodesTarget | None = None

    @model_validator(mode="after")
    def _one_action(self) -> EventModel:
        given = [a for a in EVENT_ACTIONS if getattr(self, a) is not None]
        if len(given) != 1:
            raise ValueError(
                f"expected exactly one action of {', '.join(EVENT_ACTIONS)}, got "
                f"{len(given)}" + (f" ({', '.join(given)})" if given else "")
            )
        return self

    @property
    def action(self) -> str:
        return next(a for a in EVENT_ACTIONS if getattr(self, a) is not None)


#: The actions of a timeline event (`EventModel`'s fields after `at_s`), in the order the
#: docs list them.
EVENT_ACTIONS = tuple(name for name in EventModel.model_fields if name != "at_s")


#: The largest seed (numpy's generators take any non-negative integer; results store
#: int64): `clusteremu.scenarios.option_checks.MAX_SEED`, the same for `--seed` and `seed:`.
MAX_SEED = 2**63 - 1


class ScenarioModel(Strict):
    name: str = Field(min_length=1)
    description: str = ""
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    replications: int = Field(default=1, ge=1)
    stop: StopModel
    cluster: ClusterModel
    workload: WorkloadModel
    scheduler: SchedulerModel = Field(default_factory=SchedulerModel)
    world: WorldModel = Field(default_factory=WorldModel)
    metrics: MetricsModel = Field(default_factory=MetricsModel)
    slo: SloModel | None = None
    events: list[EventModel] = Field(default_factory=list, max_length=MAX_EVENTS)
    on_node_failure: Literal["requeue", "fail"] = Field(
        default="requeue", description="what a node failure does to the jobs running there"
    )
    restart_work: Literal["same", "redraw"] = Field(
        default="redraw",
        description="work of a job re-queued after a failure: its own again, or freshly drawn",
    )
