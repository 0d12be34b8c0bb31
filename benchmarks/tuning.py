"""Throughput of weight tuning on Ray Tune: a random-tuner run of N experiments with 1 and
with W workers, and Tune's overhead per trial next to the run time of one evaluation.

Each configuration starts its own local Ray instance (no dashboard) with as many CPUs as
workers; a warm-up tuning of two experiments first loads the compiled engine in the workers.
Overhead per trial = wall time x workers / trials - mean engine run time of a trial.

    python benchmarks/tuning.py [--experiments 100] [--budget 5] [--domain train]
                                [--workers 2] [--json]
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np
import ray

from clusteremu.tuners.domains import sample_configs
from clusteremu.tuners.evaluate import experiment_from_config
from clusteremu.tuners.tuning import run_tuning


def timed(experiments: list, workers: int, budget: int) -> dict[str, float]:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        run_tuning(experiments[:2], "random", 2, seed=99, workers=workers)  # warm-up
        result = run_tuning(experiments, "random", budget, seed=0, workers=workers)
    finally:
        ray.shutdown()
    trials = sum(len(o.scores) for o in result.outcomes)
    run_s = float(np.mean([t for o in result.outcomes for t in o.run_wall_s]))
    per_trial = result.wall_s * workers / trials
    return {
        "workers": workers,
        "trials": trials,
        "wall_s": round(result.wall_s, 2),
        "trials_per_s": round(trials / result.wall_s, 2),
        "mean_run_s": round(run_s, 4),
        "overhead_per_trial_s": round(per_trial - run_s, 4),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--experiments", type=int, default=100)
    p.add_argument("--budget", type=int, default=5)
    p.add_argument("--domain", default="train")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    experiments = [
        experiment_from_config(c) for c in sample_configs(args.domain, args.experiments, seed=0)
    ]
    one = timed(experiments, 1, args.budget)
    many = timed(experiments, args.workers, args.budget)
    out = {
        "experiments": args.experiments,
        "budget": args.budget,
        "domain": args.domain,
        "one_worker": one,
        f"{args.workers}_workers": many,
        "speedup": round(one["wall_s"] / many["wall_s"], 2),
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for r in (one, many):
        print(
            f"{r['workers']} worker(s): {r['trials']} trials in {r['wall_s']:.1f} s "
            f"({r['trials_per_s']:.2f}/s); engine run {r['mean_run_s']:.3f} s, Tune overhead "
            f"{r['overhead_per_trial_s']:.3f} s per trial"
        )
    print(f"speed-up with {args.workers} workers: {out['speedup']:.2f}x (target >= 1.7x)")


if __name__ == "__main__":
    main()
