"""`LearnConfig`: the settings of the MDP paper's learning-and-control loop (scenario
`scheduler.allocator.params.learn`), checked when the scenario loads; the loop itself is
`clusteremu.cluster.experiments.mdp_learner`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from clusteremu.cluster.policies.mdp.model import MdpModelError, check_theta

#: Algorithm 1a (the last epoch's data) and 1b (all data since time 0).
ALGORITHMS = ("1a", "1b")


@dataclass(frozen=True)
class LearnConfig:
    """Settings of a learning run (scenario `scheduler.allocator.params.learn`).

    Attributes:
        algorithm: "1a" (last epoch's data) or "1b" (all data since time 0).
        iterations: number of epochs (policy updates).
        initial_theta: the estimates the first policy is solved for (default 0.5 for
            every class).
        departures_first, departures_step: d_n = first + step * n, n = 1, 2, ...
        change_points: list of {time_s, theta: {class name or index: value}} (non-stationary).
        max_blocking: largest blocking probability at B accepted for the true parameters.
    """

    algorithm: str = "1a"
    iterations: int = 100
    initial_theta: tuple[float, ...] | None = None
    departures_first: int = 50
    departures_step: int = 1
    change_points: tuple[dict[str, Any], ...] = ()
    max_blocking: float = 1e-3

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise MdpModelError(
                "learn.algorithm", f"expected one of {ALGORITHMS}, got {self.algorithm!r}"
            )
        _check_int("learn.iterations", self.iterations, 1)
        _check_int("learn.departures.first", self.departures_first, 1)
        _check_int("learn.departures.step", self.departures_step, 0)
        if self.initial_theta is not None:
            check_theta(tuple(self.initial_theta), len(self.initial_theta), "learn.initial_theta")
        if not (0.0 < self.max_blocking < 1.0):
            raise MdpModelError(
                "learn.max_blocking", f"expected a probability in (0, 1), got {self.max_blocking}"
            )
        last = -math.inf
        for i, cp in enumerate(self.change_points):
            where = f"learn.change_points.{i}"
            if not isinstance(cp, dict) or set(cp) != {"time_s", "theta"}:
                raise MdpModelError(where, "expected a mapping with keys time_s and theta")
            t = cp["time_s"]
            if (
                isinstance(t, bool)
                or not isinstance(t, int | float)
                or not math.isfinite(t)
                or t < 0
                or t <= last
            ):
                raise MdpModelError(
                    f"{where}.time_s", f"expected increasing finite times >= 0, got {t!r}"
                )
            last = float(t)
            if not isinstance(cp["theta"], dict) or not cp["theta"]:
                raise MdpModelError(f"{where}.theta", "expected a mapping class -> theta")
            for name, value in cp["theta"].items():
                check_theta((float(value),), 1, f"{where}.theta.{name}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LearnConfig:
        """Build from the scenario's `learn:` block."""
        known = {
            "algorithm",
            "iterations",
            "initial_theta",
            "departures",
            "change_points",
            "max_blocking",
        }
        unknown = sorted(set(data) - known)
        if unknown:
            raise MdpModelError(
                f"learn.{unknown[0]}", f"unknown field; expected one of {sorted(known)}"
            )
        dep = data.get("departures", {})
        if not isinstance(dep, dict) or not set(dep) <= {"first", "step"}:
            raise MdpModelError("learn.departures", "expected a mapping with keys first and step")
        algorithm = str(data.get("algorithm", "1a"))
        default_first, default_step = (50, 1) if algorithm == "1a" else (100, 0)
        theta = data.get("initial_theta")
        if theta is not None and (not isinstance(theta, list | tuple) or len(theta) < 2):
            raise MdpModelError(
                "learn.initial_theta", f"expected one value per class, got {theta!r}"
            )
        return cls(
            algorithm=algorithm,
            iterations=data.get("iterations", 100),
            initial_theta=None if theta is None else tuple(float(t) for t in theta),
            departures_first=dep.get("first", default_first),
            departures_step=dep.get("step", default_step),
            change_points=tuple(data.get("change_points", ())),
            max_blocking=float(data.get("max_blocking", 1e-3)),
        )

    def departures(self, n: int) -> int:
        """d_n, the departures in epoch n (n = 1, 2, ...)."""
        return self.departures_first + self.departures_step * n

    def total_departures(self) -> int:
        return sum(self.departures(n) for n in range(1, self.iterations + 1))


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise MdpModelError(name, f"expected an integer >= {low}, got {value!r}")


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise MdpModelError(name, f"expected an integer >= {low}, got {value!r}")
