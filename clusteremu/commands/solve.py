"""`clusteremu solve`: the A*-optimal plan of a scenario's batch (Pennyworth, seed 000).

    clusteremu solve SCENARIO [--set PATH=VALUE ...] [--json]

The scenario's classes are tasks arriving as one batch (`arrival: {kind: batch, count}`);
each task's mean run time on a node type (`runtime_by_node_type`) is the estimate; the
rentable node types are the VM types (all types if none is marked rentable); `slo:` is the
objective. Prints the plan of least cost, eq. 1 of the seed: for every VM its start-up
cost plus price x the run times of its jobs, plus the SLO loss. `--json` prints exactly
`{"cost": <dollars incl. SLO loss>, "slo_loss_usd": x, "vms": [{"type": "<name>",
"jobs": [{"id": <job index>, "class": "<task>"}, ...]}, ...]}`; job indices number the batch
as the engine does (class by class, in class order).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cluster.io import to_json
from scenarios.errors import ScenarioError
from scenarios.loader import load_scenario


def add_parser(sub: Any) -> None:
    p = sub.add_parser("solve", help="A*-optimal VM renting and job order for a batch (Pennyworth)")
    p.add_argument("scenario", help="scenario YAML file, or the name of a shipped scenario")
    p.add_argument("--set", action="append", metavar="PATH=VALUE", help="override a field")
    p.add_argument(
        "--time-limit", type=float, default=600.0, help="seconds before giving up (default 600)"
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=cmd_solve)


def cmd_solve(args: argparse.Namespace) -> int:
    from cluster.policies.pennyworth.astar import SearchLimit, solve
    from cluster.policies.pennyworth.plan import assign_ids
    from cluster.policies.pennyworth.problem import ScenarioFieldError, checked_problem
    from cluster.workload import BatchArrivals
    from clusteremu.cli import UsageError

    spec = load_scenario(args.scenario, list(args.set or []))
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
    try:
        problem = checked_problem(spec, "solve")
    except ScenarioFieldError as exc:
        raise ScenarioError(source, [(exc.field, exc.expected)]) from None
    try:
        found = solve(problem, time_limit_s=args.time_limit)
    except SearchLimit as exc:
        raise UsageError(
            f"{source}: {exc}; the batch is too large to solve exactly in --time-limit"
        ) from None
    ids = assign_ids(problem, found.plan)
    vms: list[dict[str, Any]] = [
        {
            "type": problem.type_names[k],
            "jobs": [
                {"id": j, "class": problem.task_names[t]}
                for j, t in zip(job_ids, tasks, strict=True)
            ],
        }
        for (k, tasks), job_ids in zip(found.plan.vms, ids, strict=True)
    ]
    out = {"cost": found.cost, "slo_loss_usd": found.slo_loss, "vms": vms}
    if args.json:
        print(to_json(out))
        return 0
    print(
        f"{spec.name}: {problem.jobs} jobs, {len(vms)} VMs, cost ${found.cost:.6f} "
        f"(SLO loss ${found.slo_loss:.6f}); A* expanded {found.expanded} vertices "
        f"in {found.seconds:.2f} s"
    )
    for i, vm in enumerate(vms):
        jobs = ", ".join(f"{j['class']}#{j['id']}" for j in vm["jobs"])
        print(f"  VM {i} {vm['type']}: {jobs}")
    print(file=sys.stderr, end="")
    return 0
