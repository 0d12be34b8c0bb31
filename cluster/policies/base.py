"""The policy protocols: placers, allocators and provisioners, and the decisions they return.

Policies are plain objects. They read a *view* of the state (numpy arrays, never the
engine's own buffers) and return a small decision object; the engine validates the decision
and applies it, raising `PolicyError` on anything illegal. A policy may also provide a
compiled decision function (`compiled`, registered in `clusteremu.cluster.policies.compiled_table`):
the engine then decides inside its compiled loop, through the same checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.model import SimulationSpec

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class PolicyError(RuntimeError):
    """A policy returned a decision the engine cannot apply.

    Crosses process boundaries (Ray tasks, sweeps) intact: it pickles with its fields.
    """

    def __init__(self, policy: str, time_s: float, problem: str, decision: object = None) -> None:
        self.policy, self.time_s, self.problem, self.decision = policy, time_s, problem, decision
        shown = "" if decision is None else f" Decision: {_short(repr(decision))}."
        super().__init__(f"policy {policy!r} at t={time_s:.6g} s: {problem}.{shown}")

    def __reduce__(self) -> tuple[Any, ...]:
        decision = self.decision
        try:
            import pickle

            pickle.dumps(decision)
        except Exception:  # an unpicklable decision travels as its text
            decision = repr(decision)
        return (type(self), (self.policy, self.time_s, self.problem, decision))


class MigrationError(ValueError):
    """Old scenario data that a policy's `migrate` hook cannot translate: `field` is its
    path in the scenario (``scheduler.placer.params.goodput``), `problem` what was expected;
    the scenario loader reports both, naming the file."""

    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem
        super().__init__(f"{field}: {problem}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.field, self.problem))


class Migration(Protocol):
    """What the scenario loader hands a policy's `migrate` hook (`Policy.migrate`): how to
    tell the user about a translated field, and how to quote a user's value in a
    `MigrationError` (the loader's rules, for one scenario file)."""

    def moved(self, old: str, new: str, see: str = "docs/scenarios.md") -> None:
        """Tell the user that `old` (a field path, or a description of old fields) was
        translated into `new`, and where the new fields are described (`see`): a
        deprecation warning that names the scenario file."""
        ...

    def shown(self, value: Any) -> str:
        """A user's value quoted for a message: a short `repr`, bounded in length."""
        ...


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


@dataclass(frozen=True)
class PoolView:
    """The jobs of one malleable pool at an event, in arrival order.

    Sizes and remaining work are in core-seconds at speed 1; policies that assume unknown
    sizes must not read them.
    """

    time_s: float
    pool: str
    cores: float
    job_ids: IntArray
    class_index: IntArray
    arrival_s: FloatArray
    size: FloatArray
    remaining: FloatArray
    holding_cost: FloatArray
    current_cores: FloatArray


@dataclass(frozen=True)
class Allocation:
    """Cores per job of a PoolView, in the view's order (0 = the job waits)."""

    cores: FloatArray


@dataclass(frozen=True)
class PlacementView:
    """The placement queue (arrival order) and the nodes' capacities and free resources.

    Every array is the policy's to read during the call; capacities, speeds and node types
    never change during a run and are shared read-only between calls.
    """

    time_s: float
    queue: IntArray
    class_index: IntArray
    request_cpu: FloatArray
    request_memory_gb: FloatArray
    request_gpu: FloatArray
    free_cpu: FloatArray
    free_memory_gb: FloatArray
    free_gpu: FloatArray
    capacity_cpu: FloatArray
    capacity_memory_gb: FloatArray
    capacity_gpu: FloatArray
    speed: FloatArray
    node_type: IntArray
    active: npt.NDArray[np.bool_]
    free_slots: FloatArray
    #: (nodes, GPUs per node): free milli-GPU of each GPU (1000 = wholly free).
    gpu_free_milli: FloatArray
    #: (nodes, items): 1.0 where a node holds an image or data item of the world model
    #: (`clusteremu.cluster.world.World.items` names them; its tables say what a class needs where);
    #: (0, 0) when the scenario has no world model. The engine's cache, read-only.
    cached: FloatArray = field(default_factory=lambda: np.zeros((0, 0)))
    #: Each node row's `clusteremu.cluster.layout.NodeStatus` (BOOTING, UP, DOWN after a failure,
    #: DRAINING, RELEASED); only UP nodes (`active`) take placements. Empty: not given.
    node_status: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: (node rows, classes): how many jobs of each class (`class_index`'s numbering: the
    #: scenario's `workload.classes` order) hold resources on each node row now, i.e. run
    #: there or set up there (image pull, data transfer) before running; a job counts on the
    #: node of its current attempt until it ends or is killed. For placers that score a node
    #: by what it hosts (GPU clustering). Malleable-pool jobs are on no node and count
    #: nowhere. (0, 0): not given (a hand-made view). The engine's view counts on the first
    #: read in a call (a placer that never reads it pays nothing), read-only.
    running_by_class: IntArray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))

    # Read-only aliases under the compiled `PlacerView`'s names, so that one naming serves
    # a compiled placer and its Python twin (docs/adding_a_policy.md, "Field names"). Job
    # fields stay indexed by queue position here (by job id in the compiled view).

    @property
    def free_mem(self) -> FloatArray:
        """`free_memory_gb` (the compiled view's name)."""
        return self.free_memory_gb

    @property
    def capacity_mem(self) -> FloatArray:
        """`capacity_memory_gb` (the compiled view's name)."""
        return self.capacity_memory_gb

    @property
    def gpu_free(self) -> FloatArray:
        """`gpu_free_milli` (the compiled view's name): (nodes, GPUs) free milli-GPU."""
        return self.gpu_free_milli

    @property
    def request_mem(self) -> FloatArray:
        """`request_memory_gb` (the compiled view's name), by queue position."""
        return self.request_memory_gb

    @property
    def job_class(self) -> IntArray:
        """`class_index` (the compiled view's name), by queue position."""
        return self.class_index

    def job_column(self, name: str) -> npt.NDArray[Any]:
        """A per-job column indexed by job id (the ids in `queue`), read-only: `arrival_s`,
        `size` (a rigid job's run time at speed 1, s), `estimate_s` (the user's estimate,
        s; 0: none), `start_s` (start of the current attempt, s), `node` (its node row, or
        -1) and `state` (a `clusteremu.cluster.layout.JobState`). For queue policies that look at
        the
        running jobs (EASY backfilling's reservation: docs/traces.md). A hand-made view
        has none."""
        raise NotImplementedError("this view carries no per-job columns")

    def fitting_nodes(self, i: int) -> list[int]:
        """The nodes (indices, ascending) where waiting job `i` (its position in `queue`)
        fits as the call began: up (`active`), a free worker slot, and room for its cores,
        memory and GPUs; the rule the engine checks a placement with. Computed by compiled
        code: well under a microsecond on a hundred nodes, where a scan in Python costs
        several. Your own placements of this call are not taken off: placing several jobs
        in one call, keep a tally of what they took."""
        from clusteremu.cluster.fit_index import (
            fitting_rows,  # compiled code: imported on first use
        )

        out = np.empty(self.free_cpu.shape[0], dtype=np.int64)
        count = fitting_rows(
            self.free_cpu,
            self.free_memory_gb,
            self.free_slots,
            self.active,
            self.gpu_free_milli,
            float(self.request_cpu[i]),
            float(self.request_memory_gb[i]),
            float(self.request_gpu[i]),
            out,
        )
        return out[:count].tolist()  # type: ignore[no-any-return]

    def fit_mask(self, i: int) -> npt.NDArray[np.bool_]:
        """`fitting_nodes(i)` as a mask over the node rows, for numpy-style placers: True
        where waiting job `i` fits as the call began (a new array, yours to change).
        Computed by compiled code: one call in place of the four numpy calls that compare
        `active`, `free_cpu`, `free_memory_gb` and `free_slots` with its request."""
        from clusteremu.cluster.fit_index import (
            fit_mask_rows,  # compiled code: imported on first use
        )

        out = np.empty(self.free_cpu.shape[0], dtype=np.bool_)
        fit_mask_rows(
            self.free_cpu,
            self.free_memory_gb,
            self.free_slots,
            self.active,
            self.gpu_free_milli,
            float(self.request_cpu[i]),
            float(self.request_memory_gb[i]),
            float(self.request_gpu[i]),
            out,
        )
        return out


