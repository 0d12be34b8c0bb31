"""The one table of compiled policies: functions written outside the package run inside the
compiled loop, are checked like Python decisions, and decide exactly as their Python twins."""

from __future__ import annotations

import numpy as np
import pytest
from numba.core.errors import TypingError

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import JobState, NodeStatus
from clusteremu.cluster.policies import compiled_table
from clusteremu.cluster.policies.base import Allocation, Allocator, PolicyError, Scaler
from clusteremu.cluster.policies.compiled_table import (
    RELEASE,
    RENT,
    compiled_allocator,
    compiled_placer,
    compiled_scaler,
    fits,
)
from clusteremu.cluster.policies.fifo import Equi, FcfsPlacer, FirstFit
from clusteremu.cluster.testing import PlacerConformance, ScalerConformance
from clusteremu.scenarios.loader import spec_from_dict
from tests.cluster.test_lifecycle import QueueScaler, vm_spec
from tests.cluster.testing.test_conformance import QueueScaler as ConformanceQueueScaler


def mmc(jobs: int = 3000, servers: int = 8, pool: bool = False) -> dict:
    classes = [
        {
            "name": "a",
            "arrival": {"kind": "poisson", "rate_per_s": 0.85 * servers},
            "size": {"kind": "exponential", "mean_s": 1.0},
            "request": {"cpu": 1, "memory_gb": 1},
        }
    ]
    cluster: dict = {
        "node_types": [{"name": "n", "cpu": 2, "memory_gb": 4}],
        "nodes": [{"type": "n", "count": servers}],
    }
    if pool:
        cluster = {"pools": [{"name": "p", "cores": servers}]}
        classes[0].pop("request")
        classes[0]["pool"] = "p"
        classes[0]["speedup"] = {"kind": "amdahl", "parallel_fraction": 0.9}
    return {
        "name": "t",
        "seed": 3,
        "stop": {"jobs": jobs, "warmup_jobs": jobs // 10},
        "cluster": cluster,
        "workload": {"classes": classes},
    }


# --- placers -------------------------------------------------------------------------------


@compiled_placer
def place_first(job, now_s, view):  # type: ignore[no-untyped-def]
    for k in range(view.free_cpu.shape[0]):
        if fits(view, job, k):
            return k
    return -1


@compiled_placer
def place_most_free(job, now_s, view):  # type: ignore[no-untyped-def]
    best, room = -1, -1.0
    for k in range(view.free_cpu.shape[0]):
        if fits(view, job, k) and view.free_cpu[k] > room:
            best, room = k, view.free_cpu[k]
    return best


class UserFirstFit(FirstFit):
    name = "user-first-fit"  # type: ignore[assignment]
    compiled = place_first


class MostFree(FcfsPlacer):
    name = "user-most-free"
    compiled = place_most_free

    def choose(self, fits, count, free_cpu):  # type: ignore[no-untyped-def]
        return int(fits.nonzero()[0][free_cpu[fits].argmax()])


def per_job(result) -> dict:  # type: ignore[no-untyped-def]
    """Start, end and node of every job (NaN, for a job that never ran, as None)."""
    return {
        c: [None if v != v else v for v in result.jobs[c].to_pylist()]
        for c in ("start_s", "end_s", "node")
    }


def test_a_user_compiled_first_fit_decides_as_the_built_in_one() -> None:
    spec = spec_from_dict(mmc())
    built_in = Engine(spec).run()
    user = Engine(spec, placer=UserFirstFit()).run()
    assert per_job(user) == per_job(built_in)


class TestMostFreeConformance(PlacerConformance):
    """The compiled most-free placer and its Python twin give the same runs (the suite's
    compiled == Python property), with GPUs, slots, failures and draining nodes."""

    def make_placer(self) -> MostFree:
        return MostFree()


@compiled_placer
def place_on_node_zero(job, now_s, view):  # type: ignore[no-untyped-def]
    return 0  # ignores the fit rule


@compiled_placer
def place_off_the_end(job, now_s, view):  # type: ignore[no-untyped-def]
    return view.free_cpu.shape[0] + 3


@pytest.mark.parametrize(
    ("function", "message"),
    [(place_on_node_zero, "does not fit node 0"), (place_off_the_end, "does not exist")],
)
def test_a_compiled_placement_that_cannot_apply_is_refused_naming_the_policy(
    function, message
) -> None:  # type: ignore[no-untyped-def]
    class Careless(FirstFit):
        name = "careless"  # type: ignore[assignment]
        compiled = function

    with pytest.raises(PolicyError, match=f"'careless'.*{message}"):
        Engine(spec_from_dict(mmc(jobs=200, servers=1)), placer=Careless()).run()


def test_a_compiled_placer_cannot_write_the_state() -> None:
    @compiled_placer
    def place_and_steal(job, now_s, view):  # type: ignore[no-untyped-def]
        view.free_cpu[0] = 1e9
        return 0

    with pytest.raises(TypingError, match="readonly"):
        compiled_table.function_addresses("placer", place_and_steal)


# --- allocators ------------------------------------------------------------------------------


@compiled_allocator
def allocate_equal(members, n, pool_cores, now_s, view, cores):  # type: ignore[no-untyped-def]
    for i in range(n):
        cores[members[i]] = pool_cores / n


class UserEqui(Equi):
    name = "user-equi"  # type: ignore[assignment]
    compiled = allocate_equal


def test_a_user_compiled_allocator_decides_as_the_built_in_one() -> None:
    spec = spec_from_dict(mmc(pool=True))
    built_in = Engine(spec).run()
    user = Engine(spec, allocator=UserEqui()).run()
    np.testing.assert_array_equal(user.jobs["end_s"].to_numpy(), built_in.jobs["end_s"].to_numpy())


@compiled_allocator
def allocate_twice(members, n, pool_cores, now_s, view, cores):  # type: ignore[no-untyped-def]
    for i in range(n):
        cores[members[i]] = 2.0 * pool_cores / n


@compiled_allocator
def allocate_all_but_last(members, n, pool_cores, now_s, view, cores):  # type: ignore[no-untyped-def]
    for i in range(n - 1):
        cores[members[i]] = 0.0


@pytest.mark.parametrize(
    ("function", "message"),
    [(allocate_twice, "allocated .* cores in pool 'p' of 8"), (allocate_all_but_last, "got nan")],
)
def test_a_bad_compiled_allocation_is_refused_naming_the_policy(function, message) -> None:  # type: ignore[no-untyped-def]
    class Greedy(Allocator):
        name = "careless-allocator"
        compiled = function

        def allocate(self, view):  # type: ignore[no-untyped-def]
            return Allocation(np.zeros(view.job_ids.size))

    with pytest.raises(PolicyError, match=f"'careless-allocator'.*{message}"):
        Engine(spec_from_dict(mmc(jobs=200, pool=True)), allocator=Greedy()).run()


# --- scalers ---------------------------------------------------------------------------------


@compiled_scaler
def scale_vms(now_s, view, actions):  # type: ignore[no-untyped-def]
    """The conformance suite's toy queue scaler, compiled: params = [k, vm type index]."""
    k, vm = int(view.params[0]), int(view.params[1])
    booting = idle = 0
    for n in range(view.node_count):
        if view.node_status[n] == NodeStatus.BOOTING:
            booting += 1
        elif view.node_status[n] == NodeStatus.UP and view.running_jobs[n] == 0:
            idle += 1
    waiting = 0
    for i in range(view.queue_head, view.queue_tail):
        if view.job_state[view.queue[i]] == JobState.QUEUED:
            waiting += 1
    if waiting > k + booting + idle:
        actions[0, 0] = RENT
        actions[1, 0] = vm
        actions[2, 0] = waiting - k - booting - idle
        return 1
    count = 0
    if waiting == 0:
        for n in range(view.node_count):
            up = view.node_status[n] == NodeStatus.UP
            if up and view.running_jobs[n] == 0 and view.node_type[n] == vm:
                actions[0, count] = RELEASE
                actions[1, count] = n
                count += 1
    return count


class CompiledQueueScaler(QueueScaler):
    """`QueueScaler` (tests/cluster/test_lifecycle.py), compiled: `scale_vms` on a cluster of
    VMs only (node type 0)."""

    name = "compiled-queue-scaler"
    compiled = scale_vms

    def kernel_params(self):  # type: ignore[no-untyped-def]
        return np.array([float(self.k), 0.0])


@pytest.mark.parametrize("k", [0, 2])
def test_a_compiled_scaler_rents_and_releases_as_its_python_twin(k: int) -> None:
    arrivals = (0.0, 0.0, 0.0, 50.0, 400.0, 401.0, 402.0, 900.0)
    python = Engine(vm_spec(arrivals), scaler=QueueScaler(k=k)).run()
    compiled = Engine(vm_spec(arrivals), scaler=CompiledQueueScaler(k=k)).run()
    assert per_job(compiled) == per_job(python)
    for key in ("nodes_rented", "cost_usd", "mean_response_time_s"):
        assert compiled.summary[key] == python.summary[key]
    assert python.summary["nodes_rented"] > 1


@compiled_scaler
def scale_nonsense(now_s, view, actions):  # type: ignore[no-untyped-def]
    actions[0, 0] = 9
    return 1


def test_an_unknown_scaler_action_is_refused_naming_the_policy() -> None:
    class Nonsense(Scaler):
        name = "nonsense"
        compiled = scale_nonsense

    with pytest.raises(PolicyError, match="'nonsense'.*action kind 9"):
        Engine(vm_spec((0.0, 1.0)), scaler=Nonsense()).run()


# --- the table -------------------------------------------------------------------------------


def test_every_built_in_compiled_policy_is_in_the_one_table() -> None:
    from clusteremu.cluster.policies import registry

    for kind in ("placer", "allocator", "scaler"):
        for name in registry.names(kind):
            fn = compiled_table.compiled_of(registry.policy_class(kind, name))
            if fn is not None:
                assert compiled_table.code_of(kind, fn) > 0, (kind, name)
    assert compiled_table.code_of("placer", place_first) > 0
    from clusteremu.cluster.policies.scoring.framework import SCORERS

    for plugin in SCORERS.values():  # the built-in scorers are fused, not in the table
        assert compiled_table.compiled_of(plugin) is None


def test_a_function_is_compiled_for_one_extension_point_only() -> None:
    with pytest.raises(TypeError, match="already a compiled placer"):
        compiled_allocator(place_first)
    with pytest.raises(ValueError, match="not a registered compiled allocator"):
        compiled_table.code_of("allocator", place_first)


class CompiledVmScaler(ConformanceQueueScaler):
    name = "compiled-vm-scaler"
    compiled = scale_vms

    def setup(self, spec, rng):  # type: ignore[no-untyped-def]
        self.vm = [t.name for t in spec.node_types].index("vm")

    def kernel_params(self):  # type: ignore[no-untyped-def]
        return np.array([float(self.k), float(self.vm)])


class TestCompiledScalerConformance(ScalerConformance):
    """Compiled == Python for a scaler, on the suite's scenarios (failures included)."""

    def make_scaler(self) -> CompiledVmScaler:
        return CompiledVmScaler(k=1)
