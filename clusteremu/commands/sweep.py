"""`clusteremu sweep`: a resumable parameter sweep on Ray (see `clusteremu.tuners.sweep`).

    clusteremu sweep mm-c --grid workload.classes.0.arrival.rate_per_s=6,7,8 \\
        --seeds 1-20 --policy placer=first-fit --policy placer=random-fit --out runs/mmc

Re-running the same command after an interruption runs only the missing cells (the
scenario may be named differently: `mm-c`, `scenarios/mm-c.yaml` or an absolute path).
Every argument, cell and policy variant, and the folder, are checked before Ray starts;
when every cell already has a row, Ray does not start at all. `--metric` chooses the
summary keys the table shows (mean over seeds and 95% CI per grid point and policy).
Exit status 0 when every cell has a row, 1 when some are still missing (re-run to resume),
2 on bad input, 130 / 143 when interrupted (finished cells are kept).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from clusteremu.plugins import add_plugin_option


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sweep", help="run a grid of scenario variants on Ray (resumable)")
    p.add_argument("scenario", help="scenario YAML file, or the name of a shipped scenario")
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="PATH=V1,V2,...",
        help="a scenario field and its values (repeat for more axes)",
    )
    p.add_argument("--seeds", help="seeds: N, A-B or a comma list (default: the scenario's seed)")
    p.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="KIND=NAME[,KIND=NAME]",
        help="a policy variant, e.g. placer=random-fit (repeat for each; default: the "
        "scenario's policies)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="override a field in every cell",
    )
    p.add_argument(
        "--out", metavar="DIR", required=True, help="sweep folder (Parquet dataset + sweep.json)"
    )
    p.add_argument(
        "--workers", type=int, default=None, help="parallel runs (default: the CPUs Ray reports)"
    )
    p.add_argument(
        "--address", help="Ray cluster to join, HOST:PORT or 'auto' (default: a private one)"
    )
    p.add_argument("--dashboard-host", default="127.0.0.1", help="Ray dashboard bind address")
    p.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="NAME[,NAME]",
        help="summary key(s) the table shows, each as its mean over seeds and 95%% CI "
        "(repeatable or a comma list; default: mean_response_time_s)",
    )
    p.add_argument("--json", action="store_true", help="print only the outcome, as JSON")
    add_plugin_option(p)
    p.set_defaults(func=cmd_sweep)


DEFAULT_METRIC = "mean_response_time_s"


def metrics(texts: list[str]) -> list[str]:
    """`--metric` (repeatable, each a comma list) as summary keys, checked, in order and
    each once; the default metric when none is given."""
    from clusteremu.cli import UsageError, check_metric

    chosen: list[str] = []
    for text in texts:
        for name in (n.strip() for n in text.split(",")):
            if not name:
                raise UsageError(f"--metric {text!r}: an empty name; expected NAME[,NAME]")
            check_metric(name)
            if name not in chosen:
                chosen.append(name)
    return chosen or [DEFAULT_METRIC]


def cmd_sweep(args: argparse.Namespace) -> int:
    from clusteremu.cli import UsageError, check_out, parse_policy, require_extra
    from clusteremu.scenarios import option_checks

    if args.workers is not None:
        option_checks.workers(args.workers, local=not args.address)
    shown = metrics(args.metric)
    require_extra("ray", "ray", "sweep")
    from clusteremu.tuners.sweep import (
        SweepError,
        SweepOutcome,
        check_folder,
        check_manifest,
        done_cells,
        parse_grid,
        parse_seeds,
        plan_sweep,
    )

    out = Path(args.out)
    check_out(args, "sweep")
    try:
        axes = [parse_grid(g) for g in args.grid]
        seeds = parse_seeds(args.seeds) if args.seeds is not None else None
        policies = [",".join(f"{k}={v}" for k, v in parse_policy(p).items()) for p in args.policy]
        plan = plan_sweep(args.scenario, axes, seeds, policies, args.set)
        check_folder(out, plan)
    except SweepError as exc:
        raise UsageError(str(exc)) from None
    from clusteremu.cluster.io import to_json

    args.interrupt_note = f"finished cells are kept in {out}; re-run the same command to resume"
    total = len(plan.cells)
    if len(done_cells(out, plan)) == total:  # nothing left to run: no Ray at all
        try:
            check_manifest(out, plan)
        except SweepError as exc:
            raise UsageError(str(exc)) from None
        outcome = SweepOutcome(total, total, 0, [], 0.0)
    else:
        outcome = _run_on_ray(args, plan, out)
    report = {
        "cells": outcome.total,
        "already_done": outcome.skipped,
        "ran": outcome.ran,
        "missing": outcome.missing,
        "wall_s": round(outcome.wall_s, 3),
        "out": str(out),
    }
    if args.json:
        print(to_json(report))
    else:
        from clusteremu.tuners.sweep import read_results, summary_table

        ran = (
            f"{outcome.ran} run now in {outcome.wall_s:.1f} s"
            if outcome.ran or outcome.missing
            else "nothing left to run (Ray not started)"
        )
        print(f"sweep {out}: {outcome.total} cells, {outcome.skipped} already done, {ran}")
        print(summary_table(read_results(out), shown))
        verb = "wrote" if outcome.ran else "results in"
        print(f"{verb} {out / 'runs'}/ (one Parquet file per cell) and {out / 'sweep.json'}")
        if outcome.missing:
            print(
                f"{len(outcome.missing)} cell(s) missing; re-run the same command to resume",
                file=sys.stderr,
            )
    return 0 if outcome.complete else 1


def _run_on_ray(args: argparse.Namespace, plan: Any, out: Path) -> Any:
    """Start Ray (or join `--address`), run the cells without a row, stop what started."""
    import ray

    from clusteremu.actors.launch import ensure_ray, stop_ray
    from clusteremu.cli import UsageError, progress_bar
    from clusteremu.tuners.sweep import SweepError, run_sweep

    started = ensure_ray(
        args.address, args.dashboard_host, num_cpus=args.workers if not args.address else None
    )
    try:
        workers = args.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        # progress on stderr, under --json too (stdout keeps the outcome)
        with progress_bar(True, f"sweep {out.name}", compiles=True) as update:
            try:
                return run_sweep(
                    plan, out, workers, progress=lambda done, total: update(done / max(total, 1))
                )
            except SweepError as exc:
                raise UsageError(str(exc)) from None
    finally:
        stop_ray(started)
