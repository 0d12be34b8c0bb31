"""The malleable-job model of the MDP paper (section 2; docs/mdp.md) and its validation.

k identical cores; jobs arrive as a Poisson process of rate lambda (per second); a job is of
class j with probability p_j (two classes: p and 1 - p); sizes are Exponential with rate mu
(work in core-seconds at unit speed); class j speeds up by Amdahl's law with parallel fraction
theta_j:

    s(x; theta) = x                               for x <= 1 (no parallelism below a core),
    s(x; theta) = 1 / ((1 - theta) + theta / x)   for x >= 1.

Within a class cores are shared equally (EQUI), so x_j class-j jobs holding K_j cores leave
at rate (eq. 3.1)

    r_j(x_j, K_j) = mu * x_j * s(K_j / x_j; theta_j)   (0 when x_j = 0).

Assumption 3.4 (truncation): at most B jobs of each class; arrivals beyond are blocked.
Bad input raises `MdpModelError`, which names the field and what was expected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from clusteremu.cluster.distributions import Exponential
from clusteremu.cluster.model import SimulationSpec
from clusteremu.cluster.speedup import AmdahlSpeedup
from clusteremu.cluster.workload import RenewalArrivals

FloatArray = npt.NDArray[np.float64]


class MdpModelError(ValueError):
    """A parameter of the MDP model is out of range; names the field and the expectation."""

    def __init__(self, field: str, expected: str) -> None:
        self.field, self.expected = field, expected
        super().__init__(f"{field}: {expected}")


def amdahl(x: npt.ArrayLike, theta: npt.ArrayLike) -> FloatArray:
    """s(x; theta) for per-job allocations x (cores, >= 0); linear below one core."""
    xa = np.asarray(x, dtype=np.float64)
    th = np.asarray(theta, dtype=np.float64)
    above = 1.0 / ((1.0 - th) + th / np.maximum(xa, 1.0))
    return np.asarray(np.where(xa <= 1.0, xa, above), dtype=np.float64)


def departure_rate(
    jobs: npt.ArrayLike, class_cores: npt.ArrayLike, theta: float, mu: float
) -> FloatArray:
    """Eq. 3.1: mu * x * s(K / x; theta) per second, 0 where x = 0 (vectorised)."""
    x = np.asarray(jobs, dtype=np.float64)
    k = np.asarray(class_cores, dtype=np.float64)
    safe = np.maximum(x, 1.0)
    return np.asarray(np.where(x > 0, mu * x * amdahl(k / safe, theta), 0.0), dtype=np.float64)


@dataclass(frozen=True)
class MdpModel:
    """Parameters of the core-allocation MDP (the MDP paper; docs/mdp.md).

    Attributes:
        cores: k, the number of cores.
        arrival_rate_per_s: lambda, total Poisson arrival rate (jobs per second).
        class_probabilities: p_j, the probability that an arriving job is of class j.
        service_rate_per_s: mu, the rate of the exponential job size (1 / mean core-seconds).
        theta: Amdahl parallel fraction theta_j of every class, in (0, 1].
        truncation: B, the most jobs of one class in the system (arrivals beyond are blocked).
    """

    cores: float
    arrival_rate_per_s: float
    class_probabilities: tuple[float, ...]
    service_rate_per_s: float
    theta: tuple[float, ...]
    truncation: int = 20

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "class_probabilities", tuple(float(v) for v in self.class_probabilities)
        )
        object.__setattr__(self, "theta", tuple(float(v) for v in self.theta))
        check_positive("cores", self.cores)
        check_positive("arrival_rate_per_s", self.arrival_rate_per_s)
        check_positive("service_rate_per_s", self.service_rate_per_s)
        m = len(self.class_probabilities)
        if m < 2:
            raise MdpModelError("class_probabilities", f"expected at least two classes, got {m}")
        for j, p in enumerate(self.class_probabilities):
            if not (math.isfinite(p) and 0.0 < p < 1.0):
                raise MdpModelError(
                    f"class_probabilities[{j}]", f"expected a probability p in (0, 1), got {p}"
                )
        if not math.isclose(sum(self.class_probabilities), 1.0, rel_tol=0.0, abs_tol=1e-9):
            raise MdpModelError(
                "class_probabilities",
                f"expected probabilities summing to 1, got {sum(self.class_probabilities):.12g}",
            )
        check_theta(self.theta, m)
        if (
            isinstance(self.truncation, bool)
            or int(self.truncation) != self.truncation
            or self.truncation < 1
        ):
            raise MdpModelError(
                "truncation", f"expected an integer B >= 1, got {self.truncation!r}"
            )
        object.__setattr__(self, "truncation", int(self.truncation))
        if self.load >= 1.0:
            raise MdpModelError(
                "arrival_rate_per_s",
                f"unstable load lambda / (mu * k) = {self.arrival_rate_per_s:g} / "
                f"({self.service_rate_per_s:g} * {self.cores:g}) = {self.load:.4g} >= 1: the "
                f"truncation B = {self.truncation} would only hide a queue that grows without "
                "bound; expected a load below 1",
            )

    @classmethod
    def two_class(
        cls,
        cores: float,
        arrival_rate_per_s: float,
        p: float,
        service_rate_per_s: float,
        theta: tuple[float, float],
        truncation: int = 20,
    ) -> MdpModel:
        """The MDP paper's two-class model: class 1 with probability p, class 2 with 1 - p."""
        if not (math.isfinite(p) and 0.0 < p < 1.0):
            raise MdpModelError("p", f"expected a probability p in (0, 1), got {p}")
        return cls(cores, arrival_rate_per_s, (p, 1.0 - p), service_rate_per_s, theta, truncation)

    @property
    def n_classes(self) -> int:
        return len(self.class_probabilities)

    @property
    def load(self) -> float:
        """lambda / (mu * k): below 1 is needed for stability (all cores busy at speed 1 each)."""
        return self.arrival_rate_per_s / (self.service_rate_per_s * self.cores)

    @property
    def class_rates_per_s(self) -> FloatArray:
        """lambda * p_j, arrivals per second of every class."""
        return self.arrival_rate_per_s * np.asarray(self.class_probabilities)

    @property
    def uniformisation_rate(self) -> float:
        """Lambda = lambda + mu * k, an upper bound on the total outflow of any state."""
        return self.arrival_rate_per_s + self.service_rate_per_s * self.cores

    def with_theta(self, theta: tuple[float, ...]) -> MdpModel:
        return MdpModel(
            self.cores,
            self.arrival_rate_per_s,
            self.class_probabilities,
            self.service_rate_per_s,
            tuple(theta),
            self.truncation,
        )


