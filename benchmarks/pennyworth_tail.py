"""Pennyworth's tail risk: how much more than its rules a RAD-tree's plan can cost on one
draw of the run times.

For each shipped Pennyworth scenario (one per SLO): `--batches` batches of 32 jobs from
the benchmark's own split of the seed (`tail`), each planned on the task means by the
shipped tree and by its ablation `pennyworth-rules` (the tree's margins); each pair of
plans is priced on `--draws` draws of every job's run time (lognormal with its task's mean
and standard deviation on the VM's type, as the shipped scenarios draw them; both plans
on the same draws). Prints per SLO the mean and median of tree / rules over all draws,
the 99th percentile over all draws and the largest ratio, the distribution over batches
of each batch's own 99th percentile (median, largest, how many batches above 1.5), and
the dearest single draw of the tree's plan with the rules' cost on that draw.

    python benchmarks/pennyworth_tail.py [--slos max,rtpt,avg,percentile] [--batches 100]
        [--draws 40] [--seed 0] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from clusteremu.cluster.policies.pennyworth.exact import job_plan_cost, job_problem
from clusteremu.cluster.policies.pennyworth.tree import RadTree
from clusteremu.scenarios.loader import SHIPPED_DIR, load_scenario, read_yaml
from clusteremu.tuners.pennyworth import scenario_problem
from clusteremu.tuners.pennyworth_eval import draw_batches, job_plan, rules_policy, tree_policy

SLOS = ("max", "rtpt", "avg", "percentile")
SPLIT = "tail"
JOBS = 32


def shipped_tree(slo: str) -> RadTree:
    """The RAD-tree the shipped scenario of `slo` runs."""
    placer = read_yaml(SHIPPED_DIR / f"pennyworth-{slo}.yaml")["scheduler"]["placer"]
    return RadTree.load(SHIPPED_DIR / placer["tree"])


def measure(slo: str, batches: int, draws: int, seed: int) -> dict[str, Any]:
    """Tree / rules cost ratios of `slo`'s shipped tree over `draws` draws of `batches`."""
    scenario = f"pennyworth-{slo}"
    spec, base = load_scenario(scenario), scenario_problem(scenario)
    tree = shipped_tree(slo)
    plan_tree = tree_policy(tree)
    plan_rules = rules_policy(tree.safety_z, tree.slack)
    drawn, _ = draw_batches(spec, base, seed, SPLIT, batches, JOBS)
    rng = np.random.default_rng(seed)
    ratios, per_batch_p99 = [], []
    worst = (0.0, 0.0)
    for batch in drawn:
        p = batch.problem
        assert p.runtime_sd_s is not None
        task_of = [t for t, c in enumerate(p.counts) for _ in range(c)]
        mean, sd = p.runtime_s[task_of], p.runtime_sd_s[task_of]
        s2 = np.log1p((sd / mean) ** 2)
        mu = np.log(mean) - s2 / 2
        tree_jobs, rules_jobs = job_plan(p, plan_tree(p)), job_plan(p, plan_rules(p))
        mine = []
        for _ in range(draws):
            run = np.exp(mu + np.sqrt(s2) * rng.standard_normal(mean.shape))
            jp = job_problem(p.with_safety(0.0), run)
            cost_tree = job_plan_cost(jp, tree_jobs)[0]
            cost_rules = job_plan_cost(jp, rules_jobs)[0]
            mine.append(cost_tree / cost_rules)
            if cost_tree > worst[0]:
                worst = (cost_tree, cost_rules)
        ratios += mine
        per_batch_p99.append(float(np.quantile(mine, 0.99)))
    r, b = np.asarray(ratios), np.asarray(per_batch_p99)
    return {
        "slo": slo,
        "batches": batches,
        "draws": draws,
        "mean": round(float(r.mean()), 4),
        "median": round(float(np.median(r)), 4),
        "p99": round(float(np.quantile(r, 0.99)), 3),
        "max": round(float(r.max()), 2),
        "batch_p99_median": round(float(np.median(b)), 3),
        "batch_p99_max": round(float(b.max()), 3),
        "batches_p99_over_1.5": int((b > 1.5).sum()),
        "dearest_tree_draw_usd": round(worst[0], 4),
        "rules_on_that_draw_usd": round(worst[1], 4),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--slos", default=",".join(SLOS))
    p.add_argument("--batches", type=int, default=100)
    p.add_argument("--draws", type=int, default=40, help="draws of the run times per batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = [measure(slo, args.batches, args.draws, args.seed) for slo in args.slos.split(",")]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for row in rows:
            print(json.dumps(row))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
