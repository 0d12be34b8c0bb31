"""The compiled loop's variants (with / without pools, a Python placer, the rarer events)."""

from __future__ import annotations

from clusteremu.cluster import kernel


def test_loop_variants_have_distinct_names() -> None:
    """numba names a compiled function's symbol by its qualified name: two cached variants
    of one factory loaded into one process must not share it, or one binds the other's
    code (a pools scenario run after a node scenario then started no pool job)."""
    names = {loop.py_func.__qualname__ for loop in kernel.LOOPS.values()}
    assert len(names) == len(kernel.LOOPS) == 8


def test_each_scenario_gets_its_own_variant() -> None:
    assert kernel.loop_entry(True, False) is kernel.run_kernel
    assert kernel.loop_entry(True, True) is kernel.run_kernel_py
    assert kernel.loop_entry(False, False) is kernel.run_kernel_nodes
    assert kernel.loop_entry(False, True) is kernel.run_kernel_nodes_py
    for (pools, python, events), loop in kernel.LOOPS.items():
        assert kernel.loop_entry(pools, python, events) is loop
