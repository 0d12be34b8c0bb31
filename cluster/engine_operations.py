"""The engine's operations on jobs and nodes, as a mixin of `clusteremu.cluster.engine.Engine`:
start, kill, drop, rent, release, and what the compiled loop asks the engine to do
(timeline actions, fault draws, size redraws, out-of-memory lifts). They write the
engine's state; nothing else does."""

from __future__ import annotations

import math
from collections.abc import Sequence

from clusteremu.cluster import kernel
from clusteremu.cluster.capacity import fits_a_node_type, node_types_of_run
from clusteremu.cluster.jobs import (
    Purpose,
    replication_seed,
    stream,
)
from clusteremu.cluster.layout import (
    IS,
    JF,
    JI,
    NF,
    NI,
    TL,
    JobState,
    NodeStatus,
)
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import (
    OomKill,
    Placement,
    PolicyError,
)
from clusteremu.cluster.state import (
    EngineState,
    check_gpu_request,
    empty_nodes,
    fill_node,
    grown,
)
from clusteremu.cluster.world import initial_cache


class Operations:
    """Operations of `Engine` (state `_s`, `_t`, `spec`, policies: see
    `clusteremu.cluster.engine`)."""

    _s: EngineState
    spec: SimulationSpec
    _sizes_drawn: dict[int, tuple[float, ...]]

    # -- operations ---------------------------------------------------------------------

    def start(
        self,
        job: int,
        node: int,
        gpus: Sequence[int] | None = None,
        setup_s: float = 0.0,
        policy: str = "engine",
    ) -> None:
        """Start queued `job` on `node` now (checked: it must be waiting and fit).

        `gpus` names the node's GPUs the job gets (default: the first with room); `setup_s`
        is a delay before execution while the job holds its request.
        """
        s = self._s
        j, k = int(job), int(node)
        decision = Placement(j, k, gpus=None if gpus is None else tuple(gpus), setup_s=setup_s)
        if not 0 <= j < s.jobs_f.shape[1] or s.jobs_i[JI.STATE, j] != JobState.QUEUED:
            raise PolicyError(policy, self.now, f"job {j} is not waiting in the queue", decision)
        self._apply(policy, decision)
        s.istate[IS.NEED_SCALE] = 1

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
        s = self._s
        j = int(job)
        if not 0 <= j < s.jobs_f.shape[1] or s.jobs_i[JI.STATE, j] != JobState.RUNNING:
            raise ValueError(f"kill: job {j} is not running")
        if s.jobs_i[JI.POOL, j] >= 0 and s.jobs_i[JI.NODE, j] < 0:
            raise ValueError(f"kill: job {j} runs in a malleable pool, not on a node")
        if requeue:
            self._queue_room(self.jobs_fed, extra=1)
            s = self._s
            if request is not None:
                check_gpu_request(f"kill({j}): request", request[2])
        kernel.kill_entry(self._t, j, self.now, requeue)
        if requeue and request is not None:
            s.jobs_f[[JF.REQ_CPU, JF.REQ_MEM, JF.REQ_GPU], j] = request

    def drop(self, job: int) -> None:
        """Drop waiting `job` now: it leaves the queue unplaced and fails (for admission
        control, e.g. a pod that fits on no node is not retried)."""
        s = self._s
        j = int(job)
        if not 0 <= j < s.jobs_f.shape[1] or s.jobs_i[JI.STATE, j] != JobState.QUEUED:
            raise ValueError(f"drop: job {j} is not waiting in the queue")
        kernel.drop_entry(self._t, j, self.now)

    def _timeline_action(self, e: int) -> None:
        """Carry out timeline event e that the loop hands over: `join` rents its nodes."""
        s = self._s
        t = int(s.timeline[TL.TYPE, e])
        for _ in range(int(s.timeline[TL.COUNT, e])):
            self.rent(t)

    def _refill_draws(self) -> None:
        """A node's up (or down) times ran out: draw the next block and schedule its event."""
        s = self._s
        k, kind = int(s.istate[IS.DRAW_NODE]), int(s.istate[IS.DRAW_KIND])
        self._store_draws(s.fault_draws, s.nodes_i, k, up=kind == int(kernel.Event.FAIL))
        kernel.schedule_fault_entry(self._t, k, self.now, kind)

    def _redraw_sizes(self) -> None:
        """Jobs re-queued after a failure get fresh work from their class's size
        distribution (`restart_work: redraw`), each class from its own stream."""
        s = self._s
        n = int(s.istate[IS.REDRAW_N])
        s.istate[IS.REDRAW_N] = 0
        for j in s.members[:n].tolist():
            c = int(s.jobs_i[JI.CLS, j])
            rng = self._redraw_rngs.get(c)
            if rng is None:
                seq = replication_seed(self.spec, self.replication)
                rng = stream(seq, Purpose.RESTART, self.spec.classes[c].name)
                self._redraw_rngs[c] = rng
            size = float(self.spec.classes[c].size.sample(rng, 1)[0])
            drawn = self._sizes_drawn.get(j) or (float(s.jobs_f[JF.SIZE, j]),)
            self._sizes_drawn[j] = (*drawn, size)
            s.jobs_f[JF.SIZE, j] = size

    def _lift(self, j: int) -> None:
        """Job j ran out of memory within its retry limit: the provisioner lifts its
        request and the job is killed and queued again with it (its work is lost)."""
        s = self._s
        s.istate[IS.OOM_JOB] = -1
        req_cpu, req_mem = float(s.jobs_f[JF.REQ_CPU, j]), float(s.jobs_f[JF.REQ_MEM, j])
        kill = OomKill(
            job=j,
            class_index=int(s.jobs_i[JI.CLS, j]),
            time_s=self.now,
            request_cpu=req_cpu,
            request_memory_gb=req_mem,
            used_memory_gb=req_mem,
            retries=int(s.jobs_i[JI.RETRIES, j]),
            features={k: float(v[j]) for k, v in self.jobs.features.items()},
        )
        name = self.provisioner.name
        rule = self._lift_rule
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
            raise PolicyError(name, self.now, f"lift() must return (cores, GB): {exc}") from None
        if not (math.isfinite(cpu) and cpu >= 0 and math.isfinite(mem)) or mem <= req_mem:
            raise PolicyError(
                name,
                self.now,
                f"lift() must grow the memory request of job {j} above {req_mem:g} GB "
                "(finite cores >= 0)",
                (cpu, mem),
            )
        gpu = float(s.jobs_f[JF.REQ_GPU, j])
        types = node_types_of_run(self.spec, s.nodes_i[NI.NODE_TYPE, : self.nodes_used])
        if not fits_a_node_type(self.spec, types, cpu, mem, gpu):
            # No node the run holds or may rent could ever hold it: it fails now (it would
            # wait forever), and its request shows what it needed (`failed_no_fit`).
            self.kill(j, requeue=False)
            s.jobs_f[[JF.REQ_CPU, JF.REQ_MEM], j] = (cpu, mem)
            return
        self.kill(j, requeue=True, request=(cpu, mem, gpu))

    def rent(self, node_type: str | int) -> int:
        """Rent a node of `node_type` now; it takes jobs after the type's start-up delay.

        Returns the node's index. Money: the type's start-up cost, plus its price from
        ready to release.
        """
        t = self._node_type(node_type)
        s = self._s
        k = self.nodes_used
        if k >= s.nodes_f.shape[1]:
            rows = max(2 * s.nodes_f.shape[1], k + 1)
            nodes_f, nodes_i, gpu_free = empty_nodes(rows, s.gpu_free.shape[1])
            nodes_f[:, :k], nodes_i[:, :k], gpu_free[:k] = s.nodes_f, s.nodes_i, s.gpu_free
            self._replace(
                nodes_f=nodes_f,
                nodes_i=nodes_i,
                gpu_free=gpu_free,
                cached=grown(s.cached, rows, axis=0),
                fault_draws=grown(s.fault_draws, rows, axis=0),
                fit_index=self._new_fit_index(
                    nodes_f, nodes_i, gpu_free, int(s.istate[IS.PLACER_CODE])
                ),
                **self._room(s.heap_t.size + 2 * (k + 1), s.queue.size),
            )
            s = self._s
        nt = self.spec.node_types[t]
        delay = float(nt.startup_delay_s)
        status = NodeStatus.UP if delay <= 0 else NodeStatus.BOOTING
        fill_node(s.nodes_f, s.nodes_i, s.gpu_free, k, nt, t, self.now, status)
        s.cached[k] = initial_cache(self.spec, t, s.cached.shape[1])
        s.istate[IS.NODES_USED] = k + 1
        kernel.node_changed_entry(self._t, k)
        self._fault_draws.add_node(k, t)
        if s.nodes_i[NI.FAILS, k]:
            for up in (True, False):
                self._store_draws(s.fault_draws, s.nodes_i, k, up)
        if s.istate[IS.HEAP_N] + 2 >= s.heap_t.size:
            self._replace(**self._room(2 * s.heap_t.size, s.queue.size))
            s = self._s
        if status == NodeStatus.BOOTING:
            kernel.push_entry(self._t, self.now + delay, k, int(kernel.Event.NODE_READY))
        else:
            s.istate[IS.NEED_PLACE] = 1
            if s.nodes_i[NI.FAILS, k]:
                kernel.schedule_fault_entry(self._t, k, self.now, int(kernel.Event.FAIL))
        self._view_cache.clear()
        return k

    def release(self, node: int) -> None:
        """Give node `node` back now (it must run no job); its price stops."""
        s = self._s
        k = int(node)
        if not 0 <= k < self.nodes_used:
            raise ValueError(f"release: node {k} does not exist")
        status = s.nodes_i[NI.STATUS, k]
        if status == NodeStatus.RELEASED:
            raise ValueError(f"release: node {k} is already released")
        if s.nodes_f[NF.RUNNING_JOBS, k] > 0:
            raise ValueError(
                f"release: node {k} still runs {int(s.nodes_f[NF.RUNNING_JOBS, k])} job(s)"
            )
        s.nodes_i[NI.STATUS, k] = NodeStatus.RELEASED
        kernel.node_changed_entry(self._t, k)
        s.nodes_f[NF.RELEASED_AT, k] = self.now
        if status == NodeStatus.BOOTING:
            s.nodes_f[NF.READY_AT, k] = self.now  # never ready: no operating time
        self._view_cache.clear()

    def _node_type(self, node_type: str | int) -> int:
        if isinstance(node_type, str):
            if node_type not in self._type_index:
                raise ValueError(
                    f"unknown node type {node_type!r}; the scenario has "
                    f"{', '.join(self._type_index)}"
                )
            return self._type_index[node_type]
        t = int(node_type)
        if not 0 <= t < len(self.spec.node_types):
            raise ValueError(f"node type index {t} out of range")
        return t
