"""numba plumbing: the decorators for functions on the engine's hot path, per-signature
entry points, and signals held while numba compiles.

`kernel_function` is `numba.njit` with the on-disk cache and without the reference-counting
runtime (NRT). Every call between compiled functions otherwise increments and decrements
the reference count of each array argument (atomic operations): with a dozen state arrays
per call that cost ~35 ns per call, ten times the work of a typical event. Kernel
functions never allocate arrays, so they need no reference counting. Policy code that must
allocate temporary arrays uses plain `numba.njit(cache=True)` instead.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from llvmlite import ir as llvm_ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from clusteremu.cluster.jit_pipeline import KernelCompiler

F = TypeVar("F")


#: numba options of every kernel function: the on-disk cache, no reference counting, the
#: cheaper inlining of `clusteremu.cluster.jit_pipeline`, and no C-callable wrapper (nothing takes a
#: kernel function's address; compiled policies have their own options).
_KERNEL_OPTIONS: dict[str, Any] = {  # _nrt and the wrappers are not in numba's stubs
    "cache": True,
    "_nrt": False,
    "pipeline_class": KernelCompiler,
    "no_cfunc_wrapper": True,
}


def kernel_function(fn: F) -> F:
    """Compile `fn` for the event loop: cached, no reference counting (see module doc)."""
    compiled: Any = njit(**_KERNEL_OPTIONS)(fn)
    return cast(F, compiled)


def internal_function(fn: F) -> F:
    """`kernel_function` for a function only compiled code calls: compiled without the
    wrapper that lets Python call it (which unboxes every argument, the whole state for
    most: a tenth to a third of such a function's compile on a first run)."""
    options: dict[str, Any] = {**_KERNEL_OPTIONS, "no_cpython_wrapper": True}
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


@intrinsic
def call_c(typingctx: Any, address: Any, n: Any) -> Any:  # noqa: ARG001 - numba's protocol
    """Call the C function `int64 f(int64)` at `address` with `n` (compiled code only).

    The event loop calls a Python placer this way (a ctypes callback,
    `clusteremu.cluster.engine_policies`): about 0.1 us, where leaving the loop and entering it
    again costs its whole state's arguments, 1-2 us."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        word = llvm_ir.IntType(64)
        function = builder.inttoptr(args[0], llvm_ir.FunctionType(word, [word]).as_pointer())
        return builder.call(function, [args[1]])

    return types.int64(types.int64, types.int64), codegen


@intrinsic
def prefetch(typingctx: Any, table: Any, row: Any, column: Any) -> Any:  # noqa: ARG001
    """Ask the CPU to bring `table[row, column]` into its caches (compiled code only; no
    effect on results, never a fault: LLVM's `llvm.prefetch`, a hint).

    The loop asks for the fields of the job whose event comes next while it handles this
    one: a completion reads a dozen rows of a job that started long ago, each a cache miss
    once more jobs run than the caches hold (about half the loop's time at 10^5 running
    jobs, without the hint)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        array_type = sig.args[0]
        array = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(
            context, builder, array_type, array, [args[1], args[2]], wraparound=False
        )
        pointer = builder.bitcast(pointer, llvm_ir.IntType(8).as_pointer())
        word = llvm_ir.IntType(32)
        hint = llvm_ir.FunctionType(llvm_ir.VoidType(), [pointer.type, word, word, word])
        function = cgutils.get_or_insert_function(builder.module, hint, "llvm.prefetch.p0")
        # read, keep in every cache level, data
        builder.call(function, [pointer, word(0), word(3), word(1)])
        return context.get_dummy_value()

    return types.none(table, row, column), codegen


@intrinsic
def trailing_zeros(typingctx: Any, word: Any) -> Any:  # noqa: ARG001 - numba's protocol
    """The number of zero bits below the lowest set bit of a nonzero int64 (compiled code
    only: LLVM's `llvm.cttz`, one instruction)."""

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.cttz(args[0], llvm_ir.Constant(llvm_ir.IntType(1), 1))

    return types.int64(types.int64), codegen


def argument_function(fn: F) -> F:
    """`kernel_function` (cached, no reference counting: it allocates no array) for a
    function that compiled code receives as an argument (a policy's score, say): the
    caller compiles once per function it is passed.

    numba files the caller's on-disk cache entry under the argument function's id, a
    random one per process unless set, so the caller would never find its entry and would
    compile again in every process (adding an entry each time). The id set here is the
    function's module and name, the same in every process.
    """
    py_fn: Any = fn
    compiled: Any = kernel_function(py_fn)
    set_id = getattr(compiled, "_set_uuid", None)  # numba's private API (absent: no cache)
    if set_id is not None:
        set_id(f"{py_fn.__module__}.{py_fn.__qualname__}")
    return cast(F, compiled)


@contextlib.contextmanager
def signals_blocked() -> Iterator[None]:
    """Hold SIGINT and SIGTERM while numba compiles or loads the loop from its cache (an
    exception raised inside LLVM can crash the process); they arrive right after."""
    held = {signal.SIGINT, signal.SIGTERM}
    try:
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    except (AttributeError, OSError, ValueError):  # not on this platform
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def direct_entry(dispatcher: Any, *args: Any) -> Callable[..., Any]:
    """The compiled function `dispatcher` runs for arguments of these types, callable with
    no type dispatch (numba's per-signature entry point: a third of the cost of a call
    that passes the engine's state).

    Only valid while the argument types stay the same: the engine asks again whenever it
    swaps in new arrays. Falls back to the dispatcher itself.
    """
    from numba import typeof

    try:
        sig = tuple(typeof(a) for a in args)
        if sig not in dispatcher.overloads:
            with signals_blocked():
                dispatcher.compile(sig)
        return dispatcher.overloads[sig].entry_point
    except Exception:  # pragma: no cover - numba internals changed: dispatch normally
        return dispatcher
