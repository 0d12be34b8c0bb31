"""Driving the compiled loop: one call runs it until it stops, answering what it hands
back (a Python policy's decision, a refused decision, a timeline action, fault draws, size
redraws, a lift) through a table from the status it returns to the part that answers."""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt

from clusteremu.cluster import kernel
from clusteremu.cluster.engine.policy_bridge import PLACER_CALLBACK
from clusteremu.cluster.engine.store import StateStore
from clusteremu.cluster.jit import direct_entry
from clusteremu.cluster.layout import IS, Status

_PYTHON_PLACER, _PLACER_CODE = kernel.FN_PYTHON_PLACER, int(IS.PLACER_CODE)
_EVENTS = int(IS.EVENTS)

#: What the loop can hand back before it has finished (each needs an answer).
CALLS = (
    Status.PLACER_HANDED_BACK,
    Status.NEED_SCALE_DECISION,
    Status.NEED_ALLOC_DECISION,
    Status.BAD_DECISION,
    Status.BAD_COMPILED_DECISION,
    Status.BAD_ALLOCATION,
    Status.NEED_SCALE_ACTIONS,
    Status.NEED_LIFT_DECISION,
    Status.NEED_TIMELINE_ACTION,
    Status.NEED_FAULT_DRAWS,
    Status.NEED_SIZE_REDRAWS,
)


class Loop:
    """The compiled loop of one engine.

    `fns`: the compiled functions' addresses (`builder.CompiledFunctions.fns`);
    `answers`: for every status of `CALLS`, what answers it (called with no argument: each
    reads what the loop left in the state); `placer_call`: the Python placer's decision
    for the n jobs the loop gathered (`PolicyBridge.placer_call`).
    """

    def __init__(
        self,
        store: StateStore,
        fns: npt.NDArray[np.int64],
        answers: Mapping[Status, Callable[[], None]],
        placer_call: Callable[[int], int],
    ) -> None:
        missing = [s.name for s in CALLS if s not in answers]
        if missing:
            raise ValueError(f"Loop: no answer for {', '.join(missing)}")
        self.store = store
        self.fns = fns
        self._answers = {int(s): answers[s] for s in CALLS}
        self._placer_call = placer_call
        self._entry: Callable[..., int] | None = None  # the loop entry without type dispatch
        self._entry_version = -1

    def run(self, until_s: float, max_events: int) -> int:
        """Run until `until_s`, `max_events` events or the end (the status it stopped with:
        FINISHED, PAUSED or YIELDED)."""
        store = self.store
        python_placer = store.s.istate.item(_PLACER_CODE) == 0
        entry = self._entry
        if entry is None or self._entry_version != store.version:
            chosen = kernel.loop_entry(
                pools=store.s.pools_f.shape[1] > 0,
                python_placer=python_placer,
                events=bool(store.s.istate[IS.FAULTS] or store.s.istate[IS.HAS_USAGE]),
            )
            entry = self._entry = direct_entry(chosen, store.t, self.fns, until_s, max_events)
            self._entry_version = store.version
        fns = self.fns
        # A Python placer is called from inside the loop through a C function pointer to
        # `placer_call`, made for this call only: held by the engine, it would tie the
        # engine to itself (a cycle), and its arrays would outlive the run until the
        # garbage collector found them. (`ctypes.cast` would make such a cycle too: the
        # pointer is read from the callback's own buffer.)
        if python_placer:
            callback = PLACER_CALLBACK(self._placer_call)
            fns[_PYTHON_PLACER, 0] = ctypes.c_void_p.from_buffer(callback).value or 0
        try:
            return self._answer_calls(entry, until_s, max_events)
        finally:
            fns[_PYTHON_PLACER, 0] = 0

    def _answer_calls(self, entry: Callable[..., int], until_s: float, max_events: int) -> int:
        """Run the loop (`entry`), answering what it hands back, until it stops."""
        store, fns, answers = self.store, self.fns, self._answers
        # `max_events` counts over the whole call: answering a call re-enters the loop.
        first = store.s.istate.item(_EVENTS)
        while True:
            done = store.s.istate.item(_EVENTS) - first
            status = entry(store.t, fns, until_s, max(max_events - done, 0))
            answer = answers.get(status)
            if answer is None:
                if store.s.istate[IS.HEAP_OVERFLOW]:
                    raise RuntimeError("the event heap overflowed (a bug in the engine)")
                return status
            answer()
