"""The train and test domains of the Learning to Score paper (Asenov et al., "Learning to
Score", Table II; docs/tuning.md) and the tuning experiments drawn from them.

One experiment is one (cluster setup, workload, scheduling options) configuration of the
cloud/edge family (`clusteremu.scenarios.faas`), seeded: every evaluation of the experiment runs the
same
arrivals and execution-time quantiles (common random numbers), only the weights change.

=====================  ======================  =================================
Table II               train                   test
=====================  ======================  =================================
cluster setups         3 (cloud_cpu,           all 8
                       cloud_gpu,
                       edge_cloudlet)
workload functions     the paper's 5           3 to 8 of 8 (+ python-pi, fio,
                                               tf-gpu of faas-sim's raith21)
requests per second    10                      5-30
% of nodes to score    100                     10-100
min nodes per function 1                       1-10
max nodes per function 100                     50-100
scale factor           1                       1-5
number of nodes        30-180                  200-400
=====================  ======================  =================================

Both domains draw the network topology (``urban`` or ``internet``) independently of the
setup, as the paper does. Requests per second is the rate of each inference and service
function; training runs at 0.1/s and preprocessing at 1/s (faas-sim's profile). A run lasts
100 simulated seconds (the paper's benchmark window); a request that finds no node within
30 s fails. The "min / max nodes per function" and "scale factor" are faas-sim's scaling
options, the scoring placer's ``replicas`` (`clusteremu.cluster.policies.scoring.placer`).
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


@dataclass(frozen=True)
class Domain:
    """Ranges of one domain (inclusive integer ranges unless said otherwise)."""

    name: str
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


DOMAINS: dict[str, Domain] = {
    "train": Domain(
        "train",
        setups=("cloud_cpu", "cloud_gpu", "edge_cloudlet"),
        functions=tuple(faas.FUNCTIONS),
        function_count=(5, 5),
        rate_per_s=(10, 10),
        percentage=(100, 100),
        min_nodes=(1, 1),
        max_nodes=(100, 100),
        scale_factor=(1, 1),
        nodes=(30, 180),
    ),
    "test": Domain(
        "test",
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
    ),
}


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
    code = list(DOMAINS).index(domain_name)
    rng = np.random.default_rng([int(seed), code, int(index)])
    count = _uniform_int(rng, d.function_count)
    chosen = rng.choice(len(d.functions), size=count, replace=False)
    functions = tuple(d.functions[i] for i in sorted(chosen))
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
    )


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
