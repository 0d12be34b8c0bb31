"""`clusteremu provision`: train the predictive provisioner, compare provisioners (after
Jialun Song's master's thesis, "the thesis" below; see docs/provisioner.md).

    clusteremu provision train SCENARIO [--set PATH=VALUE ...] [--runs N] [--trials T]
                                        [--sampler tpe|gp] [--seed S] [--bins 2,3,4]
                                        --out DIR [--json]
    clusteremu provision compare SCENARIO [--set ...] [--model FILE] [--provisioners LIST]
                                          [--profiling-runs N] [--trials T] [--out DIR] [--json]

`train` runs the scenario with static requests for N profiling runs on seed S (not the
scenario's seed), writes the profiling data (`profile.parquet`, the thesis's Table 3) and
the sizing model (`sizing.json`: groups, and per heavy task its bins and exported
classifier), and prints per heavy task the binning, the chosen classifier, its test
accuracy, u-rate, u-score and estimated improvement.

`compare` runs the scenario (its own seed: runs the provisioners never saw) once per
provisioner and reports memory and CPU reserved vs used, the saving over static, the
u-rate (instances whose first request was below their need), out-of-memory kills, retries,
the core-seconds killed attempts wasted, the mean run makespan (a workflow run's last end
minus its first arrival: what kills and retries cost in delay), failed jobs and memory
requested per run; `--out` adds a JSON, a Parquet table and a PNG.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from clusteremu.cluster.io import output_folder, to_json, write_json, write_parquet
from clusteremu.progress import Progress, progress
from clusteremu.scenarios import option_checks
from clusteremu.scenarios.loader import load_scenario

PROVISIONERS = (
    "static",
    "grouped",
    "vpa",
    "predictive",
    "most-likely-bin",
    "smallest-bin",
    "oracle",
)
#: The provisioners that size by a sizing model's bins (`--model`, or trained the same way).
BINNED = ("predictive", "most-likely-bin", "smallest-bin", "oracle")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("provision", help="train and compare provisioners (right-sizing requests)")
    verbs = p.add_subparsers(dest="verb", required=True, metavar="{train,compare}")
    t = verbs.add_parser("train", help="profile a scenario and train the predictive model")
    _common(t)
    t.add_argument("--runs", type=int, default=1300, help="profiling runs (default 1300)")
    t.add_argument("--trials", type=int, default=20, help="Optuna trials per binning")
    t.add_argument("--sampler", choices=("tpe", "gp"), default="tpe", help="Optuna sampler")
    t.add_argument("--seed", type=int, default=1, help="profiling and training seed")
    t.add_argument(
        "--bins",
        default="2,3",
        help="comma-separated bin counts to search, each 2 to 4; the best on validation is "
        "kept (default 2,3)",
    )
    t.add_argument("--out", required=True, help="folder for sizing.json and profile.parquet")
    t.set_defaults(func=cmd_train, out_command="provision train")
    c = verbs.add_parser("compare", help="run the scenario under several provisioners")
    _common(c)
    c.add_argument(
        "--model",
        help="sizing.json from `provision train` (the provisioners "
        "predictive, most-likely-bin, smallest-bin, oracle)",
    )
    c.add_argument(
        "--provisioners",
        default=",".join(PROVISIONERS),
        help=f"comma-separated (default {','.join(PROVISIONERS)})",
    )
    c.add_argument("--profiling-runs", type=int, default=1300, help="when no --model")
    c.add_argument("--trials", type=int, default=20, help="when no --model")
    c.add_argument("--out", help="folder for provision-compare.{json,parquet,png}")
    c.set_defaults(func=cmd_compare, out_command="provision compare")


def _common(p: Any) -> None:
    p.add_argument("scenario", help="scenario YAML file, or a shipped scenario's name")
    p.add_argument("--set", action="append", metavar="PATH=VALUE", help="override a field")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


#: Memory one profiled job takes until the profile is written (bytes: the engine's arrays and
#: per-job row, its usage features and profiling row; rounded up).
BYTES_PER_PROFILED_JOB = 1024


def _check_profiling_memory(runs: int, spec: Any, flag: str) -> None:
    """Refuse, before profiling, more runs than memory holds (each run is one job of every
    class of the scenario)."""
    jobs = float(runs) * max(len(spec.classes), 1)
    option_checks.fits_memory(
        jobs, BYTES_PER_PROFILED_JOB, flag, f"profiled jobs ({len(spec.classes)} per run)"
    )


def _held_out(report: dict[str, Any]) -> dict[str, Any]:
    """A classifier's held-out report (`models.held_out_report`) with the protocol's 95%
    interval of its accuracy (percentile bootstrap over the test rows) and the
    learned-something check: the interval lies above the accuracy of the majority bin (a
    classifier that learned nothing) on the same rows."""
    if not report:
        return {}
    from clusteremu.tuners.protocol import mean_interval

    ci = mean_interval(report["correct"], method="bootstrap")  # a share: stays in [0, 1]
    hidden = ("correct", "protocol_table", "runs_by_split")
    out = {k: v for k, v in report.items() if k not in hidden}
    out["accuracy_ci95"] = [ci.low, ci.high]
    out["learned_something"] = bool(ci.low > report["majority_bin_accuracy"])
    return out


#: Bin counts `--bins` may name (4 bins: a search of ~150,000 edge sets for a 100 GB task).
BIN_COUNTS = (2, 3, 4)


def _bin_counts(text: str) -> tuple[int, ...]:
    """`--bins`: distinct bin counts from `BIN_COUNTS`, comma-separated."""
    items = [t.strip() for t in str(text).split(",")]
    if not all(t.isdigit() and int(t) in BIN_COUNTS for t in items) or len(set(items)) != len(
        items
    ):
        raise _usage_error(
            f"--bins: expected distinct bin counts from {', '.join(map(str, BIN_COUNTS))}, "
            f"comma-separated (e.g. 2,3,4), got {str(text)[:60]!r}"
        )
    return tuple(int(t) for t in items)


def _usage_error(message: str) -> Exception:
    from clusteremu.cluster.errors import UsageError

    return UsageError(message)


def cmd_train(args: argparse.Namespace) -> int:
    from clusteremu.cli import require_extra
    from clusteremu.cluster.io import check_output_folder
    from clusteremu.cluster.policies.provisioner.sizing import profile, static_of, train_sizing

    for module in ("sklearn", "optuna", "imblearn"):
        require_extra(module, "learn", "provision train")
    option_checks.count(args.runs, "--runs", minimum=10)
    option_checks.count(args.trials, "--trials")
    option_checks.fits_memory(args.trials, option_checks.BYTES_PER_TRIAL, "--trials", "trials")
    option_checks.seed(args.seed)
    bin_counts = _bin_counts(args.bins)
    check_output_folder(args.out, "provision train")
    spec = load_scenario(args.scenario, list(args.set or []))
    if spec.usage is None:
        raise _usage_error(f"{args.scenario}: has no workload.usage; nothing to learn from")
    _check_profiling_memory(args.runs, spec, "--runs")
    start = time.perf_counter()
    print(f"profiling {args.runs} runs of {spec.name} ...", file=sys.stderr)
    with progress(f"provision train: profiling {spec.name}") as shown:
        prof = profile(spec, args.runs, args.seed, shown)
    profiled = time.perf_counter() - start

    def report(name: str, task: Any) -> None:
        print(f"  trained {name}: bins {task.edges}", file=sys.stderr)

    try:
        sizing = train_sizing(
            prof, static_of(spec), args.trials, args.seed, args.sampler, report, bin_counts
        )
    except ValueError as exc:  # e.g. a heavy task whose profiled usages fill only one bin
        raise _usage_error(
            f"--runs {args.runs}: {exc}: the profiling runs of {spec.name} give too little "
            "to learn from; profile more runs (default 1300)"
        ) from None
    elapsed = time.perf_counter() - start
    with output_folder(args.out, "provision train", label=spec.name) as stage:
        sizing.save(stage / "sizing.json")
        write_parquet(prof.table, stage / "profile.parquet")
        _write_reports(stage, {n: t.heavy for n, t in sizing.tasks.items() if t.heavy})
    heavy = {n: t.heavy for n, t in sizing.tasks.items() if t.heavy is not None}
    out = {
        "rows": prof.table.num_rows,
        "profiling_s": profiled,
        "training_s": elapsed - profiled,
        "groups": {n: t.cluster for n, t in sizing.tasks.items()},
        "heavy": {
            n: {
                "edges": list(h.edges),
                "accuracy": h.accuracy,
                "u_rate": h.u_rate,
                "u_score": h.u_score,
                "optimal_improvement": h.optimal_improvement,
                "time_improvement": h.time_improvement,
                "estimated_improvement": h.estimated_improvement,
                "model": h.description,
                "held_out": _held_out(h.held_out),
            }
            for n, h in heavy.items()
        },
    }
    if args.json:
        print(to_json(out))
        return 0
    counts = {
        c: sum(1 for t in sizing.tasks.values() if t.cluster == c)
        for c in ("light", "moderate", "heavy")
    }
    print(
        f"{prof.table.num_rows} profiling rows; profiled in {profiled:.1f} s, trained in "
        f"{elapsed - profiled:.1f} s; tasks: {counts['light']} light (5 GB), "
        f"{counts['moderate']} moderate (20 GB), {counts['heavy']} heavy"
    )
    print(
        f"{'task':<12} {'bins (GB)':<18} {'OI_t':>6} {'acc':>6} {'u-rate':>7} "
        f"{'u-score':>8} {'est.':>6}  model"
    )
    for n, h in heavy.items():
        print(
            f"{n:<12} {'; '.join(f'{e:g}' for e in h.edges):<18} "
            f"{100 * h.time_improvement:5.1f}% {100 * h.accuracy:5.1f}% "
            f"{100 * h.u_rate:6.2f}% {h.u_score:8.2f} {100 * h.estimated_improvement:5.1f}%  "
            f"{h.description}"
        )
    print(
        "held out (test runs, scored once; the figures above are on them): accuracy with its "
        "95% interval against the ablations on the same rows"
    )
    for n in heavy:
        r = out["heavy"][n]["held_out"]
        if not r:
            continue
        lo, hi = r["accuracy_ci95"]
        print(
            f"  {n}: {100 * r['accuracy']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] on "
            f"{r['test_rows']} rows of {r['runs']['test']} runs; majority bin "
            f"{100 * r['majority_bin_accuracy']:.1f}%, smallest bin "
            f"{100 * r['smallest_bin_accuracy']:.1f}% (u-rate "
            f"{100 * r['smallest_bin_u_rate']:.1f}%); learned something: "
            f"{'yes' if r['learned_something'] else 'no'}"
        )
    _print_cost_rules(heavy)
    _print_models(heavy)
    print(
        f"wrote {Path(args.out) / 'sizing.json'}, {Path(args.out) / 'profile.parquet'} and "
        "held-out-<task>.{json,md} (the protocol report per heavy task)"
    )
    return 0


def _print_cost_rules(heavy: dict[str, Any]) -> None:
    """Per heavy task: the expected-cost rule `predictive` starts instances with (chosen on
    validation) and, on the held-out rows, the GB-h and kills of its bins beside the
    classifier's most likely bin, the smallest bin and the oracle (the cost model)."""
    print(
        "first bin by expected cost (predictive; GB-h and kills on the held-out rows by the "
        "cost model, with the classifier's most likely bin, the smallest bin and the oracle)"
    )
    for n, h in heavy.items():
        rule = h.cost_rule
        if rule is None:
            continue
        test = rule.report.get("test", {})
        figures = ", ".join(
            f"{name} {f['gb_h']:.0f} GB-h / {f['kills']} kills" for name, f in test.items()
        )
        print(
            f"  {n}: logistic C {rule.report['chosen']['C']:g}, kill penalty "
            f"{rule.penalty_gb:g} GB, kill fraction {rule.kill_fraction:.2f}; {figures}"
        )


