"""Quality of the RAD-tree on batches it never saw: mean plan cost relative to the A*
optimum, per SLO, with one VM type (t2.small) and with three, next to the baselines.

For each shipped Pennyworth scenario (one per SLO) and each type set: `--train` random
batches of `--jobs` jobs over the scenario's tasks are solved by A*, their decisions fitted
by a full-depth tree (entropy; `--leaf` examples per leaf), and `--held-out` other batches
planned by the tree, by A* and by the baselines; all plans are priced by eq. 1 with the
task means (`plan_cost`). The paper reports the tree within 9% (one type) and 7% (three
types) of optimal.

    python benchmarks/pennyworth_quality.py [--train 400] [--held-out 50] [--jobs 8] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import numpy as np

from cluster.policies.pennyworth.astar import solve
from cluster.policies.pennyworth.corrections import correction_examples
from cluster.policies.pennyworth.features import examples_of_plan
from cluster.policies.pennyworth.placers import (
    FfdCheapestPlacer,
    FixedPoolPlacer,
    VmPerJobPlacer,
)
from cluster.policies.pennyworth.plan import plan_cost
from cluster.policies.pennyworth.problem import Problem, problem_from_spec
from cluster.policies.pennyworth.tree import RadTree
from scenarios.loader import load_scenario
from tuners.pennyworth import with_counts

SLOS = ("max", "rtpt", "avg", "percentile")
BASELINES = {
    "ffd-cheapest": FfdCheapestPlacer,
    "vm-per-job": VmPerJobPlacer,
    "fixed-pool": FixedPoolPlacer,
}


def only_types(problem: Problem, keep: list[int]) -> Problem:
    """`problem` with VM types `keep` only."""
    return dataclasses.replace(
        problem,
        type_names=tuple(problem.type_names[k] for k in keep),
        runtime_s=problem.runtime_s[:, keep],
        price_per_s=problem.price_per_s[keep],
        startup_usd=problem.startup_usd[keep],
        startup_delay_s=problem.startup_delay_s[keep],
    )


def batch(base: Problem, seed: int, jobs: int) -> Problem:
    """A batch of `jobs` jobs drawn uniformly over the tasks (numbered task by task)."""
    rng = np.random.default_rng(seed)
    counts = np.bincount(
        rng.integers(0, len(base.task_names), jobs), minlength=len(base.task_names)
    )
    return with_counts(base, counts.tolist())


def rules_only(base: Problem) -> RadTree:
    """A tree with one leaf that ranks no decision: its plans are the feasibility rules and
    the fallback alone (the cheapest feasible add, else the rent of least mean cost per job
    left), to show what the learned tree adds."""
    return RadTree(
        base.task_names,
        base.type_names,
        np.array([-2]),
        np.array([-2.0]),
        np.array([-1]),
        np.array([-1]),
        np.zeros((1, 1)),
        np.array([0]),
        base.profiles or {},
        {},
    )


def evaluate(
    base: Problem, train: int, held_out: int, jobs: int, leaf: int, rounds: int
) -> dict[str, float]:
    t0 = time.perf_counter()
    xs, ys = [], []
    for seed in range(train):
        p = batch(base, seed, jobs)
        found = solve(p)
        x, y = examples_of_plan(p, found.plan)
        xs.append(x)
        ys.append(y)

    def fit() -> RadTree:
        return RadTree.fit(
            np.vstack(xs),
            np.concatenate(ys),
            base.task_names,
            base.type_names,
            base.profiles or {},
            min_samples_leaf=leaf,
        )

    tree = fit()
    corrected = 0
    for r in range(1, rounds + 1):
        # New batches each round (the tree reproduces the ones it was fitted on): their
        # optimal paths, and where the tree errs on them, the corrections.
        for seed in range(r * train, (r + 1) * train):
            p = batch(base, seed, jobs)
            found = solve(p)
            x, y = examples_of_plan(p, found.plan)
            xs.append(x)
            ys.append(y)
            more = correction_examples(p, tree.plan(p), found.cost)
            if more is not None:
                xs.append(more[0])
                ys.append(more[1])
                corrected += 1
        tree = fit()
    fit_s = time.perf_counter() - t0
    rules = rules_only(base)
    ratios: dict[str, list[float]] = {"tree": [], "rules": [], **{b: [] for b in BASELINES}}
    for seed in range(1_000_000, 1_000_000 + held_out):
        p = batch(base, seed, jobs)
        optimum = solve(p).cost
        ratios["tree"].append(plan_cost(p, tree.plan(p))[0] / optimum)
        ratios["rules"].append(plan_cost(p, rules.plan(p))[0] / optimum)
        for name, cls in BASELINES.items():
            ratios[name].append(plan_cost(p, cls().make_plan(p))[0] / optimum)
    return {
        **{f"{k}_ratio": float(np.mean(v)) for k, v in ratios.items()},
        "tree_max_ratio": float(np.max(ratios["tree"])),
        "tree_nodes": int(tree.feature.size),
        "examples": int(sum(len(y) for y in ys)),
        "corrections": corrected,
        "seconds": round(time.perf_counter() - t0, 1),
        "fit_s": round(fit_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=int, default=400, help="training batches (default 400)")
    parser.add_argument("--held-out", type=int, default=50, help="held-out batches (default 50)")
    parser.add_argument("--jobs", type=int, default=8, help="jobs per batch (default 8)")
    parser.add_argument("--leaf", type=int, default=1, help="min examples per leaf (default 1)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=0,
        help="correction rounds: refit on the first mistakes on the training batches (default 0)",
    )
    parser.add_argument(
        "--slo", default=",".join(SLOS), help="SLO kinds, comma-separated (default: all four)"
    )
    parser.add_argument(
        "--types", default="1,3", help="VM type sets: 1 (t2.small), 3 (all); default 1,3"
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    rows = []
    for kind in args.slo.split(","):
        if kind not in SLOS:
            parser.error(f"--slo {kind!r}: expected some of {', '.join(SLOS)}")
        spec = load_scenario(f"pennyworth-{kind}")
        full = problem_from_spec(spec, spec.slo)
        sets = {"1": ("1 type", only_types(full, [0])), "3": ("3 types", full)}
        for key in args.types.split(","):
            if key not in sets:
                parser.error(f"--types {key!r}: expected 1 or 3")
            label, base = sets[key]
            row = {"slo": kind, "types": label}
            row.update(evaluate(base, args.train, args.held_out, args.jobs, args.leaf, args.rounds))
            rows.append(row)
            print(
                f"{kind:<11}{label:<8} tree {row['tree_ratio']:.4f}"
                f" (max {row['tree_max_ratio']:.3f})"
                + f"  rules {row['rules_ratio']:.4f}"
                + "".join(f"  {b} {row[b + '_ratio']:.4f}" for b in BASELINES)
                + f"  [{row['seconds']} s]",
                file=sys.stderr,
                flush=True,
            )
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    head = f"{'SLO':<11}{'types':<8}{'tree/A*':>9}{'max':>8}{'rules':>8}" + "".join(
        f"{b:>14}" for b in BASELINES
    )
    print(head)
    for r in rows:
        print(
            f"{r['slo']:<11}{r['types']:<8}{r['tree_ratio']:>9.4f}{r['tree_max_ratio']:>8.3f}"
            + f"{r['rules_ratio']:>8.4f}"
            + "".join(f"{r[b + '_ratio']:>14.4f}" for b in BASELINES)
        )


if __name__ == "__main__":
    main()
