"""The index of free capacity (`clusteremu.cluster.fit_index`): the compiled first-fit placer finds
through it exactly the node a scan in node order finds, the index follows every change of
the nodes, whole runs are identical with and without it (and to the Python first-fit placer,
a scan through the engine), and the engine's state costs what `layout_bytes` says."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from clusteremu.cluster import fit_index, kernel
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import GPU_MILLI, NF, NI, NodeStatus, Status
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies import compiled
from clusteremu.cluster.policies.base import Release, Rent, Scaler, ScaleView
from clusteremu.cluster.runner import with_policies
from clusteremu.cluster.state import EngineState, layout_bytes, state_from
from clusteremu.scenarios.loader import load_scenario, spec_from_dict
from tests.builders import node_scenario

# Values drawn from small sets, so that ties, exact fits and near misses within the
# tolerance all occur.
FREE_CPU = (0.0, 0.5, 1.0, 2.0, 4.0, 4.0 - 1e-10, 8.0)
FREE_MEM = (0.0, 1.0, 2.0, 8.0, 8.0 - 1e-10, 16.0)
GPU_MILLIS = (0.0, 250.0, 500.0, 750.0, 1000.0, 1000.0 - 1e-10)
REQ_CPU = (0.0, 0.5, 1.0, 2.0, 4.0, 6.0, 9.0)
REQ_MEM = (0.0, 1.0, 2.0, 8.0, 12.0, 20.0)
REQ_GPU = (0.0, 0.0, 0.25, 0.5, 0.75, 1.0, 2.0, 3.0)
STATUSES = (
    NodeStatus.UP,
    NodeStatus.UP,
    NodeStatus.UP,
    NodeStatus.BOOTING,
    NodeStatus.DOWN,
    NodeStatus.DRAINING,
    NodeStatus.RELEASED,
    NodeStatus.UNUSED,
)


def random_nodes(rng: np.random.Generator, rows: int, gpus: int) -> EngineState:
    """A state of `rows` node rows in random statuses with random free capacity and `gpus`
    GPUs each (0: none, as the engine keeps them: one column of zeros), and its index."""
    nodes_f = np.zeros((len(NF), rows))
    nodes_i = np.zeros((len(NI), rows), dtype=np.int64)
    gpu_free = np.zeros((rows, max(gpus, 1)))
    for k in range(rows):
        randomize_node(rng, nodes_f, nodes_i, gpu_free, k)
    if gpus == 0:
        gpu_free[:] = 0.0
    index = fit_index.new_index(rows, gpus=gpus > 0)
    fit_index.build(index, nodes_f, nodes_i, gpu_free)
    return state_from(nodes_f=nodes_f, nodes_i=nodes_i, gpu_free=gpu_free, fit_index=index)


def randomize_node(
    rng: np.random.Generator,
    nodes_f: np.ndarray,
    nodes_i: np.ndarray,
    gpu_free: np.ndarray,
    k: int,
) -> None:
    nodes_i[NI.STATUS, k] = rng.choice(STATUSES)
    nodes_f[NF.FREE_CPU, k] = rng.choice(FREE_CPU)
    nodes_f[NF.FREE_MEM, k] = rng.choice(FREE_MEM)
    nodes_f[NF.FREE_SLOTS, k] = rng.choice((0.0, 1.0, 1.0, 3.0, math.inf))
    gpu_free[k] = rng.choice(GPU_MILLIS, size=gpu_free.shape[1])
    if rng.random() < 0.3:  # a node without GPUs
        gpu_free[k] = 0.0


def scan(s: EngineState, cpu: float, mem: float, gpu: float) -> int:
    """The first node row that fits by a scan in node order (the compiled scan of Python
    placers' views)."""
    return int(
        compiled.first_fit(
            s.nodes_i[NI.STATUS] == NodeStatus.UP,
            s.nodes_f[NF.FREE_CPU],
            s.nodes_f[NF.FREE_MEM],
            s.nodes_f[NF.FREE_SLOTS],
            s.gpu_free,
            cpu,
            mem,
            gpu,
        )
    )


def rebuilt(s: EngineState) -> np.ndarray:
    index = fit_index.new_index(s.nodes_f.shape[1], gpus=s.fit_index.shape[1] > 3)
    fit_index.build(index, s.nodes_f, s.nodes_i, s.gpu_free)
    return index


def test_first_fit_through_the_index_is_the_scans_node() -> None:
    rng = np.random.default_rng(27)
    found = 0
    for _ in range(300):
        rows = int(rng.integers(1, 80))
        s = random_nodes(rng, rows, int(rng.choice((0, 1, 2, 4, 8))))
        t = tuple(s)
        for _ in range(20):
            cpu, mem, gpu = rng.choice(REQ_CPU), rng.choice(REQ_MEM), rng.choice(REQ_GPU)
            want = scan(s, cpu, mem, gpu)
            assert fit_index.first_fit_entry(t, cpu, mem, gpu) == want, (rows, cpu, mem, gpu)
            found += want >= 0
    assert 1000 < found < 5000  # both outcomes are common


def test_the_index_follows_each_change_of_a_node() -> None:
    """Any change of one node row (free capacity, GPUs, status) followed by the engine's
    update gives the index built from scratch, and the scan's first fit."""
    rng = np.random.default_rng(5)
    s = random_nodes(rng, 37, 4)
    t = tuple(s)
    for _ in range(2000):
        k = int(rng.integers(0, 37))
        randomize_node(rng, s.nodes_f, s.nodes_i, s.gpu_free, k)
        kernel.node_changed_entry(t, k)
        assert np.array_equal(s.fit_index, rebuilt(s))
        cpu, mem, gpu = rng.choice(REQ_CPU), rng.choice(REQ_MEM), rng.choice(REQ_GPU)
        assert fit_index.first_fit_entry(t, cpu, mem, gpu) == scan(s, cpu, mem, gpu)


def test_an_index_has_a_power_of_two_of_leaves_and_empty_padding() -> None:
    for rows, leaves in ((1, 1), (2, 2), (3, 4), (64, 64), (65, 128), (100_000, 131_072)):
        assert fit_index.new_index(rows).shape == (2 * leaves, 5)
        assert fit_index.new_index(rows, gpus=False).shape == (2 * leaves, 3)
    s = random_nodes(np.random.default_rng(1), 5, 1)
    assert np.all(s.fit_index[8 + 5 :] == -math.inf)  # leaves of rows that do not exist


class QueueScaler(Scaler):
    """Rents a VM for every waiting job beyond the idle and booting VMs; releases idle VMs
    while nothing waits (rows are added and released all along a run)."""

    name = "test-queue-scaler"

    def scale(self, view: ScaleView) -> list[Rent | Release]:
        booting = int(np.sum(view.node_status == NodeStatus.BOOTING))
        idle = (view.node_status == NodeStatus.UP) & (view.running_jobs == 0)
        spare = booting + int(idle.sum())
        if view.queue.size > spare:
            return [Rent("vm", count=view.queue.size - spare)]
        if view.queue.size == 0:
            return [Release(int(k)) for k in np.flatnonzero(idle)[::2]]
        return []


def renting_spec() -> SimulationSpec:
    data = node_scenario(nodes=3, cpu=2).arrivals(2.5).jobs(1500).build()
    data["cluster"]["node_types"].append(
        {"name": "vm", "cpu": 2, "memory_gb": 2, "startup_delay_s": 2.0}
    )
    data["workload"]["classes"][0]["request"] = {"cpu": 2, "memory_gb": 1}
    return spec_from_dict(data)


def hetero_spec() -> SimulationSpec:
    return load_scenario("hetero-placement", ["stop.time_s=3000", "stop.warmup_s=300"])


def gpu_spec() -> SimulationSpec:
    spec = load_scenario("gpu-share", ["stop.jobs=4000", "stop.warmup_jobs=400"])
    return with_policies(spec, placer="first-fit")


def faults_spec() -> SimulationSpec:
    """Random failures and every timeline action: fail, recover, join, drain."""
    return load_scenario("faults-rack", ["stop.time_s=3600", "stop.warmup_s=100"])


SPECS = {
    "hetero": (hetero_spec, {}),
    "gpu-share": (gpu_spec, {}),
    "faults": (faults_spec, {}),
    "renting": (renting_spec, {"scaler": QueueScaler}),
}


def run(name: str, **options: Any) -> Any:
    make, policies = SPECS[name]
    return Engine(make(), **{k: v() for k, v in policies.items()}, **options).run()


def same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN (summaries)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_runs_are_identical_with_and_without_the_index(name: str) -> None:
    """Per-job tables and summaries: the index, a scan, and the Python first-fit placer (a
    scan through the engine, called back at each decision) give the same run."""
    indexed = run(name, fit_index=True)
    scanned = run(name, fit_index=False)
    python = run(name, force_python_policies=True)
    table = indexed.jobs.to_pandas()  # pandas: NaN equals NaN (jobs unfinished at the stop)
    assert len(table) > 1000
    assert table.equals(scanned.jobs.to_pandas())
    assert table.equals(python.jobs.to_pandas())
    assert same(indexed.summary, scanned.summary)
    assert table.equals(run(name, fit_index=True).jobs.to_pandas())  # deterministic


@pytest.mark.parametrize("name", ["faults", "renting"])
def test_the_index_is_exact_after_every_event(name: str) -> None:
    """Stepped an event at a time (the renting run: every 0.2 s, its Python scaler calls
    back at each event), the index is always the one built from the node rows."""
    make, policies = SPECS[name]
    engine = Engine(make(), **{k: v() for k, v in policies.items()}, fit_index=True)
    rows_seen, until, checks = set(), 0.0, 0
    while engine.status != Status.FINISHED:
        if name == "renting":
            until += 0.2
            engine.step(until_s=until)
        else:
            engine.step(max_events=1)
        s = engine.store.s
        rows_seen.add(s.nodes_f.shape[1])
        assert np.array_equal(s.fit_index, rebuilt(s))
        checks += 1
    assert checks > 2000
    if name == "renting":
        assert len(rows_seen) > 3  # node rows grew during the run


def test_the_engine_keeps_an_index_for_compiled_first_fit_on_many_nodes() -> None:
    def index_rows(spec: SimulationSpec, **options: Any) -> int:
        return int(Engine(spec, **options).store.s.fit_index.shape[0])

    rows = fit_index.MIN_ROWS
    many = spec_from_dict(node_scenario(nodes=rows).jobs(100).build())
    few = spec_from_dict(node_scenario(nodes=rows - 1).jobs(100).build())
    leaves = 1 << (rows - 1).bit_length()
    assert index_rows(many) == 2 * leaves
    assert index_rows(few) == 0
    assert index_rows(few, fit_index=True) == 2 * leaves
    assert index_rows(many, fit_index=False) == 0
    assert index_rows(many, force_python_policies=True) == 0
    assert index_rows(with_policies(many, placer="random-fit")) == 0
    # Without GPUs on any node type the index leaves out its GPU columns.
    assert Engine(many).store.s.fit_index.shape[1] == 3
    assert Engine(gpu_spec(), fit_index=True).store.s.fit_index.shape[1] == 5


def test_renting_past_the_threshold_starts_an_index() -> None:
    engine = Engine(renting_spec(), scaler=QueueScaler())
    assert engine.store.s.fit_index.shape[0] == 0
    for _ in range(fit_index.MIN_ROWS):
        engine.rent("vm")
    assert engine.store.s.fit_index.shape[0] > 0
    assert np.array_equal(engine.store.s.fit_index, rebuilt(engine.store.s))
    engine.release(engine.nodes_used - 1)
    assert np.array_equal(engine.store.s.fit_index, rebuilt(engine.store.s))


def test_a_result_shares_no_memory_with_the_engine() -> None:
    """`Engine.result` reads the live state without copying it: the engine may go on (and
    change its requests) without changing an earlier result."""
    engine = Engine(spec_from_dict(node_scenario(nodes=4).jobs(300).build()))
    engine.step(until_s=50.0)
    early = engine.result()
    before = early.jobs.to_pandas()
    engine.run()
    assert early.jobs.to_pandas().equals(before)
    assert engine.jobs_done == 300


def test_the_state_costs_what_the_layout_says() -> None:
    """Bytes of an engine's state: J x per_job + N x per_node + the index, within a few
    hundred bytes of fixed arrays (classes, counters)."""
    jobs, nodes = 3000, 200
    spec = spec_from_dict(node_scenario(nodes=nodes).arrivals(20.0).jobs(jobs).build())
    for index in (False, True):
        engine = Engine(spec, fit_index=index)
        sizes = layout_bytes(gpus=0, fit_index_rows=nodes if index else 0)
        total = sum(a.nbytes for a in engine.store.s)
        expected = jobs * sizes["per_job"] + nodes * sizes["per_node"] + sizes["fit_index"]
        expected += sizes["fixed"]
        assert 0 <= total - expected < 2048, (total, expected)
    # 416: 24 float rows (the run-time estimate of a trace's jobs, `JF.ESTIMATE`, is the 24th)
    assert sizes["per_job"] == 416 and sizes["per_node"] == 256
    assert sizes["fit_index"] == 2 * 256 * 3 * 8
    assert layout_bytes(gpus=8, fit_index_rows=200)["fit_index"] == 2 * 256 * 5 * 8


def test_whole_gpus_and_shares_prune_by_their_own_columns() -> None:
    """A node whose GPUs hold 750 milli each fits a share up to 0.75 but no whole GPU; one
    wholly free GPU fits 1 but not 2."""
    nodes_f = np.zeros((len(NF), 2))
    nodes_i = np.zeros((len(NI), 2), dtype=np.int64)
    nodes_i[NI.STATUS] = NodeStatus.UP
    nodes_f[[NF.FREE_CPU, NF.FREE_MEM, NF.FREE_SLOTS]] = 8.0
    gpu_free = np.array([[750.0, 750.0], [GPU_MILLI, 0.0]])
    index = fit_index.new_index(2)
    fit_index.build(index, nodes_f, nodes_i, gpu_free)
    t = tuple(state_from(nodes_f=nodes_f, nodes_i=nodes_i, gpu_free=gpu_free, fit_index=index))
    assert [fit_index.first_fit_entry(t, 1.0, 1.0, g) for g in (0.75, 0.8, 1.0, 2.0)] == [
        0,
        1,
        1,
        -1,
    ]
