"""The `clusteremu` command line: run, compare, validate, list.

Exit status: 0 on success, 2 on bad input (scenario file, override or option; one
paragraph on stderr naming the file, the field and what was expected), 3 when a policy
returns an illegal decision. With `--json` the summary is the only thing on stdout.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib import import_module
from pathlib import Path
from typing import Any

from cluster.io import to_json, write_json, write_parquet
from cluster.model import SimulationSpec
from cluster.policies import registry
from cluster.policies.base import PolicyError
from cluster.runner import ScenarioResult, run_spec
from scenarios.errors import ScenarioError
from scenarios.loader import load_scenario, shipped_scenarios

EXIT_BAD_INPUT = 2
EXIT_POLICY_ERROR = 3

log = logging.getLogger("clusteremu")


class UsageError(Exception):
    """A command-line option is malformed."""


@contextmanager
def progress_bar(enabled: bool, label: str) -> Iterator[Callable[[float], None]]:
    """A tqdm bar on stderr, shown only after a second and only on a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield lambda fraction: None
        return
    from tqdm import tqdm

    bar = tqdm(
        total=1000,
        desc=label,
        delay=1.0,
        file=sys.stderr,
        leave=False,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining}",
    )

    def update(fraction: float) -> None:
        bar.n = int(1000 * fraction)
        bar.refresh()

    try:
        yield update
    finally:
        bar.close()


def _load(args: argparse.Namespace) -> SimulationSpec:
    overrides = list(args.set or [])
    if getattr(args, "seed", None) is not None:
        overrides.append(f"seed={args.seed}")
    if getattr(args, "replications", None) is not None:
        overrides.append(f"replications={args.replications}")
    return load_scenario(args.scenario, overrides)


def _headline(summary: dict[str, Any]) -> str:
    def fmt(key: str) -> str:
        value = summary.get(key)
        ci = summary.get("ci95", {}).get(key)
        text = f"{value:.6g}" if isinstance(value, float) else str(value)
        return text + (f" ± {ci:.3g}" if isinstance(ci, float) and ci == ci else "")

    keys = [
        "jobs_completed",
        "mean_response_time_s",
        "p95_response_time_s",
        "mean_jobs_in_system",
        "holding_cost_rate",
        "utilization",
        "cost_usd",
    ]
    return "\n".join(f"  {k:<24} {fmt(k)}" for k in keys)


def cmd_run(args: argparse.Namespace) -> int:
    spec = _load(args)
    if args.ray:
        from actors.launch import run_on_ray  # the Ray extra; imported only when asked for

        result: ScenarioResult = run_on_ray(spec, args)
    else:
        with progress_bar(not args.json, spec.name) as update:
            result = run_spec(spec, update)
    if args.out:
        out = Path(args.out)
        write_parquet(result.jobs, out / "jobs.parquet")
        write_json(result.summary, out / "summary.json")
    if args.json:
        print(to_json(result.summary))
    else:
        print(f"{spec.name}: {spec.replications} replication(s), seed {spec.seed}")
        print(_headline(result.summary))
        if args.out:
            print(f"wrote {Path(args.out) / 'jobs.parquet'} and {Path(args.out) / 'summary.json'}")
    return 0


def parse_policy(text: str) -> dict[str, str]:
    """`placer=random-fit,allocator=equi` -> {'placer': 'random-fit', 'allocator': 'equi'}."""
    out: dict[str, str] = {}
    for part in text.split(","):
        kind, sep, name = part.partition("=")
        kind = kind.strip()
        if not sep or kind not in registry.KINDS or not name:
            raise UsageError(
                f"--policy {text!r}: expected kind=name with kind one of "
                f"{', '.join(registry.KINDS)}"
            )
        if name.split(":")[0] not in registry.names(kind):
            raise UsageError(
                f"--policy {text!r}: unknown {kind} {name!r}; registered: "
                f"{', '.join(registry.names(kind))}"
            )
        out[kind] = name
    return out


def cmd_compare(args: argparse.Namespace) -> int:
    if args.grid:
        return _compare_grid(args)
    spec = _load(args)
    variants = [parse_policy(p) for p in args.policy]
    if not variants:
        raise UsageError("compare needs at least one --policy kind=name")
    from cluster.compare import compare_policies, plot_comparison, table_text

    with progress_bar(not args.json, f"compare {spec.name}") as update:
        rows = compare_policies(spec, variants, update)
    out = Path(args.out) if args.out else Path(f"compare-{spec.name}")
    png = plot_comparison(rows, spec, out / "compare.png", metric=args.metric)
    write_json(rows, out / "compare.json")
    if args.json:
        print(to_json(rows))
    else:
        print(table_text(rows, args.metric))
        print(f"wrote {png} and {out / 'compare.json'}")
    return 0


