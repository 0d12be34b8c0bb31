"""How the engine calls Python policies, as a mixin of `clusteremu.cluster.engine.Engine`: their
views (placement, pool, scale), the decisions they return (checked, then applied through
the compiled transitions), and refusals."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import numpy.typing as npt
from clusteremu.cluster import kernel
from clusteremu.cluster.decision_checks import check_allocation, check_placement
from clusteremu.cluster.layout import (
    CF,
    FS,
    IS,
    JF,
    JI,
    NF,
    NI,
    PF,
    Refusal,
)
from clusteremu.cluster.live_view import LiveView, static_node_arrays
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import (
    Placement,
    PlacementView,
    PolicyError,
    PoolView,
    Release,
    Rent,
    ScaleView,
)
from clusteremu.cluster.policies.compiled_table import RELEASE, RENT
from clusteremu.cluster.state import (
    EngineState,
)

# Plain ints for the Python hot path (reading an IntEnum member costs a dictionary lookup).
_NEED_PLACE, _NOW, _DEC_N = int(IS.NEED_PLACE), int(FS.NOW), int(IS.DEC_N)
_NO_PLACEMENT, _QUEUED = kernel.NO_PLACEMENT, kernel.PLACEMENTS_QUEUED
_HANDED_BACK = kernel.HANDED_BACK
#: Jobs and nodes a packed placement (job << 32 | node) can name.
_JOBS, _NODES = 1 << 31, 1 << 32

#: The C type of the Python placer's callback (`PolicyCalls._placer_call`).
PLACER_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)


class PolicyCalls:
    """Python policy calls of `Engine` (state `_s`, `_t`, `spec`: see
    `clusteremu.cluster.engine`)."""

    _s: EngineState
    spec: SimulationSpec

    # -- Python policies --------------------------------------------------------------

    def _static_nodes(self) -> dict[str, npt.NDArray[Any]]:
        cache = self._view_cache
        if "static" not in cache:
            cache["static"] = static_node_arrays(self._s.nodes_f, self._s.nodes_i)
        return cache["static"]

    def placement_view(self) -> PlacementView:
        """The queue and the nodes now, as a Python placer sees them.

        One view object per run is re-filled at every call (valid during the call only):
        free resources are read-only views of the engine's arrays, and the waiting jobs,
        their classes and requests are what the loop gathered.
        """
        view = self._view_cache.get("view") or self._new_view()
        return view.refill(kernel.gather_entry(self._t))

    def _new_view(self) -> LiveView:
        view = self._view_cache["view"] = LiveView(self._s, self._static_nodes())
        return view

    def _placer_call(self, n: int) -> int:
        """The Python placer decides for the n waiting jobs the loop gathered; called by the
        loop itself (through `PLACER_CALLBACK`), which goes on with the answer.

        Returns one plain placement packed as job << 32 | node (the commonest answer), or
        `kernel.NO_PLACEMENT`, or `kernel.PLACEMENTS_QUEUED` (written to `decisions`), or
        `kernel.HANDED_BACK`: the call raised (nothing may propagate through C), or its
        placements need larger arrays than the running loop holds; the loop then returns
        and `_placer_handed_back` finishes the call.
        """
        try:
            view = self._view_cache.get("view") or self._new_view()
            decisions = self._pending = self.placer.place(view.refill(n))
            if type(decisions) is list and len(decisions) <= 1:
                if not decisions:
                    return _NO_PLACEMENT
                d = decisions[0]
                if (
                    type(d) is Placement
                    and type(d.job) is int
                    and type(d.node) is int
                    and 0 <= d.job < _JOBS
                    and 0 <= d.node < _NODES
                    and d.gpus is None
                    and d.setup_s == 0.0
                ):
                    return (d.job << 32) | d.node
            if isinstance(decisions, list | tuple) and len(decisions) > self._s.decisions.shape[1]:
                return _HANDED_BACK  # growing the arrays under the running loop: never
            self._queue_decisions(decisions)
            return _QUEUED
        except BaseException as error:  # noqa: BLE001 - raised again outside the loop
            self._placer_error = error
            return _HANDED_BACK

    def _placer_handed_back(self) -> None:
        """Finish the Python placer's call the loop handed back: raise what it raised, or
        queue its placements after growing the arrays."""
        error, self._placer_error = self._placer_error, None
        if error is not None:
            raise error
        self._queue_decisions(self._pending)

    def _queue_decisions(self, decisions: object) -> None:
        """Hand a Python placer's placements to the loop, which applies them first."""
        name = self.placer.name
        if not isinstance(decisions, list | tuple):
            raise PolicyError(name, self.now, "place() must return a list of Placement", decisions)
        s = self._s
        if len(decisions) > s.decisions.shape[1]:
            self._replace(**self._room(s.heap_t.size, len(decisions)))
            s = self._s
        out, setup = s.decisions, s.decision_setup_s
        for i, d in enumerate(decisions):
            if not isinstance(d, Placement):
                raise PolicyError(name, self.now, "not a Placement", d)
            if not all(_whole(x) for x in (d.job, d.node)):
                raise PolicyError(
                    name, self.now, "a Placement's job and node must be integers (row numbers)", d
                )
            mask = -1
            if d.gpus is not None or d.setup_s != 0.0:
                mask = check_placement(name, self.now, d, s)
            out[0, i] = d.job
            out[1, i] = d.node
            out[2, i] = mask
            setup[i] = d.setup_s
        s.istate[_DEC_N] = len(decisions)
        s.istate[_NEED_PLACE] = 0

    def _refused(self) -> None:
        """The loop refused a placement of the last Python call: raise, naming it."""
        s = self._s
        i = int(s.istate[IS.DEC_BAD])
        d = self._pending[i]
        why = int(s.istate[IS.DEC_WHY])
        if why == Refusal.NOT_WAITING:
            raise PolicyError(
                self.placer.name, self.now, f"job {d.job} is not waiting in the queue", d
            )
        check_placement(self.placer.name, self.now, d, s)  # raises with the details
        raise PolicyError(self.placer.name, self.now, "the placement cannot be applied", d)

    def _refused_compiled(self) -> None:
        """The loop refused a compiled placer's answer: raise, naming it."""
        s = self._s
        j, k = int(s.istate[IS.DEC_BAD]), int(s.istate[IS.BAD_NODE])
        d = Placement(j, k)
        if int(s.istate[IS.DEC_WHY]) == Refusal.NODE_NOT_UP and 0 <= k < s.nodes_f.shape[1]:
            raise PolicyError(self.placer.name, self.now, f"node {k} is not up", d)
        if not 0 <= k < self.nodes_used:
            raise PolicyError(
                self.placer.name, self.now, f"node {k} does not exist (0..{self.nodes_used - 1})", d
            )
        check_placement(self.placer.name, self.now, d, s)  # raises with the details
        raise PolicyError(self.placer.name, self.now, "the placement cannot be applied", d)

    def _refused_allocation(self) -> None:
        """The loop refused a compiled allocator's cores: raise, naming it."""
        s = self._s
        p, j = int(s.istate[IS.STATUS_POOL]), int(s.istate[IS.DEC_BAD])
        pool = self.spec.pools[p]
        if j >= 0:
            message = (
                f"job {j} in pool {pool.name!r} got {float(s.alloc_out[j])!r} cores "
                "(expected a finite, non-negative number, written as cores[job])"
            )
        else:
            n = kernel.pool_members_entry(self._t, p)
            total = float(s.alloc_out[s.members[:n]].sum())
            message = (
                f"allocated {total:.6g} cores in pool {pool.name!r} of "
                f"{float(s.pools_f[PF.CORES, p]):g}"
            )
        raise PolicyError(self.allocator.name, self.now, message)

    def _apply(self, policy: str, d: Placement) -> None:
        """Check and apply one placement now (the compiled `try_start` checks the fit)."""
        now = float(self._s.fstate[_NOW])
        mask = -1
        if d.gpus is not None or d.setup_s != 0.0:
            mask = check_placement(policy, now, d, self._s)
        why = kernel.try_start(self._t, int(d.job), int(d.node), now, float(d.setup_s), mask)
        if why == Refusal.NOT_WAITING:
            raise PolicyError(policy, now, f"job {d.job} is not waiting in the queue", d)
        if why != Refusal.NONE:
            check_placement(policy, now, d, self._s)  # raises with the details
            raise PolicyError(policy, now, "the placement cannot be applied", d)

    def scale_view(self) -> ScaleView:
        s = self._s
        used = self.nodes_used
        q = s.members[: kernel.gather_entry(self._t)].copy()
        return ScaleView(
            time_s=self.now,
            queue=q,
            class_index=s.jobs_i[JI.CLS, q],
            request_cpu=s.jobs_f[JF.REQ_CPU, q],
            node_type=s.nodes_i[NI.NODE_TYPE, :used].copy(),
            node_status=s.nodes_i[NI.STATUS, :used].copy(),
            running_jobs=s.nodes_f[NF.RUNNING_JOBS, :used].astype(np.int64),
            free_cpu=s.nodes_f[NF.FREE_CPU, :used].copy(),
            node_type_names=tuple(t.name for t in self.spec.node_types),
            batch_pending=self._batch_pending(),
        )

    def _batch_pending(self) -> bool:
        """Whether more jobs arrive at this very instant (a batch still being submitted)."""
        s = self._s
        a = int(s.istate[IS.NEXT_ARRIVAL])
        return a < s.jobs_f.shape[1] and float(s.jobs_f[JF.ARRIVAL, a]) <= self.now

    def _python_scale(self) -> None:
        s = self._s
        s.istate[IS.NEED_SCALE] = 0
        decisions = self.scaler.scale(self.scale_view())
        if not isinstance(decisions, list | tuple):
            raise PolicyError(
                self.scaler.name,
                self.now,
                "scale() must return a list of Rent / Release",
                decisions,
            )
        self._apply_scaling(decisions)

    def _compiled_scale(self) -> None:
        """Carry out the actions a compiled scaler wrote (`scale_actions`), like a Python
        scaler's `Rent` and `Release`."""
        s = self._s
        n = int(s.istate[IS.SCALE_N])
        name, now = self.scaler.name, self.now
        if not 0 < n <= s.scale_actions.shape[1]:
            raise PolicyError(
                name,
                now,
                f"the compiled scaler returned {n} actions "
                f"(expected 0 to {s.scale_actions.shape[1]})",
            )
        decisions: list[Rent | Release] = []
        for kind, arg, count in s.scale_actions[:, :n].T.tolist():
            if kind == RENT:
                decisions.append(Rent(int(arg), count=int(count)))
            elif kind == RELEASE:
                decisions.append(Release(int(arg)))
            else:
                raise PolicyError(
                    name,
                    now,
                    f"scaler action kind {kind} (expected {RENT}: rent, {RELEASE}: release)",
                    (kind, arg),
                )
        self._apply_scaling(decisions)

    def _apply_scaling(self, decisions: list[Any] | tuple[Any, ...]) -> None:
        name, now = self.scaler.name, self.now
        for d in decisions:
            try:
                if isinstance(d, Rent):
                    for _ in range(int(d.count)):
                        self.rent(d.node_type)
                elif isinstance(d, Release):
                    self.release(d.node)
                else:
                    raise PolicyError(name, now, "not a Rent or Release", d)
            except ValueError as exc:
                raise PolicyError(name, now, str(exc), d) from None

    def pool_view(self, p: int) -> PoolView:
        s = self._s
        n = kernel.pool_members_entry(self._t, p)
        ids = s.members[:n].copy()
        cls = s.jobs_i[JI.CLS, ids]
        return PoolView(
            time_s=self.now,
            pool=self.spec.pools[p].name,
            cores=float(s.pools_f[PF.CORES, p]),
            job_ids=ids,
            class_index=cls.copy(),
            arrival_s=s.jobs_f[JF.ARRIVAL, ids].copy(),
            size=s.jobs_f[JF.SIZE, ids].copy(),
            remaining=s.jobs_f[JF.REM, ids].copy(),
            holding_cost=s.classes_f[CF.HOLDING_COST, cls].copy(),
            current_cores=s.jobs_f[JF.CORES, ids].copy(),
        )

    def _python_allocate(self, p: int) -> None:
        view = self.pool_view(p)
        if view.job_ids.size:
            decision = self.allocator.allocate(view)
            cores = check_allocation(self.allocator.name, view, decision)
            self._s.jobs_f[JF.CORES, view.job_ids] = cores
        kernel.apply_allocation_entry(self._t, p, self.now)


def _whole(x: object) -> bool:
    """An integer (Python or numpy), not a bool: what a Placement's job and node must be."""
    return isinstance(x, int | np.integer) and not isinstance(x, bool)
