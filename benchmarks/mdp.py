"""Learned speed-up MDP (the MDP paper): solver and estimator speed, and the learning table.

1. Relative value iteration with B = 50 jobs per class (2,601 states) and 21 actions
   (M = 20), for Table 1's examples and a heavily loaded system: wall time per solve (after
   compilation), sweeps, and E[N]; and one three-class system (B = 10, 66 share vectors).
2. One MLE over 10,000 departures (Example 1, optimal policy): wall time of `mle` on the
   sufficient statistics, and of rebuilding the state path from the per-job records first.
3. (unless --quick) The learning table: every Table 1 example with the paper's algorithm and
   number of iterations; the final estimates and the exact E[N] of the learned policy under
   the true parameters against the optimal policy's, and the change-point experiment's
   tracking delays.

    python benchmarks/mdp.py [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from clusteremu.cluster import layout as L
from clusteremu.cluster.engine import Engine
from clusteremu.cluster.experiments.mdp_learner import learn, tracking_delays
from clusteremu.cluster.policies.mdp import estimator as est
from clusteremu.cluster.policies.mdp.allocator import MdpAllocator
from clusteremu.cluster.policies.mdp.learn_config import LearnConfig
from clusteremu.cluster.policies.mdp.model import MdpModel
from clusteremu.cluster.policies.mdp.solver import solve
from clusteremu.scenarios.loader import load_scenario

SYSTEMS = {
    "example 1": MdpModel.two_class(30, 4.0, 0.35, 2.5, (0.3, 0.8), 50),
    "example 2": MdpModel.two_class(10, 2.0, 0.6, 1.5, (0.4, 0.85), 50),
    "example 3": MdpModel.two_class(20, 2.0, 0.65, 1.0, (0.4, 0.7), 50),
    "load 0.8 (k=10, lambda=12, mu=1.5)": MdpModel.two_class(10, 12.0, 0.5, 1.5, (0.4, 0.85), 50),
}


def best_of(fn: Any, repeats: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench_solver() -> list[dict[str, Any]]:
    solve(MdpModel.two_class(4, 1.0, 0.5, 1.0, (0.5, 0.5), 3), actions=2)  # compile
    rows = []
    for name, model in SYSTEMS.items():
        seconds, sol = best_of(lambda m=model: solve(m, actions=20), 3)
        rows.append(
            {
                "system": name,
                "states": (model.truncation + 1) ** 2,
                "actions": 21,
                "seconds": seconds,
                "sweeps": sol.iterations,
                "mean_jobs": sol.average_cost,
                "converged": sol.converged,
            }
        )
    three = MdpModel(12, 3.0, (0.3, 0.3, 0.4), 1.0, (0.3, 0.6, 0.9), 10)
    solve(MdpModel(4, 1.0, (0.3, 0.3, 0.4), 1.0, (0.5, 0.5, 0.5), 2), actions=2)  # compile
    seconds, sol = best_of(lambda: solve(three, actions=10), 3)
    rows.append(
        {
            "system": "three classes (B=10, M=10: 66 actions)",
            "states": 11**3,
            "actions": 66,
            "seconds": seconds,
            "sweeps": sol.iterations,
            "mean_jobs": sol.average_cost,
            "converged": sol.converged,
        }
    )
    return rows


def bench_mle() -> dict[str, Any]:
    spec = load_scenario("mdp-example-1", ["stop.jobs=10000", "stop.warmup_jobs=0"])
    model = MdpModel.two_class(30, 4.0, 0.35, 2.5, (0.3, 0.8), 20)
    table = solve(model, actions=100).table
    engine = Engine(spec, allocator=MdpAllocator(table=table))
    engine.run()

    def rebuild() -> list[est.ClassExposure]:
        path = est.path_from_jobs(
            engine.jobs_f[L.JF.ARRIVAL],
            engine.jobs_f[L.JF.END],
            engine.jobs_i[L.JI.CLS],
            (0, 1),
            30.0,
            [(0.0, table)],
            (0.0, engine.now),
        )
        return [est.exposure(path, c) for c in (0, 1)]

    t_path, data = best_of(rebuild, 5)
    t_mle, estimates = best_of(lambda: [est.mle(d, 2.5) for d in data], 5)
    return {
        "departures": int(engine.state.istate[L.IS.DONE_COUNT]),
        "seconds_mle_both_classes": t_mle,
        "seconds_mle_per_class": t_mle / 2,
        "seconds_path_and_exposure": t_path,
        "theta_hat": [e.theta for e in estimates],
        "std_error": [e.std_error for e in estimates],
    }


def bench_learning() -> dict[str, Any]:
    rows = []
    for name in ("mdp-example-1", "mdp-example-2", "mdp-example-3", "mdp-example-4"):
        spec = load_scenario(name)
        params = spec.scheduler.allocator.params
        config = LearnConfig.from_dict(params["learn"])
        t0 = time.perf_counter()
        result = learn(spec, config, params["truncation"], params["actions"])
        rows.append(
            {
                "scenario": name,
                "algorithm": config.algorithm,
                "iterations": config.iterations,
                "departures": result.rows[-1]["departures"],
                "theta_hat": result.theta,
                "true_theta": result.true_theta,
                "mean_jobs_learned": result.mean_jobs_learned,
                "mean_jobs_optimal": result.mean_jobs_optimal,
                "gap_percent": 100 * (result.mean_jobs_learned / result.mean_jobs_optimal - 1),
                "seconds": time.perf_counter() - t0,
            }
        )
    spec = load_scenario("mdp-changepoint")
    params = spec.scheduler.allocator.params
    config = LearnConfig.from_dict(params["learn"])
    result = learn(spec, config, params["truncation"], params["actions"])
    times = np.array([r["time_s"] for r in result.rows])
    change_epochs = [int(np.searchsorted(times, t)) + 1 for t in result.change_times]
    return {
        "examples": rows,
        "changepoint": {
            "change_times_s": result.change_times,
            "change_iterations": change_epochs,
            "tracking_delays_epochs": tracking_delays(result, 0.1),
            "final_theta": result.theta,
            "gap_percent": 100 * (result.mean_jobs_learned / result.mean_jobs_optimal - 1),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="skip the learning table")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report: dict[str, Any] = {"solver": bench_solver(), "mle": bench_mle()}
    if not args.quick:
        report["learning"] = bench_learning()
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print("Relative value iteration, B = 50 per class, 21 actions (target < 1 s):")
    for r in report["solver"]:
        print(
            f"  {r['system']:<40} {r['seconds']:.3f} s  {r['sweeps']:>5} sweeps  "
            f"E[N] = {r['mean_jobs']:.5f}  converged={r['converged']}"
        )
    m = report["mle"]
    print(
        f"MLE over {m['departures']} departures (target < 0.1 s): "
        f"{m['seconds_mle_per_class'] * 1e3:.2f} ms per class "
        f"({m['seconds_mle_both_classes'] * 1e3:.2f} ms both); path + exposure from the job "
        f"records {m['seconds_path_and_exposure'] * 1e3:.2f} ms; "
        f"theta_hat = ({m['theta_hat'][0]:.4f}, {m['theta_hat'][1]:.4f})"
    )
    if "learning" in report:
        print("Learning (E[N] exact under the true theta; gap = learned / optimal - 1):")
        print(
            f"  {'scenario':<15} {'alg':<4} {'iter':>5} {'departures':>10} "
            f"{'theta_hat':>16} {'true':>12} {'E[N] learned':>13} {'E[N] optimal':>13} "
            f"{'gap %':>8} {'wall s':>7}"
        )
        for r in report["learning"]["examples"]:
            th = f"({r['theta_hat'][0]:.3f}, {r['theta_hat'][1]:.3f})"
            tr = f"({r['true_theta'][0]:g}, {r['true_theta'][1]:g})"
            print(
                f"  {r['scenario']:<15} {r['algorithm']:<4} {r['iterations']:>5} "
                f"{r['departures']:>10} {th:>16} {tr:>12} {r['mean_jobs_learned']:>13.5f} "
                f"{r['mean_jobs_optimal']:>13.5f} {r['gap_percent']:>8.3f} {r['seconds']:>7.1f}"
            )
        c = report["learning"]["changepoint"]
        print(
            f"Change points at {c['change_times_s']} s (iterations {c['change_iterations']}): "
            f"estimates within 0.1 of the new theta after {c['tracking_delays_epochs']} "
            f"epochs; final theta_hat = ({c['final_theta'][0]:.3f}, {c['final_theta'][1]:.3f}),"
            f" gap {c['gap_percent']:.3f}%"
        )


if __name__ == "__main__":
    main()
