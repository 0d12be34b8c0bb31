"""`next_fit` (`clusteremu.cluster.policies.compiled_table`): a compiled placer's way through
the fitting nodes. Through the engine's index of free capacity and by a scan it visits
exactly the nodes a scan of the fit rule lists, in node order, on random clusters in random
states; a best-fit written with it decides as one written with a scan and as its Python
twin, with and without the index; the engine keeps the index for a placer that asks
(`uses_fit_index`) on many nodes; and a placement where the job does not fit is still
refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clusteremu.cluster import fit_index, kernel
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.jit import kernel_function
from clusteremu.cluster.layout import JF, JI, NF, NI, NodeStatus
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.policies import compiled
from clusteremu.cluster.policies.base import PolicyError
from clusteremu.cluster.policies.compiled_table import (
    compiled_placer,
    fits,
    next_fit,
    placer_view,
)
from clusteremu.cluster.policies.fifo import FcfsPlacer
from clusteremu.cluster.runner import with_policies
from clusteremu.cluster.state import EngineState
from clusteremu.scenarios.loader import spec_from_dict
from tests.builders import node_scenario
from tests.cluster.test_fit_index import (
    REQ_CPU,
    REQ_GPU,
    REQ_MEM,
    faults_spec,
    gpu_spec,
    hetero_spec,
    random_nodes,
    randomize_node,
)

# --- placers, as a user writes them from docs/adding_a_policy.md -----------------------------


@compiled_placer
def place_best_fit(job, now_s, view):  # type: ignore[no-untyped-def]
    """The fitting node left with the fewest free cores (the first of equals), visiting
    only the fitting nodes; stops at one left with none."""
    best, left_best = -1, math.inf
    k = next_fit(view, job, 0)
    while k >= 0:
        left = view.free_cpu[k] - view.request_cpu[job]
        if left < left_best:
            best, left_best = k, left
            if left <= 0.0:
                break
        k = next_fit(view, job, k + 1)
    return best


@compiled_placer
def place_best_fit_by_scan(job, now_s, view):  # type: ignore[no-untyped-def]
    """`place_best_fit` by a scan of every node."""
    best, left_best = -1, math.inf
    for k in range(view.free_cpu.shape[0]):
        if fits(view, job, k):
            left = view.free_cpu[k] - view.request_cpu[job]
            if left < left_best:
                best, left_best = k, left
                if left <= 0.0:
                    break
    return best


class BestFit(FcfsPlacer):
    name = "test-next-fit-best-fit"
    compiled = place_best_fit
    uses_fit_index = True

    def choose_node(self, view, i, fits, count):  # type: ignore[no-untyped-def]
        best, left_best = -1, math.inf
        for k in np.flatnonzero(fits).tolist():
            left = view.free_cpu[k] - view.request_cpu[i]
            if left < left_best:
                best, left_best = k, left
                if left <= 0.0:
                    break
        return best


# --- compiled helpers: the engine's own view of a hand-made state ------------------------------
# (compiled as the loop is, without reference counting: the view's read-only arrays are the
# state's own, not counted references)


@kernel_function
def fitting_by_next_fit(t, job, out):  # type: ignore[no-untyped-def]
    """Write the nodes `next_fit` visits from 0 into `out`; return how many."""
    view = placer_view(EngineState(*t))
    m = 0
    k = next_fit(view, job, 0)
    while k >= 0:
        out[m] = k
        m += 1
        k = next_fit(view, job, k + 1)
    return m


@kernel_function
def next_fit_from(t, job, start):  # type: ignore[no-untyped-def]
    return next_fit(placer_view(EngineState(*t)), job, start)


@kernel_function
def best_fits(t, job):  # type: ignore[no-untyped-def]
    view = placer_view(EngineState(*t))
    return place_best_fit(job, 0.0, view), place_best_fit_by_scan(job, 0.0, view)


def with_jobs(s: EngineState, rng: np.random.Generator, jobs: int) -> EngineState:
    """State `s` with `jobs` random requests (cores, GB, GPUs)."""
    jobs_f = np.zeros((len(JF), jobs))
    jobs_f[JF.REQ_CPU] = rng.choice(REQ_CPU, jobs)
    jobs_f[JF.REQ_MEM] = rng.choice(REQ_MEM, jobs)
    jobs_f[JF.REQ_GPU] = rng.choice(REQ_GPU, jobs)
    return s._replace(jobs_f=jobs_f, jobs_i=np.zeros((len(JI), jobs), dtype=np.int64))


def scan(s: EngineState, job: int) -> list[int]:
    """The fitting nodes by the Python placers' scan (`compiled.fit_mask`), in node order."""
    ok = np.zeros(s.nodes_f.shape[1], dtype=np.bool_)
    compiled.fit_mask(
        s.nodes_i[NI.STATUS] == NodeStatus.UP,
        s.nodes_f[NF.FREE_CPU],
        s.nodes_f[NF.FREE_MEM],
        s.nodes_f[NF.FREE_SLOTS],
        s.gpu_free,
        s.jobs_f[JF.REQ_CPU, job],
        s.jobs_f[JF.REQ_MEM, job],
        s.jobs_f[JF.REQ_GPU, job],
        ok,
    )
    return np.flatnonzero(ok).tolist()


