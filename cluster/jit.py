"""The decorator for functions on the engine's hot path.

`kernel_function` is `numba.njit` with the on-disk cache and without the reference-counting
runtime (NRT). Every call between compiled functions otherwise increments and decrements
the reference count of each array argument (atomic operations): with a dozen state arrays
per call that cost ~35 ns per call, ten times the work of a typical event. Kernel
functions never allocate arrays, so they need no reference counting. Policy code that must
allocate temporary arrays uses plain `numba.njit(cache=True)` instead.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from numba import njit

F = TypeVar("F")


def kernel_function(fn: F) -> F:
    """Compile `fn` for the event loop: cached, no reference counting (see module doc)."""
    options: dict[str, Any] = {"cache": True, "_nrt": False}  # _nrt is not in numba's stubs
    compiled: Any = njit(**options)(fn)
    return cast(F, compiled)


def inline_function(fn: F) -> F:
    """`kernel_function`, inlined into its callers in numba's own IR.

    For the small transitions every event runs that take the whole `EngineState`: a call
    between compiled functions passes a NamedTuple as every field of every array (hundreds
    of values), which LLVM does not always inline away; inlined, the call costs nothing.
    """
    options: dict[str, Any] = {"cache": True, "_nrt": False, "inline": "always"}
    compiled: Any = njit(**options)(fn)
    return cast(F, compiled)
