"""Shared builders for the learned speed-up MDP tests (the MDP paper; docs/mdp.md)."""

from __future__ import annotations

from typing import Any

#: Table 1 of the MDP paper: (k, lambda, mu, p, theta1, theta2).
EXAMPLES: dict[int, tuple[float, float, float, float, float, float]] = {
    1: (30, 4.0, 2.5, 0.35, 0.3, 0.8),
    2: (10, 2.0, 1.5, 0.6, 0.4, 0.85),
    3: (20, 2.0, 1.0, 0.65, 0.4, 0.7),
    4: (30, 4.0, 2.5, 0.35, 0.3, 0.8),
}


def mdp_scenario(
    example: int = 2,
    jobs: int = 2000,
    seed: int = 1,
    true_theta: tuple[float, float] | None = None,
    **params: Any,
) -> dict[str, Any]:
    """A scenario dict for one of Table 1's examples, run by the `mdp` allocator."""
    k, lam, mu, p, t1, t2 = EXAMPLES[example]
    if true_theta is not None:
        t1, t2 = true_theta
    cls = [("class1", lam * p, t1), ("class2", lam * (1 - p), t2)]
    return {
        "name": f"mdp-test-{example}",
        "seed": seed,
        "stop": {"jobs": jobs},
        "cluster": {"pools": [{"name": "cores", "cores": k}]},
        "workload": {
            "classes": [
                {
                    "name": name,
                    "arrival": {"kind": "poisson", "rate_per_s": rate},
                    "size": {"kind": "exponential", "mean_s": 1.0 / mu},
                    "speedup": {"kind": "amdahl", "parallel_fraction": th},
                    "pool": "cores",
                }
                for name, rate, th in cls
            ]
        },
        "scheduler": {"allocator": {"name": "mdp", "params": params}},
    }


def three_class_scenario(jobs: int = 3000, seed: int = 1, **params: Any) -> dict[str, Any]:
    """Three Amdahl classes (theta 0.3, 0.6, 0.9) on 12 cores, lambda = 3, mu = 1."""
    return {
        "name": "mdp-test-3",
        "seed": seed,
        "stop": {"jobs": jobs},
        "cluster": {"pools": [{"name": "cores", "cores": 12}]},
        "workload": {
            "classes": [
                {
                    "name": name,
                    "arrival": {"kind": "poisson", "rate_per_s": rate},
                    "size": {"kind": "exponential", "mean_s": 1.0},
                    "speedup": {"kind": "amdahl", "parallel_fraction": th},
                    "pool": "cores",
                }
                for name, rate, th in (("a", 0.9, 0.3), ("b", 0.9, 0.6), ("c", 1.2, 0.9))
            ]
        },
        "scheduler": {"allocator": {"name": "mdp", "params": params}},
    }
