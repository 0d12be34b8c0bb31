"""The GPU-sharing placers registered for scenarios (`fgd`, `best-fit`, `dot-product`,
`gpu-packing`, `gpu-clustering`, `gpu-random-fit`): the conformance suite, the shipped
`gpu-share` scenario end to end, FGD's typical pods from the classes, gpu-clustering's
counts of the nodes' jobs (the view's `running_by_class`), and parameter errors."""

from __future__ import annotations

import json
from dataclasses import replace as dataclasses_replace
from typing import Any

import numpy as np
import pytest
import yaml

from clusteremu.cli import main
from clusteremu.cluster.distributions import Deterministic
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.layout import JI, JobState
from clusteremu.cluster.model import JobClass, NodeType, Pool, Request, SimulationSpec, StopRule
from clusteremu.cluster.policies import registry
from clusteremu.cluster.policies.base import Placement, PlacementView, Placer
from clusteremu.cluster.policies.gpu_share_placers import (
    Fgd,
    GpuClustering,
    GpuSharingPlacer,
    expected_jobs,
    kind_of,
    pod_of,
)
from clusteremu.cluster.speedup import LinearSpeedup
from clusteremu.cluster.testing import PlacerConformance, equal_tables, run_capacity_violations
from clusteremu.cluster.workload import TraceArrivals
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import SHIPPED_DIR, load_scenario, spec_from_dict

GPU_SHARE = SHIPPED_DIR / "gpu-share.yaml"
NAMES = ("fgd", "best-fit", "dot-product", "gpu-packing", "gpu-clustering", "gpu-random-fit")


class TestFgd(PlacerConformance):
    def make_placer(self) -> Placer:
        return registry.create("placer", "fgd")  # type: ignore[return-value]


class TestDotProduct(PlacerConformance):
    def make_placer(self) -> Placer:
        return registry.create("placer", "dot-product")  # type: ignore[return-value]


class TestGpuClustering(PlacerConformance):
    def make_placer(self) -> Placer:
        return registry.create("placer", "gpu-clustering")  # type: ignore[return-value]


@pytest.mark.parametrize("name", NAMES)
def test_registered_under_the_replays_names(name: str) -> None:
    placer = registry.create("placer", name)
    assert isinstance(placer, GpuSharingPlacer) and placer.name == name
    assert placer.policy == ("random-fit" if name == "gpu-random-fit" else name)


def test_requests_map_to_the_traces_pods() -> None:
    assert pod_of(2.0, 0.25) == (2000, 1, 250)
    assert pod_of(4.0, 0.5) == (4000, 1, 500)
    assert pod_of(6.0, 1.0) == (6000, 1, 1000)
    assert pod_of(12.0, 2.0) == (12000, 2, 1000)
    assert pod_of(8.0, 0.0) == (8000, 0, 0)


def small(jobs: int = 1500) -> Any:
    return load_scenario(str(GPU_SHARE), [f"stop.jobs={jobs}", f"stop.warmup_jobs={jobs // 10}"])


@pytest.mark.parametrize("name", ["fgd", "dot-product", "gpu-clustering"])
def test_the_gpu_share_scenario_runs_legally(name: str) -> None:
    """Shared GPUs, whole GPUs and CPU-only jobs, within capacity; T4-only jobs on T4s."""
    spec = small()
    placer = registry.create("placer", name)
    engine = Engine(spec, placer=placer)  # type: ignore[arg-type]
    result = engine.run()
    assert result.summary["jobs_completed"] > 0
    assert run_capacity_violations(engine) == []
    s = engine.state
    done = s.jobs_i[JI.STATE] == JobState.DONE
    assert done.sum() >= 1000
    node_type = np.array([spec.node_types.index(spec.node_type(t)) for t in spec.nodes])
    names = [c.name for c in spec.classes]
    t4 = [i for i, t in enumerate(spec.node_types) if t.labels.get("gpu_model") == "T4"]
    cls, node = s.jobs_i[JI.CLS, done], s.jobs_i[JI.NODE, done]
    on = node_type[node[cls == names.index("half-t4")]]
    assert on.size > 0 and np.isin(on, t4).all()
    assert set(np.unique(cls).tolist()) == set(range(len(names)))  # every class ran


