"""The tuning domains of the Learning to Score paper (Asenov et al., "Learning to Score",
Table II; docs/tuning.md) made disjoint, and the tuning experiments drawn from them.

One experiment is one (cluster setup, workload, scheduling options) configuration of the
cloud/edge family (`clusteremu.scenarios.faas`), seeded: every evaluation of the experiment
runs the same cluster, arrivals and execution-time quantiles (common random numbers), only
the weights change.

The paper's test domain draws from all 8 cluster setups, so it shares the 3 training setups
(at seed 0, 9 of 20 test experiments used one). Here the setups are split three ways,
disjoint by construction (`check_disjoint`, run at import):

==========================  ===============  ===========================  ===============
                            train            validation (selection)       test (reported)
==========================  ===============  ===========================  ===============
cluster setups              cloud_cpu,       edge_gpu, hybrid_balanced    edge_sbc,
                            cloud_gpu,                                    edge_tpu,
                            edge_cloudlet                                 hybrid_balanced_jetson
workload functions          the paper's 5    3 to 8 of 8, at least one of python-pi, fio,
                                             tf-gpu (faas-sim raith21's), which training never
                                             runs: no workload is a training workload
requests per second         10               5-30
% of nodes to score         100              10-100
min nodes per function      1                1-10
max nodes per function      100              50-100
scale factor                1                1-5
number of nodes             30-180           200-400
==========================  ===============  ===========================================

``paper-test`` is the paper's Table II test domain as published (all 8 setups, any 3 to 8
functions), named so because it overlaps training: it reproduces the paper's setting and
is never the novel-configuration figure. ``tiny`` is ours, for smoke tests.

Every domain draws the network topology (``urban`` or ``internet``) independently of the
setup, as the paper does. The cluster is drawn from the setup's device proportions by a
seeded multinomial, one device per node, as faas-sim's generators sample each node
(``method: sample``; ``tiny`` keeps the exact apportionment), so a new cluster seed is a
new cluster (`clusteremu.tuners.out_of_sample` redraws it). Requests per second is the rate
of each inference and service function; training runs at 0.1/s and preprocessing at 1/s
(faas-sim's profile). A run lasts 100 simulated seconds (the paper's benchmark window); a
request that finds no node within 30 s fails. The "min / max nodes per function" and "scale
factor" are faas-sim's scaling options, the scoring placer's ``replicas``
(`clusteremu.cluster.policies.scoring.placer`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.policies.scoring.scorers import FIXED_WEIGHTS, SEED_SCORERS
from clusteremu.scenarios import faas

#: The weight vector's order: the paper's eight scorers.
WEIGHT_NAMES: tuple[str, ...] = SEED_SCORERS
#: The paper's "Fixed" weights: 1, and 0 for LeastAllocated and RequestedToCapacityRatio.
FIXED: tuple[float, ...] = tuple(FIXED_WEIGHTS[n] for n in WEIGHT_NAMES)
#: Simulated seconds per evaluation run (the paper's 100 s window).
RUN_TIME_S = 100.0
#: Seconds a request may wait for a node before it fails.
TIMEOUT_S = 30.0
#: Fresh seeds each tuner's chosen weights are judged on by default
#: (`clusteremu.tuners.out_of_sample`).
DEFAULT_TEST_SEEDS = 5


#: The cluster setups of each split: disjoint (`check_disjoint`); together the 8 of faas-sim.
TRAIN_SETUPS: tuple[str, ...] = ("cloud_cpu", "cloud_gpu", "edge_cloudlet")
VALIDATION_SETUPS: tuple[str, ...] = ("edge_gpu", "hybrid_balanced")
TEST_SETUPS: tuple[str, ...] = ("edge_sbc", "edge_tpu", "hybrid_balanced_jetson")
#: The functions training never runs (faas-sim raith21's service functions): every
#: validation and test workload has at least one of them.
NEW_FUNCTIONS: tuple[str, ...] = tuple(faas.SERVICE_FUNCTIONS)


@dataclass(frozen=True)
class Domain:
    """Ranges of one domain (inclusive integer ranges unless said otherwise).

    `code` keys the domain's random stream (stable: adding a domain changes no other
    domain's experiments); `new_functions`: every workload holds at least one of these
    (none: any subset of `functions`); `cluster_method`: how the cluster generator draws the
    nodes (``sample``: a seeded multinomial over the setup's proportions, ``exact``: the
    largest-remainder apportionment, only the node order seeded)."""

    name: str
    code: int
    setups: tuple[str, ...]
    functions: tuple[str, ...]
    function_count: tuple[int, int]
    rate_per_s: tuple[int, int]
    percentage: tuple[int, int]
    min_nodes: tuple[int, int]
    max_nodes: tuple[int, int]
    scale_factor: tuple[int, int]
    nodes: tuple[int, int]
    topologies: tuple[str, ...] = ("urban", "internet")
    run_time_s: float = RUN_TIME_S
    new_functions: tuple[str, ...] = ()
    cluster_method: str = "sample"


def _held_out(name: str, code: int, setups: tuple[str, ...]) -> Domain:
    """A validation or test domain: Table II's test ranges on the given setups, every
    workload with at least one function training never runs."""
    return Domain(
        name,
        code,
        setups=setups,
        functions=tuple(faas.ALL_FUNCTIONS),
        function_count=(3, 8),
        rate_per_s=(5, 30),
        percentage=(10, 100),
        min_nodes=(1, 10),
        max_nodes=(50, 100),
        scale_factor=(1, 5),
        nodes=(200, 400),
        new_functions=NEW_FUNCTIONS,
    )


DOMAINS: dict[str, Domain] = {
    "train": Domain(
        "train",
        0,
        setups=TRAIN_SETUPS,
        functions=tuple(faas.FUNCTIONS),
        function_count=(5, 5),
        rate_per_s=(10, 10),
        percentage=(100, 100),
        min_nodes=(1, 1),
        max_nodes=(100, 100),
        scale_factor=(1, 1),
        nodes=(30, 180),
    ),
    "validation": _held_out("validation", 3, VALIDATION_SETUPS),
    "test": _held_out("test", 4, TEST_SETUPS),
    # The paper's Table II test domain as published: all 8 setups (the 3 training ones
    # included) and any 3 to 8 functions. Not novel; named so.
    "paper-test": Domain(
        "paper-test",
        1,
        setups=tuple(faas.SETUPS),
        functions=tuple(faas.ALL_FUNCTIONS),
        function_count=(3, 8),
        rate_per_s=(5, 30),
        percentage=(10, 100),
        min_nodes=(1, 10),
        max_nodes=(50, 100),
        scale_factor=(1, 5),
        nodes=(200, 400),
    ),
    # Not the paper's: small, short configurations for smoke tests and quick trials.
    "tiny": Domain(
        "tiny",
        2,
        setups=("cloud_cpu", "edge_cloudlet"),
        functions=("resnet50-inference", "speech-inference", "mobilenet-inference"),
        function_count=(3, 3),
        rate_per_s=(4, 4),
        percentage=(100, 100),
        min_nodes=(1, 1),
        max_nodes=(100, 100),
        scale_factor=(1, 1),
        nodes=(12, 24),
        run_time_s=20.0,
        cluster_method="exact",
    ),
}
#: The training domain, the one that selects algorithms and hyper-parameters, and the
#: reported one (novel setups); every other held-out domain is disjoint from training too.
TRAIN_DOMAIN = "train"
SELECTION_DOMAIN = "validation"
REPORTED_DOMAIN = "test"
#: What each domain is for (the out-of-sample report says it).
ROLES: dict[str, str] = {
    "train": "the training domain (in distribution for the RL agents)",
    "validation": "the validation domain: selects algorithms and hyper-parameters; not reported",
    "test": "the test domain: setups and workloads disjoint from training and validation",
    "paper-test": "the paper's test domain: all 8 setups, the 3 training setups included",
    "tiny": "a smoke-test domain",
}


def check_disjoint(
    train: str = TRAIN_DOMAIN, held_out: tuple[str, ...] = (SELECTION_DOMAIN, REPORTED_DOMAIN)
) -> None:
    """Raise ValueError unless the held-out domains share no setup with `train` or with each
    other, and each requires a function `train` never runs."""
    t = DOMAINS[train]
    seen: dict[str, str] = {s: train for s in t.setups}
    for name in held_out:
        d = DOMAINS[name]
        for setup in d.setups:
            if setup in seen:
                raise ValueError(f"setup {setup!r} is in both {seen[setup]!r} and {name!r}")
            seen[setup] = name
        if not d.new_functions or set(d.new_functions) & set(t.functions):
            raise ValueError(f"domain {name!r}: its workloads may be {train!r} workloads")


check_disjoint()


def domain(name: str) -> Domain:
    """The domain called `name`; ValueError naming the known ones otherwise."""
    if name not in DOMAINS:
        raise ValueError(f"unknown domain {name!r}; expected one of {', '.join(DOMAINS)}")
    return DOMAINS[name]


@dataclass(frozen=True)
class ExperimentConfig:
    """One tuning experiment: a cluster, a workload, scheduling options and a seed."""

    domain: str
    index: int
    setup: str
    topology: str
    nodes: int
    functions: tuple[str, ...]
    rate_per_s: float
    percentage: float
    min_nodes: int
    max_nodes: int
    scale_factor: int
    seed: int
    run_time_s: float = RUN_TIME_S
    cluster_method: str = "exact"

    def scenario(self, weights: Sequence[float] | None = None) -> dict[str, Any]:
        """The experiment's scenario (a YAML-shaped dict) under `weights` (default Fixed)."""
        data = faas.scenario_dict(
            self.setup,
            nodes=self.nodes,
            rate_per_s=self.rate_per_s,
            time_s=self.run_time_s,
            seed=self.seed,
            topology=self.topology,
            functions=list(self.functions),
            timeout_s=TIMEOUT_S,
            weights=weight_mapping(FIXED if weights is None else weights),
            method=self.cluster_method,
            percentage_of_nodes_to_score=self.percentage,
            replicas={
                "min": self.min_nodes,
                "max": self.max_nodes,
                "scale_factor": self.scale_factor,
            },
        )
        data["name"] = f"tune-{self.domain}-{self.index:04d}"
        return data

    def row(self) -> dict[str, Any]:
        """Flat, Parquet-friendly description (functions joined by commas)."""
        out = asdict(self)
        out["functions"] = ",".join(self.functions)
        return out

    def describe(self) -> str:
        """One readable line."""
        return (
            f"{self.setup}/{self.topology} {self.nodes} nodes, {len(self.functions)} functions "
            f"at {self.rate_per_s:g}/s, score {self.percentage:g}% of nodes, replicas "
            f"{self.min_nodes}-{self.max_nodes} x{self.scale_factor}"
        )