class Placement(NamedTuple):
    """Start job `job` (an id from PlacementView.queue) on node index `node` now.

    `gpus` names the GPUs of the node the job gets (indices; one for a share of a GPU,
    n for n whole GPUs); None lets the engine take the first with room. `setup_s` is a
    delay before execution (image pull, data transfer) while the job holds its request.
    Execution time is physics, not policy: the engine computes it. (A NamedTuple: cheap to
    make, since a placer makes one per decision.)
    """

    job: int
    node: int
    gpus: tuple[int, ...] | None = None
    setup_s: float = 0.0


@dataclass(frozen=True)
class ScaleView:
    """What a scaler sees: the waiting jobs and every node row handed out so far.

    `node_status` holds `clusteremu.cluster.layout.NodeStatus` values (BOOTING, UP, DOWN, DRAINING,
    RELEASED): a DOWN node failed and comes back empty (a rented one bills meanwhile; a
    scaler may rent a replacement or release it), a DRAINING one takes no new job and is
    released when its last job ends. The scaler is asked after every failure and recovery.
    """

    time_s: float
    queue: IntArray
    class_index: IntArray
    request_cpu: FloatArray
    node_type: IntArray
    node_status: IntArray
    running_jobs: IntArray
    free_cpu: FloatArray
    node_type_names: tuple[str, ...]
    #: More jobs arrive at this very instant: a batch is still being submitted (a scaler
    #: that plans per batch waits for its last job).
    batch_pending: bool = False


