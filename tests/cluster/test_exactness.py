"""The engine against queueing theory: Erlang C, processor sharing, a birth-death chain,
and Little's law. Each test states its tolerance; run lengths are chosen so the 95%
confidence half-width across replications is well inside it (checked too).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from clusteremu.cluster.runner import run_spec
from clusteremu.cluster.speedup import AmdahlSpeedup
from clusteremu.scenarios.loader import load_scenario

TOLERANCE = 0.03  # relative, as in the foundation issue


def erlang_c_response_time(arrival_rate: float, service_rate: float, servers: int) -> float:
    """Mean response time of M/M/c FCFS (Erlang C): P_wait / (c mu - lambda) + 1 / mu."""
    a = arrival_rate / service_rate
    rho = a / servers
    head = sum(a**k / math.factorial(k) for k in range(servers))
    tail = a**servers / math.factorial(servers) / (1.0 - rho)
    p_wait = tail / (head + tail)
    return p_wait / (servers * service_rate - arrival_rate) + 1.0 / service_rate


def birth_death_mean(arrival_rate: float, death_rate, n_max: int = 4000) -> float:  # type: ignore[no-untyped-def]
    """Stationary mean of a birth-death chain with constant birth rate, truncated far out."""
    log_pi = np.zeros(n_max + 1)
    for n in range(1, n_max + 1):
        log_pi[n] = log_pi[n - 1] + math.log(arrival_rate) - math.log(death_rate(n))
    pi = np.exp(log_pi - log_pi.max())
    pi /= pi.sum()
    return float(np.dot(np.arange(n_max + 1), pi))


def _check(summary: dict, key: str, exact: float) -> None:  # type: ignore[type-arg]
    value, half_width = summary[key], summary["ci95"][key]
    assert half_width < TOLERANCE * exact / 2, f"run too short: ci95 {half_width:.4g}"
    assert abs(value - exact) <= TOLERANCE * exact, (
        f"{key} = {value:.5g} ± {half_width:.3g}, exact {exact:.5g}"
    )


def test_mmc_matches_erlang_c() -> None:
    spec = load_scenario("mm-c", ["stop.jobs=300000", "stop.warmup_jobs=10000", "replications=6"])
    result = run_spec(spec)
    _check(result.summary, "mean_response_time_s", erlang_c_response_time(8.0, 1.0, 10))


def test_mm1_response_time_percentile_is_exponential() -> None:
    """FCFS M/M/1 (lambda 0.5, mu 1): the response time is exponential with rate mu -
    lambda, so its 90th percentile is ln(10) / (mu - lambda) (the p90 summary metric)."""
    spec = load_scenario(
        "mm-c",
        [
            "cluster.nodes.0.count=1",
            "workload.classes.0.arrival.rate_per_s=0.5",
            "stop.jobs=200000",
            "stop.warmup_jobs=5000",
            "replications=6",
        ],
    )
    _check(run_spec(spec).summary, "p90_response_time_s", math.log(10.0) / (1.0 - 0.5))


def test_equi_linear_is_processor_sharing() -> None:
    # k = 4 cores, lambda = 3, mu = 1: one fast server of rate k*mu, T = 1 / (k mu - lambda).
    spec = load_scenario(
        "ps-amdahl",
        [
            "workload.classes.0.speedup={kind: linear}",
            "cluster.pools.0.cores=4",
            "workload.classes.0.arrival.rate_per_s=3.0",
            "stop.jobs=1000000",
            "stop.warmup_jobs=10000",
            "replications=6",
        ],
    )
    result = run_spec(spec)
    _check(result.summary, "mean_response_time_s", 1.0 / (4 * 1.0 - 3.0))


def test_equi_amdahl_matches_birth_death_chain() -> None:
    spec = load_scenario(
        "ps-amdahl", ["stop.jobs=300000", "stop.warmup_jobs=10000", "replications=6"]
    )
    cores, rate, mu = 16.0, 10.0, 1.0
    s = AmdahlSpeedup(0.9)
    exact = birth_death_mean(rate, lambda n: mu * n * float(s.value(cores / n)))
    result = run_spec(spec)
    _check(result.summary, "mean_jobs_in_system", exact)


@pytest.mark.parametrize("name", ["mm-c", "ps-amdahl", "hetero-placement"])
def test_littles_law_on_every_summary(name: str) -> None:
    result = run_spec(load_scenario(name))
    for s in result.replications:
        little = s["throughput_per_s"] * s["mean_response_time_s"]
        assert abs(s["mean_jobs_in_system"] - little) <= 0.01 * s["mean_jobs_in_system"]
        for per_class in s["per_class"].values():
            little_c = per_class["throughput_per_s"] * per_class["mean_response_time_s"]
            assert (
                abs(per_class["mean_jobs_in_system"] - little_c)
                <= 0.01 * per_class["mean_jobs_in_system"]
            )
