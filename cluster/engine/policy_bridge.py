"""The bridge to Python policies: their views (placement, pool, scale), the decisions they
return (checked, then applied through the compiled transitions or the engine's
operations), the Python placer's callback from inside the loop, and the refusals of
decisions the loop could not apply."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster import kernel
from clusteremu.cluster.decision_checks import check_allocation, check_placement
from clusteremu.cluster.engine.operations import Operations
from clusteremu.cluster.engine.store import StateStore
from clusteremu.cluster.layout import CF, IS, JF, JI, NF, NI, PF, Refusal
from clusteremu.cluster.live_view import LiveView, static_node_arrays
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies.base import (
    Allocator,
    Placement,
    PlacementView,
    Placer,
    PolicyError,
    PoolView,
    Release,
    Rent,
    Scaler,
    ScaleView,
)
from clusteremu.cluster.policies.compiled_table import RELEASE, RENT

# Plain ints for the Python hot path (reading an IntEnum member costs a dictionary lookup).
_NEED_PLACE, _DEC_N = int(IS.NEED_PLACE), int(IS.DEC_N)
_NO_PLACEMENT, _QUEUED = kernel.NO_PLACEMENT, kernel.PLACEMENTS_QUEUED
_HANDED_BACK = kernel.HANDED_BACK
#: Jobs and nodes a packed placement (job << 32 | node) can name.
_JOBS, _NODES = 1 << 31, 1 << 32

#: The C type of the Python placer's callback (`PolicyBridge.placer_call`).
PLACER_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)


class PolicyBridge:
    """How one engine calls its Python policies (placer, allocator, scaler)."""

    def __init__(
        self,
        store: StateStore,
        spec: SimulationSpec,
        placer: Placer,
        allocator: Allocator,
        scaler: Scaler,
        operations: Operations,
    ) -> None:
        self.store = store
        self.spec = spec
        self.placer = placer
        self.allocator = allocator
        self.scaler = scaler
        self.operations = operations
        # Read once per decision: bound here, not looked up through two attributes.
        self._views = store.views
        self._place = placer.place
        self._pending: list[Placement] | tuple[Placement, ...] = []
        self._placer_error: BaseException | None = None  # raised by the placer in the loop

    # -- the Python placer ----------------------------------------------------------------

    def _static_nodes(self) -> dict[str, npt.NDArray[Any]]:
        store = self.store
        cache = store.views
        if "static" not in cache:
            cache["static"] = static_node_arrays(store.s.nodes_f, store.s.nodes_i)
        return cache["static"]

    def _view(self) -> LiveView:
        """The placer's one view object (made again after the arrays were replaced)."""
        views = self.store.views
        view = views.get("view")
        if view is None:
            view = views["view"] = LiveView(self.store.s, self._static_nodes())
        return view

    def placement_view(self) -> PlacementView:
        """The queue and the nodes now, as a Python placer sees them.

        One view object per run is re-filled at every call (valid during the call only):
        free resources are read-only views of the engine's arrays, and the waiting jobs,
        their classes and requests are what the loop gathered.
        """
        return self._view().refill(kernel.gather_entry(self.store.t))

    def placer_call(self, n: int) -> int:
        """The Python placer decides for the n waiting jobs the loop gathered; called by the
        loop itself (through `PLACER_CALLBACK`), which goes on with the answer.

        Returns one plain placement packed as job << 32 | node (the commonest answer), or
        `kernel.NO_PLACEMENT`, or `kernel.PLACEMENTS_QUEUED` (written to `decisions`), or
        `kernel.HANDED_BACK`: the call raised (nothing may propagate through C), or its
        placements need larger arrays than the running loop holds; the loop then returns
        and `placer_handed_back` finishes the call.
        """
        try:
            view = self._views.get("view") or self._view()
            decisions = self._pending = self._place(view.refill(n))
            if type(decisions) is list and len(decisions) <= 1:
                if not decisions:
                    return _NO_PLACEMENT
                d = decisions[0]
                if type(d) is Placement:
                    # Unpacked at once: each field read by name is a descriptor call.
                    job, node, gpus, setup_s = d
                    if (
                        gpus is None
                        and type(job) is int
                        and type(node) is int
                        and 0 <= job < _JOBS
                        and 0 <= node < _NODES
                        and setup_s == 0.0
                    ):
                        return (job << 32) | node
            if (
                isinstance(decisions, list | tuple)
                and len(decisions) > self.store.s.decisions.shape[1]
            ):
                return _HANDED_BACK  # growing the arrays under the running loop: never
            self._queue_decisions(decisions)
            return _QUEUED
        except BaseException as error:  # noqa: BLE001 - raised again outside the loop
            self._placer_error = error
            return _HANDED_BACK

    def placer_handed_back(self) -> None:
        """Finish the Python placer's call the loop handed back: raise what it raised, or
        queue its placements after growing the arrays."""
        error, self._placer_error = self._placer_error, None
        if error is not None:
            raise error
        self._queue_decisions(self._pending)

    def _queue_decisions(self, decisions: object) -> None:
        """Hand a Python placer's placements to the loop, which applies them first."""
        store = self.store
        name, now = self.placer.name, store.now
        if not isinstance(decisions, list | tuple):
            raise PolicyError(name, now, "place() must return a list of Placement", decisions)
        s = store.s
        if len(decisions) > s.decisions.shape[1]:
            store.replace(**store.room(s.heap_t.size, len(decisions)))
            s = store.s
        out, setup = s.decisions, s.decision_setup_s
        for i, d in enumerate(decisions):
            if not isinstance(d, Placement):
                raise PolicyError(name, now, "not a Placement", d)
            if not all(_whole(x) for x in (d.job, d.node)):
                raise PolicyError(
                    name, now, "a Placement's job and node must be integers (row numbers)", d
                )
            mask = -1
            if d.gpus is not None or d.setup_s != 0.0:
                mask = check_placement(name, now, d, s)
            out[0, i] = d.job
            out[1, i] = d.node
            out[2, i] = mask
            setup[i] = d.setup_s
        s.istate[_DEC_N] = len(decisions)
        s.istate[_NEED_PLACE] = 0

    # -- refusals ---------------------------------------------------------------------------

    def refused(self) -> None:
        """The loop refused a placement of the last Python call: raise, naming it."""
        s, now = self.store.s, self.store.now
        i = int(s.istate[IS.DEC_BAD])
        d = self._pending[i]
        why = int(s.istate[IS.DEC_WHY])
        if why == Refusal.NOT_WAITING:
            raise PolicyError(self.placer.name, now, f"job {d.job} is not waiting in the queue", d)
        check_placement(self.placer.name, now, d, s)  # raises with the details
        raise PolicyError(self.placer.name, now, "the placement cannot be applied", d)

    def refused_compiled(self) -> None:
        """The loop refused a compiled placer's answer: raise, naming it."""
        store = self.store
        s, now, used = store.s, store.now, store.nodes_used
        j, k = int(s.istate[IS.DEC_BAD]), int(s.istate[IS.BAD_NODE])
        d = Placement(j, k)
        if int(s.istate[IS.DEC_WHY]) == Refusal.NODE_NOT_UP and 0 <= k < s.nodes_f.shape[1]:
            raise PolicyError(self.placer.name, now, f"node {k} is not up", d)
        if not 0 <= k < used:
            raise PolicyError(self.placer.name, now, f"node {k} does not exist (0..{used - 1})", d)
        check_placement(self.placer.name, now, d, s)  # raises with the details
        raise PolicyError(self.placer.name, now, "the placement cannot be applied", d)

    def refused_allocation(self) -> None:
        """The loop refused a compiled allocator's cores: raise, naming it."""
        store = self.store
        s = store.s
        p, j = int(s.istate[IS.STATUS_POOL]), int(s.istate[IS.DEC_BAD])
        pool = self.spec.pools[p]
        if j >= 0:
            message = (
                f"job {j} in pool {pool.name!r} got {float(s.alloc_out[j])!r} cores "
                "(expected a finite, non-negative number, written as cores[job])"
            )
        else:
            n = kernel.pool_members_entry(store.t, p)
            total = float(s.alloc_out[s.members[:n]].sum())
            message = (
                f"allocated {total:.6g} cores in pool {pool.name!r} of "
                f"{float(s.pools_f[PF.CORES, p]):g}"
            )
        raise PolicyError(self.allocator.name, store.now, message)

    # -- the scaler -------------------------------------------------------------------------

    def scale_view(self) -> ScaleView:
        store = self.store
        s = store.s
        used = store.nodes_used
        q = s.members[: kernel.gather_entry(store.t)].copy()
        return ScaleView(
            time_s=store.now,
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
        s = self.store.s
        a = int(s.istate[IS.NEXT_ARRIVAL])
        return a < s.jobs_f.shape[1] and float(s.jobs_f[JF.ARRIVAL, a]) <= self.store.now

    def python_scale(self) -> None:
        """The loop asks the Python scaler (its `Rent` and `Release` are carried out)."""
        s = self.store.s
        s.istate[IS.NEED_SCALE] = 0
        decisions = self.scaler.scale(self.scale_view())
        if not isinstance(decisions, list | tuple):
            raise PolicyError(
                self.scaler.name,
                self.store.now,
                "scale() must return a list of Rent / Release",
                decisions,
            )
        self._apply_scaling(decisions)

    def compiled_scale(self) -> None:
        """Carry out the actions a compiled scaler wrote (`scale_actions`), like a Python
        scaler's `Rent` and `Release`."""
        s = self.store.s
        n = int(s.istate[IS.SCALE_N])
        name, now = self.scaler.name, self.store.now
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
        name, now = self.scaler.name, self.store.now
        for d in decisions:
            try:
                if isinstance(d, Rent):
                    for _ in range(int(d.count)):
                        self.operations.rent(d.node_type)
                elif isinstance(d, Release):
                    self.operations.release(d.node)
                else:
                    raise PolicyError(name, now, "not a Rent or Release", d)
            except ValueError as exc:
                raise PolicyError(name, now, str(exc), d) from None

    # -- the allocator ----------------------------------------------------------------------

    def pool_view(self, p: int) -> PoolView:
        store = self.store
        s = store.s
        n = kernel.pool_members_entry(store.t, p)
        ids = s.members[:n].copy()
        cls = s.jobs_i[JI.CLS, ids]
        return PoolView(
            time_s=store.now,
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

    def python_allocate(self) -> None:
        """The loop asks the Python allocator for the pool it names."""
        store = self.store
        p = int(store.s.istate[IS.STATUS_POOL])
        view = self.pool_view(p)
        if view.job_ids.size:
            decision = self.allocator.allocate(view)
            cores = check_allocation(self.allocator.name, view, decision)
            store.s.jobs_f[JF.CORES, view.job_ids] = cores
        kernel.apply_allocation_entry(store.t, p, store.now)


def _whole(x: object) -> bool:
    """An integer (Python or numpy), not a bool: what a Placement's job and node must be."""
    return isinstance(x, int | np.integer) and not isinstance(x, bool)