@dataclass(frozen=True)
class Rent:
    """Rent `count` nodes of `node_type` (a name or index) now."""

    node_type: str | int
    count: int = 1


@dataclass(frozen=True)
class Release:
    """Give back node `node` (it must run no job)."""

    node: int


class Policy:
    """Common base: a registry name, seeded set-up and an optional compiled path."""

    name: ClassVar[str] = "policy"
    #: None = decide in Python; else a compiled decision function registered for this
    #: extension point (`@compiled_placer`, ... in `clusteremu.cluster.policies.compiled_table`).
    compiled: ClassVar[Any] = None
    #: The extension points one object of the class decides for, when more than one (a
    #: pair, e.g. Pennyworth's planners: ("placer", "scaler")); the first is the point a
    #: scenario names it through, and the others follow it (`clusteremu.cluster.policies.points`).
    #: Empty: the one point it is registered for.
    provides: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def migrate(cls, data: dict[str, Any], migration: Migration) -> dict[str, Any]:
        """Old scenario data translated for this policy: the scenario loader calls the hook
        of every policy a scenario names (`scheduler.<kind>.name`), before validation.

        `data` is the scenario as read (the YAML mapping, overrides applied), unvalidated:
        any field may be missing or of any type (validation reports those). Return it with
        the policy's old parameters moved into the scenario fields that replaced them: a
        copy when anything changes (never change `data` in place), `data` itself otherwise.
        Call `migration.moved(old, new)` for each translation (the user is warned, the
        scenario file named) and raise `MigrationError(field, problem)` for old data that
        cannot be translated. Default: `data` unchanged.
        """
        return data

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        """Called once per run before the first decision; keep what the policy needs."""

    def check_spec(self, spec: SimulationSpec) -> list[tuple[str, str]]:
        """Cheap checks of a scenario this policy cannot serve, run when the scenario is
        loaded (before any work): (field, what was expected) per problem."""
        return []

    def kernel_params(self) -> FloatArray:
        """Parameters handed to the compiled decision function (its `view.params`)."""
        return np.zeros(1)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def extra_summary(self, jobs: Any, summary: dict[str, Any]) -> dict[str, Any]:
        """Extra summary keys computed from the per-job Arrow table (e.g. a family's score)."""
        return {}


