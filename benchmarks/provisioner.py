"""Predictive provisioner (the thesis): training time, and the engine's speed with usages.

1. Training: profiling runs of the shipped `ml-workflow` scenario (1,300 runs: 35,100
   rows, the thesis's data set had 34,368) and training of the heavy tasks' classifiers
   (Optuna, `--trials` per binning), with the TPE and the GP sampler.
2. Engine: the same workflow jobs (`--runs` runs) with and without the usage model, the
   predictive provisioner's sizes (trained once, outside the timing) against static
   requests; the fastest of `--repeat` runs counts. Target: within 1.5x.

    python benchmarks/provisioner.py [--runs 20000] [--trials 20] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from typing import Any

from clusteremu.cluster.engine import Engine
from clusteremu.cluster.model import PolicyRef
from clusteremu.cluster.policies.provisioner.policies import Predictive
from clusteremu.cluster.policies.provisioner.sizing import profile, static_of, train_sizing
from clusteremu.scenarios.loader import load_scenario


def training(trials: int, sampler: str) -> dict[str, Any]:
    spec = load_scenario("ml-workflow")
    start = time.perf_counter()
    prof = profile(spec, 1300, seed=11)
    profiled = time.perf_counter() - start
    sizing = train_sizing(prof, static_of(spec), trials=trials, seed=11, sampler=sampler)
    total = time.perf_counter() - start
    return {
        "sampler": sampler,
        "rows": prof.table.num_rows,
        "profiling_s": profiled,
        "training_s": total - profiled,
        "total_s": total,
        "heavy": {
            n: {"edges": t.heavy.edges, "accuracy": t.heavy.accuracy, "u_rate": t.heavy.u_rate}
            for n, t in sizing.tasks.items()
            if t.heavy is not None
        },
    }


def engine_speed(runs: int, repeat: int, sizing: Any) -> dict[str, Any]:
    spec = load_scenario("ml-workflow", [f"stop.jobs={runs * 27}"])
    static = dataclasses.replace(
        spec,
        usage=None,
        scheduler=dataclasses.replace(spec.scheduler, provisioner=PolicyRef("static")),
    )
    best: dict[str, float] = {}
    oom = 0
    for _ in range(repeat):
        for label in ("without usages", "with usages"):
            if label == "with usages":
                provisioner = Predictive()
                provisioner.sizing = sizing
                engine = Engine(spec, provisioner=provisioner)
            else:
                engine = Engine(static)
            start = time.perf_counter()
            result = engine.run()
            wall = time.perf_counter() - start
            best[label] = min(best.get(label, float("inf")), wall)
            if label == "with usages":
                oom = int(result.summary["oom_kills"])
    jobs = runs * 27
    return {
        "jobs": jobs,
        "without_usages_s": best["without usages"],
        "with_usages_s": best["with usages"],
        "slowdown": best["with usages"] / best["without usages"],
        "oom_kills": oom,
        "jobs_per_s_with_usages": jobs / best["with usages"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    spec = load_scenario("ml-workflow")
    Engine(spec, provisioner=Predictive(profiling_runs=50, trials=1)).run()  # compile
    trained = [training(args.trials, s) for s in ("tpe", "gp")]
    prof = profile(spec, 1300, seed=11)
    sizing = train_sizing(prof, static_of(spec), trials=args.trials, seed=11)
    speed = engine_speed(args.runs, args.repeat, sizing)
    out = {"training": trained, "engine": speed}
    if args.json:
        print(json.dumps(out, indent=2, default=list))
        return
    for t in trained:
        print(
            f"training ({t['sampler']}): {t['rows']:,} profiling rows in {t['profiling_s']:.1f} s, "
            f"classifiers in {t['training_s']:.1f} s, total {t['total_s']:.1f} s (target < 120 s)"
        )
        for name, h in t["heavy"].items():
            print(
                f"  {name}: bins {h['edges']}, test accuracy {100 * h['accuracy']:.1f}%, "
                f"u-rate {100 * h['u_rate']:.2f}%"
            )
    print(
        f"engine, {speed['jobs']:,} workflow jobs: "
        f"without usages {speed['without_usages_s']:.3f} s, "
        f"with usages and predictive sizes {speed['with_usages_s']:.3f} s "
        f"({speed['oom_kills']} OOM kills): {speed['slowdown']:.2f}x (target <= 1.5x)"
    )


if __name__ == "__main__":
    main()
