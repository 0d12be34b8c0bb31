"""The heterogeneous cloud/edge scenario family of the Learning to Score paper (Asenov et
al., "Learning to Score: Tuning Cluster Schedulers through Reinforcement Learning";
reference in docs/scoring.md).

Numbers from the paper's simulator, faas-sim (edgerun/faas-sim ``ext/raith21``) and Skippy,
as tabulated in ``shared/traces/faas-sim-tables.md``:

- `DEVICES`: the ten device types (cores, memory, architecture, accelerator, locality);
- `SETUPS`: the eight cluster setups as device counts of the simulator's generators (seed
  1234); `generate_nodes(setup, n, seed)` draws a cluster of any size with those proportions
  (exact apportionment by largest remainder, or a seeded multinomial draw), in seeded order;
- `FUNCTIONS`: the five functions with ranked images, image sizes per architecture, memory
  requests, models and data per invocation; `EXEC_MEAN_S` the mean execution time of each
  image on each device, drawn from a bounded lognormal whose mean is the table's mean;
- network: cloud VMs on 1 Gbit/s fibre; edge devices behind a 250 Mbit/s uplink (``urban``
  topology) or on 1 Gbit/s (``internet`` topology); transfers get 0.97 of the bandwidth.

`scenario_dict(...)` builds a complete scenario (YAML-shaped dict): the world model (images in
``world.images``, each function's container, data and model in its workload class, the node
types' bandwidths), the eq. 2 ``score`` selected under ``metrics``, and the ``scoring`` placer
(or any other); `expand_cluster_generator(...)` serves the loader's ``cluster.generator``
block.

Model choices [derived], documented in docs/scoring.md: each function is one job class
requesting 1 core and the memory of its largest image; a node runs the function's first
ranked image it can run (a build for its device in the execution-time table), so a
function's execution time depends on the node type only (``runtime_by_node_type``); GPU
memory is not booked (the four worker slots per node bound the sharing); images and models
stay cached on a node once pulled.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from scipy import optimize, special

# --- devices ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Device:
    """A device type of faas-sim's raith21 extension."""

    name: str
    cores: int
    memory_gb: float
    arch: str
    accelerator: str | None
    vram_gb: float
    locality: str


DEVICES: dict[str, Device] = {
    d.name: d
    for d in (
        Device("xeoncpu", 4, 7.8, "x86", None, 0.0, "cloud"),
        Device("xeongpu", 4, 7.8, "x86", "gpu", 6.0, "cloud"),
        Device("nuc", 4, 16.0, "x86", None, 0.0, "edge"),
        Device("nx", 6, 7.7, "aarch64", "gpu", 8.0, "edge"),
        Device("tx2", 4, 7.7, "aarch64", "gpu", 8.0, "edge"),
        Device("nano", 4, 3.9, "aarch64", "gpu", 4.0, "edge"),
        Device("coral", 4, 1.0, "aarch64", "tpu", 0.0, "edge"),
        Device("rockpi", 6, 4.0, "aarch64", None, 0.0, "edge"),
        Device("rpi4", 4, 1.0, "arm32", None, 0.0, "edge"),
        Device("rpi3", 4, 0.95, "arm32", None, 0.0, "edge"),
    )
}
DEVICE_NAMES: tuple[str, ...] = tuple(DEVICES)

#: Device counts of the eight setups as faas-sim generated them (seed 1234).
SETUPS: dict[str, dict[str, int]] = {
    name: dict(zip(DEVICE_NAMES, counts, strict=True))
    for name, counts in {
        "cloud_cpu": (333, 46, 21, 4, 6, 24, 2, 14, 26, 24),
        "cloud_gpu": (35, 344, 21, 4, 6, 24, 2, 14, 26, 24),
        "edge_cloudlet": (52, 11, 187, 18, 9, 44, 13, 16, 78, 72),
        "edge_gpu": (219, 35, 146, 166, 147, 522, 129, 236, 210, 190),
        "edge_sbc": (274, 40, 186, 7, 10, 23, 66, 394, 777, 723),
        "edge_tpu": (112, 15, 73, 47, 43, 133, 265, 112, 99, 101),
        "hybrid_balanced": (47, 33, 70, 5, 7, 30, 50, 58, 89, 111),
        "hybrid_balanced_jetson": (81, 73, 146, 32, 29, 171, 93, 75, 149, 151),
    }.items()
}