def _compare_grid(args: argparse.Namespace) -> int:
    """`compare --grid PATH=v1,v2,...`: every policy at every value, seed 004's two figures."""
    from cluster.compare import compare_grid, grid_table_text, parse_grid, plot_grid

    try:
        path, values = parse_grid(args.grid)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    variants = [parse_policy(p) for p in args.policy]
    if not variants:
        raise UsageError("compare needs at least one --policy kind=name")
    base = list(args.set or [])
    if args.seed is not None:
        base.append(f"seed={args.seed}")
    if args.replications is not None:
        base.append(f"replications={args.replications}")
    specs = {v: load_scenario(args.scenario, [*base, f"{path}={v}"]) for v in values}
    name = next(iter(specs.values())).name
    with progress_bar(not args.json, f"compare {name} over {path}") as update:
        records = compare_grid(specs.__getitem__, values, variants, update)
    out = Path(args.out) if args.out else Path(f"compare-{name}")
    pngs = plot_grid(records, name, out)
    write_json(records, out / "compare-grid.json")
    if args.json:
        print(to_json([{k: v for k, v in r.items() if k != "summary"} for r in records]))
    else:
        print(
            f"{name}: {path} over {', '.join(values)}; "
            f"{next(iter(specs.values())).replications} replication(s) per point"
        )
        print(grid_table_text(records))
        print(f"wrote {', '.join(str(p) for p in pngs)} and {out / 'compare-grid.json'}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    spec = _load(args)
    n_nodes, n_pools = len(spec.nodes), len(spec.pools)
    print(
        f"{args.scenario}: valid ({len(spec.classes)} classes, {n_nodes} nodes, {n_pools} pools, "
        f"placer {spec.scheduler.placer.name}, allocator {spec.scheduler.allocator.name})"
    )
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    print("shipped scenarios:")
    for path in shipped_scenarios():
        print(f"  {path.stem:<24} {path}")
    for kind in registry.KINDS:
        print(f"{kind}s: {', '.join(registry.names(kind))}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clusteremu", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    def scenario_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("scenario", help="scenario YAML file, or the name of a shipped scenario")
        p.add_argument(
            "--set",
            action="append",
            metavar="PATH=VALUE",
            help="override a field, e.g. workload.classes.0.arrival.rate_per_s=9",
        )
        p.add_argument("--seed", type=int, help="override the scenario seed")
        p.add_argument("--replications", type=int, help="override the number of replications")

    run = sub.add_parser("run", help="run a scenario and print its summary")
    scenario_args(run)
    run.add_argument("--out", help="write DIR/jobs.parquet and DIR/summary.json")
    run.add_argument("--json", action="store_true", help="print only the summary, as JSON")
    ray = run.add_argument_group("Ray (needs the `ray` extra)")
    ray.add_argument("--ray", action="store_true", help="run on Ray actors")
    ray.add_argument("--address", help="Ray address; 'auto' joins a running cluster")
    ray.add_argument("--shards", type=int, default=1, help="node shard actors")
    ray.add_argument("--window", type=float, default=0.0, help="windowed mode: window, seconds")
    ray.add_argument("--realtime", type=float, default=0.0, help="pace to wall clock times X")
    ray.add_argument("--dashboard-host", default="127.0.0.1", help="Ray dashboard bind address")
    ray.add_argument(
        "--shard-resources",
        action="append",
        metavar="NAME=AMOUNT[,NAME=AMOUNT]",
        help="Ray custom resources node shard i requires (the i-th flag, cycled), to pin "
        "shards to machines started with `ray start --resources`",
    )
    ray.add_argument("--shard-cpus", type=float, default=0.0, help="CPUs each shard actor reserves")
    run.set_defaults(func=cmd_run)

    cmp_ = sub.add_parser("compare", help="run several policies on the same seeds")
    scenario_args(cmp_)
    cmp_.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="KIND=NAME[,KIND=NAME]",
        help="a policy variant, e.g. placer=random-fit (repeat for each)",
    )
    cmp_.add_argument("--metric", default="mean_response_time_s", help="summary key to chart")
    cmp_.add_argument(
        "--grid",
        metavar="PATH=V1,V2,...",
        help="sweep one field, e.g. cluster.pools.0.cores=4,8,16: every policy at every value; "
        "writes convergence.png and heuristics.png (normalised holding cost vs n, seed 004)",
    )
    cmp_.add_argument("--out", help="folder for compare.png and compare.json")
    cmp_.add_argument("--json", action="store_true", help="print only the rows, as JSON")
    cmp_.set_defaults(func=cmd_compare)

    val = sub.add_parser("validate", help="check a scenario file without running it")
    scenario_args(val)
    val.set_defaults(func=cmd_validate)

    lst = sub.add_parser("list", help="list shipped scenarios and registered policies")
    lst.set_defaults(func=cmd_list)

    from clusteremu.commands import COMMAND_MODULES

    for module in COMMAND_MODULES:
        import_module(module).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args))
    except ScenarioError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except PolicyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_POLICY_ERROR
    except BrokenPipeError:
        # The reader went away (`clusteremu run ... | head`): exit quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("interrupted; files already written are complete", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
