"""Pennyworth's tail risk: how much more than its rules a RAD-tree's plan can cost on one
draw of the run times, with and without the tail guard.

For each shipped Pennyworth scenario (one per SLO): `--batches` batches of 32 jobs from
the benchmark's own split of the seed (`tail`), each planned on the task means by the
shipped tree alone (`tree`, its own decisions), by the tree with the tail guard the
placer uses by default (`guarded`: the plan of least expected cost of the tree's and its
rules' with the tree's margins and with their own, `RadTree.plan(guard=True)`), by its ablation
`pennyworth-rules` with the tree's margins (`rules`) and by `pennyworth-rules` alone, with
its own default margins (`rules-default`). Every plan of a batch is priced on the same
`--draws` draws of every job's run time (lognormal with its task's mean and standard
deviation on the VM's type, as the shipped scenarios draw them).

Prints one row per SLO and tree policy: over all draws the mean, median, 99th percentile
and largest of policy / rules; each batch's own 99th percentile (median, largest, how
many batches above 1.5); the mirror, rules / policy, largest (a tail the rules have and
the policy has not); and each policy's own blow-ups, the share of draws whose cost is more
than 1.5 times the rules' mean cost of the batch (the rules' share beside it). A policy
whose largest ratio is high but whose blow-ups are no more frequent than the rules' has a
tail no heavier than the rules': the two are unlucky on different draws.

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
from clusteremu.cluster.policies.pennyworth.features import RULES_SAFETY_Z
from clusteremu.cluster.policies.pennyworth.tree import RadTree
from clusteremu.scenarios.loader import SHIPPED_DIR, load_scenario, read_yaml
from clusteremu.tuners.pennyworth import scenario_problem
from clusteremu.tuners.pennyworth_eval import draw_batches, job_plan, rules_policy, tree_policy

SLOS = ("max", "rtpt", "avg", "percentile")
SPLIT = "tail"
JOBS = 32
#: A draw is a blow-up when it costs more than this times the rules' mean cost of its batch.
BLOW_UP = 1.5


def shipped_tree(slo: str) -> RadTree:
    """The RAD-tree the shipped scenario of `slo` runs."""
    placer = read_yaml(SHIPPED_DIR / f"pennyworth-{slo}.yaml")["scheduler"]["placer"]
    return RadTree.load(SHIPPED_DIR / placer["tree"])


def measure(slo: str, batches: int, draws: int, seed: int) -> list[dict[str, Any]]:
    """One row per tree policy (`tree`, `guarded`): its cost / the rules' over `draws`
    draws of `batches` batches of `slo`'s scenario."""
    scenario = f"pennyworth-{slo}"
    spec, base = load_scenario(scenario), scenario_problem(scenario)
    tree = shipped_tree(slo)
    policies = {
        "tree": tree_policy(tree),
        "guarded": tree_policy(tree, guard=True),
        "rules": rules_policy(tree.safety_z, tree.slack),
        "rules-default": rules_policy(RULES_SAFETY_Z, 0.0),
    }
    drawn, _ = draw_batches(spec, base, seed, SPLIT, batches, JOBS)
    rng = np.random.default_rng(seed)
    cost = {name: np.zeros((batches, draws)) for name in policies}
    for b, batch in enumerate(drawn):
        p = batch.problem
        assert p.runtime_sd_s is not None
        task_of = [t for t, c in enumerate(p.counts) for _ in range(c)]
        mean, sd = p.runtime_s[task_of], p.runtime_sd_s[task_of]
        s2 = np.log1p((sd / mean) ** 2)
        mu = np.log(mean) - s2 / 2
        plans = {name: job_plan(p, policy(p)) for name, policy in policies.items()}
        for d in range(draws):
            run = np.exp(mu + np.sqrt(s2) * rng.standard_normal(mean.shape))
            jp = job_problem(p.with_safety(0.0), run)
            for name, plan in plans.items():
                cost[name][b, d] = job_plan_cost(jp, plan)[0]
    rules = cost["rules"]
    rules_blow = float((rules > BLOW_UP * rules.mean(axis=1, keepdims=True)).mean())
    rows = []
    for name in ("tree", "guarded"):
        ratio = cost[name] / rules
        per_batch_p99 = np.quantile(ratio, 0.99, axis=1)
        worst = np.unravel_index(int(np.argmax(cost[name])), cost[name].shape)
        blow = cost[name] > BLOW_UP * rules.mean(axis=1, keepdims=True)
        rows.append(
            {
                "slo": slo,
                "policy": name,
                "batches": batches,
                "draws": draws,
                "mean_over_rules": round(float(ratio.mean()), 4),
                "median": round(float(np.median(ratio)), 4),
                "p99": round(float(np.quantile(ratio, 0.99)), 3),
                "max": round(float(ratio.max()), 2),
                "batch_p99_median": round(float(np.median(per_batch_p99)), 3),
                "batch_p99_max": round(float(per_batch_p99.max()), 3),
                "batches_p99_over_1.5": int((per_batch_p99 > 1.5).sum()),
                "rules_over_policy_max": round(float((rules / cost[name]).max()), 2),
                "blow_ups": round(float(blow.mean()), 4),
                "rules_blow_ups": round(rules_blow, 4),
                "mean_cost_usd": round(float(cost[name].mean()), 6),
                "rules_mean_cost_usd": round(float(rules.mean()), 6),
                "rules_default_mean_cost_usd": round(float(cost["rules-default"].mean()), 6),
                "dearest_draw_usd": round(float(cost[name][worst]), 4),
                "rules_on_that_draw_usd": round(float(rules[worst]), 4),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--slos", default=",".join(SLOS))
    p.add_argument("--batches", type=int, default=100)
    p.add_argument("--draws", type=int, default=40, help="draws of the run times per batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rows = []
    for slo in args.slos.split(","):
        rows += measure(slo, args.batches, args.draws, args.seed)
        if not args.json:
            for row in rows[-2:]:
                print(json.dumps(row), flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