#: Each setup in plain words (what `clusteremu list` shows).
SETUP_WORDS: dict[str, str] = {
    "cloud_cpu": "cloud/edge cluster, mostly cloud CPU servers",
    "cloud_gpu": "cloud/edge cluster, mostly cloud GPU servers",
    "edge_cloudlet": "cloud/edge cluster, mostly small edge servers (cloudlets)",
    "edge_gpu": "cloud/edge cluster, mostly edge devices with GPUs",
    "edge_sbc": "cloud/edge cluster, mostly single-board computers",
    "edge_tpu": "cloud/edge cluster, mostly edge devices with TPUs",
    "hybrid_balanced": "cloud/edge cluster, a balanced mix of servers and edge devices",
    "hybrid_balanced_jetson": "cloud/edge cluster, a balanced mix with more Jetson GPU boards",
}

#: Topologies: (cloud, edge) bandwidth in Mbit/s to the image registry and the storage nodes.
TOPOLOGIES: dict[str, dict[str, float]] = {
    "urban": {"cloud": 1000.0, "edge": 250.0},
    "internet": {"cloud": 1000.0, "edge": 1000.0},
}
GOODPUT = 0.97
WORKER_SLOTS = 4


def setup_proportions(setup: str) -> dict[str, float]:
    """Fraction of each device type in a setup."""
    counts = _setup_counts(setup)
    total = sum(counts.values())
    return {d: c / total for d, c in counts.items()}


def _setup_counts(setup: str) -> dict[str, int]:
    if setup not in SETUPS:
        raise ValueError(f"unknown cluster setup {setup!r}; expected one of {', '.join(SETUPS)}")
    return SETUPS[setup]


def device_counts(setup: str, n: int, seed: int = 0, method: str = "exact") -> dict[str, int]:
    """Device counts of an n-node cluster with the setup's proportions.

    `exact`: largest-remainder apportionment (ties by device order), independent of the seed;
    `sample`: a seeded multinomial draw, as faas-sim's generators sample each node.
    """
    if n < 0:
        raise ValueError(f"nodes: expected a non-negative count, got {n}")
    p = np.array(list(setup_proportions(setup).values()))
    if method == "exact":
        raw = p * n
        counts = np.floor(raw).astype(np.int64)
        order = np.argsort(-(raw - counts), kind="stable")
        counts[order[: n - int(counts.sum())]] += 1
    elif method == "sample":
        counts = np.random.default_rng(seed).multinomial(n, p)
    else:
        raise ValueError(f"method: expected 'exact' or 'sample', got {method!r}")
    return dict(zip(DEVICE_NAMES, (int(c) for c in counts), strict=True))


def generate_nodes(setup: str, n: int, seed: int = 0, method: str = "exact") -> list[str]:
    """A device name per node: the setup's mix at size n, in a seeded random order."""
    counts = device_counts(setup, n, seed, method)
    nodes = np.repeat(np.array(DEVICE_NAMES), [counts[d] for d in DEVICE_NAMES])
    rng = np.random.default_rng([seed, 1])
    return [str(x) for x in rng.permutation(nodes)]


def node_type_dicts(
    topology: str = "urban", devices: Sequence[str] = DEVICE_NAMES
) -> list[dict[str, Any]]:
    """Scenario node types (one per device) with the scoring framework's labels."""
    if topology not in TOPOLOGIES:
        raise ValueError(f"topology: expected one of {', '.join(TOPOLOGIES)}, got {topology!r}")
    bw = TOPOLOGIES[topology]
    out = []
    for name in devices:
        d = DEVICES[name]
        labels = {"device": d.name, "arch": d.arch, "locality": d.locality}
        if d.accelerator == "gpu":
            labels.update(
                {"accelerator": "gpu", "capability.cuda": "true", "capability.gpu": "true"}
            )
        elif d.accelerator == "tpu":
            labels.update({"accelerator": "tpu", "capability.tpu": "true"})
        out.append(
            {
                "name": d.name,
                "cpu": d.cores,
                "memory_gb": d.memory_gb,
                "gpu": d.vram_gb,
                "labels": labels,
                "max_jobs": WORKER_SLOTS,
                "registry_mbps": bw[d.locality],
                "storage_mbps": bw[d.locality],
            }
        )
    return out


