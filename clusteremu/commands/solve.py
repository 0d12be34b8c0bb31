"""`clusteremu solve`: the optimal plan of a scenario's batch (Pennyworth).

    clusteremu solve SCENARIO [--set PATH=VALUE ...] [--seed S] [--knowledge mean|actual]
                     [--time-limit 600] [--json]

The scenario's classes are tasks arriving as one batch (`arrival: {kind: batch, count}`);
the rentable node types are the VM types (all types if none is marked rentable); `slo:` is
the objective. Prints the plan of least cost: for every VM its start-up cost plus price x
the run times of its jobs, plus the SLO loss.

`--knowledge mean` (the default) plans with each task's mean run time on a node type
(`runtime_by_node_type`), the estimate a policy has. `--knowledge actual` plans with the
run time each job actually has in `clusteremu run SCENARIO --seed S` (the same draws:
common random numbers), the Pennyworth paper's perfect-knowledge optimum. Both are exact
(`cluster/policies/pennyworth/exact.py`); when `--time-limit` stops the search first, the
best plan found is printed with `"optimal": false` and a proven lower bound. The search
starts from the plan of the scenario's Pennyworth planner (a RAD-tree's, and its rules'
with the same margins; not the tree-less `pennyworth`, which is itself a search), so the
plan printed never costs more than that policy's; `plan_from` says where the plan came
from (`search`, `incumbent`: one of the solver's simple plans, or the planner's name) and
`gap` the share of its cost that may lie above the optimum (0 when proven).

`--json` prints `{"cost": <dollars incl. SLO loss>, "slo_loss_usd": x, "optimal": bool,
"lower_bound_usd": y, "gap": g, "plan_from": "<source>", "knowledge": "mean"|"actual",
"seed": S, "vms": [{"type": "<name>",
"jobs": [{"id": <job index>, "class": "<task>", "run_s": <s>}, ...]}, ...]}`; job indices
number the batch as the engine does (class by class, in class order).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from clusteremu.cluster.io import to_json
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import load_scenario


def add_parser(sub: Any) -> None:
    p = sub.add_parser("solve", help="optimal VM renting and job order for a batch (Pennyworth)")
    p.add_argument("scenario", help="scenario YAML file, or the name of a shipped scenario")
    p.add_argument("--set", action="append", metavar="PATH=VALUE", help="override a field")
    p.add_argument(
        "--seed", type=int, default=None, help="the run's seed (default: the scenario's)"
    )
    p.add_argument(
        "--knowledge",
        choices=("mean", "actual"),
        default="mean",
        help="plan on the task means (default) or on each job's actual run time in"
        " `clusteremu run SCENARIO --seed S`",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=600.0,
        help="seconds the exact search may take; then the best plan found is printed, "
        "unproven, with a lower bound (default 600 s; solve says so on stderr as it starts)",
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=cmd_solve)


def _check_batch_size(spec: Any, source: str, most: int) -> None:
    """Refuse, before any job is built, a batch of more jobs than the exact planner takes
    (`arrival.count` of 10^9 used to be drawn first), naming the largest class's count."""
    counts = [int(c.arrival.count) for c in spec.classes]
    total = sum(counts)
    if total > most:
        i = max(range(len(counts)), key=counts.__getitem__)
        raise ScenarioError(
            source,
            [
                (
                    f"workload.classes.{i}.arrival.count",
                    f"solve plans at most {most} jobs exactly, the batch has {total:,}",
                )
            ],
        )


