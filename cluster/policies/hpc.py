"""The HPC queue policies every Standard Workload Format study compares against (docs/traces.md):
`fcfs`, `sjf` and `easy-backfill`, for rigid parallel jobs that hold their processors for
their run time.

Semantics (the ones the exactness test checks job by job against an independent EASY):

- Every completion and arrival at one instant is applied before the queue is scheduled
  (`place_after_ties`: the engine asks once per instant).
- The queue is in FCFS order: arrival (submit) time, then the trace table's row (the SWF
  job number).
- `fcfs`: queue heads start in order while the head fits; the first that does not blocks
  the rest. Compiled (the built-in first-fit's decision), at full engine speed.
- `sjf`: the queue ordered by the user's estimate (then FCFS order), scheduled strictly in
  that order: the first job that does not fit blocks the others.
- `easy-backfill` (EASY backfilling, Lifka 1995; Mu'alem and Feitelson, IEEE TPDS 2001):
  heads start in FCFS order while they fit; the first that does not fit gets a reservation
  at the *shadow time*, the earliest time enough processors free up as the running jobs
  end by their start + estimate; a later job starts now if it fits now and either ends by
  its estimate no later than the shadow time (``now + estimate <= shadow``) or uses only
  processors the head will not need then (the *extra* processors: free at the shadow time
  less the head's request; a job that takes them reduces the extra for later ones). One
  reservation per scheduling pass.
- A job's estimate is its `estimate_s` (the trace's requested time; the importer sets the
  run time where the requested time is unknown or shorter than the run); a job without one
  (0) uses its run time on the node.

On several nodes the reservation is per node: the head's shadow time is the earliest over
the nodes at which it fits on one (cores and GB; lowest node first on ties), and only a
backfill onto that node is held to the shadow time and extra capacity. On one node (the SWF
machine) this is exactly EASY. GPUs are checked when a job starts (the engine's rule), not
counted in the reservation.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.layout import JobState
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies import compiled as rules
from clusteremu.cluster.policies.base import Placement, PlacementView, Placer
from clusteremu.cluster.policies.fifo import FirstFit, FreeTally
from clusteremu.cluster.policies.registry import register

FloatArray = npt.NDArray[np.float64]
_RUNNING = int(JobState.RUNNING)


@register("placer", "fcfs")
class Fcfs(FirstFit):
    """First come, first served: queue heads in arrival order, each on the first node with
    room; the first that fits nowhere blocks the queue (the compiled first-fit decision)."""


class _QueuePolicy(Placer):
    """Shared by `sjf` and `easy-backfill`: asked once per instant; knows its running jobs."""

    place_after_ties = True

    def setup(self, spec: SimulationSpec, rng: np.random.Generator) -> None:
        #: job -> (node, cores, GB, estimated end s) of the jobs this placer started
        self.running: dict[int, tuple[int, float, float, float]] = {}

    def _estimate(self, view: PlacementView, job: int, node: int) -> float:
        """The job's run-time estimate, s: its own, else its run time on the node."""
        est = float(self._estimates[job])
        if est > 0.0:
            return est
        return float(self._sizes[job]) / float(view.speed[node])

    def _columns(self, view: PlacementView) -> None:
        self._estimates = view.job_column("estimate_s")
        self._sizes = view.job_column("size")
        self._state = view.job_column("state")

    def _forget_ended(self) -> None:
        state = self._state
        ended = [j for j in self.running if state[j] != _RUNNING]
        for j in ended:
            del self.running[j]

    def _start(
        self,
        view: PlacementView,
        tally: FreeTally,
        out: list[Placement],
        job: int,
        k: int,
        req: tuple[float, float, float],
    ) -> None:
        tally.take(k, *req)
        out.append(Placement(job, k))
        self.running[job] = (k, req[0], req[1], view.time_s + self._estimate(view, job, k))


