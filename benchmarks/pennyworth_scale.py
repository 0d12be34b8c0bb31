"""Pennyworth at scale: cost per job and planning time on batches of 1,000 and 30,000 jobs.

For each shipped Pennyworth scenario (one per SLO): `--repeats` batches of each size, the
jobs' tasks uniform over the 10 tasks, actual run times drawn as the engine draws them
(common random numbers with `clusteremu run`), from the benchmark's own split of the
seed (`scale`, never drawn by `synthesize`). Every policy plans on the task means: the
shipped RAD-tree (with its margin), its ablation `pennyworth-rules` (same margin, no
tree), ffd-cheapest and vm-per-job; each plan is priced with the actual run times (what
the emulator charges), divided by the number of jobs. No optimum is computable at this
size; the least money any plan could pay (each job at its cheapest type's price, one
start-up) is printed as the floor. fixed-pool (two VMs for thousands of jobs) pays days
of lateness and is left out.

    python benchmarks/pennyworth_scale.py [--slos max,rtpt,avg,percentile]
        [--sizes 1000,30000] [--repeats 3] [--seed 0] [--json]

Prints one row per SLO and size: mean dollars per job with its 95% interval over the
batches, the tree's planning seconds (the slowest batch) and which plan the tree took
for each batch (past 32 jobs a tree plans in chunks, `chunks.chunked_plan`: its plan of
the whole batch, of stratified chunks, of chunks by cheapest type, or its rules' plan of
the whole batch, whichever has the least expected cost).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from clusteremu.cluster.policies.pennyworth.exact import _money_lower_bound, job_problem
from clusteremu.cluster.policies.pennyworth.tree import RadTree
from clusteremu.scenarios.loader import SHIPPED_DIR, load_scenario, read_yaml
from clusteremu.tuners.pennyworth import scenario_problem
from clusteremu.tuners.pennyworth_eval import (
    actual_cost,
    baseline_policies,
    draw_batch,
    rules_policy,
)
from clusteremu.tuners.protocol import mean_interval, paired_interval

SLOS = ("max", "rtpt", "avg", "percentile")
SPLIT = "scale"
TREE = "pennyworth (RAD-tree)"
RULES = "pennyworth-rules"
BASELINES = ("ffd-cheapest", "vm-per-job")


def shipped_tree(slo: str) -> RadTree:
    """The RAD-tree the shipped scenario of `slo` runs."""
    placer = read_yaml(SHIPPED_DIR / f"pennyworth-{slo}.yaml")["scheduler"]["placer"]
    return RadTree.load(SHIPPED_DIR / placer["tree"])


def measure(slo: str, jobs: int, repeats: int, seed: int) -> dict[str, Any]:
    """Cost per job of every policy on `repeats` batches of `jobs` jobs of `slo`'s scenario."""
    scenario = f"pennyworth-{slo}"
    spec, base = load_scenario(scenario), scenario_problem(scenario)
    tree = shipped_tree(slo)
    chosen: list[str] = []
    z, slack = tree.safety_z, tree.slack
    policies = {
        TREE: lambda problem: tree.plan(problem.with_slack(slack).with_safety(z), chosen=chosen),
        RULES: rules_policy(tree.safety_z, tree.slack),
        **{name: baseline_policies()[name] for name in BASELINES},
    }
    per_job: dict[str, list[float]] = {name: [] for name in policies}
    vms: dict[str, list[int]] = {name: [] for name in policies}
    floor: list[float] = []
    plan_s: list[float] = []
    for i in range(repeats):
        batch = draw_batch(spec, base, seed, f"{SPLIT}-{jobs}", i, jobs)
        floor.append(
            _money_lower_bound(job_problem(batch.problem.with_safety(0.0), batch.runtime_s)) / jobs
        )
        for name, policy in policies.items():
            start = time.perf_counter()
            plan = policy(batch.problem)
            if name == TREE:
                plan_s.append(time.perf_counter() - start)
            per_job[name].append(actual_cost(batch, plan) / jobs)
            vms[name].append(len(plan.vms))
    row: dict[str, Any] = {
        "slo": slo,
        "jobs": jobs,
        "batches": repeats,
        "floor_usd_per_job": float(np.mean(floor)),
        "tree_plan_s_max": round(max(plan_s), 3),
        # which plan the tree took (chunks.chunked_plan): whole, stratified,
        # by_cheapest_type, or fallback (its rules' plan of the whole batch)
        "tree_chose": {name: chosen.count(name) for name in sorted(set(chosen))},
    }
    if repeats > 1:  # the tree against its rules on the same batches (paired ratio)
        paired = paired_interval(
            np.asarray(per_job[TREE]), np.asarray(per_job[RULES]), kind="ratio"
        )
        row["tree_over_rules"] = {
            "mean": paired.estimate,
            "ci": [paired.low, paired.high],
        }
    for name, values in per_job.items():
        ci = mean_interval(values) if len(values) > 1 else None
        row[name] = {
            "usd_per_job": float(np.mean(values)),
            "ci": None if ci is None else [ci.low, ci.high],
            "vms": float(np.mean(vms[name])),
        }
    return row


def table(rows: list[dict[str, Any]]) -> str:
    names = [TREE, RULES, *BASELINES]
    lines = [
        "| SLO | jobs | " + " | ".join(f"{n} $/job" for n in names) + " | floor $/job | "
        "tree plans in (s) | tree's plan | tree / rules (paired) |",
        "|" + "---|" * (len(names) + 6),
    ]
    for r in rows:
        cells = []
        for n in names:
            v = r[n]
            ci = "" if v["ci"] is None else f" [{v['ci'][0]:.6f}, {v['ci'][1]:.6f}]"
            cells.append(f"{v['usd_per_job']:.6f}{ci} ({v['vms']:.0f} VMs)")
        lines.append(
            f"| {r['slo']} | {r['jobs']:,} | "
            + " | ".join(cells)
            + f" | {r['floor_usd_per_job']:.6f} | {r['tree_plan_s_max']:.2f} | "
            + ", ".join(f"{k} {v}" for k, v in r["tree_chose"].items())
            + " | "
            + (
                f"{r['tree_over_rules']['mean']:.3f} [{r['tree_over_rules']['ci'][0]:.3f}, "
                f"{r['tree_over_rules']['ci'][1]:.3f}]"
                if "tree_over_rules" in r
                else "n/a"
            )
            + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--slos", default=",".join(SLOS))
    p.add_argument("--sizes", default="1000,30000", help="jobs per batch, comma-separated")
    p.add_argument("--repeats", type=int, default=3, help="batches of each size")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = []
    for slo in args.slos.split(","):
        for jobs in (int(n) for n in args.sizes.split(",")):
            row = measure(slo, jobs, args.repeats, args.seed)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    print(json.dumps(rows, indent=1) if args.json else table(rows))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