def expand_cluster_generator(
    name: str, nodes: int, seed: int = 0, params: Mapping[str, Any] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(node_types, node groups) for a ``cluster.generator`` block (scenario data).

    `params`: ``topology`` (urban | internet), ``method`` (exact | sample).
    """
    params = dict(params or {})
    unknown = set(params) - {"topology", "method"}
    if unknown:
        raise ValueError(f"params: unknown keys {sorted(unknown)}; expected topology, method")
    order = generate_nodes(name, nodes, seed, str(params.get("method", "exact")))
    types = node_type_dicts(str(params.get("topology", "urban")))
    groups: list[dict[str, Any]] = []
    for device in order:  # run-length groups keep the seeded order
        if groups and groups[-1]["type"] == device:
            groups[-1]["count"] += 1
        else:
            groups.append({"type": device, "count": 1})
    return types, groups


# --- functions, images, execution times ----------------------------------------------------------

#: Mean execution time (s) of each image on each device; absent = cannot run there.
EXEC_MEAN_S: dict[str, dict[str, float]] = {
    "resnet-training-gpu": {"xeongpu": 32.13, "nx": 142.00, "tx2": 228.12, "nano": 847.17},
    "resnet-training-cpu": {"nuc": 197.45},
    "resnet-preprocessing": dict(
        zip(
            DEVICE_NAMES,
            (2.66, 2.66, 2.53, 6.08, 6.39, 7.95, 10.51, 7.65, 19.50, 30.48),
            strict=True,
        )
    ),
    "resnet-inference-gpu": {"xeongpu": 0.13, "nx": 0.39, "tx2": 0.39, "nano": 0.73},
    "resnet-inference-cpu": dict(
        zip(DEVICE_NAMES, (0.17, 0.17, 0.16, 0.51, 0.74, 0.93, 2.18, 1.38, 2.91, 5.10), strict=True)
    ),
    "mobilenet-inference-tpu": {"coral": 0.55},
    "mobilenet-inference-tflite": dict(
        zip(DEVICE_NAMES, (0.28, 0.28, 0.28, 0.33, 0.33, 0.45, 0.66, 0.52, 1.28, 2.07), strict=True)
    ),
    "speech-inference-gpu": {"xeongpu": 0.75, "nx": 1.65, "tx2": 3.31, "nano": 4.54},
    "speech-inference-tflite": dict(
        zip(
            DEVICE_NAMES, (1.08, 1.08, 1.06, 2.68, 3.44, 3.89, 7.21, 3.82, 6.75, 16.56), strict=True
        )
    ),
    # The three service functions of faas-sim's raith21 extension (ext/raith21/fet.py): the
    # paper's test domain has eight functions. fio and tf-gpu: the extension's mean table;
    # python-pi: the midpoint of its sampled bounds (the extension's mean table was measured
    # with other request sizes and disagrees with its own distributions, e.g. 71.6 s against
    # bounds of 2.96-3.02 s on the Xeons).
    "python-pi": dict(
        zip(DEVICE_NAMES, (2.99, 2.99, 0.44, 1.31, 0.96, 1.32, 1.63, 0.93, 1.74, 2.06), strict=True)
    ),
    "fio": {
        "xeoncpu": 1.14,
        "xeongpu": 1.14,
        "nuc": 1.12,
        "nx": 13.77,
        "tx2": 4.31,
        "nano": 19.64,
        "rockpi": 21.99,
        "rpi4": 27.81,
        "rpi3": 28.66,
    },
    "tf-gpu": {"xeongpu": 0.37, "nx": 1.17, "tx2": 1.89, "nano": 0.62},
}
#: The column order of the table above is xeoncpu, xeongpu, ... (DEVICE_NAMES); the source
#: table lists xeongpu first, and the two have identical values wherever both run an image.

#: Bounds [min, max] (s) known from faas-sim; elsewhere [BOUND_LO x mean, BOUND_HI x mean].
KNOWN_BOUNDS_S: dict[tuple[str, str], tuple[float, float]] = {
    ("resnet-training-gpu", "nano"): (475.0, 3759.0),
    ("resnet-training-gpu", "xeongpu"): (31.5, 33.1),
    ("resnet-inference-gpu", "nano"): (0.67, 1.84),
    # raith21's sampled bounds of the service functions (ext/raith21/fet.py).
    ("python-pi", "xeoncpu"): (2.956, 3.018),
    ("python-pi", "xeongpu"): (2.956, 3.018),
    ("python-pi", "nuc"): (0.4292, 0.4426),
    ("python-pi", "nx"): (1.281, 1.331),
    ("python-pi", "tx2"): (0.9472, 0.9737),
    ("python-pi", "nano"): (1.3, 1.331),
    ("python-pi", "coral"): (1.616, 1.643),
    ("python-pi", "rockpi"): (0.9023, 0.9621),
    ("python-pi", "rpi4"): (1.696, 1.776),
    ("python-pi", "rpi3"): (1.91, 2.203),
    ("fio", "xeoncpu"): (1.117, 1.197),
    ("fio", "xeongpu"): (1.117, 1.197),
    ("fio", "nuc"): (1.089, 1.371),
    ("fio", "nx"): (13.39, 14.5),
    ("fio", "tx2"): (4.2, 4.509),
    ("fio", "nano"): (17.63, 21.38),
    ("fio", "rockpi"): (21.46, 23.43),
    ("fio", "rpi4"): (23.44, 33.21),
    ("fio", "rpi3"): (23.95, 41.16),
    ("tf-gpu", "xeongpu"): (0.36, 0.3754),
    ("tf-gpu", "nx"): (1.158, 1.209),
    ("tf-gpu", "tx2"): (1.875, 2.138),
    ("tf-gpu", "nano"): (0.5251, 1.097),
}
BOUND_LO, BOUND_HI = 0.8, 2.5
#: Log-standard deviation of the execution-time lognormals [derived].
EXEC_SIGMA = 0.3

#: Image sizes (MB) per architecture.
IMAGE_SIZE_MB: dict[str, dict[str, float]] = {
    "resnet-inference-cpu": {"x86": 2000, "aarch64": 840, "arm32": 700},
    "resnet-inference-gpu": {"x86": 2000, "aarch64": 1000},
    "resnet-training-gpu": {"x86": 2000, "aarch64": 1000},
    "resnet-training-cpu": {"x86": 2000},
    "resnet-preprocessing": {"x86": 4100, "aarch64": 1910, "arm32": 1370},
    "mobilenet-inference-tflite": {"x86": 180, "aarch64": 173, "arm32": 160},
    "mobilenet-inference-tpu": {"aarch64": 173},
    "speech-inference-tflite": {"x86": 108, "aarch64": 400, "arm32": 328},
    "speech-inference-gpu": {"x86": 1600, "aarch64": 1300},
    "python-pi": {"x86": 88, "aarch64": 62, "arm32": 55},
    "fio": {"x86": 24, "aarch64": 23, "arm32": 20},
    "tf-gpu": {"x86": 4100, "aarch64": 2240},
}


@dataclass(frozen=True)
class Function:
    """A serverless function: ranked images, memory per image (MiB), model and data (MB)."""

    name: str
    images: tuple[str, ...]
    memory_mib: tuple[float, ...]
    model_mb: float
    data_in_mb: float = 0.0
    data_out_mb: float = 0.0
    default_rate_per_s: float = 1.0
    inference: bool = False


FUNCTIONS: dict[str, Function] = {
    f.name: f
    for f in (
        Function(
            "resnet50-inference",
            ("resnet-inference-gpu", "resnet-inference-cpu"),
            (400, 150),
            103,
            inference=True,
        ),
        Function(
            "speech-inference",
            ("speech-inference-tflite", "speech-inference-gpu"),
            (100, 300),
            48,
            inference=True,
        ),
        Function(
            "mobilenet-inference",
            ("mobilenet-inference-tpu", "mobilenet-inference-tflite"),
            (100, 100),
            4,
            inference=True,
        ),
        Function(
            "resnet50-training",
            ("resnet-training-gpu", "resnet-training-cpu"),
            (800, 1024),
            103,
            58,
            103,
            default_rate_per_s=0.1,
        ),
        Function(
            "resnet50-preprocessing",
            ("resnet-preprocessing",),
            (100,),
            0,
            14,
            14,
            default_rate_per_s=1.0,
        ),
    )
}

#: faas-sim raith21's service functions (requests 1 core; 100, 200, 300 MiB): with the five
#: above they make the eight functions of the paper's test domain. They run at the
#: experiment's request rate, like the inference functions.
SERVICE_FUNCTIONS: dict[str, Function] = {
    f.name: f
    for f in (
        Function("python-pi", ("python-pi",), (100,), 0, inference=True),
        Function("fio", ("fio",), (200,), 0, inference=True),
        Function("tf-gpu", ("tf-gpu",), (300,), 0, inference=True),
    )
}
#: Every function a scenario may name.
ALL_FUNCTIONS: dict[str, Function] = {**FUNCTIONS, **SERVICE_FUNCTIONS}


def image_on_device(function: str, device: str) -> str | None:
    """The first ranked image of `function` that runs on `device` (None: it cannot run there)."""
    for image in ALL_FUNCTIONS[function].images:
        if device in EXEC_MEAN_S[image] and DEVICES[device].arch in IMAGE_SIZE_MB[image]:
            return image
    return None


def _log_norm_mass(a: float, b: float) -> float:
    """log(Phi(b) - Phi(a)) for a < b, accurate in both tails."""
    if a > 0:  # use the upper tail: Phi(b) - Phi(a) = Phi(-a) - Phi(-b)
        a, b = -b, -a
    hi, lo = special.log_ndtr(b), special.log_ndtr(a)
    return float(hi + math.log1p(-math.exp(lo - hi)))


@cache
def exec_distribution(image: str, device: str) -> tuple[float, float, float, float]:
    """(mu, sigma, min_s, max_s) of the bounded lognormal whose mean is the table's mean."""
    mean = EXEC_MEAN_S[image][device]
    lo, hi = KNOWN_BOUNDS_S.get((image, device), (BOUND_LO * mean, BOUND_HI * mean))
    lo, hi = float(f"{lo:.4g}"), float(f"{hi:.4g}")  # readable scenario files
    # Narrow known bounds get a narrower lognormal, so that mu stays near log(mean).
    sigma = float(f"{min(EXEC_SIGMA, math.log(hi / lo) / 4.0):.4g}")

    def bounded_mean(mu: float) -> float:
        a, b = (math.log(lo) - mu) / sigma, (math.log(hi) - mu) / sigma
        # E[X | lo <= X <= hi] = exp(mu + s^2/2) (Phi(b - s) - Phi(a - s)) / (Phi(b) - Phi(a)),
        # in log space so that far tails stay finite.
        log_ratio = _log_norm_mass(a - sigma, b - sigma) - _log_norm_mass(a, b)
        return mu + sigma * sigma / 2.0 + log_ratio - math.log(mean)

    # The truncated mean rises monotonically from lo to hi as mu does.
    mu = optimize.brentq(
        bounded_mean, math.log(lo) - 50 * sigma, math.log(hi) + 50 * sigma, xtol=1e-12
    )
    return round(float(mu), 7), sigma, lo, hi


def runtime_by_node_type(
    function: str, devices: Sequence[str] = DEVICE_NAMES
) -> dict[str, dict[str, Any]]:
    """Scenario data: the execution-time distribution of `function` on each device that runs it."""
    out: dict[str, dict[str, Any]] = {}
    for device in devices:
        image = image_on_device(function, device)
        if image is None:
            continue
        mu, sigma, lo, hi = exec_distribution(image, device)
        out[device] = {"kind": "lognormal", "mu": mu, "sigma": sigma, "min_s": lo, "max_s": hi}
    return out


def image_dict(image: str) -> dict[str, Any]:
    """A `world.images` entry: sizes per architecture (MB), the devices it runs on."""
    return {
        "name": image,
        "size_mb": dict(IMAGE_SIZE_MB[image]),
        "requires": {"device": sorted(EXEC_MEAN_S[image])},
    }


def class_world(function: str) -> dict[str, Any]:
    """A function's world fields (workload class): one container with its ranked images,
    the capabilities the Capability scorer rewards, data per invocation and model (MB)."""
    f = ALL_FUNCTIONS[function]
    caps = (
        {"capability.cuda": "true", "capability.gpu": "true"}
        if any(img.endswith("-gpu") for img in f.images)
        else {}
    )
    if any(img.endswith("-tpu") for img in f.images):
        caps["capability.tpu"] = "true"
    out: dict[str, Any] = {"containers": [{"images": list(f.images)}]}
    if caps:
        out["capabilities"] = caps
    for key in ("data_in_mb", "data_out_mb", "model_mb"):
        if getattr(f, key):
            out[key] = getattr(f, key)
    return out


def pod_dict(function: str) -> dict[str, Any]:
    """The old (deprecated) form of a function's world, as the scoring placer's ``pods``
    entry; kept to test the loader's migration (`clusteremu.scenarios.world.migrate`)."""
    f = ALL_FUNCTIONS[function]
    world = class_world(function)
    return {
        "images": [image_dict(img) for img in f.images],
        "capabilities": world.get("capabilities", {}),
        "data_in_mb": f.data_in_mb,
        "data_out_mb": f.data_out_mb,
        "model_mb": f.model_mb,
    }


def score_bounds(function: str, wait_hi_s: float) -> dict[str, list[float]]:
    """Eq. 2 bounds: execution between the fastest and slowest device means, wait in
    [0, wait_hi_s]."""
    means = [EXEC_MEAN_S[img][d] for d in DEVICE_NAMES if (img := image_on_device(function, d))]
    return {"exec_s": [min(means), max(means)], "wait_s": [0.0, wait_hi_s]}


def scenario_dict(
    setup: str = "hybrid_balanced",
    nodes: int = 500,
    rate_per_s: float = 50.0,
    time_s: float = 600.0,
    warmup_s: float = 0.0,
    seed: int = 1,
    topology: str = "urban",
    functions: Sequence[str] | None = None,
    timeout_s: float = 30.0,
    weights: Mapping[str, float] | None = None,
    scorers: Sequence[str] | None = None,
    method: str = "exact",
    placer: str = "scoring",
    percentage_of_nodes_to_score: float | None = None,
    replicas: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """A complete faas scenario: the setup at `nodes` nodes, the inference and service
    functions at `rate_per_s` requests/s each, training at 0.1/s and preprocessing at 1/s
    (Poisson); `functions` defaults to the paper's five (`FUNCTIONS`). The scheduling options
    `percentage_of_nodes_to_score` and `replicas` ({min, max, scale_factor}) go to the
    scoring placer."""
    functions = list(FUNCTIONS if functions is None else functions)
    for name in functions:
        if name not in ALL_FUNCTIONS:
            known = ", ".join(ALL_FUNCTIONS)
            raise ValueError(f"functions: unknown function {name!r}; expected some of {known}")
    classes = []
    for name in functions:
        f = ALL_FUNCTIONS[name]
        rate = rate_per_s if f.inference else f.default_rate_per_s
        runtime = runtime_by_node_type(name)
        mean_run = float(np.mean([EXEC_MEAN_S[image_on_device(name, d) or ""][d] for d in runtime]))
        classes.append(
            {
                "name": name,
                "arrival": {"kind": "poisson", "rate_per_s": rate},
                "size": {"kind": "deterministic", "value_s": round(mean_run, 4)},
                "request": {"cpu": 1, "memory_gb": max(f.memory_mib) / 1024.0},
                "timeout_s": timeout_s,
                "runtime_by_node_type": runtime,
                **class_world(name),
            }
        )
    images = list(dict.fromkeys(img for name in functions for img in ALL_FUNCTIONS[name].images))
    params: dict[str, Any] = {}
    if placer == "scoring":
        if scorers is not None:
            params["scorers"] = list(scorers)
        if weights is not None:
            params["weights"] = dict(weights)
        if percentage_of_nodes_to_score is not None:
            params["percentage_of_nodes_to_score"] = float(percentage_of_nodes_to_score)
        if replicas is not None:
            params["replicas"] = dict(replicas)
    return {
        "name": f"faas-{setup.replace('_', '-')}",
        "description": f"{SETUP_WORDS[setup]}, {nodes} nodes, {topology} network",
        "seed": seed,
        "stop": {"time_s": time_s, "warmup_s": warmup_s},
        "cluster": {
            "generator": {
                "name": setup,
                "nodes": nodes,
                "seed": seed,
                "params": {"topology": topology, "method": method},
            }
        },
        "workload": {"classes": classes},
        "world": {"goodput": GOODPUT, "images": [image_dict(img) for img in images]},
        "metrics": {
            "score": {"bounds": {name: score_bounds(name, timeout_s) for name in functions}}
        },
        "scheduler": {"placer": {"name": placer, "params": params}},
    }


def apply_cluster_generator(model: Any) -> Any:
    """A validated `ScenarioModel` with its ``cluster.generator`` expanded (loader hook).

    The generated node types and node groups are appended to any listed explicitly.
    Raises ValueError for an unknown setup or bad generator parameters.
    """
    from clusteremu.scenarios import schema

    gen = model.cluster.generator
    types, groups = expand_cluster_generator(gen.name, gen.nodes, gen.seed, gen.params)
    cluster = model.cluster.model_copy(
        update={
            "node_types": list(model.cluster.node_types)
            + [schema.NodeTypeModel(**t) for t in types],
            "nodes": list(model.cluster.nodes) + [schema.NodeGroupModel(**g) for g in groups],
            "generator": None,
        }
    )
    return model.model_copy(update={"cluster": cluster})


#: The header of the shipped scenario file (`shipped_yaml`).
SHIPPED_HEADER = """\
# The heterogeneous cloud/edge family of the Learning to Score paper (Asenov et al., "Learning
# to Score", after faas-sim; reference in docs/scoring.md):
# the hybrid_balanced setup at 1,000 nodes (urban topology: edge devices behind 250 Mbit/s
# uplinks), the five functions -- the three inference functions at 50 requests/s each, training
# at 0.1/s, preprocessing at 1/s -- for 600 simulated seconds, placed by the scoring placer
# with the paper's eight scorers and "Fixed" weights. Per-device execution times are bounded
# lognormals with faas-sim's means (runtime_by_node_type); a request that finds no feasible node
# within 30 s fails. The world model is scenario data: the images (world.images), each
# function's container, model and data (its workload class) and the node types' bandwidths
# (from the generator); the engine charges every start its image pulls, model download and
# data transfer, whatever the placer. The summary carries `score` (the paper's eq. 2, selected
# under metrics) and `per_function`, for every placer:
#   clusteremu compare faas-hybrid-balanced --policy placer=first-fit --policy placer=scoring
# Generated by `python -m clusteremu.scenarios.faas` (its shipped_yaml()); change sizes with
# --set, e.g.
#   clusteremu run faas-hybrid-balanced --set cluster.generator.nodes=5000 --json
"""


def shipped_yaml() -> str:
    """The text of ``scenarios/faas-hybrid-balanced.yaml``."""
    import yaml

    data = scenario_dict("hybrid_balanced", nodes=1000, rate_per_s=50.0, time_s=600.0, seed=1)
    data["name"] = "faas-hybrid-balanced"
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)
    return SHIPPED_HEADER + body


if __name__ == "__main__":
    from pathlib import Path

    target = Path(__file__).with_name("faas-hybrid-balanced.yaml")
    target.write_text(shipped_yaml())
    print(f"wrote {target}")
