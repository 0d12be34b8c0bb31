"""The numba pipeline the event loop compiles with: numba's own, with IR inlining made
cheaper in two ways (together they take about a third off a cold start).

**No copies of the state.** Inlining a function in numba's IR (`inline="always"`) binds
each argument with a copy,
`s.3 = s`. For the engine's state, a tuple of some forty arrays, every copy is a struct of
hundreds of values that numba types, lowers to its own stack slot and LLVM then breaks up
again (its SROA and value-propagation passes were most of a cold start). Replacing each
such copy by the variable it copies removes that work; the compiled code is the same.

A copy `a = b` is replaced only where that cannot change a value: `a` and `b` are each
assigned once, the copy comes before every use of `a` on every path (it dominates them),
and `b` is set before the copy: in a block that strictly dominates the copy's, or earlier
in the copy's own block. Then no path from the copy to a use of `a` sets `b` again
without passing the copy again after it, so `a` and `b` hold the same value at every use.

**Each field read once.** Reading a field of the state (`s.heap_t`) loads the whole
struct first; `hoist_attribute_reads` reads each field once, where the state is set, and
the reads at each use become copies that the pass above removes.

**No defensive copies of the inlined IR.** numba deep-copies a callee's IR twice at every
call site it inlines, block by block, so each block copies the callee's whole variable
scope again: most of the inlining pass's time (numba issues #8989 and #9204). Here the
callee's IR is numba's own fresh translation, made for this call site and used once, so
`InlineInlinablesUncopied` lets numba's inliner use it as it is. Nothing else changes:
the copies' module reference is swapped only while this pass runs, under numba's
compiler lock, and where numba's internals differ from the version this was written for
(0.60 to 0.68), numba's pass runs unchanged.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

from numba.core import inline_closurecall, ir, ir_utils
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import FunctionPass, register_pass
from numba.core.untyped_passes import InlineInlinables


def _assignments(blocks: dict[int, ir.Block]) -> dict[str, list[tuple[int, int]]]:
    """Where each variable is assigned: (block, statement index), one per assignment."""
    where: dict[str, list[tuple[int, int]]] = {}
    for label, block in blocks.items():
        for index, stmt in enumerate(block.body):
            if isinstance(stmt, ir.Assign):
                where.setdefault(stmt.target.name, []).append((label, index))
    return where


def _uses(blocks: dict[int, ir.Block]) -> dict[str, set[int]]:
    """The blocks that read each variable."""
    used: dict[str, set[int]] = {}
    for label, block in blocks.items():
        for stmt in block.body:
            for var in stmt.list_vars():
                if isinstance(stmt, ir.Assign) and var.name == stmt.target.name:
                    continue
                used.setdefault(var.name, set()).add(label)
    return used


def propagate_copies(func_ir: ir.FunctionIR) -> int:
    """Replace the safe copies `a = b` in `func_ir` by `b` (see the module doc), until none
    is left (a copy of a copy qualifies once the first is gone); returns how many."""
    total = 0
    while (replaced := _propagate_once(func_ir)) > 0:
        total += replaced
    return total


def _propagate_once(func_ir: ir.FunctionIR) -> int:
    """One round of `propagate_copies`."""
    blocks = func_ir.blocks
    dominators = ir_utils.compute_cfg_from_blocks(blocks).dominators()
    defined = _assignments(blocks)
    used = _uses(blocks)
    replace: dict[str, ir.Var] = {}
    for label, block in blocks.items():
        for index, stmt in enumerate(block.body):
            if not (isinstance(stmt, ir.Assign) and isinstance(stmt.value, ir.Var)):
                continue
            a, b = stmt.target.name, stmt.value.name
            if len(defined.get(a, ())) != 1 or len(defined.get(b, ())) != 1:
                continue
            if not _set_before(dominators, defined[b][0], (label, index)):
                continue
            if any(label not in dominators[use] for use in used.get(a, ())):
                continue
            if label in used.get(a, ()) and not _copied_before_uses(block, a):
                continue
            replace[a] = stmt.value
    if not replace:
        return 0

    def root(var: ir.Var) -> ir.Var:
        while var.name in replace:
            var = replace[var.name]
        return var

    replace = {name: root(var) for name, var in replace.items()}
    for block in blocks.values():
        block.body = [
            stmt
            for stmt in block.body
            if not (isinstance(stmt, ir.Assign) and stmt.target.name in replace)
        ]
    ir_utils.replace_vars(blocks, replace)
    func_ir._definitions = ir_utils.build_definitions(blocks)
    return len(replace)


def _set_before(
    dominators: dict[int, set[int]], where: tuple[int, int], copy: tuple[int, int]
) -> bool:
    """Whether a variable assigned once, at `where` (block, statement index), is set again
    on no path from the copy at `copy` to any later use of the copy: true when its block
    strictly dominates the copy's (a path from the copy back to it and on to a use would
    pass the copy again), or it is set earlier in the copy's own block."""
    if where[0] != copy[0]:
        return where[0] in dominators[copy[0]]
    return where[1] < copy[1]


#: Attributes whose every read makes a new object (an array's `flat` iterator): not hoisted.
_FRESH_EACH_READ = frozenset({"flat"})