def _print_models(heavy: dict[str, Any]) -> None:
    """Per heavy task: the per-model table (each classifier x imbalance treatment on the
    held-out rows, as in the thesis) and the protocol report's table."""
    for n, h in heavy.items():
        report = h.held_out
        if not report.get("models"):
            continue
        print(
            f"\n{n}: every classifier x imbalance treatment, refitted on train + validation, "
            f"on the {report['test_rows']} held-out rows"
        )
        print(
            f"  {'model':<14} {'acc.':>6} {'u-rate':>7} {'u-score':>8} {'val. u-score':>12}  "
            "parameters"
        )
        for r in report["models"]:
            val = "—" if r["validation_u_score"] is None else f"{r['validation_u_score']:.2f}"
            mark = " (selected)" if r["selected"] else ""
            print(
                f"  {r['model']:<14} {100 * r['accuracy']:5.1f}% {100 * r['u_rate']:6.2f}% "
                f"{r['u_score']:8.2f} {val:>12}  {r['params']}; {r['source']}{mark}"
            )
        print()
        print(report["protocol_table"])


def _write_reports(stage: Path, heavy: dict[str, Any]) -> None:
    """`held-out-<task>.json` (the protocol report, per-model table) and `.md`."""
    import json

    for n, h in heavy.items():
        report = h.held_out
        if not report.get("protocol"):
            continue
        data = {"task": n, "report": report["protocol"], "models": report["models"]}
        (stage / f"held-out-{n}.json").write_text(json.dumps(data, indent=1, allow_nan=False))
        (stage / f"held-out-{n}.md").write_text(report["protocol_table"])


