"""`kube-default` (cluster/policies/kube.py) against hand-computed Kubernetes decisions.

The pure helpers (`tolerates`, `affinity_matches`, `feasible_types`, `filter_table`,
`prefer_no_schedule`) case by case; then small scenarios replaying a trace table where the
node of every pod is worked out by hand from the kube-scheduler's formulas, in its integer
arithmetic (milli-cores, bytes, scores 0..100):

- LeastAllocated: per resource (cap - requested) * 100 // cap, the two averaged with //;
- BalancedAllocation: int((1 - |f_cpu - f_mem| / 2) * 100);
- TaintToleration: 100 - untolerated PreferNoSchedule taints * 100 // the most of any
  feasible node, weight 3;
- requests of 0 scored as 100 m and 200 MiB (`DEFAULT_MILLI_CPU`, `DEFAULT_MEMORY_BYTES`).

Node rows are named `<type>-<index>` in the per-job table, in the order of `cluster.nodes`.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from clusteremu.cluster import workload as wl
from clusteremu.cluster.distributions import Deterministic
from clusteremu.cluster.model import JobClass, NodeType
from clusteremu.cluster.policies.kube import (
    UNSCHEDULABLE_TAINT,
    affinity_matches,
    feasible_types,
    filter_table,
    prefer_no_schedule,
    tolerates,
)
from clusteremu.cluster.runner import run_spec
from clusteremu.cluster.speedup import RigidSpeedup
from clusteremu.cluster.traces.table import job_table
from clusteremu.scenarios.loader import load_scenario

# --- the pure helpers ----------------------------------------------------------------------


def _cls(
    selector: dict[str, tuple[str, ...]] | None = None,
    affinity: tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...] = (),
    tolerations: tuple[tuple[str, str, str, str], ...] = (),
    name: str = "c",
) -> JobClass:
    return JobClass(
        name,
        wl.BatchArrivals(1),
        Deterministic(1.0),
        RigidSpeedup(),
        node_selector=selector or {},
        node_affinity=affinity,
        tolerations=tolerations,
    )


def _type(
    name: str = "t",
    labels: dict[str, str] | None = None,
    taints: tuple[tuple[str, str, str], ...] = (),
    unschedulable: bool = False,
) -> NodeType:
    return NodeType(name, 4.0, 8.0, labels=labels or {}, taints=taints, unschedulable=unschedulable)


TAINT = ("dedicated", "gpu", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        # Equal: key and value must both match
        (("dedicated", "Equal", "gpu", "NoSchedule"), TAINT, True),
        (("dedicated", "Equal", "cpu", "NoSchedule"), TAINT, False),
        (("other", "Equal", "gpu", "NoSchedule"), TAINT, False),
        (("dedicated", "Equal", "", "NoSchedule"), TAINT, False),
        (("dedicated", "Equal", "", "NoSchedule"), ("dedicated", "", "NoSchedule"), True),
        # Exists: the key alone (any value)
        (("dedicated", "Exists", "", "NoSchedule"), TAINT, True),
        (("dedicated", "Exists", "ignored", "NoSchedule"), TAINT, True),
        (("other", "Exists", "", "NoSchedule"), TAINT, False),
        # Exists with an empty key: every taint (of the effect, if one is given)
        (("", "Exists", "", ""), TAINT, True),
        (("", "Exists", "", ""), ("x", "y", "PreferNoSchedule"), True),
        (("", "Exists", "", ""), ("x", "", "NoExecute"), True),
        (("", "Exists", "", "NoSchedule"), TAINT, True),
        (("", "Exists", "", "NoSchedule"), ("x", "y", "NoExecute"), False),
        # An empty effect matches every effect
        (("dedicated", "Equal", "gpu", ""), TAINT, True),
        (("dedicated", "Equal", "gpu", ""), ("dedicated", "gpu", "NoExecute"), True),
        (("dedicated", "Exists", "", ""), ("dedicated", "gpu", "PreferNoSchedule"), True),
        # An effect that differs: not tolerated, even with key and value right
        (("dedicated", "Equal", "gpu", "NoExecute"), TAINT, False),
        (("dedicated", "Exists", "", "PreferNoSchedule"), TAINT, False),
    ],
)
def test_tolerates_one_toleration(
    toleration: tuple[str, str, str, str], taint: tuple[str, str, str], expected: bool
) -> None:
    assert tolerates((toleration,), taint) is expected


def test_tolerates_needs_one_toleration_of_several() -> None:
    assert not tolerates((), TAINT)
    wrong = ("dedicated", "Equal", "cpu", "NoSchedule")
    right = ("dedicated", "Exists", "", "")
    assert not tolerates((wrong,), TAINT)
    assert tolerates((wrong, right), TAINT)
    assert tolerates((right, wrong), TAINT)


LABELS = {"zone": "a", "disk": "ssd"}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (("zone", "In", ("a", "b")), True),
        (("zone", "In", ("b",)), False),
        (("rack", "In", ("a",)), False),  # In on a missing label
        (("zone", "NotIn", ("b",)), True),
        (("zone", "NotIn", ("a", "b")), False),
        (("rack", "NotIn", ("a",)), True),  # NotIn on a missing label
        (("disk", "Exists", ()), True),
        (("rack", "Exists", ()), False),
        (("disk", "DoesNotExist", ()), False),
        (("rack", "DoesNotExist", ()), True),
    ],
)
def test_affinity_operators(expression: tuple[str, str, tuple[str, ...]], expected: bool) -> None:
    assert affinity_matches(LABELS, _cls(affinity=((expression,),))) is expected


def test_affinity_expressions_are_anded_and_terms_ored() -> None:
    yes = ("zone", "In", ("a",))
    no = ("disk", "In", ("hdd",))
    assert affinity_matches(LABELS, _cls(affinity=((yes, ("disk", "Exists", ())),)))
    assert not affinity_matches(LABELS, _cls(affinity=((yes, no),)))  # one false: term false
    assert not affinity_matches(LABELS, _cls(affinity=((no, yes),)))
    assert affinity_matches(LABELS, _cls(affinity=((no,), (yes,))))  # one true term: match
    assert affinity_matches(LABELS, _cls(affinity=((yes,), (no,))))
    assert not affinity_matches(LABELS, _cls(affinity=((no,), (no, yes))))


def test_node_selector_and_its_combination_with_affinity() -> None:
    assert affinity_matches(LABELS, _cls())  # no constraint: every node
    assert affinity_matches({}, _cls())
    assert affinity_matches(LABELS, _cls(selector={"zone": ("a",)}))
    assert affinity_matches(LABELS, _cls(selector={"zone": ("b", "a")}))  # one of the values
    assert not affinity_matches(LABELS, _cls(selector={"zone": ("b",)}))
    assert not affinity_matches(LABELS, _cls(selector={"rack": ("a",)}))  # label missing
    both = {"zone": ("a",), "disk": ("ssd",)}
    assert affinity_matches(LABELS, _cls(selector=both))
    assert not affinity_matches(LABELS, _cls(selector={**both, "disk": ("hdd",)}))
    # the selector and the required affinity must both hold
    fits = (("zone", "Exists", ()),)
    misses = (("zone", "DoesNotExist", ()),)
    assert affinity_matches(LABELS, _cls(selector={"zone": ("a",)}, affinity=(fits,)))
    assert not affinity_matches(LABELS, _cls(selector={"zone": ("a",)}, affinity=(misses,)))
    assert not affinity_matches(LABELS, _cls(selector={"zone": ("b",)}, affinity=(fits,)))


def test_feasible_types_unschedulable_node() -> None:
    cordoned = _type(unschedulable=True)
    assert not feasible_types(_cls(), cordoned)
    assert feasible_types(_cls(), _type())
    exact = (UNSCHEDULABLE_TAINT, "Exists", "", "NoSchedule")
    assert feasible_types(_cls(tolerations=(exact,)), cordoned)
    assert feasible_types(_cls(tolerations=((UNSCHEDULABLE_TAINT, "Exists", "", ""),)), cordoned)
    assert feasible_types(_cls(tolerations=(("", "Exists", "", ""),)), cordoned)
    wrong_effect = (UNSCHEDULABLE_TAINT, "Exists", "", "NoExecute")
    assert not feasible_types(_cls(tolerations=(wrong_effect,)), cordoned)
    assert not feasible_types(_cls(tolerations=(("other", "Exists", "", ""),)), cordoned)


def test_feasible_types_taint_effects() -> None:
    hard = _type(taints=(("dedicated", "gpu", "NoSchedule"),))
    execute = _type(taints=(("dedicated", "gpu", "NoExecute"),))
    soft = _type(taints=(("dedicated", "gpu", "PreferNoSchedule"),))
    plain = _cls()
    assert not feasible_types(plain, hard)
    assert not feasible_types(plain, execute)
    assert feasible_types(plain, soft)  # PreferNoSchedule only lowers the score
    tolerant = _cls(tolerations=(("dedicated", "Equal", "gpu", ""),))
    assert feasible_types(tolerant, hard) and feasible_types(tolerant, execute)
    # every NoSchedule taint must be tolerated, not just one
    two = _type(taints=(("dedicated", "gpu", "NoSchedule"), ("team", "x", "NoSchedule")))
    assert not feasible_types(tolerant, two)
    both = _cls(tolerations=(("dedicated", "Equal", "gpu", ""), ("team", "Exists", "", "")))
    assert feasible_types(both, two)
    # the affinity filter applies as well
    assert not feasible_types(_cls(selector={"zone": ("a",)}), _type())
    assert feasible_types(_cls(selector={"zone": ("a",)}), _type(labels={"zone": "a"}))


def test_filter_and_prefer_tables() -> None:
    soft = ("soft", "", "PreferNoSchedule")
    types = [
        _type("plain"),
        _type("hard", taints=(("dedicated", "gpu", "NoSchedule"),)),
        _type("soft2", taints=(soft, ("soft", "2", "PreferNoSchedule"))),
        _type("cordoned", unschedulable=True),
    ]
    classes = [
        _cls(name="plain"),
        _cls(name="tolerant", tolerations=(("", "Exists", "", ""),)),
        _cls(name="soft", tolerations=(("soft", "Equal", "", "PreferNoSchedule"),)),
    ]
    spec = SimpleNamespace(classes=classes, node_types=types)
    allowed = filter_table(spec)  # type: ignore[arg-type]
    assert allowed.shape == (3, 4)
    assert allowed.tolist() == [
        [True, False, True, False],
        [True, True, True, True],
        [True, False, True, False],
    ]
    prefer = prefer_no_schedule(spec)  # type: ignore[arg-type]
    assert prefer.tolist() == [[0, 0, 2, 0], [0, 0, 0, 0], [0, 0, 1, 0]]
    empty = SimpleNamespace(classes=[], node_types=types)
    assert filter_table(empty).shape == (0, 4)  # type: ignore[arg-type]


# --- whole runs: every pod's node worked out by hand ---------------------------------------


def _scenario(
    folder: Path,
    node_types: list[dict[str, Any]],
    nodes: list[tuple[str, int]],
    pods: list[dict[str, Any]],
    classes: list[dict[str, Any]] | None = None,
    placer: str = "kube-default",
    seed: int = 0,
) -> Path:
    """A scenario replaying `pods` (arrival, run, cpu, mem, gpu, cls; arrival and run
    default to 0 s and 100 s) on the node groups `nodes`."""
    folder.mkdir(parents=True, exist_ok=True)
    table = job_table(
        [f"p{i}" for i in range(len(pods))],
        [p.get("arrival", 0.0) for p in pods],
        [p.get("run", 100.0) for p in pods],
        [p["cpu"] for p in pods],
        [p["mem"] for p in pods],
        [p.get("gpu", 0.0) for p in pods],
        job_class=[p.get("cls", "pods") for p in pods],
    )
    pq.write_table(table, folder / "jobs.parquet")
    names = classes or [{"name": "pods"}]
    data = {
        "name": folder.name,
        "seed": seed,
        "stop": {"jobs": len(pods)},
        "cluster": {
            "node_types": node_types,
            "nodes": [{"type": t, "count": n} for t, n in nodes],
        },
        "workload": {
            "jobs": {"path": "jobs.parquet"},
            "classes": [
                {"arrival": {"kind": "table"}, "speedup": {"kind": "rigid"}, **c} for c in names
            ],
        },
        "scheduler": {"placer": {"name": placer}},
    }
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _run(path: Path, overrides: list[str] | None = None) -> tuple[list[Any], dict[str, Any]]:
    """(the per-job table's rows in job order, the summary)."""
    result = run_spec(load_scenario(path, overrides))
    rows = sorted(result.jobs.to_pylist(), key=lambda r: r["job"])
    return rows, result.summary


def _nodes(path: Path, overrides: list[str] | None = None) -> list[str | None]:
    return [r["node"] for r in _run(path, overrides)[0]]


#: Two node types of one shape, a 4-core and a 6-core one.
SPREAD_TYPES = [
    {"name": "a", "cpu": 4, "memory_gb": 8},
    {"name": "b", "cpu": 6, "memory_gb": 12},
]
SPREAD_PODS = [{"cpu": 1, "mem": 2}] * 3


@pytest.fixture(scope="module")
def spread(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _scenario(
        tmp_path_factory.mktemp("spread"), SPREAD_TYPES, [("a", 1), ("b", 1)], SPREAD_PODS
    )


def test_least_allocated_spreads_pods(spread: Path) -> None:
    """Pods of 1 core, 2 GB (every fraction equal: BalancedAllocation 100 everywhere).

    pod 0: a (75 + 75) // 2 = 75; b (83 + 83) // 2 = 83             -> b
    pod 1: a 75; b holds 2000 m of 6000: (66 + 66) // 2 = 66         -> a
    pod 2: a holds 2000 m of 4000: 50; b 66                          -> b
    """
    rows, summary = _run(spread)
    assert [r["node"] for r in rows] == ["b-1", "a-0", "b-1"]
    assert [r["start_s"] for r in rows] == [0.0, 0.0, 0.0]
    assert summary["jobs_completed"] == 3 and summary["unscheduled"] == 0


def test_kube_default_differs_from_first_fit(spread: Path, tmp_path: Path) -> None:
    """first-fit stacks the three pods on node 0 (room for all); kube-default spreads them."""
    stacked = _scenario(
        tmp_path, SPREAD_TYPES, [("a", 1), ("b", 1)], SPREAD_PODS, placer="first-fit"
    )
    first_fit = _nodes(stacked)
    kube = _nodes(spread)
    assert first_fit == ["a-0", "a-0", "a-0"]
    assert kube != first_fit
    assert len(set(kube)) == 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_placement_is_the_same_whatever_the_seed_without_ties(spread: Path, seed: int) -> None:
    assert _nodes(spread, [f"seed={seed}"]) == ["b-1", "a-0", "b-1"]


def test_balanced_allocation_decides(tmp_path: Path) -> None:
    """A pod of 1 core, 1 GB on `wide` (4 cores, 16 GB) or `square` (4 cores, 4 GB):

    wide:   least (75 + 93) // 2 = 84; fractions .25, .0625: int((1 - .09375) * 100) = 90
            -> 84 + 90 + 300 = 474
    square: least (75 + 75) // 2 = 75; fractions .25, .25: 100  -> 75 + 100 + 300 = 475
    LeastAllocated alone would take `wide`; the sum takes `square` by one point.
    """
    path = _scenario(
        tmp_path,
        [{"name": "wide", "cpu": 4, "memory_gb": 16}, {"name": "square", "cpu": 4, "memory_gb": 4}],
        [("wide", 1), ("square", 1)],
        [{"cpu": 1, "mem": 1}],
    )
    assert _nodes(path) == ["square-1"]


def test_a_pod_that_fits_nowhere_does_not_block_the_next(tmp_path: Path) -> None:
    """One node of 4 cores. Pod 0 (8 cores) never fits; pod 1 (3 cores) starts at 0 s;
    pod 2 (2 cores) does not fit beside it and waits; pod 3 (1 core, 50 s) starts at 0 s
    behind it. At 50 s pod 3 ends (1 core free: pod 2 still waits); at 100 s pod 1 ends and
    pod 2 starts."""
    path = _scenario(
        tmp_path,
        [{"name": "n", "cpu": 4, "memory_gb": 8}],
        [("n", 1)],
        [
            {"cpu": 8, "mem": 1},
            {"cpu": 3, "mem": 1},
            {"cpu": 2, "mem": 1},
            {"cpu": 1, "mem": 1, "run": 50.0},
        ],
    )
    rows, summary = _run(path)
    starts = [r["start_s"] for r in rows]
    assert math.isnan(starts[0]) and starts[1:] == [0.0, 100.0, 0.0]
    assert [r["node"] for r in rows] == [None, "n-0", "n-0", "n-0"]
    assert summary["unscheduled"] == 1
    assert summary["jobs_completed"] == 3
    assert summary["jobs_unfinished"] == 1


def test_a_no_schedule_taint_repels(tmp_path: Path) -> None:
    """`big` (8 cores, 16 GB) carries dedicated=gpu:NoSchedule; `small` (4 cores, 8 GB).

    pod 0, class plain (no toleration): only `small` passes the filter    -> small
    pod 1, class tolerant: big (87 + 87) // 2 = 87; small (after pod 0) 50 -> big
    pod 2, class plain: small again (it still has room)                     -> small
    """
    path = _scenario(
        tmp_path,
        [
            {
                "name": "big",
                "cpu": 8,
                "memory_gb": 16,
                "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
            },
            {"name": "small", "cpu": 4, "memory_gb": 8},
        ],
        [("big", 1), ("small", 1)],
        [
            {"cpu": 1, "mem": 2, "cls": "plain"},
            {"cpu": 1, "mem": 2, "cls": "tolerant"},
            {"cpu": 1, "mem": 2, "cls": "plain"},
        ],
        classes=[
            {"name": "plain"},
            {
                "name": "tolerant",
                "tolerations": [
                    {
                        "key": "dedicated",
                        "operator": "Equal",
                        "value": "gpu",
                        "effect": "NoSchedule",
                    }
                ],
            },
        ],
    )
    assert _nodes(path) == ["small-1", "big-0", "small-1"]


def test_a_prefer_no_schedule_taint_scores_three_times(tmp_path: Path) -> None:
    """`big` (8 cores, 16 GB) carries soft=yes:PreferNoSchedule; `small` (4 cores, 8 GB).

    pod 0, plain: big 87 + 100 + 3 x 0 = 187; small 75 + 100 + 3 x 100 = 475  -> small
    pod 1, tolerant (Exists soft): big 87 + 100 + 300 = 487; small 50 + 100 + 300 -> big
    """
    path = _scenario(
        tmp_path,
        [
            {
                "name": "big",
                "cpu": 8,
                "memory_gb": 16,
                "taints": [{"key": "soft", "value": "yes", "effect": "PreferNoSchedule"}],
            },
            {"name": "small", "cpu": 4, "memory_gb": 8},
        ],
        [("big", 1), ("small", 1)],
        [{"cpu": 1, "mem": 2, "cls": "plain"}, {"cpu": 1, "mem": 2, "cls": "tolerant"}],
        classes=[
            {"name": "plain"},
            {"name": "tolerant", "tolerations": [{"key": "soft", "operator": "Exists"}]},
        ],
    )
    assert _nodes(path) == ["small-1", "big-0"]


def test_a_selector_attracts_and_affinity_filters(tmp_path: Path) -> None:
    """`big` (8 cores, 16 GB) scores higher than `ssd` (4 cores, 8 GB, disk=ssd) for any
    pod of 1 core, 2 GB, but a class selecting disk=ssd goes to `ssd`; a class whose
    required affinity says disk NotIn [ssd] goes to `big`; a class with both is placed
    nowhere.

    pod 0, picky: only ssd passes                                   -> ssd
    pod 1, any: big 87; ssd (holding pod 0) 50                      -> big
    pod 2, not-ssd: only big passes                                 -> big
    pod 3, impossible: no node passes                               -> never placed
    pod 4, picky: ssd                                               -> ssd
    """
    picky = {"node_selector": {"disk": ["ssd"]}}
    not_ssd = [[{"key": "disk", "operator": "NotIn", "values": ["ssd"]}]]
    path = _scenario(
        tmp_path,
        [
            {"name": "big", "cpu": 8, "memory_gb": 16},
            {"name": "ssd", "cpu": 4, "memory_gb": 8, "labels": {"disk": "ssd"}},
        ],
        [("big", 1), ("ssd", 1)],
        [
            {"cpu": 1, "mem": 2, "cls": "picky"},
            {"cpu": 1, "mem": 2, "cls": "any"},
            {"cpu": 1, "mem": 2, "cls": "not-ssd"},
            {"cpu": 1, "mem": 2, "cls": "impossible"},
            {"cpu": 1, "mem": 2, "cls": "picky"},
        ],
        classes=[
            {"name": "picky", **picky},
            {"name": "any"},
            {"name": "not-ssd", "node_affinity": not_ssd},
            {"name": "impossible", **picky, "node_affinity": not_ssd},
        ],
    )
    rows, summary = _run(path)
    assert [r["node"] for r in rows] == ["ssd-1", "big-0", "big-0", None, "ssd-1"]
    assert summary["unscheduled"] == 1


def test_a_cordoned_node_takes_only_pods_that_tolerate_it(tmp_path: Path) -> None:
    """`big` (8 cores, 16 GB) is unschedulable; `small` (4 cores, 8 GB) is not.

    pod 0, plain: small                                             -> small
    pod 1, tolerant (node.kubernetes.io/unschedulable Exists): big 87, small 50 -> big
    """
    path = _scenario(
        tmp_path,
        [
            {"name": "big", "cpu": 8, "memory_gb": 16, "unschedulable": True},
            {"name": "small", "cpu": 4, "memory_gb": 8},
        ],
        [("big", 1), ("small", 1)],
        [{"cpu": 1, "mem": 2, "cls": "plain"}, {"cpu": 1, "mem": 2, "cls": "tolerant"}],
        classes=[
            {"name": "plain"},
            {
                "name": "tolerant",
                "tolerations": [
                    {"key": UNSCHEDULABLE_TAINT, "operator": "Exists", "effect": "NoSchedule"}
                ],
            },
        ],
    )
    assert _nodes(path) == ["small-1", "big-0"]


#: `tiny-cpu` (150 m, 64 GB) and `tiny-mem` (8 cores, 256 MiB): a pod of zero requests is
#: scored as 100 m and 200 MiB.
ZERO_TYPES = [
    {"name": "tiny-cpu", "cpu": 0.15, "memory_gb": 64},
    {"name": "tiny-mem", "cpu": 8, "memory_gb": 0.25},
]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_zero_request_pod_is_scored_with_the_defaults(tmp_path: Path, seed: int) -> None:
    """A pod requesting nothing, scored as 100 m and 200 MiB:

    tiny-cpu: cpu (150 - 100) * 100 // 150 = 33, memory 99: least 66; fractions .667,
              .003: balanced 66                              -> 66 + 66 + 300 = 432
    tiny-mem: cpu 98, memory (256 - 200) * 100 // 256 = 21: least 59; fractions .0125,
              .78: balanced 61                               -> 59 + 61 + 300 = 420
    (Scored as zero both nodes would tie at 100 + 100 and the seed would choose.)
    """
    path = _scenario(
        tmp_path, ZERO_TYPES, [("tiny-cpu", 1), ("tiny-mem", 1)], [{"cpu": 0, "mem": 0}], seed=seed
    )
    rows, _ = _run(path)
    assert [r["node"] for r in rows] == ["tiny-cpu-0"]
    assert rows[0]["request_cpu"] == 0.0 and rows[0]["request_memory_gb"] == 0.0


def test_zero_request_pods_already_placed_count_with_the_defaults(tmp_path: Path) -> None:
    """LeastAllocated counts the pods already on a node with the same non-zero defaults
    (the kube-scheduler's `NodeInfo.NonZeroRequested`). Two pods requesting nothing, on
    `a` (4 cores, 8 GB) and `b` (6 cores, 12 GB):

    pod 0: a cpu (4000 - 100) * 100 // 4000 = 97, memory (8192 - 200) * 100 // 8192 = 97:
           97; b cpu 98, memory 98: 98; balanced 99 on both            -> b
    pod 1: b now holds 100 m and 200 MiB: cpu (6000 - 200) * 100 // 6000 = 96, memory
           (12288 - 400) * 100 // 12288 = 96: 96; a 97; balanced 99 on both -> a
    """
    path = _scenario(
        tmp_path,
        SPREAD_TYPES,
        [("a", 1), ("b", 1)],
        [{"cpu": 0, "mem": 0}, {"cpu": 0, "mem": 0}],
    )
    assert _nodes(path) == ["b-1", "a-0"]


def test_a_node_type_without_memory_is_scored_on_cpu(tmp_path: Path) -> None:
    """Node types without memory (`memory_gb` 0, the schema's default) and pods of 1 core,
    0 GB. The kube-scheduler leaves a resource of allocatable 0 out of both scores
    (`allocable[i] == 0: continue`), so BalancedAllocation is 100 on every node and
    LeastAllocated is the cpu score: a (2 cores) 50, b (8 cores) 87 -> b.

    (Counting the memory fraction as 1 instead gives a 25 + 75 = 100 against
    b 43 + 56 = 99 and takes the smaller node.)
    """
    path = _scenario(
        tmp_path,
        [{"name": "a", "cpu": 2}, {"name": "b", "cpu": 8}],
        [("a", 1), ("b", 1)],
        [{"cpu": 1, "mem": 0}],
    )
    assert _nodes(path) == ["b-1"]


def test_ties_are_drawn_with_the_seed(tmp_path: Path) -> None:
    """Two identical nodes and one pod: a tie, drawn with the placer's seeded stream (the
    same seed, the same node; over seeds, both nodes)."""
    path = _scenario(
        tmp_path,
        [{"name": "n", "cpu": 4, "memory_gb": 8}],
        [("n", 2)],
        [{"cpu": 1, "mem": 1}],
    )
    chosen = {seed: _nodes(path, [f"seed={seed}"])[0] for seed in range(12)}
    assert set(chosen.values()) == {"n-0", "n-1"}
    assert all(_nodes(path, [f"seed={s}"])[0] == chosen[s] for s in (0, 1, 2))
