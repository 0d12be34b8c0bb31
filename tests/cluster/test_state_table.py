"""One table of state (`clusteremu.cluster.state.ARRAYS`): it declares every array of
`EngineState` (name, dtype, empty shape, what it grows with, along which axis), and what an
engine builds and grows agrees with it: the arrays of a built engine have the table's
dtypes and dimensions, those that follow the jobs, the node rows, the heap or the queue
have one size per kind, and renting past the node rows grows every array the table says
has a row per node."""

from __future__ import annotations

import typing

import numpy as np

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.state import (
    ARRAYS,
    GPUS,
    EngineState,
    arrays_growing_with,
    layout_bytes,
)
from clusteremu.scenarios.loader import load_scenario, spec_from_dict
from tests.builders import node_scenario


def test_the_table_declares_every_array_of_the_state_in_its_order() -> None:
    assert tuple(ARRAYS) == EngineState._fields
    defaults = EngineState._field_defaults
    for name, array in defaults.items():
        assert array.dtype == ARRAYS[name].dtype and array.shape == ARRAYS[name].empty, name
    hints = typing.get_type_hints(EngineState)
    for name, spec in ARRAYS.items():
        assert spec.grows in {"job", "node", "heap", "queue", "class", "pool", "fixed"}, name
        assert -len(spec.empty) <= spec.axis < len(spec.empty), name
        assert np.dtype(spec.dtype) == np.dtype(typing.get_args(hints[name])[1].__args__[0])


def _sizes(engine: Engine, unit: str) -> set[int]:
    s = engine.store.s
    return {
        getattr(s, name).shape[ARRAYS[name].axis]
        for name in arrays_growing_with(unit)
        if getattr(s, name).shape[0]  # arrays without rows in this run (run_by_type)
    }


def test_a_built_engine_has_the_tables_dtypes_and_one_size_per_kind_of_growth() -> None:
    for spec in (
        load_scenario("faults-rack"),  # failure models: fault_draws
        load_scenario("ml-workflow", ["stop.jobs=50"]),  # a world model
        spec_from_dict(node_scenario(nodes=3).jobs(40).build()),
    ):
        engine = Engine(spec)
        s = engine.store.s
        for name, table in ARRAYS.items():
            array = getattr(s, name)
            assert array.dtype == table.dtype and array.ndim == len(table.empty), name
        assert _sizes(engine, "job") == {engine.jobs.arrival_s.size}, spec.name
        assert len(_sizes(engine, "node")) == 1, spec.name
        assert len(_sizes(engine, "heap")) == 1
        # every queue array holds an entry per job (`queue` itself may hold more: room for
        # jobs re-queued after out-of-memory kills)
        assert min(_sizes(engine, "queue")) >= max(engine.jobs.arrival_s.size, 1)


def test_renting_past_the_node_rows_grows_every_array_with_a_row_per_node() -> None:
    data = node_scenario(nodes=2).arrivals(0.1).jobs(20).build()
    data["cluster"]["node_types"][0]["price_per_hour"] = 1.0
    engine = Engine(spec_from_dict(data))
    before = _sizes(engine, "node").pop()
    for _ in range(before):  # the first grows the rows to twice as many
        engine.rent(0)
    assert _sizes(engine, "node") == {2 * before}, _sizes(engine, "node")


def test_the_byte_estimate_counts_the_tables_arrays() -> None:
    """A job's bytes are its rows in the job and queue arrays and two heap entries; a node
    row's, its rows in the node arrays and two heap entries (8-byte values)."""
    b = layout_bytes()
    heap = 8 * len(arrays_growing_with("heap"))
    job_rows = sum(ARRAYS[n].per_unit for n in arrays_growing_with("job"))
    queue_rows = sum(ARRAYS[n].per_unit for n in arrays_growing_with("queue"))
    assert b["per_job"] == 8 * (job_rows + queue_rows) + 2 * heap
    node_rows = sum(
        1 if ARRAYS[n].per_unit == GPUS else ARRAYS[n].per_unit for n in arrays_growing_with("node")
    )
    assert b["per_node"] == 8 * node_rows + 2 * heap