def python_best_fit(s: EngineState, job: int) -> int:
    best, left_best = -1, math.inf
    for k in scan(s, job):
        left = s.nodes_f[NF.FREE_CPU, k] - s.jobs_f[JF.REQ_CPU, job]
        if left < left_best:
            best, left_best = k, left
            if left <= 0.0:
                break
    return best


def check_state(s: EngineState, jobs: int) -> tuple[int, int]:
    """Every job on `s` with its index and without one: `next_fit`'s nodes are the scan's,
    from every start; best-fit through `next_fit` is best-fit by scan. Returns (fitting
    nodes seen, jobs that fit somewhere)."""
    rows = s.nodes_f.shape[1]
    seen = placed = 0
    out = np.zeros(rows, dtype=np.int64)
    for t in (tuple(s), tuple(s._replace(fit_index=np.zeros((0, 0))))):
        for job in range(jobs):
            want = scan(s, job)
            m = fitting_by_next_fit(t, job, out)
            assert out[:m].tolist() == want, (rows, job)
            for start in range(-1, rows + 2):
                after = [k for k in want if k >= max(start, 0)]
                assert next_fit_from(t, job, start) == (after[0] if after else -1), (job, start)
            chosen, by_scan = best_fits(t, job)
            assert chosen == by_scan == python_best_fit(s, job), (rows, job)
            seen += m
            placed += chosen >= 0
    return seen, placed


def test_next_fit_visits_the_scans_fitting_nodes_on_random_clusters() -> None:
    rng = np.random.default_rng(39)
    seen = placed = 0
    for _ in range(150):
        rows = int(rng.integers(1, 90))
        s = with_jobs(random_nodes(rng, rows, int(rng.choice((0, 1, 2, 4)))), rng, 12)
        a, b = check_state(s, 12)
        seen, placed = seen + a, placed + b
    assert seen > 5000 and 500 < placed < 3000  # many fits, and jobs that fit nowhere


def test_next_fit_follows_the_index_as_nodes_change() -> None:
    """Each change of a node row, followed by the engine's update of its index, leaves
    `next_fit` visiting the scan's nodes."""
    rng = np.random.default_rng(7)
    s = with_jobs(random_nodes(rng, 70, 2), rng, 6)
    t = tuple(s)
    for _ in range(300):
        k = int(rng.integers(0, 70))
        randomize_node(rng, s.nodes_f, s.nodes_i, s.gpu_free, k)
        kernel.node_changed_entry(t, k)
        check_state(s, 6)