def test_fgd_typical_pods_are_the_classes_weighted_by_expected_jobs() -> None:
    spec = small()
    rates = [jc.arrival.rate_per_s for jc in spec.classes]
    jobs = expected_jobs(spec)
    assert np.allclose(np.array(jobs) / sum(jobs), np.array(rates) / sum(rates))
    placer = Fgd()
    placer.setup(spec, np.random.default_rng(0))
    t = placer.typical
    assert t is not None
    # 95 % coverage of the weight: the two rarest classes (quad 0.7 %, pair 3.6 %) are left.
    kept = sorted(zip(t.cpu_milli.tolist(), t.num_gpu.tolist(), t.gpu_milli.tolist(), strict=True))
    assert kept == sorted(
        [(2000, 1, 250), (4000, 1, 500), (4000, 1, 500), (6000, 1, 1000), (8000, 0, 0)]
    )
    assert t.p.sum() == pytest.approx(1.0)
    # half-t4 carries its GPU model: only the T4 bit of the models (T4, V100).
    assert sorted(t.model_mask.tolist()) == [1, 3, 3, 3, 3]
    # Given weights replace the derived ones; the classes not named are not typical.
    given = Fgd(weights={"quad": 3, "half": 1.0}, coverage=1.0)
    given.setup(spec, np.random.default_rng(0))
    t = given.typical
    assert t is not None
    assert (t.num_gpu.tolist(), t.gpu_milli.tolist(), t.p.tolist()) == (
        [4, 1],
        [1000, 500],
        [0.75, 0.25],
    )


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"weights": {"nope": 1}}, "scheduler.placer.params.weights.nope", "a placed job class"),
        ({"weights": {"half": -1}}, "scheduler.placer.params", "weights.half: expected a finite"),
        ({"weights": {"half": 0}}, "scheduler.placer.params.weights", "a weight above 0"),
        ({"weights": [1, 2]}, "scheduler.placer.params.weights", "expected Mapping"),
        ({"coverage": 0}, "scheduler.placer.params", "coverage: expected a number in (0, 1]"),
        ({"coverage": "x"}, "scheduler.placer.params.coverage", "expected float, got 'x'"),
        ({"spread": 2}, "scheduler.placer.params.spread", "unknown parameter"),
    ],
)
def test_fgd_parameters_are_checked(params: dict[str, Any], field: str, message: str) -> None:
    data = yaml.safe_load(GPU_SHARE.read_text())
    data["scheduler"]["placer"]["params"] = params
    with pytest.raises(ScenarioError) as info:
        spec_from_dict(data, "gpu-share.yaml")
    text = str(info.value)
    assert field in text and message in text, text


def test_other_gpu_placers_take_no_parameters() -> None:
    data = yaml.safe_load(GPU_SHARE.read_text())
    data["scheduler"]["placer"] = {"name": "best-fit", "params": {"coverage": 0.9}}
    with pytest.raises(ScenarioError, match="params.coverage: unknown parameter"):
        spec_from_dict(data, "gpu-share.yaml")


def test_clusteremu_run_names_fgd(capsys: pytest.CaptureFixture[str]) -> None:
    """`clusteremu run` of the shipped scenario (placer fgd), and with another GPU placer."""
    argv = ["run", str(GPU_SHARE), "--set", "stop.jobs=600", "--set", "stop.warmup_jobs=60"]
    assert main([*argv, "--json"]) == 0
    fgd = json.loads(capsys.readouterr().out)
    assert main([*argv, "--policy", "placer=gpu-random-fit", "--json"]) == 0
    other = json.loads(capsys.readouterr().out)
    assert fgd["jobs_completed"] == other["jobs_completed"] == 540
    assert fgd["jobs_failed"] == other["jobs_failed"] == 0
    assert fgd["mean_response_time_s"] != other["mean_response_time_s"]


class _FgdNoCache(Fgd):
    """FGD recomputing every node's F_n at every call (no cache)."""

    def _refresh(self, view: Any, cpu_milli: Any) -> None:
        super()._refresh(view, cpu_milli)
        self.f_cache[:] = -1.0


def test_fgd_cache_of_f_n_follows_ended_jobs() -> None:
    """F_n is cached between calls and recomputed where a node's free GPU or CPU changed
    (jobs ended): the run is the one that recomputes every F_n at every call."""
    spec = small(800)
    cached = Engine(spec, placer=Fgd()).run()
    fresh = Engine(spec, placer=_FgdNoCache()).run()
    assert equal_tables(cached, fresh)


# --- gpu-clustering: the nodes' jobs per class (`PlacementView.running_by_class`) ---------


