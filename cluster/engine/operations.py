"""The engine's operations on jobs and nodes: start, kill, drop, rent, release, one
placement checked and applied, and what the compiled loop asks the engine to do (a
timeline `join`, size redraws, out-of-memory lifts). They write the engine's state;
nothing else does."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from clusteremu.cluster import kernel
from clusteremu.cluster.capacity import fits_a_node_type, node_types_of_run
from clusteremu.cluster.decision_checks import check_placement
from clusteremu.cluster.engine.builder import new_fit_bits
from clusteremu.cluster.engine.compaction import JobIds
from clusteremu.cluster.engine.fault_feed import FaultFeed
from clusteremu.cluster.engine.feeding import JobFeed
from clusteremu.cluster.engine.store import StateStore
from clusteremu.cluster.jobs import Purpose, stream
from clusteremu.cluster.layout import FS, IS, JF, JI, NF, NI, TL, JobState, NodeStatus, Refusal
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import LiftRule, OomKill, Placement, PolicyError, Provisioner
from clusteremu.cluster.state import (
    ARRAYS,
    HEAP_PER_NODE,
    arrays_growing_with,
    check_gpu_request,
    empty_nodes,
    fill_node,
    grown,
)
from clusteremu.cluster.world import initial_cache

#: The arrays with a row per node row (`state.ARRAYS`): what renting past them grows.
NODE_ARRAYS = arrays_growing_with("node")

#: Builds the index of free capacity over new node arrays (nodes_f, nodes_i, gpu_free,
#: placer code): `builder.new_fit_index` with the engine's placer and wish.
FitIndexFactory = Callable[..., np.ndarray]


class Operations:
    """Operations on one replication's jobs and nodes (`seq`: its seed sequence, for the
    redraw streams; `lift_rule`: the provisioner's compiled lift, or None)."""

    def __init__(
        self,
        store: StateStore,
        spec: SimulationSpec,
        seq: np.random.SeedSequence,
        provisioner: Provisioner,
        feed: JobFeed,
        faults: FaultFeed,
        new_fit_index: FitIndexFactory,
        lift_rule: LiftRule | None,
        ids: JobIds | None = None,
    ) -> None:
        self.store = store
        #: Each job row's number in the whole run (rows are renumbered by compaction).
        self.ids = ids if ids is not None else JobIds(store.s.jobs_f.shape[1])
        self.spec = spec
        self.seq = seq
        self.provisioner = provisioner
        self.feed = feed
        self.faults = faults
        self.new_fit_index = new_fit_index
        self.lift_rule = lift_rule
        self.type_index = {t.name: i for i, t in enumerate(spec.node_types)}
        self._redraw_rngs: dict[int, np.random.Generator] = {}
        #: job row -> its original size and each redrawn one (`RunState.sizes_drawn`)
        self.sizes_drawn: dict[int, tuple[float, ...]] = {}

    # -- jobs -------------------------------------------------------------------------------

    def start(
        self,
        job: int,
        node: int,
        gpus: Sequence[int] | None = None,
        setup_s: float = 0.0,
        policy: str = "engine",
    ) -> None:
        """Start queued `job` on `node` now (checked: it must be waiting and fit)."""
        s = self.store.s
        j, k = int(job), int(node)
        decision = Placement(j, k, gpus=None if gpus is None else tuple(gpus), setup_s=setup_s)
        if not 0 <= j < s.jobs_f.shape[1] or s.jobs_i[JI.STATE, j] != JobState.QUEUED:
            raise PolicyError(
                policy, self.store.now, f"job {j} is not waiting in the queue", decision
            )
        self.apply(policy, decision)
        s.istate[IS.NEED_SCALE] = 1

    def apply(self, policy: str, d: Placement) -> None:
        """Check and apply one placement now (the compiled `try_start` checks the fit)."""
        store = self.store
        now = store.now
        mask = -1
        if d.gpus is not None or d.setup_s != 0.0:
            mask = check_placement(policy, now, d, store.s)
        why = kernel.try_start(store.t, int(d.job), int(d.node), now, float(d.setup_s), mask)
        if why == Refusal.NOT_WAITING:
            raise PolicyError(policy, now, f"job {d.job} is not waiting in the queue", d)
        if why != Refusal.NONE:
            check_placement(policy, now, d, store.s)  # raises with the details
            raise PolicyError(policy, now, "the placement cannot be applied", d)

    def kill(
        self,
        job: int,
        requeue: bool = True,
        request: tuple[float, float, float] | None = None,
    ) -> None:
        """Kill running placed `job` now: its work is lost and counted as waste.

        With `requeue` it waits in the queue again, with `request` (cores, GB, GPUs) if
        given, and its `retries` grows; otherwise it fails.
        """
        store = self.store
        s = store.s
        j = int(job)
        if not 0 <= j < s.jobs_f.shape[1] or s.jobs_i[JI.STATE, j] != JobState.RUNNING:
            raise ValueError(f"kill: job {j} is not running")
        if s.jobs_i[JI.POOL, j] >= 0 and s.jobs_i[JI.NODE, j] < 0:
            raise ValueError(f"kill: job {j} runs in a malleable pool, not on a node")
        if requeue:
            store.queue_room(self.feed.jobs_fed, extra=1)
            s = store.s
            if request is not None:
                check_gpu_request(f"kill({j}): request", request[2])
        kernel.kill_entry(store.t, j, store.now, requeue)
        if requeue and request is not None:
            s.jobs_f[[JF.REQ_CPU, JF.REQ_MEM, JF.REQ_GPU], j] = request

    def drop(self, job: int) -> None:
        """Drop waiting `job` now: it leaves the queue unplaced and fails (for admission
        control, e.g. a pod that fits on no node is not retried)."""
        store = self.store
        s = store.s
        j = int(job)
        if not 0 <= j < s.jobs_f.shape[1] or s.jobs_i[JI.STATE, j] != JobState.QUEUED:
            raise ValueError(f"drop: job {j} is not waiting in the queue")
        kernel.drop_entry(store.t, j, store.now)

    # -- what the loop asks for -------------------------------------------------------------

    def timeline_action(self) -> None:
        """Carry out the timeline event the loop hands over: `join` rents its nodes."""
        s = self.store.s
        e = int(s.istate[IS.TL_EVENT])
        t = int(s.timeline[TL.TYPE, e])
        for _ in range(int(s.timeline[TL.COUNT, e])):
            self.rent(t)

    def redraw_sizes(self) -> None:
        """Jobs re-queued after a failure get fresh work from their class's size
        distribution (`restart_work: redraw`), each class from its own stream."""
        s = self.store.s
        n = int(s.istate[IS.REDRAW_N])
        s.istate[IS.REDRAW_N] = 0
        for j in s.members[:n].tolist():
            c = int(s.jobs_i[JI.CLS, j])
            rng = self._redraw_rngs.get(c)
            if rng is None:
                rng = stream(self.seq, Purpose.RESTART, self.spec.classes[c].name)
                self._redraw_rngs[c] = rng
            size = float(self.spec.classes[c].size.sample(rng, 1)[0])
            drawn = self.sizes_drawn.get(j) or (float(s.jobs_f[JF.SIZE, j]),)
            self.sizes_drawn[j] = (*drawn, size)
            s.jobs_f[JF.SIZE, j] = size

    def lift(self) -> None:
        """The job the loop names ran out of memory within its retry limit: the provisioner
        lifts its request and the job is killed and queued again with it (its work is
        lost)."""
        store = self.store
        s = store.s
        j = int(s.istate[IS.OOM_JOB])
        s.istate[IS.OOM_JOB] = -1
        now = store.now
        req_cpu, req_mem = float(s.jobs_f[JF.REQ_CPU, j]), float(s.jobs_f[JF.REQ_MEM, j])
        kill = OomKill(
            job=j,
            class_index=int(s.jobs_i[JI.CLS, j]),
            time_s=now,
            request_cpu=req_cpu,
            request_memory_gb=req_mem,
            used_memory_gb=req_mem,
            retries=int(s.jobs_i[JI.RETRIES, j]),
            features={k: float(v[self.ids.of(j)]) for k, v in self.feed.jobs.features.items()},
        )
        name = self.provisioner.name
        rule = self.lift_rule
        if rule is not None:  # the loop's own rule, when it had no queue room to apply it
            mem_or_none = rule.next_request(kill.class_index, req_mem)
            new = None if mem_or_none is None else (req_cpu, mem_or_none)
        else:
            new = self.provisioner.lift(kill)
        if new is None:  # the provisioner gives up: the job fails
            self.kill(j, requeue=False)
            return
        try:
            cpu, mem = (float(x) for x in new)
        except (TypeError, ValueError) as exc:
            raise PolicyError(name, now, f"lift() must return (cores, GB): {exc}") from None
        if not (math.isfinite(cpu) and cpu >= 0 and math.isfinite(mem)) or mem <= req_mem:
            raise PolicyError(
                name,
                now,
                f"lift() must grow the memory request of job {j} above {req_mem:g} GB "
                "(finite cores >= 0)",
                (cpu, mem),
            )
        gpu = float(s.jobs_f[JF.REQ_GPU, j])
        types = node_types_of_run(self.spec, s.nodes_i[NI.NODE_TYPE, : store.nodes_used])
        if not fits_a_node_type(self.spec, types, cpu, mem, gpu):
            # No node the run holds or may rent could ever hold it: it fails now (it would
            # wait forever), and its request shows what it needed (`failed_no_fit`).
            self.kill(j, requeue=False)
            s.jobs_f[[JF.REQ_CPU, JF.REQ_MEM], j] = (cpu, mem)
            return
        self.kill(j, requeue=True, request=(cpu, mem, gpu))

    # -- nodes ------------------------------------------------------------------------------

    def rent(self, node_type: str | int) -> int:
        """Rent a node of `node_type` now; it takes jobs after the type's start-up delay.

        Returns the node's index. Money: the type's start-up cost, plus its price from
        ready to release.
        """
        store = self.store
        t = self.node_type(node_type)
        s = store.s
        k = store.nodes_used
        if k >= s.nodes_f.shape[1]:
            rows = max(2 * s.nodes_f.shape[1], k + 1)
            nodes_f, nodes_i, gpu_free = empty_nodes(rows, s.gpu_free.shape[1])
            nodes_f[:, :k], nodes_i[:, :k], gpu_free[:k] = s.nodes_f, s.nodes_i, s.gpu_free
            # the node rows themselves (unused rows: `empty_nodes`), then every other array
            # that has a row per node (`state.ARRAYS`), grown
            others = {
                name: grown(getattr(s, name), rows, axis=ARRAYS[name].axis)
                for name in NODE_ARRAYS
                if name not in ("nodes_f", "nodes_i", "gpu_free")
            }
            index = self.new_fit_index(nodes_f, nodes_i, gpu_free, int(s.istate[IS.PLACER_CODE]))
            store.replace(
                nodes_f=nodes_f,
                nodes_i=nodes_i,
                gpu_free=gpu_free,
                **others,
                fit_index=index,
                fit_bits=new_fit_bits(nodes_f, nodes_i, index, float(s.fstate[FS.FIT_FLOOR])),
                **store.room(s.heap_t.size + HEAP_PER_NODE * (k + 1), s.queue.size),
            )
            s = store.s
        now = store.now
        nt = self.spec.node_types[t]
        delay = float(nt.startup_delay_s)
        status = NodeStatus.UP if delay <= 0 else NodeStatus.BOOTING
        fill_node(s.nodes_f, s.nodes_i, s.gpu_free, k, nt, t, now, status)
        s.cached[k] = initial_cache(self.spec, t, s.cached.shape[1])
        s.istate[IS.NODES_USED] = k + 1
        kernel.node_changed_entry(store.t, k)
        self.faults.add_node(store, k, t)
        if s.istate[IS.HEAP_N] + 2 >= s.heap_t.size:
            store.replace(**store.room(2 * s.heap_t.size, s.queue.size))
            s = store.s
        if status == NodeStatus.BOOTING:
            kernel.push_entry(store.t, now + delay, k, int(kernel.Event.NODE_READY))
        else:
            s.istate[IS.NEED_PLACE] = 1
            if s.nodes_i[NI.FAILS, k]:
                kernel.schedule_fault_entry(store.t, k, now, int(kernel.Event.FAIL))
        store.views.clear()
        return k

    def release(self, node: int) -> None:
        """Give node `node` back now (it must run no job); its price stops."""
        store = self.store
        s = store.s
        k = int(node)
        if not 0 <= k < store.nodes_used:
            raise ValueError(f"release: node {k} does not exist")
        status = s.nodes_i[NI.STATUS, k]
        if status == NodeStatus.RELEASED:
            raise ValueError(f"release: node {k} is already released")
        if s.nodes_f[NF.RUNNING_JOBS, k] > 0:
            raise ValueError(
                f"release: node {k} still runs {int(s.nodes_f[NF.RUNNING_JOBS, k])} job(s)"
            )
        s.nodes_i[NI.STATUS, k] = NodeStatus.RELEASED
        kernel.node_changed_entry(store.t, k)
        s.nodes_f[NF.RELEASED_AT, k] = store.now
        if status == NodeStatus.BOOTING:
            s.nodes_f[NF.READY_AT, k] = store.now  # never ready: no operating time
        store.views.clear()

    def node_type(self, node_type: str | int) -> int:
        """The index of a node type given by name or index (ValueError when unknown)."""
        if isinstance(node_type, str):
            if node_type not in self.type_index:
                raise ValueError(
                    f"unknown node type {node_type!r}; the scenario has "
                    f"{', '.join(self.type_index)}"
                )
            return self.type_index[node_type]
        t = int(node_type)
        if not 0 <= t < len(self.spec.node_types):
            raise ValueError(f"node type index {t} out of range")
        return t
