"""`clusteremu bound`: the mean-field lower bound of a malleable-pool scenario (the WHAM
paper's relaxed problem (3), solved by its KKT conditions; see docs/wham.md).

    clusteremu bound SCENARIO [--set PATH=VALUE ...] [--json]

Prints the lower bound on the normalised time-average holding cost
(1/n) sum_i c_i lambda_i E[T_i] that no allocation policy can beat, and the fixed width k_i
(cores per job) of every class at the optimum of the relaxed problem. With `--json` the
output is exactly `{"lower_bound": <normalised holding cost>, "widths": {<class>: <cores>}}`.
A load that no allocation can keep stable, a holding cost <= 0 or a speed-up that is not
concave and non-decreasing is bad input (exit status 2, naming the field).
"""

from __future__ import annotations

import argparse
from typing import Any

from clusteremu.cluster.io import to_json
from clusteremu.cluster.policies.relaxed_bound import BoundError, scenario_bound
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import load_scenario


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "bound", help="mean-field lower bound on the holding cost of malleable-pool scenarios"
    )
    p.add_argument("scenario", help="scenario YAML file, or the name of a shipped scenario")
    p.add_argument(
        "--set",
        action="append",
        metavar="PATH=VALUE",
        help="override a field, e.g. cluster.pools.0.cores=1024",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='print only {"lower_bound": ..., "widths": {...}} as JSON',
    )
    p.set_defaults(func=cmd_bound)


def cmd_bound(args: argparse.Namespace) -> int:
    spec = load_scenario(args.scenario, list(args.set or []))
    try:
        bound = scenario_bound(spec)
    except BoundError as exc:
        raise ScenarioError(str(args.scenario), [(exc.field, exc.problem)]) from None
    if args.json:
        print(to_json({"lower_bound": bound.lower_bound, "widths": bound.widths}))
        return 0
    print(
        f"{spec.name}: lower bound on the normalised holding cost {bound.lower_bound:.6g} "
        "(cost per second per core)"
    )
    for pool, sol in bound.pools.items():
        price = "0 (budget slack)" if sol.price == 0 else f"{sol.price:.6g}"
        print(
            f"  pool {pool}: {sol.cores:g} cores, price nu = {price} per core-second, "
            f"effective load {sol.effective_load.sum():.6g} cores"
        )
        for name, width, rho in zip(sol.names, sol.widths, sol.effective_load, strict=True):
            print(f"    {name:<20} width {width:10.6g} cores   effective load {rho:10.6g} cores")
    return 0