def _uniform_int(rng: np.random.Generator, bounds: tuple[int, int]) -> int:
    return int(rng.integers(bounds[0], bounds[1] + 1))


def sample_config(domain_name: str, seed: int, index: int) -> ExperimentConfig:
    """Experiment `index` of `domain_name` under `seed`: a pure function of the three (each
    experiment has its own stream, so experiment i is the same whatever N is)."""
    d = domain(domain_name)
    rng = np.random.default_rng([int(seed), d.code, int(index)])
    count = _uniform_int(rng, d.function_count)
    functions = _workload(rng, d, count)
    min_nodes = _uniform_int(rng, d.min_nodes)
    return ExperimentConfig(
        domain=domain_name,
        index=int(index),
        setup=d.setups[int(rng.integers(len(d.setups)))],
        topology=d.topologies[int(rng.integers(len(d.topologies)))],
        nodes=_uniform_int(rng, d.nodes),
        functions=functions,
        rate_per_s=float(_uniform_int(rng, d.rate_per_s)),
        percentage=float(_uniform_int(rng, d.percentage)),
        min_nodes=min_nodes,
        max_nodes=max(min_nodes, _uniform_int(rng, d.max_nodes)),
        scale_factor=_uniform_int(rng, d.scale_factor),
        seed=int(rng.integers(2**31 - 1)),
        run_time_s=d.run_time_s,
        cluster_method=d.cluster_method,
    )


