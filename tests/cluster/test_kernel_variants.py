"""The compiled loop's variants (with / without pools, with / without a Python placer)."""

from __future__ import annotations

from cluster import kernel


def test_loop_variants_have_distinct_names() -> None:
    """numba names a compiled function's symbol by its qualified name: two cached variants
    of one factory loaded into one process must not share it, or one binds the other's
    code (a pools scenario run after a node scenario then started no pool job)."""
    loops = [
        kernel.run_kernel,
        kernel.run_kernel_py,
        kernel.run_kernel_nodes,
        kernel.run_kernel_nodes_py,
    ]
    names = {loop.py_func.__qualname__ for loop in loops}
    assert len(names) == 4


def test_each_entry_calls_its_own_variant() -> None:
    loops = {
        (True, False): kernel.run_kernel,
        (True, True): kernel.run_kernel_py,
        (False, False): kernel.run_kernel_nodes,
        (False, True): kernel.run_kernel_nodes_py,
    }
    for (pools, python), loop in loops.items():
        entry = kernel.loop_entry(pools, python)
        called = [n for n in entry.py_func.__code__.co_names if n.startswith("run_kernel")]
        assert len(called) == 1 and getattr(kernel, called[0]) is loop