def cmd_solve(args: argparse.Namespace) -> int:
    from clusteremu.cluster.policies.pennyworth.exact import (
        MAX_JOBS,
        actual_job_problem,
        mean_job_problem,
        solve_jobs,
    )
    from clusteremu.cluster.policies.pennyworth.problem import ScenarioFieldError, checked_problem
    from clusteremu.cluster.workload import BatchArrivals
    from clusteremu.scenarios import option_checks

    option_checks.time_limit(args.time_limit, maximum=86_400)
    option_checks.seed(args.seed)
    overrides = list(args.set or []) + ([f"seed={args.seed}"] if args.seed is not None else [])
    spec = load_scenario(args.scenario, overrides)
    source = str(args.scenario)
    for i, c in enumerate(spec.classes):
        if not isinstance(c.arrival, BatchArrivals):
            raise ScenarioError(
                source,
                [
                    (
                        f"workload.classes.{i}.arrival",
                        "solve plans a batch: expected {kind: batch, count: N}",
                    )
                ],
            )
    _check_batch_size(spec, source, MAX_JOBS)
    try:
        problem = checked_problem(spec, "solve")
        if args.knowledge == "actual":
            # the engine's draws and job ids (replication 0: `clusteremu run`'s first)
            jp = actual_job_problem(spec, problem)
        else:
            jp = mean_job_problem(problem)
    except ScenarioFieldError as exc:
        raise ScenarioError(source, [(exc.field, exc.expected)]) from None
    print(
        f"solve: planning {problem.jobs} jobs exactly; stops after --time-limit "
        f"{args.time_limit:g} s with the best plan found and a proven bound",
        file=sys.stderr,
    )
    found = solve_jobs(jp, args.time_limit, _planner_plans(spec, problem))
    vms: list[dict[str, Any]] = [
        {
            "type": jp.type_names[k],
            "jobs": [
                {
                    "id": int(jp.job_ids[j]),
                    "class": jp.task_names[jp.task_of[j]],
                    "run_s": float(jp.runtime_s[j, k]),
                }
                for j in jobs
            ],
        }
        for k, jobs in found.plan.vms
    ]
    out = {
        "cost": found.cost,
        "slo_loss_usd": found.slo_loss,
        "optimal": bool(found.optimal),
        "lower_bound_usd": found.lower_bound_usd,
        "gap": found.gap,
        "plan_from": found.source,
        "knowledge": args.knowledge,
        "seed": spec.seed,
        "vms": vms,
    }
    if args.json:
        print(to_json(out))
        return 0
    proof = (
        "proven optimal"
        if found.optimal
        else f"NOT proven optimal: the optimum is at least ${found.lower_bound_usd:.6f} "
        f"(gap {found.gap:.2%})"
    )
    print(
        f"{spec.name} (seed {spec.seed}, {args.knowledge} run times): {problem.jobs} jobs, "
        f"{len(vms)} VMs, cost ${found.cost:.6f} (SLO loss ${found.slo_loss:.6f}), {proof}; "
        f"the plan of {found.source}; {found.seconds:.2f} s"
    )
    for i, vm in enumerate(vms):
        jobs = ", ".join(f"{j['class']}#{j['id']}" for j in vm["jobs"])
        print(f"  VM {i} {vm['type']}: {jobs}")
    return 0


def _planner_plans(spec: Any, problem: Any) -> dict[str, Any]:
    """The plans the search starts from (`JobPlan`s by name): the scenario's Pennyworth
    planner's plan of the batch on the means and, for a RAD-tree, its rules' with the
    tree's margins. None for another placer or the tree-less `pennyworth` (a search)."""
    import numpy as np

    from clusteremu.cluster.policies import registry
    from clusteremu.cluster.policies.pennyworth.exact import JobPlan
    from clusteremu.cluster.policies.pennyworth.placers import (
        PennyworthPlacer,
        PennyworthRulesPlacer,
        PlanPlacer,
    )

    ref = spec.scheduler.placer
    planner = registry.create("placer", ref.name, **ref.params)
    if not isinstance(planner, PlanPlacer):
        return {}
    planners: dict[str, PlanPlacer] = {ref.name: planner}
    if isinstance(planner, PennyworthPlacer):
        if planner.tree is None:
            return {}
        rules = PennyworthRulesPlacer(safety_z=planner.safety_z, slack=planner.slack)
        planners["pennyworth-rules"] = rules
    out = {}
    for name, p in planners.items():
        p.setup(spec, np.random.default_rng(0))
        out[name] = JobPlan.of_tasks(problem.counts, p.make_plan(problem).vms)
    return out
