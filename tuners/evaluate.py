"""One evaluation of a tuning experiment: one emulator run of its scenario under a weight
vector, scored by the Learning to Score paper's eq. 2 (`clusteremu.cluster.score_metric`).

An `Experiment` is a scenario (a YAML-shaped dict whose placer is ``scoring``) and the coarse
description the RL agent sees. It comes from a domain (`clusteremu.tuners.domains.sample_config`) or
from a user's scenario file (`experiment_from_file`). Every evaluation of one experiment
runs the same seed: arrivals and execution-time quantiles are common random numbers, only
the weights differ. `repeats` > 1 averages the score over that many replications.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.tuners.domains import ExperimentConfig, static_features, weight_mapping


@dataclass(frozen=True)
class Experiment:
    """A scenario to tune and its static description."""

    name: str
    data: dict[str, Any]
    static: npt.NDArray[np.float32]
    row: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Evaluation:
    """The outcome of one run: eq. 2's score, per-function detail and wall time (s)."""

    score: float
    per_function: dict[str, dict[str, Any]]
    jobs: int
    wall_s: float


def experiment_from_config(config: ExperimentConfig) -> Experiment:
    """The experiment of a domain configuration."""
    from clusteremu.scenarios.loader import spec_from_dict

    data = config.scenario()
    spec = spec_from_dict(data, data["name"])
    return Experiment(data["name"], data, static_features(spec), config.row())


def experiment_from_file(path: str, overrides: list[str] | None = None) -> Experiment:
    """The experiment of a scenario file (after ``--set`` overrides). Raises ScenarioError
    for a file that is not a valid scenario, or whose placer is not ``scoring``."""
    from clusteremu.scenarios.errors import ScenarioError
    from clusteremu.scenarios.loader import (
        apply_overrides,
        build_spec,
        read_yaml,
        resolve_path,
        validate,
    )

    resolved = resolve_path(path)
    source = str(resolved)
    data = apply_overrides(read_yaml(resolved), overrides or [], source)
    spec = build_spec(validate(data, source), resolved.parent, source)
    if spec.scheduler.placer.name != "scoring":
        raise ScenarioError(
            source,
            [
                (
                    "scheduler.placer.name",
                    f"tuning weights needs the scoring placer, got {spec.scheduler.placer.name!r}",
                )
            ],
        )
    data = copy.deepcopy(data)
    if spec.metrics.score is None:  # select eq. 2 with each class's default bounds
        data.setdefault("metrics", {})["score"] = {}
        spec = build_spec(validate(data, source), resolved.parent, source)
    data["_base_dir"] = str(resolved.parent)
    name = str(data.get("name") or Path(source).stem)
    return Experiment(name, data, static_features(spec), {"scenario": source, "seed": spec.seed})


def scenario_with(data: dict[str, Any], weights: Any, repeats: int = 1) -> dict[str, Any]:
    """A copy of the scenario dict with the scoring placer's weights set."""
    out = copy.deepcopy(data)
    out.pop("_base_dir", None)
    sched = out.setdefault("scheduler", {})
    placer = sched.setdefault("placer", {"name": "scoring"})
    params = dict(placer.get("params") or {})
    params["weights"] = weight_mapping(weights)
    placer["params"] = params
    if repeats > 1:
        out["replications"] = int(repeats)
    return out


def evaluate(experiment: Experiment, weights: Any, repeats: int = 1) -> Evaluation:
    """Run the experiment's scenario under `weights`; the score is the mean over `repeats`
    replications (each the same for every weight vector)."""
    from clusteremu.cluster.runner import run_spec
    from clusteremu.scenarios.loader import spec_from_dict

    start = time.perf_counter()
    base = experiment.data.get("_base_dir")
    data = scenario_with(experiment.data, weights, repeats)
    spec = spec_from_dict(data, experiment.name, Path(base) if base else None)
    result = run_spec(spec)
    scores = [float(s["score"]) for s in result.replications]
    per_function = result.replications[0].get("per_function", {})
    return Evaluation(
        float(np.mean(scores)),
        per_function,
        int(result.jobs.num_rows),
        time.perf_counter() - start,
    )