class Placer(Policy):
    """Chooses nodes for waiting jobs. Called whenever the queue or free capacity changes
    and some waiting job may fit a node.

    When no waiting job fits any node (by the rule every placement is checked by), the only
    legal answer is no placement, and the engine does not ask: it asks when some waiting
    job is within the free cores and GB of an up node with a free worker slot. A placer
    whose calls change its own state whatever they return (it draws random numbers before
    it knows a job fits, counts its calls, seeds something at its first call) sets
    `ask_when_nothing_fits = True` to be asked then too.

    A placer that never starts a job behind a waiting one (strict FCFS) sets
    `strict_fcfs = True`: the engine then asks it only when the head of the queue may move
    (a job joins an empty queue, resources are freed) and the head fits a node, as it does
    for compiled placers.
    """

    strict_fcfs: ClassVar[bool] = False
    ask_when_nothing_fits: ClassVar[bool] = False
    #: True: the engine asks only once every event at the current instant (completions,
    #: arrivals, ...) has been applied, so one decision sees them all (the HPC queue
    #: policies: docs/traces.md). False: after each event, as the compiled placers.
    place_after_ties: ClassVar[bool] = False

    def place(self, view: PlacementView) -> list[Placement]:
        raise NotImplementedError(f"placer {self.name!r} has no Python decision function")


class Allocator(Policy):
    """Splits a pool's cores among its jobs. Called at every event in that pool."""

    def allocate(self, view: PoolView) -> Allocation:
        raise NotImplementedError(f"allocator {self.name!r} has no Python decision function")


class Scaler(Policy):
    """Decides when to rent and release nodes. Called after every event that changes the
    queue or the nodes (arrival, completion, node ready, timeout, kill)."""

    #: True: never rents or releases anything, so the engine never asks it.
    static: ClassVar[bool] = False

    def scale(self, view: ScaleView) -> list[Rent | Release]:
        raise NotImplementedError(f"scaler {self.name!r} has no Python decision function")


@dataclass(frozen=True)
class OomKill:
    """A job killed because its memory peak exceeded its request (out-of-memory).

    `used_memory_gb` is what was observed: the request it hit (the true peak is unknown).
    `retries` counts its earlier re-queued attempts; `features` are its input features
    (`Jobs.features`). Units: seconds, cores, GB.
    """

    job: int
    class_index: int
    time_s: float
    request_cpu: float
    request_memory_gb: float
    used_memory_gb: float
    retries: int
    features: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class LiftRule:
    """A lift of out-of-memory requests simple enough to run inside the compiled loop.

    After a job of class c hits its request m GB, its next request is the smallest bin edge
    of c (`edges[c]`, GB) at or above max(`multiplier` x m, m + `add_gb`) — that value
    itself if c has no edge that large, or no edges — capped at `cap_gb[c]` (inf: none). A
    next request that does not exceed m (the cap reached) fails the job.

    Examples: doubling (2, 0); Kubernetes VPA's out-of-memory bump max(used + 100 MiB,
    1.2 x used) (1.2, 100/1024); the next bin edge (1, 1e-9, edges).
    """

    multiplier: float = 2.0
    add_gb: float = 0.0
    edges: tuple[tuple[float, ...], ...] = ()
    cap_gb: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        ok = math.isfinite(self.multiplier) and math.isfinite(self.add_gb)
        if not ok or self.multiplier < 1.0 or self.add_gb < 0.0:
            raise ValueError("lift rule: multiplier must be >= 1 and add_gb >= 0 (finite)")
        if self.multiplier == 1.0 and self.add_gb == 0.0:
            raise ValueError("lift rule: multiplier 1 and add_gb 0 never grow the request")
        for e in self.edges:
            if any(b <= a for a, b in zip(e, e[1:], strict=False)) or any(x <= 0 for x in e):
                raise ValueError("lift rule: bin edges must be > 0 and strictly ascending")

    def next_request(self, class_index: int, hit_gb: float) -> float | None:
        """The next memory request (GB) after hitting `hit_gb`, or None: give up."""
        want = max(self.multiplier * hit_gb, hit_gb + self.add_gb)
        edges = self.edges[class_index] if class_index < len(self.edges) else ()
        above = [e for e in edges if e >= want]
        if above:
            want = above[0]
        cap = self.cap_gb[class_index] if class_index < len(self.cap_gb) else math.inf
        want = min(want, cap)
        return want if want > hit_gb else None