def test_a_dense_run_of_fitting_nodes_and_a_lone_one_at_the_end() -> None:
    """Every node fits but for a gap (the walk from one row to the next), and one fitting
    node at the last row of a tree with padding (its rightmost leaves empty)."""
    rng = np.random.default_rng(1)
    s = with_jobs(random_nodes(rng, 300, 0), rng, 1)
    s.nodes_i[NI.STATUS] = NodeStatus.UP
    s.nodes_f[[NF.FREE_CPU, NF.FREE_MEM, NF.FREE_SLOTS]] = 100.0
    s.nodes_f[NF.FREE_CPU, 100:200] = 0.0
    s.jobs_f[[JF.REQ_CPU, JF.REQ_MEM], 0] = 1.0
    s.jobs_f[JF.REQ_GPU, 0] = 0.0
    fit_index.build(s.fit_index, s.nodes_f, s.nodes_i, s.gpu_free)
    out = np.zeros(300, dtype=np.int64)
    m = fitting_by_next_fit(tuple(s), 0, out)
    assert out[:m].tolist() == [*range(100), *range(200, 300)]
    s.nodes_f[NF.FREE_CPU, :299] = 0.0
    fit_index.build(s.fit_index, s.nodes_f, s.nodes_i, s.gpu_free)
    assert fitting_by_next_fit(tuple(s), 0, out) == 1 and out[0] == 299
    assert next_fit_from(tuple(s), 0, 299) == 299 and next_fit_from(tuple(s), 0, 300) == -1


# --- whole runs --------------------------------------------------------------------------------


SPECS = {"hetero": hetero_spec, "gpu-share": gpu_spec, "faults": faults_spec}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_a_best_fit_through_next_fit_runs_alike_with_and_without_the_index(name: str) -> None:
    """Per-job tables: the index, a scan, and the Python twin give the same run."""
    spec = SPECS[name]()
    indexed = Engine(spec, placer=BestFit(), fit_index=True).run().jobs.to_pandas()
    assert len(indexed) > 1000
    assert indexed.equals(Engine(spec, placer=BestFit(), fit_index=False).run().jobs.to_pandas())
    python = Engine(spec, placer=BestFit(), force_python_policies=True).run()
    assert indexed.equals(python.jobs.to_pandas())


def test_the_engine_keeps_the_index_for_a_placer_that_asks_on_many_nodes() -> None:
    class Unasked(BestFit):
        name = "test-next-fit-unasked"
        uses_fit_index = False

    def index_rows(spec: SimulationSpec, placer: FcfsPlacer) -> int:
        return int(Engine(spec, placer=placer).store.s.fit_index.shape[0])

    many = spec_from_dict(node_scenario(nodes=fit_index.MIN_ROWS).jobs(100).build())
    few = spec_from_dict(node_scenario(nodes=fit_index.MIN_ROWS - 1).jobs(100).build())
    assert index_rows(many, BestFit()) > 0
    assert index_rows(few, BestFit()) == 0
    assert index_rows(many, Unasked()) == 0


@compiled_placer
def place_before_the_first_fit(job, now_s, view):  # type: ignore[no-untyped-def]
    """Node 0 whenever `next_fit` skipped it (so it does not fit): a bug."""
    k = next_fit(view, job, 0)
    return 0 if k > 0 else k


@pytest.mark.parametrize("index", [True, False])
def test_a_placement_where_the_job_does_not_fit_is_still_refused(index: bool) -> None:
    class Careless(FcfsPlacer):
        name = "careless-next-fit"
        compiled = place_before_the_first_fit

    spec = with_policies(hetero_spec(), placer="first-fit")
    with pytest.raises(PolicyError, match="'careless-next-fit'.*does not fit node 0"):
        Engine(spec, placer=Careless(), fit_index=index).run()


def test_next_fit_is_exported() -> None:
    from clusteremu.cluster.policies import compiled_table

    assert "next_fit" in compiled_table.__all__
