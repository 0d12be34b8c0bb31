"""Helpers of the Ray tests: a private Ray instance and a NaN-aware table comparison."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow as pa


def assert_same_jobs(expected: pa.Table, actual: pa.Table) -> None:
    """Column-by-column equality of two per-job tables (NaN equals NaN, exact floats).

    `pyarrow.Table.equals` treats NaN as unequal to itself, so it cannot compare tables
    of unfinished jobs.
    """
    assert expected.column_names == actual.column_names
    assert expected.num_rows == actual.num_rows
    for name in expected.column_names:
        a, b = expected.column(name).combine_chunks(), actual.column(name).combine_chunks()
        if pa.types.is_floating(a.type):
            x = a.to_numpy(zero_copy_only=False)
            y = b.to_numpy(zero_copy_only=False)
            assert np.array_equal(x, y, equal_nan=True), f"column {name!r} differs"
        else:
            assert a.to_pylist() == b.to_pylist(), f"column {name!r} differs"


@contextmanager
def auth_disabled() -> Iterator[None]:
    """Ray 2.6x turns on token authentication for local clusters. The test instances are
    private to this process and bound to loopback, so the fixtures switch it off
    explicitly (RAY_AUTH_MODE=disabled) instead of provisioning a token."""
    old = os.environ.get("RAY_AUTH_MODE")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = old
