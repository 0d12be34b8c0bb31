"""Property: the compiled and the Python decision paths give the same run.

On random small scenarios (node types with worker slots and GPUs, classes with requests
that fit some type, GPU shares and patience timeouts; pools with several speed-ups), the
baseline policies' compiled path and their Python path (`force_python_policies=True`)
give identical per-job tables (placers) or the same completion times (allocators).
Examples are derandomized so CI sees the same ones on every run.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusteremu.cluster.distributions import Exponential
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.model import JobClass, NodeType, Pool, Request, SimulationSpec, StopRule
from clusteremu.cluster.policies import registry
from clusteremu.cluster.speedup import AmdahlSpeedup, LinearSpeedup, PowerSpeedup, Speedup
from clusteremu.cluster.testing import equal_tables
from clusteremu.cluster.workload import poisson_arrivals

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


@st.composite
def node_types(draw: Any, i: int) -> NodeType:
    slots = draw(st.sampled_from([math.inf, 1.0, 2.0, 3.0]))
    return NodeType(
        f"t{i}",
        cpu=draw(st.sampled_from([1.0, 2.0, 4.0, 8.0])),
        memory_gb=draw(st.sampled_from([2.0, 8.0, 32.0])),
        gpu=draw(st.sampled_from([0.0, 1.0, 2.0])),
        speed=draw(st.sampled_from([1.0, 2.0])),
        max_jobs=slots,
    )


@st.composite
def job_class(draw: Any, i: int, types: list[NodeType]) -> JobClass:
    """A class whose request fits its 'host' type (so every job can run somewhere)."""
    host = draw(st.sampled_from(types))
    cpu = draw(st.sampled_from([c for c in (0.5, 1.0, 2.0, 4.0) if c <= host.cpu]))
    mem = draw(st.sampled_from([m for m in (0.0, 1.0, 2.0) if m <= host.memory_gb]))
    gpu = draw(st.sampled_from([g for g in (0.0, 0.25, 0.5, 1.0, 2.0) if g <= host.gpu]))
    timeout = draw(st.sampled_from([math.inf, math.inf, 0.5, 3.0]))
    return JobClass(
        f"c{i}",
        poisson_arrivals(draw(st.floats(0.3, 4.0))),
        Exponential(draw(st.floats(0.2, 3.0))),
        LinearSpeedup(),
        request=Request(cpu, mem, gpu),
        timeout_s=timeout,
    )


@st.composite
def placement_specs(draw: Any) -> SimulationSpec:
    types = [draw(node_types(i)) for i in range(draw(st.integers(1, 3)))]
    nodes = tuple(t.name for t in types for _ in range(draw(st.integers(1, 3))))
    classes = tuple(draw(job_class(i, types)) for i in range(draw(st.integers(1, 3))))
    return SimulationSpec(
        name="hypothesis-placement",
        seed=draw(st.integers(0, 2**31)),
        stop=StopRule(jobs=draw(st.integers(20, 120))),
        node_types=tuple(types),
        nodes=nodes,
        pools=(),
        classes=classes,
    )


@st.composite
def speedups(draw: Any) -> Speedup:
    kind = draw(st.sampled_from(["linear", "amdahl", "power"]))
    if kind == "amdahl":
        return AmdahlSpeedup(draw(st.floats(0.0, 1.0)))
    if kind == "power":
        return PowerSpeedup(draw(st.floats(0.1, 1.0)))
    return LinearSpeedup()


@st.composite
def pool_specs(draw: Any) -> SimulationSpec:
    cores = draw(st.sampled_from([1.0, 2.0, 4.0, 8.0]))
    classes = tuple(
        JobClass(
            f"c{i}",
            poisson_arrivals(draw(st.floats(0.2, 2.0))),
            Exponential(draw(st.floats(0.1, 2.0))),
            draw(speedups()),
            holding_cost=draw(st.floats(0.5, 3.0)),
            pool="p",
        )
        for i in range(draw(st.integers(1, 3)))
    )
    return SimulationSpec(
        name="hypothesis-pool",
        seed=draw(st.integers(0, 2**31)),
        stop=StopRule(jobs=draw(st.integers(20, 120))),
        node_types=(),
        nodes=(),
        pools=(Pool("p", cores),),
        classes=classes,
    )


@SETTINGS
@given(spec=placement_specs(), placer=st.sampled_from(["first-fit", "random-fit"]))
def test_placers_compiled_path_equals_python_path(spec: SimulationSpec, placer: str) -> None:
    fast = Engine(spec, placer=registry.create("placer", placer)).run()  # type: ignore[arg-type]
    slow = Engine(
        spec,
        placer=registry.create("placer", placer),  # type: ignore[arg-type]
        force_python_policies=True,
    ).run()
    assert fast.summary["jobs_unfinished"] == 0
    assert equal_tables(fast, slow)


@SETTINGS
@given(spec=pool_specs(), allocator=st.sampled_from(["equi", "fcfs-one-core"]))
def test_allocators_compiled_path_equals_python_path(spec: SimulationSpec, allocator: str) -> None:
    fast = Engine(spec, allocator=registry.create("allocator", allocator)).run()  # type: ignore[arg-type]
    slow = Engine(
        spec,
        allocator=registry.create("allocator", allocator),  # type: ignore[arg-type]
        force_python_policies=True,
    ).run()
    assert fast.summary["jobs_unfinished"] == 0
    np.testing.assert_allclose(
        fast.jobs["end_s"].to_numpy(), slow.jobs["end_s"].to_numpy(), rtol=1e-9, atol=1e-9
    )
    np.testing.assert_array_equal(fast.jobs["arrival_s"].to_numpy(), slow.jobs["arrival_s"])