def _workload(rng: np.random.Generator, d: Domain, count: int) -> tuple[str, ...]:
    """`count` distinct functions of the domain, in the domain's order; redrawn (same
    count) until one is of `d.new_functions` when the domain has some."""
    while True:
        chosen = rng.choice(len(d.functions), size=count, replace=False)
        functions = tuple(d.functions[i] for i in sorted(chosen))
        if not d.new_functions or set(functions) & set(d.new_functions):
            return functions


def sample_configs(domain_name: str, count: int, seed: int) -> list[ExperimentConfig]:
    """Experiments 0..count-1 of a domain."""
    return [sample_config(domain_name, seed, i) for i in range(count)]


# --- weights -------------------------------------------------------------------------------------


def check_weights(values: Sequence[Any], source: str = "weights") -> tuple[float, ...]:
    """A weight vector checked: one finite value in [0, 1] per scorer of `WEIGHT_NAMES`."""
    try:
        vector = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise ValueError(
            f"{source}: expected {len(WEIGHT_NAMES)} numbers, got {values!r}"
        ) from None
    if len(vector) != len(WEIGHT_NAMES):
        raise ValueError(
            f"{source}: expected {len(WEIGHT_NAMES)} weights ({', '.join(WEIGHT_NAMES)}), "
            f"got {len(vector)}"
        )
    for name, v in zip(WEIGHT_NAMES, vector, strict=True):
        if not (0.0 <= v <= 1.0):
            raise ValueError(f"{source}: weight of {name} must be in [0, 1], got {v!r}")
    return vector