def hoist_attribute_reads(func_ir: ir.FunctionIR) -> int:
    """Read each attribute of a variable once, right where the variable is set, instead of
    at every use (`s.heap_t` at every heap operation of every inlined transition): each
    read of a field of the state loads the whole struct, hundreds of values, that LLVM
    must break up again. Returns how many reads now copy a hoisted one (they go with
    `propagate_copies`).

    Only for variables assigned once and never written through an attribute (`x.a = ...`),
    and not for globals (modules, functions): an attribute of such a value is the same
    wherever it is read after the value is set (a NamedTuple's field, an array's shape).
    Kernel functions hold no objects whose attributes a call could change (no jitclass).
    """
    blocks = func_ir.blocks
    assigned = _assignments(blocks)
    defined = {name: places[0] for name, places in assigned.items() if len(places) == 1}
    written = {
        stmt.target.name
        for block in blocks.values()
        for stmt in block.body
        if isinstance(stmt, ir.SetAttr)
    }
    hoisted: dict[tuple[str, str], ir.Var] = {}
    replaced = 0
    for block in blocks.values():
        for index, stmt in enumerate(block.body):
            value = stmt.value if isinstance(stmt, ir.Assign) else None
            if not (isinstance(value, ir.Expr) and value.op == "getattr"):
                continue
            name = value.value.name
            if name not in defined or name in written or value.attr in _FRESH_EACH_READ:
                continue
            label, where = defined[name]
            source = blocks[label].body[where].value
            if isinstance(source, (ir.Global, ir.FreeVar)):
                continue
            key = (name, value.attr)
            if key not in hoisted:
                hoisted[key] = block.scope.redefine(f"$hoisted.{name}.{value.attr}", value.loc)
            block.body[index] = ir.Assign(hoisted[key], stmt.target, stmt.loc)
            replaced += 1
    by_definition: dict[tuple[int, int], list[ir.Assign]] = {}
    for (name, attr), var in hoisted.items():
        label, where = defined[name]
        read = ir.Expr.getattr(blocks[label].body[where].target, attr, var.loc)
        by_definition.setdefault((label, where), []).append(ir.Assign(read, var, var.loc))
    for (label, where), reads in sorted(by_definition.items(), reverse=True):
        body = blocks[label].body
        body[where + 1 : where + 1] = reads
    if replaced:
        func_ir._definitions = ir_utils.build_definitions(blocks)
    return replaced


def _copied_before_uses(block: ir.Block, name: str) -> bool:
    """Whether `name` is assigned in `block` before any statement of it reads it."""
    for stmt in block.body:
        if isinstance(stmt, ir.Assign) and stmt.target.name == name:
            return True
        if any(var.name == name for var in stmt.list_vars()):
            return False
    return False


@register_pass(mutates_CFG=False, analysis_only=False)
class PropagateStateCopies(FunctionPass):
    """`propagate_copies` and `hoist_attribute_reads`, run right after numba inlines the
    `inline_function` calls."""

    _name = "propagate_state_copies"

    def __init__(self) -> None:
        FunctionPass.__init__(self)

    def run_pass(self, state: Any) -> bool:
        changed = propagate_copies(state.func_ir) > 0
        if hoist_attribute_reads(state.func_ir) > 0:
            propagate_copies(state.func_ir)
            changed = True
        return changed


class _NoCopy:
    """Stands in for the `copy` module in numba's inliner: its `deepcopy` returns the IR
    block it is given (see the module doc)."""

    @staticmethod
    def deepcopy(value: Any, memo: Any = None) -> Any:  # noqa: ARG004 - copy's signature
        return value


@contextlib.contextmanager
def _callee_ir_not_copied() -> Iterator[None]:
    """While inside, numba's inliner uses each callee's fresh IR without copying it."""
    if getattr(inline_closurecall, "copy", None) is not copy:  # numba changed: leave it
        yield
        return
    setattr(inline_closurecall, "copy", _NoCopy)  # noqa: B010 - the module doc says why
    try:
        yield
    finally:
        setattr(inline_closurecall, "copy", copy)  # noqa: B010


@register_pass(mutates_CFG=True, analysis_only=False)
class InlineInlinablesUncopied(InlineInlinables):
    """numba's `InlineInlinables`, without its defensive copies of the callees' IR (also
    for the callees' own inlined calls, which it compiles while it runs)."""

    _name = "inline_inlinables_uncopied"

    def run_pass(self, state: Any) -> bool:
        with _callee_ir_not_copied():
            result: bool = super().run_pass(state)
        return result


class KernelCompiler(CompilerBase):
    """numba's nopython pipeline with `InlineInlinablesUncopied` in place of numba's IR
    inlining, followed by `PropagateStateCopies`."""

    def define_pipelines(self) -> list[Any]:
        pipeline = DefaultPassBuilder.define_nopython_pipeline(self.state)
        pipeline.add_pass_after(InlineInlinablesUncopied, InlineInlinables)
        pipeline.add_pass_after(PropagateStateCopies, InlineInlinablesUncopied)
        pipeline.passes = [p for p in pipeline.passes if p[0] is not InlineInlinables]
        pipeline.finalize()
        return [pipeline]