@register("placer", "sjf")
class ShortestJobFirst(_QueuePolicy):
    """Shortest job first by the user's estimate (ties: FCFS order), strictly in that order:
    the first job that fits no node blocks the others. Each job goes to the first node with
    room."""

    def place(self, view: PlacementView) -> list[Placement]:
        self._columns(view)
        self._forget_ended()
        queue = view.queue
        est = np.asarray(self._estimates)[queue]
        no_estimate = est <= 0.0
        if no_estimate.any():  # the run time at speed 1
            est = np.where(no_estimate, np.asarray(self._sizes)[queue], est)
        order = np.lexsort((np.arange(queue.size), est))
        tally = FreeTally(view)
        out: list[Placement] = []
        for i in order.tolist():
            req = (
                float(view.request_cpu[i]),
                float(view.request_memory_gb[i]),
                float(view.request_gpu[i]),
            )
            nodes = tally.fitting(*req)
            if nodes.size == 0:
                break
            self._start(view, tally, out, int(queue[i]), int(nodes[0]), req)
        return out


@register("placer", "easy-backfill")
class EasyBackfill(_QueuePolicy):
    """EASY backfilling: FCFS with a reservation for the queue's head; later jobs start now
    when they do not delay it (module docstring)."""

    def place(self, view: PlacementView) -> list[Placement]:
        self._columns(view)
        self._forget_ended()
        queue = view.queue.tolist()
        cpu, mem, gpu = view.request_cpu, view.request_memory_gb, view.request_gpu
        tally = FreeTally(view)
        out: list[Placement] = []
        now = view.time_s
        n = len(queue)
        i = 0
        while i < n:  # heads in FCFS order while they fit
            req = (float(cpu[i]), float(mem[i]), float(gpu[i]))
            nodes = tally.fitting(*req)
            if nodes.size == 0:
                break
            self._start(view, tally, out, queue[i], int(nodes[0]), req)
            i += 1
        if i >= n - 1:
            return out  # nothing behind a blocked head
        shadow, res_node, extra_cpu, extra_mem = self._reservation(
            view, tally, float(cpu[i]), float(mem[i])
        )
        for b in range(i + 1, n):
            req = (float(cpu[b]), float(mem[b]), float(gpu[b]))
            nodes = tally.fitting(*req)
            if nodes.size == 0:
                continue
            job = queue[b]
            for k in nodes.tolist():
                if k != res_node or now + self._estimate(view, job, k) <= shadow:
                    self._start(view, tally, out, job, k, req)
                    break
                if req[0] <= extra_cpu and req[1] <= extra_mem:
                    extra_cpu -= req[0]
                    extra_mem -= req[1]
                    self._start(view, tally, out, job, k, req)
                    break
        return out

    def _reservation(
        self, view: PlacementView, tally: FreeTally, cpu: float, mem: float
    ) -> tuple[float, int, float, float]:
        """(shadow time s, its node, extra cores, extra GB) of a head needing (cpu, mem):
        per node, the running jobs' estimated ends in order, until the head fits. A head
        that fits no node even empty: shadow +inf on no node (anything may start)."""
        ends: dict[int, list[tuple[float, float, float]]] = {}
        for node, c, m, end in self.running.values():
            ends.setdefault(node, []).append((end, c, m))
        best = (math.inf, -1, math.inf, math.inf)
        now = view.time_s
        active = view.active
        for k in range(tally.cpu.size):
            if not active[k]:
                continue
            free_c, free_m = float(tally.cpu[k]), float(tally.mem[k])
            if free_c >= cpu - rules.FIT_EPS and free_m >= mem - rules.FIT_EPS:
                shadow = now  # fits by cores and GB now (held back by GPUs or slots)
            else:
                running = sorted(ends.get(k, ()))
                shadow = max(_shadow(running, free_c, free_m, cpu, mem), now)
                # Free at the shadow time: every job that ends by it (ties included).
                for end, c, m in running:
                    if max(end, now) > shadow:
                        break
                    free_c += c
                    free_m += m
            if shadow < best[0]:
                best = (shadow, k, free_c - cpu, free_m - mem)
        return best


def _shadow(
    running: list[tuple[float, float, float]], free_c: float, free_m: float, cpu: float, mem: float
) -> float:
    """The first estimated end (s) among `running` (end, cores, GB), in order of end, by
    which enough cores and GB are free for (cpu, mem); +inf when never."""
    for end, c, m in running:
        free_c += c
        free_m += m
        if free_c >= cpu - rules.FIT_EPS and free_m >= mem - rules.FIT_EPS:
            return end
    return math.inf