def parse_weights(text: str, source: str = "--weights") -> tuple[float, ...]:
    """`w1,w2,...` (in `WEIGHT_NAMES` order) as a checked weight vector."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    return check_weights(parts, source)


def weight_mapping(weights: Sequence[float]) -> dict[str, float]:
    """{scorer: weight} for the scoring placer. An all-zero vector has no ranking; it is run
    as equal weights (ranking is invariant to scaling all weights)."""
    vector = [float(w) for w in weights]
    if not any(w > 0.0 for w in vector):
        vector = [1.0] * len(vector)
    return {n: round(w, 6) for n, w in zip(WEIGHT_NAMES, vector, strict=True)}


def placer_block(weights: Sequence[float], extra: Mapping[str, Any] | None = None) -> str:
    """The ``scheduler.placer`` YAML block a user pastes into a scenario file."""
    import yaml

    params: dict[str, Any] = {**dict(extra or {}), "weights": weight_mapping(weights)}
    block = {"scheduler": {"placer": {"name": "scoring", "params": params}}}
    return yaml.safe_dump(block, sort_keys=False, default_flow_style=False)


# --- the RL agent's coarse static description ----------------------------------------------------

#: (name, min, max) of each static feature; values are scaled to [0, 1] and clipped.
STATIC_SPACE: tuple[tuple[str, float, float], ...] = (
    ("nodes", 0.0, 400.0),
    ("edge_share", 0.0, 1.0),
    ("accelerator_share", 0.0, 1.0),
    ("urban", 0.0, 1.0),
    ("functions", 0.0, 8.0),
    ("rate_per_s", 0.0, 30.0),
    ("percentage", 0.0, 100.0),
    ("min_nodes", 0.0, 10.0),
    ("max_nodes", 0.0, 100.0),
    ("scale_factor", 0.0, 5.0),
)


def static_features(spec: Any) -> npt.NDArray[np.float32]:
    """The coarse description of a scenario (a `SimulationSpec`): node count, shares of edge
    and accelerated nodes, whether edge uplinks are slower than the cloud's, the number of
    functions, the highest class rate, and the scoring placer's scheduling options -- each
    scaled by `STATIC_SPACE`. Computed from the spec, so it works for any scenario."""
    types = {t.name: t for t in spec.node_types}
    nodes = [types[n] for n in spec.nodes]
    n = max(len(nodes), 1)
    edge = sum(t.labels.get("locality") == "edge" for t in nodes) / n
    accel = sum("accelerator" in t.labels for t in nodes) / n
    cloud_bw = [t.registry_mbps for t in nodes if t.labels.get("locality") != "edge"]
    edge_bw = [t.registry_mbps for t in nodes if t.labels.get("locality") == "edge"]
    urban = float(bool(cloud_bw and edge_bw and min(edge_bw) < min(cloud_bw)))
    rates = [getattr(c.arrival, "rate_per_s", 0.0) or 0.0 for c in spec.classes]
    params = dict(spec.scheduler.placer.params)
    replicas = dict(params.get("replicas") or {})
    raw = {
        "nodes": float(len(nodes)),
        "edge_share": edge,
        "accelerator_share": accel,
        "urban": urban,
        "functions": float(len(spec.classes)),
        "rate_per_s": float(max(rates, default=0.0)),
        "percentage": float(params.get("percentage_of_nodes_to_score", 100.0)),
        "min_nodes": float(replicas.get("min", 0)),
        "max_nodes": float(min(replicas.get("max", 100), 100)),
        "scale_factor": float(replicas.get("scale_factor", 1)),
    }
    out = np.array(
        [(raw[name] - lo) / (hi - lo) for name, lo, hi in STATIC_SPACE], dtype=np.float32
    )
    return np.clip(out, 0.0, 1.0)