def cmd_compare(args: argparse.Namespace) -> int:
    import dataclasses

    from clusteremu.cluster.engine import Engine
    from clusteremu.cluster.io import check_output_folder
    from clusteremu.cluster.model import PolicyRef

    names = option_checks.name_list(args.provisioners, "--provisioners", PROVISIONERS)
    if "static" not in names:
        names.insert(0, "static")
    elif names[0] != "static":  # static first: the others' savings are against it
        names.remove("static")
        names.insert(0, "static")
    if args.model is not None and not set(BINNED) & set(names):
        raise _usage_error(
            f"--model: only the {', '.join(BINNED)} provisioners use a sizing model; add one "
            f"to --provisioners (got {args.provisioners}) or drop --model"
        )
    learnt = [n for n in names if n != "static" and not (n in BINNED and args.model)]
    if learnt:  # they profile the scenario first: --profiling-runs (and --trials) apply
        option_checks.count(args.profiling_runs, "--profiling-runs", minimum=2)
    if set(BINNED) & set(learnt):
        option_checks.count(args.trials, "--trials")
        option_checks.fits_memory(args.trials, option_checks.BYTES_PER_TRIAL, "--trials", "trials")
    if args.model is not None:
        from clusteremu.cluster.policies.provisioner.sizing import Sizing

        try:
            sizing = Sizing.load(args.model)
        except ValueError as exc:
            raise _usage_error(f"--model: {exc}") from None
    if args.out is not None:
        check_output_folder(args.out, "provision compare")
    spec = load_scenario(args.scenario, list(args.set or []))
    if spec.usage is None:
        raise _usage_error(f"{args.scenario}: has no workload.usage; provisioners cannot differ")
    if learnt:
        _check_profiling_memory(args.profiling_runs, spec, "--profiling-runs")
    if args.model is not None:
        problem = sizing.mismatch(spec)
        if problem is not None:
            raise _usage_error(f"--model {args.model}: {problem}")
    base_params = dict(spec.scheduler.provisioner.params)
    rows: list[dict[str, Any]] = []
    shown = Progress(f"provision compare {spec.name}", total=len(names), unit="provisioners")
    for i, name in enumerate(names):
        params: dict[str, Any] = {}
        if "retry_limit" in base_params:
            params["retry_limit"] = base_params["retry_limit"]
        if name != "static":
            if name in BINNED and args.model is not None:
                params["model"] = args.model
            else:
                params["profiling_runs"] = args.profiling_runs
                if name in BINNED:
                    params["trials"] = args.trials
        run_spec = dataclasses.replace(
            spec,
            scheduler=dataclasses.replace(spec.scheduler, provisioner=PolicyRef(name, params)),
        )
        start = time.perf_counter()
        print(f"running {spec.name} with provisioner {name} ...", file=sys.stderr)
        engine = Engine(run_spec)
        try:
            result = engine.run(lambda f, i=i: shown.update((i + f) / len(names), done=i))
        except BaseException:
            shown.close(finished=False)
            raise
        s, jobs = result.summary, result.jobs
        kills = jobs.column("oom_kills").to_numpy()
        first_mem = _first_requests(engine, jobs)
        runs = max(int(np.unique(engine.jobs.features.get("run", np.zeros(1))).size), 1)
        rows.append(
            {
                "provisioner": name,
                "reserved_memory_gb_h": s["reserved_memory_gb_h"],
                "used_memory_gb_h": s["used_memory_gb_h"],
                "reserved_cpu_core_h": s["reserved_cpu_core_h"],
                "used_cpu_core_h": s["used_cpu_core_h"],
                "memory_utilization": s["used_memory_gb_h"] / max(s["reserved_memory_gb_h"], 1e-12),
                "cpu_utilization": s["used_cpu_core_h"] / max(s["reserved_cpu_core_h"], 1e-12),
                "requested_memory_gb_per_run": float(first_mem.sum() / runs),
                "u_rate": float((kills > 0).mean()) if kills.size else 0.0,
                "accuracy": _accuracy(engine, first_mem),
                "oom_kills": s["oom_kills"],
                "wasted_core_s": s["wasted_core_s"],
                "mean_run_makespan_s": s.get("mean_run_makespan_s", float("nan")),
                "retries": s["retries"],
                "failed_jobs": s["failed_jobs"],
                "wall_s": time.perf_counter() - start,
            }
        )
    shown.update(done=len(names))
    shown.close()
    static = rows[0]
    for r in rows:
        r["memory_saving"] = 1.0 - r["reserved_memory_gb_h"] / static["reserved_memory_gb_h"]
        r["cpu_saving"] = 1.0 - r["reserved_cpu_core_h"] / static["reserved_cpu_core_h"]
    if args.out is not None:
        import pyarrow as pa

        with output_folder(args.out, "provision compare", label=spec.name) as stage:
            write_json(
                {"scenario": spec.name, "seed": spec.seed, "rows": rows},
                stage / "provision-compare.json",
            )
            write_parquet(pa.Table.from_pylist(rows), stage / "provision-compare.parquet")
            _plot(rows, stage / "provision-compare.png", spec.name)
    if args.json:
        print(to_json({"scenario": spec.name, "seed": spec.seed, "rows": rows}))
        return 0
    print(
        f"{spec.name}, seed {spec.seed}: reserved vs used over every attempt "
        "(savings against static)"
    )
    print(
        f"{'provisioner':<15} {'mem GB-h':>10} {'used':>9} {'saving':>7} {'CPU core-h':>10} "
        f"{'used':>8} {'saving':>7} {'GB/run':>7} {'u-rate':>7} {'acc.':>6} {'OOM':>5} "
        f"{'retries':>7} {'wasted core-s':>13} {'run span s':>10} {'failed':>6}"
    )
    for r in rows:
        print(
            f"{r['provisioner']:<15} {r['reserved_memory_gb_h']:10.0f} "
            f"{r['used_memory_gb_h']:9.0f} "
            f"{100 * r['memory_saving']:6.1f}% {r['reserved_cpu_core_h']:10.0f} "
            f"{r['used_cpu_core_h']:8.0f} {100 * r['cpu_saving']:6.1f}% "
            f"{r['requested_memory_gb_per_run']:7.0f} {100 * r['u_rate']:6.2f}% "
            f"{100 * r['accuracy']:5.1f}% "
            f"{r['oom_kills']:5d} {r['retries']:7d} {r['wasted_core_s']:13.0f} "
            f"{r['mean_run_makespan_s']:10.0f} {r['failed_jobs']:6d}"
        )
    if args.out is not None:
        json_, parquet, png = (
            Path(args.out) / f"provision-compare.{x}" for x in ("json", "parquet", "png")
        )
        print(f"wrote {json_}, {parquet} and {png}")
    return 0


