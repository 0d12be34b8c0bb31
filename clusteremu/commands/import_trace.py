"""`clusteremu import`: a public cluster trace or a Kubernetes cluster's objects into a
folder that runs as it is (docs/traces.md).

    clusteremu import FORMAT FILE... --out DIR [--option KEY=VALUE ...] [--name NAME] [--json]
    clusteremu import FORMAT FILE... --stats [--option KEY=VALUE ...] [--json]

`--out` writes `DIR/scenario.yaml` (node types, nodes, one class per job class of the trace,
the format's usual placer), `DIR/jobs.parquet` (one row per job, `clusteremu.cluster.traces.table`),
`DIR/nodes.parquet` where the trace has machines, `DIR/import-report.json` (rows read,
kept, dropped and corrected with a count per reason, the time span, the units) and
`DIR/load.png` (the trace's jobs per hour and requested cores over time against the
cluster's). The folder is written together: an error or an interrupt leaves `DIR` as it
was. `--stats` prints the trace's shape and writes nothing.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

from clusteremu.cluster.traces.formats import FORMATS

#: What `--out` holds.
IMPORT_FILES = ("scenario.yaml", "jobs.parquet", "nodes.parquet", "import-report.json", "load.png")
#: Arrival-rate buckets `--stats` prints over the trace's span.
RATE_BUCKETS = 10


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "import",
        help="read a public trace or Kubernetes objects into a runnable scenario folder",
    )
    p.add_argument("format", choices=list(FORMATS), help="the trace's format (docs/traces.md)")
    p.add_argument("files", nargs="+", help="the trace's files")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--out", help="folder to write scenario.yaml, jobs.parquet, ... into")
    what.add_argument("--stats", action="store_true", help="print the trace's shape only")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a format option (units of normalised traces, ...: docs/traces.md)",
    )
    p.add_argument("--name", help="the scenario's name (default: the folder's name)")
    p.add_argument("--json", action="store_true", help="print the report (or stats) as JSON")
    p.set_defaults(func=cmd_import)


def _options(raw: list[str]) -> dict[str, str]:
    from clusteremu.cli import UsageError

    out: dict[str, str] = {}
    for item in raw:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--option {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def cmd_import(args: argparse.Namespace) -> int:
    from clusteremu.cli import UsageError, check_out
    from clusteremu.cluster.io import output_folder, to_json, write_json, write_parquet
    from clusteremu.cluster.traces.formats import reader
    from clusteremu.cluster.traces.table import TraceError, check_jobs
    from clusteremu.scenarios.from_trace import scenario_for

    options = _options(args.option)
    check_out(args, "import", IMPORT_FILES)
    module = reader(args.format)
    paths = [Path(f) for f in args.files]
    try:
        trace = module.read(paths, options)
        check_jobs(trace.jobs, f"{args.format} import")
    except TraceError as exc:
        raise UsageError(str(exc)) from None
    report = trace.report.to_dict(trace.jobs, trace.nodes)
    if args.stats:
        stats = trace_stats(trace)
        if args.json:
            print(to_json({"report": report, "stats": stats}))
        else:
            _print_report(report)
            _print_stats(stats)
        return 0
    name = args.name or Path(args.out).resolve().name or "trace"
    try:
        scenario = scenario_for(trace, name, args.format)
    except ValueError as exc:
        raise UsageError(f"{args.format} {', '.join(args.files)}: {exc}") from None
    report["scenario"] = {
        "placer": scenario["scheduler"]["placer"]["name"],
        "node_types": len(scenario["cluster"]["node_types"]),
        "nodes": sum(g["count"] for g in scenario["cluster"]["nodes"]),
        "classes": len(scenario["workload"]["classes"]),
    }
    import yaml

    from clusteremu.scenarios.loader import load_scenario

    with output_folder(args.out, "import", IMPORT_FILES, label=name) as stage:
        write_parquet(trace.jobs, stage / "jobs.parquet")
        if trace.nodes is not None:
            write_parquet(trace.nodes, stage / "nodes.parquet")
        text = yaml.safe_dump(scenario, sort_keys=False, width=100)
        (stage / "scenario.yaml").write_text(
            f"# Imported by `clusteremu import {args.format}` (docs/traces.md).\n" + text
        )
        write_json(report, stage / "import-report.json")
        load_scenario(str(stage / "scenario.yaml"))  # it runs as it is, or nothing is written
        _plot_load(trace, scenario, stage / "load.png")
    if args.json:
        print(to_json(report))
    else:
        _print_report(report)
        out = Path(args.out)
        print(
            f"wrote {out / 'scenario.yaml'}, {out / 'jobs.parquet'}"
            + (f", {out / 'nodes.parquet'}" if trace.nodes is not None else "")
            + f", {out / 'import-report.json'} and {out / 'load.png'}"
        )
        print(f"run it: clusteremu run {out / 'scenario.yaml'}")
    return 0


def _print_report(report: dict[str, Any]) -> None:
    print(
        f"{report['format']}: {report['rows_read']:,} rows read, {report['rows_kept']:,} kept, "
        f"{report['rows_dropped']:,} dropped; {report['nodes']:,} nodes"
    )
    for title, key in (("dropped", "dropped"), ("corrected", "corrected")):
        for reason, count in report[key].items():
            print(f"  {title:<9} {count:>10,}  {reason}")
    span = report["time_span_s"]
    if span:
        print(f"  arrivals from {span[0]:g} s to {span[1]:g} s ({_duration(span[1] - span[0])})")
    if "scenario" in report:
        s = report["scenario"]
        print(
            f"  scenario: {s['nodes']:,} nodes of {s['node_types']} type(s), "
            f"{s['classes']} class(es), placer {s['placer']}"
        )


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"


def trace_stats(trace: Any) -> dict[str, Any]:
    """The trace's shape: jobs, span, arrival rate per tenth of the span, run-time and
    request quantiles, and the offered load against the capacity its scenario would have."""
    from clusteremu.scenarios.from_trace import classes_of, cluster_cores, cluster_for, peak_demand

    jobs = trace.jobs
    n = jobs.num_rows
    arrival = jobs.column("arrival_s").to_numpy()
    run = jobs.column("run_s").to_numpy()
    cpu = jobs.column("request_cpu").to_numpy()
    mem = jobs.column("request_memory_gb").to_numpy()
    gpu = jobs.column("request_gpu").to_numpy()
    span = float(arrival[-1] - arrival[0]) if n else 0.0
    q = [0.1, 0.5, 0.9, 0.99, 1.0]

    def quantiles(x: Any) -> dict[str, float] | None:
        x = x[np.isfinite(x)]
        if x.size == 0:
            return None
        return {f"p{int(p * 100)}": float(v) for p, v in zip(q, np.quantile(x, q), strict=True)}

    rates = []
    if n and span > 0:
        counts, edges = np.histogram(arrival, bins=RATE_BUCKETS, range=(0.0, span))
        width = span / RATE_BUCKETS
        rates = [
            {"from_s": float(edges[i]), "jobs_per_h": float(counts[i] / width * 3600.0)}
            for i in range(RATE_BUCKETS)
        ]
    stats: dict[str, Any] = {
        "jobs": n,
        "span_s": span,
        "arrival_rate": rates,
        "run_s": quantiles(run),
        "runs_to_the_end": int(np.isnan(run).sum()),
        "request_cpu": quantiles(cpu),
        "request_memory_gb": quantiles(mem),
        "request_gpu_milli": quantiles(gpu) if gpu.any() else None,
    }
    if n:
        types, groups, note = cluster_for(trace, classes_of(trace))
        cores = cluster_cores(types, groups)
        finite = np.isfinite(run)
        work = float(np.sum(cpu[finite] * run[finite]))
        horizon = float(np.max(np.where(finite, arrival + run, arrival)) - arrival[0])
        peak_jobs, peak_cpu = peak_demand(jobs)
        stats.update(
            {
                "capacity_cores": float(cores),
                "cluster": note,
                "requested_core_s": work,
                "offered_load": work / (horizon * cores) if horizon > 0 and cores else math.nan,
                "peak_jobs_running": peak_jobs,
                "peak_cores_requested": peak_cpu,
            }
        )
    return stats


def _print_stats(stats: dict[str, Any]) -> None:
    print(f"jobs {stats['jobs']:,} over {_duration(stats['span_s'])}")
    if stats["arrival_rate"]:
        rates = ", ".join(f"{r['jobs_per_h']:.3g}" for r in stats["arrival_rate"])
        print(f"  arrivals per hour, by tenth of the span: {rates}")
    for key, label in (
        ("run_s", "run time s"),
        ("request_cpu", "cores"),
        ("request_memory_gb", "memory GB"),
        ("request_gpu_milli", "milli-GPU"),
    ):
        qs = stats.get(key)
        if qs:
            print(f"  {label:<11} " + "  ".join(f"{k} {v:.4g}" for k, v in qs.items()))
    if stats["runs_to_the_end"]:
        print(f"  {stats['runs_to_the_end']:,} jobs without a run time run to the end")
    if "offered_load" in stats:
        note = stats["cluster"].rstrip(".")
        print(
            f"  offered load {stats['offered_load']:.3g} on {stats['capacity_cores']:,.0f} cores "
            f"({note[:1].lower() + note[1:]})\n  if no job waited: at most "
            f"{stats['peak_jobs_running']:,} jobs and {stats['peak_cores_requested']:,.0f} cores "
            "at once"
        )


def _plot_load(trace: Any, scenario: dict[str, Any], path: Path) -> None:
    """Jobs per hour and the cores requested by jobs running if none waited, over time,
    against the scenario's cores (a PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from clusteremu.scenarios.from_trace import cluster_cores

    jobs = trace.jobs
    arrival = jobs.column("arrival_s").to_numpy()
    run = jobs.column("run_s").to_numpy()
    cpu = jobs.column("request_cpu").to_numpy()
    end = np.where(np.isnan(run), np.inf, arrival + run)
    finite_end = end[np.isfinite(end)]
    horizon = float(max(arrival.max(), finite_end.max() if finite_end.size else 0.0))
    grid = np.linspace(0.0, horizon if horizon > 0 else 1.0, 400)
    order_a, order_e = np.argsort(arrival), np.argsort(end)
    started = np.concatenate([[0.0], np.cumsum(cpu[order_a])])
    ended = np.concatenate([[0.0], np.cumsum(cpu[order_e])])
    demand = (
        started[np.searchsorted(arrival[order_a], grid, side="right")]
        - ended[np.searchsorted(end[order_e], grid, side="right")]
    )
    cores = cluster_cores(scenario["cluster"]["node_types"], scenario["cluster"]["nodes"])
    hours = grid / 3600.0
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    bins = max(1, min(200, int(math.ceil(horizon / 3600.0)) or 1))
    top.hist(arrival / 3600.0, bins=bins, range=(0.0, max(horizon, 1.0) / 3600.0))
    width = max(horizon, 1.0) / bins
    top.set_ylabel(f"jobs arriving\nper {_duration(width)}")
    top.set_title(f"{scenario['name']}: {jobs.num_rows:,} jobs")
    bottom.plot(hours, demand, label="cores requested (if no job waited)")
    bottom.axhline(cores, color="tab:red", linestyle="--", label=f"cluster: {cores:,.0f} cores")
    bottom.set_xlabel("hours since the first arrival")
    bottom.set_ylabel("cores")
    bottom.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