class Provisioner(Policy):
    """Sets what each job requests (cores, GB, GPUs) before it is placed, and lifts the
    request of a job killed out-of-memory (`lift`).

    `retry_limit` (a parameter of every provisioner): how many times an out-of-memory job
    waits again with a lifted request before it fails (0: it fails at once).
    """

    def __init__(self, retry_limit: int = 3) -> None:
        if isinstance(retry_limit, bool) or not isinstance(retry_limit, int) or retry_limit < 0:
            raise ValueError(f"retry_limit must be an integer >= 0, got {retry_limit!r}")
        self.retry_limit = retry_limit

    def requests(
        self, spec: SimulationSpec, class_index: IntArray
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Per-job (cpu, memory_gb, gpu) requests for jobs of the given classes."""
        raise NotImplementedError

    def requests_for(
        self, spec: SimulationSpec, jobs: Any
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Per-job (cpu, memory_gb, gpu) requests of `jobs` (a `clusteremu.cluster.jobs.Jobs`).

        The default asks `requests` by class. A provisioner that sizes each instance
        overrides this and reads `jobs.features` (never `jobs.usage`: that is what it has
        to guess).
        """
        return self.requests(spec, jobs.class_index)

    def class_requests(
        self, spec: SimulationSpec, jobs: Any
    ) -> tuple[FloatArray, FloatArray, FloatArray] | None:
        """Per-class (cpu, memory_gb, gpu) requests (one value per class of `spec`) when
        every job of a class requests the same, else None (the default: the engine asks
        `requests_for` per job). Only a shortcut: the engine fills each job's request from
        its class's, exactly what `requests_for` would have given."""
        return None

    def lift_rule(self) -> LiftRule | None:
        """The lift as a `LiftRule` the loop applies itself (fast), or None: the engine
        calls `lift`. Called after `setup`. Default: doubling, no cap.
        """
        return LiftRule(2.0, 0.0)

    def lift(self, kill: OomKill) -> tuple[float, float] | None:
        """The (cores, GB) request of a job's next attempt after an out-of-memory kill, or
        None to give up (the job fails). The memory request must grow.

        Default: the `lift_rule`, the same cores.
        """
        rule = self.lift_rule()
        if rule is None:
            raise NotImplementedError(f"provisioner {self.name!r} has neither lift nor lift_rule")
        hit = max(kill.request_memory_gb, kill.used_memory_gb)
        mem = rule.next_request(kill.class_index, hit)
        return None if mem is None else (kill.request_cpu, mem)

    def compiled_lift(self) -> LiftRule | None:
        """The rule the loop may apply: None when `lift` is overridden but `lift_rule` is not
        (the engine then calls `lift`)."""
        own_lift = type(self).lift is not Provisioner.lift
        own_rule = type(self).lift_rule is not Provisioner.lift_rule
        if own_lift and not own_rule:
            return None
        return self.lift_rule()