def test_clusteremu_run_names_gpu_clustering(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", str(GPU_SHARE), "--set", "stop.jobs=600", "--set", "stop.warmup_jobs=60"]
    argv += ["--set", "scheduler.placer.name=gpu-clustering", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["jobs_completed"] == 540 and out["jobs_failed"] == 0


class _Recording(GpuClustering):
    """gpu-clustering that keeps, per call, the time, the view's counts and its choices."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[float, np.ndarray, set[int]]] = []

    def place(self, view: PlacementView) -> list[Placement]:
        counts = np.array(view.running_by_class, copy=True)
        out = super().place(view)
        self.calls.append((view.time_s, counts, {p.job for p in out}))
        return out


def test_running_by_class_matches_the_job_table() -> None:
    """At every decision of a gpu-share run, the view's counts are the jobs of each class
    whose [start, end) holds the decision's time on each node, from the per-job table
    (the call's own placements aside); and they go down as jobs end."""
    spec = small(800)
    placer = _Recording()
    engine = Engine(spec, placer=placer)
    table = engine.run().jobs.to_pydict()
    classes = [c.name for c in spec.classes]
    rows = engine.nodes_used
    start = np.array([np.nan if v is None else v for v in table["start_s"]])
    end = np.array([np.inf if v is None or np.isnan(v) else v for v in table["end_s"]])
    node = np.array([-1 if v is None else int(v.rsplit("-", 1)[1]) for v in table["node"]])
    cls = np.array([classes.index(c) for c in table["class"]])
    job = np.array(table["job"])
    assert len(placer.calls) > 500
    for t, counts, placed in placer.calls:
        assert counts.shape == (rows, len(classes))
        held = (start <= t) & (t < end) & ~np.isin(job, list(placed))
        want = np.zeros_like(counts)
        np.add.at(want, (node[held], cls[held]), 1)
        assert np.array_equal(counts, want), t
    totals = [int(c.sum()) for _, c, _ in placer.calls]
    assert min(totals) == 0 and max(totals) > 20
    assert any(b < a for a, b in zip(totals, totals[1:], strict=False)), "never went down"
    # The clustering score read its kinds from these counts: share-gpu (quarter, half,
    # half-t4) in column 0, 1, 2 and 4 whole GPUs in columns 1, 2 and 4, CPU-only none.
    assert placer.class_kind.tolist() == [0, 0, 0, 1, 2, 4, -1]
    assert placer.kind_matrix.shape == (len(classes), 8 + 2)


class _OnNodeZero(Placer):
    """Places every waiting job on node 0 with a 5 s set-up; records the view's counts."""

    name = "on-node-zero"

    def __init__(self) -> None:
        self.seen: list[tuple[float, np.ndarray]] = []

    def place(self, view: PlacementView) -> list[Placement]:
        self.seen.append((view.time_s, np.array(view.running_by_class, copy=True)))
        return [Placement(int(j), 0, setup_s=5.0) for j in view.queue.tolist()]


def test_running_by_class_by_hand() -> None:
    """Two half-GPU jobs, a whole-GPU one and a CPU-only one start on node 0 at t=0 with a
    5 s set-up (held: counted while setting up), the share and CPU jobs end at 15 s, the
    whole one at 105 s; a malleable pool's jobs count nowhere. Probes arrive at 2 and 30 s."""

    def job(name: str, times: tuple[float, ...], size: float, **request: float) -> JobClass:
        req = Request(**request)
        return JobClass(
            name, TraceArrivals(times), Deterministic(size), LinearSpeedup(), request=req
        )

    classes = (
        job("share", (0.0, 0.0), 10.0, cpu=1.0, gpu=0.5),
        job("whole", (0.0,), 100.0, cpu=1.0, gpu=1.0),
        job("cpu", (0.0,), 10.0, cpu=1.0),
        job("probe", (2.0, 30.0), 1.0, cpu=1.0),
        dataclasses_replace(job("pooled", (1.0, 29.0), 50.0), pool="p"),
    )
    types = (NodeType("g4", cpu=16, memory_gb=64, gpu=4),)
    spec = SimulationSpec(
        "by-hand", 1, StopRule(jobs=8), types, ("g4", "g4"), (Pool("p", 4.0),), classes
    )
    placer = _OnNodeZero()
    Engine(spec, placer=placer).run()
    at: dict[float, np.ndarray] = {}
    for t, counts in placer.seen:
        at.setdefault(t, counts)  # the first call at each time
    assert sorted(at) == [0.0, 2.0, 30.0]
    assert at[0.0].shape == (2, 5) and at[0.0].sum() == 0
    assert at[2.0].tolist() == [[2, 1, 1, 0, 0], [0, 0, 0, 0, 0]]  # set-ups count
    assert at[30.0].tolist() == [[0, 1, 0, 0, 0], [0, 0, 0, 0, 0]]  # ended jobs left


def test_kinds_of_requests() -> None:
    assert kind_of(*pod_of(2.0, 0.25)[1:], 10) == 0
    assert kind_of(*pod_of(2.0, 1.0)[1:], 10) == 1
    assert kind_of(*pod_of(2.0, 4.0)[1:], 10) == 4
    assert kind_of(*pod_of(2.0, 16.0)[1:], 10) == 9
    assert kind_of(*pod_of(2.0, 0.0)[1:], 10) == -1


def test_gpu_clustering_groups_jobs_of_a_kind() -> None:
    """On a view where node 1 runs share-gpu jobs only, node 2 whole-GPU ones only and
    node 0 nothing, a share job goes to node 1 and a whole-GPU job to node 2; with no
    counts given (a hand-made view), both go to the same node."""
    spec = small(100)
    placer = GpuClustering()
    placer.setup(spec, np.random.default_rng(0))
    live = Engine(spec, placer=GpuClustering()).placement_view()
    fields = {f: getattr(live, f) for f in PlacementView.__dataclass_fields__}
    n, c = live.running_by_class.shape
    names = [jc.name for jc in spec.classes]
    v100 = [k for k, t in enumerate(live.node_type.tolist()) if spec.node_types[t].name == "v100x8"]
    running = np.zeros((n, c), dtype=np.int64)
    running[v100[1], names.index("quarter")] = 2
    running[v100[2], names.index("whole")] = 1
    free = np.array(live.gpu_free_milli, copy=True)
    free[v100[1], 0] = 500.0
    free[v100[2], 0] = 0.0

    def one(cls: str, counts: np.ndarray) -> int:
        jc = spec.classes[names.index(cls)]
        view = PlacementView(
            **{
                **fields,
                "queue": np.array([0]),
                "class_index": np.array([names.index(cls)]),
                "request_cpu": np.array([jc.request.cpu]),
                "request_memory_gb": np.array([jc.request.memory_gb]),
                "request_gpu": np.array([jc.request.gpu]),
                "gpu_free_milli": free,
                "running_by_class": counts,
            }
        )
        fresh = GpuClustering()
        fresh.setup(spec, np.random.default_rng(0))
        (decision,) = fresh.place(view)
        return decision.node

    assert one("half", running) == v100[1]
    assert one("whole", running) == v100[2]
    # No node hosts 2-GPU jobs: the nodes without GPU jobs (25..50) beat those hosting
    # other kinds (0..25).
    assert one("pair", running) not in v100[1:3]
    # Without counts (a hand-made view), every node is without GPU jobs.
    empty = np.zeros((0, 0), dtype=np.int64)
    assert one("half", empty) != v100[1] and one("whole", empty) != v100[2]


def _two_node_view(spec: Any, t: int, job_class: int, hosts: list[int]) -> PlacementView:
    """Two empty nodes of type `t`, node i hosting one running job of class hosts[i] (its
    GPU use left out, so only what the nodes host differs), one waiting job."""
    nt = spec.node_types[t]
    gpus = int(nt.gpu)
    running = np.zeros((2, len(spec.classes)), dtype=np.int64)
    running[0, hosts[0]] = running[1, hosts[1]] = 1
    jc = spec.classes[job_class]
    return PlacementView(
        time_s=0.0,
        queue=np.array([0]),
        class_index=np.array([job_class]),
        request_cpu=np.array([jc.request.cpu]),
        request_memory_gb=np.array([jc.request.memory_gb]),
        request_gpu=np.array([jc.request.gpu]),
        free_cpu=np.full(2, float(nt.cpu)),
        free_memory_gb=np.full(2, float(nt.memory_gb)),
        free_gpu=np.full(2, float(gpus)),
        capacity_cpu=np.full(2, float(nt.cpu)),
        capacity_memory_gb=np.full(2, float(nt.memory_gb)),
        capacity_gpu=np.full(2, float(gpus)),
        speed=np.ones(2),
        node_type=np.full(2, t, dtype=np.int64),
        active=np.ones(2, dtype=np.bool_),
        free_slots=np.full(2, 100.0),
        gpu_free_milli=np.full((2, gpus), 1000.0),
        running_by_class=running,
    )


def test_gpu_clustering_sends_a_job_to_the_node_hosting_its_kind() -> None:
    """A sharing job goes to the node that hosts a sharing job, not to the one hosting a
    whole-GPU job, whichever of the two comes first in the tie-break order."""
    spec = small(10)
    placer = registry.create("placer", "gpu-clustering")
    assert isinstance(placer, GpuSharingPlacer)
    placer.setup(spec, np.random.default_rng(0))
    kind = placer.class_kind.tolist()
    t = next(i for i, nt in enumerate(spec.node_types) if nt.gpu >= 2)
    sharing = next(c for c, k in enumerate(kind) if k == 0 and placer.type_ok[c][t])
    whole = next(c for c, k in enumerate(kind) if k >= 1 and placer.type_ok[c][t])
    for hosts, expected in (([whole, sharing], 1), ([sharing, whole], 0)):
        out = placer.place(_two_node_view(spec, t, sharing, hosts))
        assert [p.node for p in out] == [expected], (hosts, out)