def check_positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not (math.isfinite(float(value)) and float(value) > 0.0):
        raise MdpModelError(name, f"expected a finite positive number, got {value!r}")


def check_theta(theta: tuple[float, ...], n_classes: int, name: str = "theta") -> None:
    """Every theta_j must lie in (0, 1] (theta = 0 is no parallelism and is not identifiable)."""
    if len(theta) != n_classes:
        raise MdpModelError(name, f"expected {n_classes} values (one per class), got {len(theta)}")
    for j, t in enumerate(theta):
        if not (math.isfinite(t) and 0.0 < t <= 1.0):
            raise MdpModelError(f"{name}[{j}]", f"expected a parallel fraction in (0, 1], got {t}")


def model_from_spec(
    spec: SimulationSpec, truncation: int = 20, theta: tuple[float, ...] | None = None
) -> MdpModel:
    """The MDP model of a scenario: its classes, all in one pool, Poisson arrivals, exponential
    sizes with one common mean, Amdahl speed-ups (their parallel fractions are the true theta
    unless `theta` is given). Raises MdpModelError naming the offending scenario field.
    """
    if len(spec.pools) != 1:
        raise MdpModelError("cluster.pools", f"expected exactly one pool, got {len(spec.pools)}")
    pool = spec.pools[0]
    rates, means, thetas = [], [], []
    for i, jc in enumerate(spec.classes):
        where = f"workload.classes.{i}"
        if jc.pool != pool.name:
            raise MdpModelError(f"{where}.pool", f"expected pool {pool.name!r}, got {jc.pool!r}")
        arrival = jc.arrival
        if not (
            isinstance(arrival, RenewalArrivals) and isinstance(arrival.interarrival, Exponential)
        ):
            raise MdpModelError(f"{where}.arrival", "expected a poisson arrival process")
        if not isinstance(jc.size, Exponential):
            raise MdpModelError(f"{where}.size", "expected an exponential size distribution")
        if not isinstance(jc.speedup, AmdahlSpeedup):
            raise MdpModelError(f"{where}.speedup", "expected an amdahl speed-up")
        rates.append(1.0 / arrival.interarrival.mean)
        means.append(jc.size.mean / pool.speed)
        pf = jc.speedup.parallel_fraction
        if theta is None and not 0.0 < pf <= 1.0:
            raise MdpModelError(
                f"{where}.speedup.parallel_fraction",
                f"expected a parallel fraction in (0, 1], got {pf}",
            )
        thetas.append(jc.speedup.parallel_fraction)
    if len(rates) < 2:
        raise MdpModelError("workload.classes", f"expected at least two classes, got {len(rates)}")
    if not np.allclose(means, means[0], rtol=1e-12, atol=0.0):
        raise MdpModelError("workload.classes", f"expected one common mean size, got {means}")
    lam = float(sum(rates))
    probs = tuple(r / lam for r in rates)
    return MdpModel(
        pool.cores,
        lam,
        probs,
        1.0 / means[0],
        tuple(thetas) if theta is None else tuple(theta),
        truncation,
    )