def _accuracy(engine: Any, first_mem: Any) -> float:
    """Share of instances whose first memory request was the smallest of the
    provisioner's sizes for their task that covers the instance's peak (static: its one
    size; learnt provisioners: their bins or groups, and their recommendation)."""
    spec, jobs = engine.spec, engine.jobs
    sizing = getattr(engine.provisioner, "sizing", None)
    usage = jobs.usage.memory_gb
    right = np.zeros(usage.size, dtype=bool)
    for c, cls in enumerate(spec.classes):
        mine = jobs.class_index == c
        if sizing is None:
            sizes = [cls.request.memory_gb]
        else:
            t = sizing.tasks[cls.name]
            sizes = sorted({*t.edges, t.memory_gb})
        grid = np.asarray(sorted(sizes))
        best = grid[np.minimum(np.searchsorted(grid, usage[mine], side="left"), grid.size - 1)]
        right[mine] = np.isclose(first_mem[mine], best)
    return float(right.mean()) if right.size else 1.0


def _first_requests(engine: Any, jobs: Any) -> Any:
    """Memory each job asked for at its first attempt (GB): the provisioner's sizing."""
    return np.asarray(engine.provisioner.requests_for(engine.spec, engine.jobs)[1])


def _plot(rows: list[dict[str, Any]], path: Path, name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from clusteremu.cluster.plotting import scale_axis

    labels = [r["provisioner"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, (res, used, unit) in zip(
        axes,
        (
            ("reserved_memory_gb_h", "used_memory_gb_h", "memory, GB-hours"),
            ("reserved_cpu_core_h", "used_cpu_core_h", "CPU, core-hours"),
        ),
        strict=True,
    ):
        x = np.arange(len(rows))
        ax.bar(x - 0.2, [r[res] for r in rows], 0.4, label="reserved")
        ax.bar(x + 0.2, [r[used] for r in rows], 0.4, label="used")
        scale_axis(ax, [r[k] for r in rows for k in (res, used)])  # log when over 10x
        for i, r in enumerate(rows):
            if r["failed_jobs"]:
                ax.annotate(
                    f"{r['failed_jobs']} failed",
                    (i - 0.2, r[res]),
                    ha="center",
                    va="bottom",
                    fontsize=8,
                )
        ax.set_xticks(x, labels)
        ax.set_ylabel(unit)
        ax.legend()
    fig.suptitle(f"{name}: provisioners, reserved vs used")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
