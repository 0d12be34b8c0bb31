"""The event loop's numba pipeline (`clusteremu.cluster.jit_pipeline`): copies dropped only where no
value can change, inlined callees used without copies, the same results as Python."""

from __future__ import annotations

import copy
from typing import Any, NamedTuple

import numpy as np
import pytest
from numba import njit
from numba.core import inline_closurecall, ir
from numba.core.compiler import run_frontend

from clusteremu.cluster.jit_pipeline import KernelCompiler, hoist_attribute_reads, propagate_copies


class Pair(NamedTuple):
    left: np.ndarray
    right: np.ndarray


@njit(inline="always", _nrt=False)
def _bump(s: Any, j: int, by: float) -> float:
    s.left[j] += by
    return s.left[j] + s.right[j]


def _loop_carried(n: int) -> int:
    """`a` keeps the last iteration's `b` while `b` changes: a copy that must stay."""
    out = 0
    b = -1
    for i in range(n):
        a = b
        b = i * 2
        out += a * 3 + b
    return out


def _copied_in_loop(n: int) -> int:
    """Copies of loop values, each read in its own iteration: these may go."""
    out = 0
    for i in range(n):
        b = i * 3
        a = b
        if a % 2 == 0:
            out += a
        c = a
        out -= c // 3
    return out


def _uses_pair(left: np.ndarray, right: np.ndarray, n: int) -> float:
    s = Pair(left, right)
    total = 0.0
    for j in range(n):
        total += _bump(s, j % left.size, 0.5)
        total += _bump(s, (j + 1) % left.size, 1.0)  # a second call site of the same callee
    return total


@pytest.mark.parametrize("fn", [_loop_carried, _copied_in_loop])
def test_compiled_with_the_pipeline_as_python_computes(fn: Any) -> None:
    compiled = njit(pipeline_class=KernelCompiler)(fn)
    for n in (0, 1, 2, 7, 50):
        assert compiled(n) == fn(n)


def test_inlined_state_calls_give_python_results_and_leave_numbas_copy_module() -> None:
    compiled = njit(pipeline_class=KernelCompiler, _nrt=False)(_uses_pair)
    left, right = np.arange(5.0), np.linspace(1.0, 2.0, 5)
    expected_left = left.copy()
    expected = 0.0
    for j in range(23):
        for k, by in ((j % 5, 0.5), ((j + 1) % 5, 1.0)):
            expected_left[k] += by
            expected += expected_left[k] + right[k]
    assert compiled(left, right, 23) == pytest.approx(expected, rel=1e-15)
    np.testing.assert_array_equal(left, expected_left)
    assert inline_closurecall.copy is copy  # swapped only while the pass ran


def _names(func_ir: ir.FunctionIR) -> set[str]:
    return {
        stmt.target.name
        for block in func_ir.blocks.values()
        for stmt in block.body
        if isinstance(stmt, ir.Assign)
    }


def test_a_copy_of_a_value_set_before_it_is_dropped() -> None:
    def copies(s: Any) -> Any:
        t = s
        u = t
        return u[0] + t[1]

    func_ir = run_frontend(copies)
    assert propagate_copies(func_ir) == 2
    assert not {"t", "u"} & _names(func_ir)


def test_a_copy_read_in_the_next_iteration_is_kept() -> None:
    func_ir = run_frontend(_loop_carried)
    propagate_copies(func_ir)
    assert "a" in _names(func_ir)


def _attribute_reads(func_ir: ir.FunctionIR, of: str) -> list[str]:
    return [
        stmt.value.attr
        for block in func_ir.blocks.values()
        for stmt in block.body
        if isinstance(stmt, ir.Assign)
        and isinstance(stmt.value, ir.Expr)
        and stmt.value.op == "getattr"
        and stmt.value.value.name == of
    ]


def test_each_field_of_the_state_is_read_once() -> None:
    def reads(s: Any, n: int) -> float:
        total = 0.0
        for j in range(n):
            if s.left[j] > 0.0:
                total += s.right[j]
            total += s.left[j] * np.floor(s.right[j])
        return total

    func_ir = run_frontend(reads)
    assert sorted(_attribute_reads(func_ir, "s")) == ["left", "left", "right", "right"]
    assert hoist_attribute_reads(func_ir) == 4
    propagate_copies(func_ir)
    assert sorted(_attribute_reads(func_ir, "s")) == ["left", "right"]
    floors = [
        stmt
        for block in func_ir.blocks.values()
        for stmt in block.body
        if isinstance(stmt, ir.Assign)
        and isinstance(stmt.value, ir.Expr)
        and stmt.value.op == "getattr"
        and stmt.value.attr == "floor"
    ]
    assert len(floors) == 1  # a module's attribute stays where it was read
    compiled = njit(pipeline_class=KernelCompiler, _nrt=False)(reads)
    pair = Pair(np.array([1.0, -2.0, 3.0]), np.array([0.5, 2.5, 4.0]))
    assert compiled(pair, 3) == reads(pair, 3)


def test_an_attribute_written_is_not_hoisted() -> None:
    def writes(x: Any) -> Any:
        first = x.a
        x.a = 1
        return first + x.a

    assert hoist_attribute_reads(run_frontend(writes)) == 0


def test_an_iterator_made_at_each_read_is_not_shared() -> None:
    def two_passes(a: np.ndarray) -> float:
        total = 0.0
        for v in a.flat:
            total += v
        for v in a.flat:  # a fresh iterator: the array again from its start
            total += 2.0 * v
        return total

    a = np.arange(6.0).reshape(2, 3)
    assert njit(pipeline_class=KernelCompiler)(two_passes)(a) == two_passes(a) == 45.0
