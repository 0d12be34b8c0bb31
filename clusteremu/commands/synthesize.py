"""`clusteremu synthesize`: learn a RAD-tree policy from optimal plans (Pennyworth).

    clusteremu synthesize SCENARIO --out DIR [--batches 400] [--jobs 20] [--trials 8]
                          [--validation-batches N] [--test-batches 50] [--slack 0.15]
                          [--time-limit 20] [--workers W] [--seed 0] [--explain]
                          [--explain-full] [--json]
    clusteremu synthesize --tree FILE [--explain | --explain-full] [--json]

Draws `--batches` example job sets of `--jobs` jobs over varying task mixes, plans each
optimally on the task means (the exact planner, keeping `--slack` of the SLO's bound free
as a margin for the spread of the run times) on Ray (`clusteremu.tuners.pennyworth`), writes their
decisions as Parquet under DIR/examples/ (resumable: a re-run solves only the missing
chunks), then searches the tree's
hyper-parameters (and the margin it plans with) with Ray Tune and Optuna's TPE sampler
(`--trials` trials, `--workers` at once), minimising the mean actual cost of the tree's
plans on validation batches of the scenario's size with actual run times. The chosen tree
is then scored once on `--test-batches` held-out test batches (none equivalent to a
training or validation one) against its ablation (`pennyworth-rules`) and the baselines.
Writes DIR/tree.json (the `pennyworth` placer's `tree:` file), DIR/report.json (the best
parameters, the validation score, the held-out report, counts, wall seconds),
DIR/held-out.md and DIR/held-out.png; prints a summary, or the report with `--json`;
`--explain` prints a digest of the tree (size, the features that matter most, the decisions
to depth 3; with `--json`: under "explain"), `--explain-full` every rule as if/else (under
"rules"). `clusteremu synthesize --tree FILE [--explain-full]` explains an existing tree
file without synthesising one.
Exit status 0, 2 on bad input (checked before any work), 130 / 143 when interrupted
(finished example chunks are kept).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from clusteremu.progress import Progress

#: The files `synthesize` writes into --out together (the examples folder is resumable).
FILES = ("tree.json", "report.json", "held-out.md", "held-out.png")
EXAMPLES = "examples"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "synthesize", help="learn a RAD-tree policy from optimal plans on Ray (Pennyworth)"
    )
    p.add_argument(
        "scenario",
        nargs="?",
        help="scenario YAML file, or the name of a shipped scenario (not with --tree)",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        help="folder for tree.json, report.json and examples/ (Parquet); required unless --tree",
    )
    p.add_argument(
        "--batches",
        type=int,
        default=400,
        help="example job sets planned optimally (default 400)",
    )
    p.add_argument(
        "--jobs", type=int, default=20, help="jobs per example set (default 20, the paper's)"
    )
    p.add_argument(
        "--validation-batches",
        type=int,
        default=None,
        help="batches of the scenario's size that select the tree (default: a tenth of"
        " --batches, 20 to 60)",
    )
    p.add_argument(
        "--test-batches",
        type=int,
        default=50,
        help="held-out batches the chosen tree is scored on once (default 50; 0: none)",
    )
    p.add_argument(
        "--slack",
        type=float,
        default=0.15,
        help="margin of the examples' plans: the share of the SLO's bound (deadline, rtpt "
        "factor, target) kept free (default 0.15)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=20.0,
        help="seconds the planner may spend proving one example set optimal before it is "
        "skipped (default 20)",
    )
    p.add_argument("--trials", type=int, default=8, help="hyper-parameter settings tried")
    p.add_argument(
        "--workers", type=int, default=None, help="Ray tasks and trials at once (default: CPUs)"
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the batches and of the search (default 0)"
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="print a summary of the tree: its size, the features that matter most and the "
        "decisions near the root (to depth 3)",
    )
    p.add_argument(
        "--explain-full",
        action="store_true",
        help="print every rule of the tree as nested if/else (thousands of lines for a big tree)",
    )
    p.add_argument(
        "--tree",
        metavar="FILE",
        help="explain this tree file (a tree.json, or a shipped scenarios/policies/*.json) "
        "without synthesising: no SCENARIO, no --out; --explain unless --explain-full",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_synthesize)


def _check_numbers(args: argparse.Namespace) -> None:
    from clusteremu.cluster.errors import UsageError
    from clusteremu.cluster.policies.pennyworth.exact import MAX_JOBS
    from clusteremu.scenarios import option_checks

    for name in ("batches", "trials", "validation_batches"):
        value = getattr(args, name)
        if value is not None:
            option_checks.count(value, f"--{name.replace('_', '-')}")
    option_checks.count(
        args.jobs,
        "--jobs",
        maximum=MAX_JOBS,
        reason="the exact planner's limit; A* rarely finishes sets of over 32 jobs within "
        "--time-limit",
    )
    option_checks.fits_memory(args.trials, option_checks.BYTES_PER_TRIAL, "--trials", "trials")
    if args.workers is not None:
        option_checks.workers(args.workers)
    if not 0 <= args.test_batches <= 10_000:
        raise UsageError(f"--test-batches: expected 0 to 10000, got {args.test_batches}")
    if args.validation_batches is not None and args.validation_batches > 10_000:
        raise UsageError(
            f"--validation-batches: expected at most 10000, got {args.validation_batches}"
        )
    if not 0 <= args.slack < 0.9:
        raise UsageError(f"--slack: expected a fraction from 0 to below 0.9, got {args.slack}")
    option_checks.time_limit(args.time_limit, maximum=3600)
    option_checks.seed(args.seed)


def _explained(tree: Any, args: argparse.Namespace) -> dict[str, Any]:
    """What --explain / --explain-full add to the JSON: the summary, or every rule."""
    out: dict[str, Any] = {}
    if args.explain:
        out["explain"] = tree.summary()
    if args.explain_full:
        out["rules"] = tree.explain()
    return out


def _print_explanation(tree: Any, args: argparse.Namespace) -> None:
    if args.explain:
        print(tree.summary())
    if args.explain_full:
        print(tree.explain())


def _explain_file(args: argparse.Namespace) -> int:
    """`synthesize --tree FILE [--explain | --explain-full]`: explain a tree, no training."""
    from clusteremu.cluster.errors import UsageError
    from clusteremu.cluster.io import to_json
    from clusteremu.cluster.policies.pennyworth.tree import RadTree, TreeFileError

    if args.scenario is not None or args.out is not None:
        raise UsageError(
            "--tree explains an existing tree without synthesising: drop "
            + " and ".join(x for x, v in (("SCENARIO", args.scenario), ("--out", args.out)) if v)
        )
    if not args.explain_full:
        args.explain = True
    try:
        tree = RadTree.load(args.tree)
    except TreeFileError as exc:
        raise UsageError(f"--tree {exc}") from None
    if args.json:
        print(to_json({"tree_file": args.tree, **_explained(tree, args)}))
    else:
        _print_explanation(tree, args)
    return 0


def cmd_synthesize(args: argparse.Namespace) -> int:
    from clusteremu.cli import UsageError, check_out, require_extra

    if args.tree is not None:
        return _explain_file(args)
    missing = [x for x, v in (("scenario", args.scenario), ("--out", args.out)) if v is None]
    if missing:
        raise UsageError(
            f"the following arguments are required: {', '.join(missing)} (or --tree FILE to "
            "explain an existing tree)"
        )
    _check_numbers(args)
    require_extra("ray", "ray", "synthesize")
    for module in ("sklearn", "optuna"):
        require_extra(module, "learn", "synthesize")
    out = Path(args.out)
    check_out(args, "synthesize", FILES)
    from clusteremu.cluster.policies.pennyworth.problem import ScenarioFieldError
    from clusteremu.scenarios.errors import ScenarioError
    from clusteremu.scenarios.loader import load_scenario, resolve_path
    from clusteremu.tuners.pennyworth import (
        CHUNK_BATCHES,
        ExamplesError,
        check_folder,
        plan_examples,
        scenario_jobs,
        scenario_problem,
        synthesize,
    )

    base = scenario_problem(args.scenario)  # ScenarioError: exit 2
    spec = load_scenario(args.scenario)
    try:
        scenario_jobs(spec)
    except ScenarioFieldError as exc:
        raise ScenarioError(str(resolve_path(args.scenario)), [(exc.field, exc.expected)]) from None
    try:
        plan = plan_examples(
            args.scenario,
            base,
            args.batches,
            args.jobs,
            args.seed,
            CHUNK_BATCHES,
            args.slack,
            args.time_limit,
        )
        check_folder(out / EXAMPLES, plan)
    except ExamplesError as exc:
        raise UsageError(str(exc)) from None
    # Everything is checked: now start Ray.
    import ray

    from clusteremu.actors.launch import ensure_ray, stop_ray
    from clusteremu.cluster.io import output_folder, to_json, write_json

    args.interrupt_note = (
        f"finished example chunks are kept in {out / EXAMPLES}; re-run the same command to resume"
    )
    start = time.perf_counter()
    started = ensure_ray(None, num_cpus=args.workers or os.cpu_count() or 1)
    progress = _Progress()
    finished = False
    try:
        workers = args.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        try:
            result = synthesize(
                base,
                plan,
                out / EXAMPLES,
                args.trials,
                workers,
                args.validation_batches,
                progress,
                spec,
                args.test_batches,
            )
        except ExamplesError as exc:
            raise UsageError(str(exc)) from None
        finished = True
    finally:
        progress.close(finished)
        stop_ray(started)
    report = _report(args, plan, base, result, out, time.perf_counter() - start)
    with output_folder(out, "synthesize", FILES, label=plan.scenario) as stage:
        result.tree.save(stage / "tree.json")
        write_json(report, stage / "report.json")
        if result.report is not None:
            (stage / "held-out.md").write_text(result.report.to_table() + "\n", encoding="utf-8")
            result.report.plot(stage / "held-out.png")
        else:  # no test split: no held-out report may be left from an earlier run
            (stage / "held-out.md").write_text(
                "No held-out test batches were scored (--test-batches 0).\n", encoding="utf-8"
            )
            (out / "held-out.png").unlink(missing_ok=True)
    if args.json:
        print(to_json({**report, **_explained(result.tree, args)}))
        return 0
    _print_summary(report, out)
    _print_explanation(result.tree, args)
    return 0


def _report(
    args: argparse.Namespace, plan: Any, base: Any, result: Any, out: Path, wall_s: float
) -> dict[str, Any]:
    """report.json: what was synthesised, the best parameters, the held-out score."""
    tree = result.tree
    return {
        "scenario": plan.scenario,
        "slo": base.slo.kind,
        "tasks": list(base.task_names),
        "types": list(base.type_names),
        "batches": plan.batches,
        "jobs_per_batch": plan.jobs,
        "seed": plan.seed,
        "examples": result.examples.rows,
        "chunks": {
            "total": result.examples.chunks,
            "already_done": result.examples.skipped,
            "solved": result.examples.ran,
        },
        "unsolved_sets": result.examples.unsolved,
        "example_slack": plan.slack,
        "validation_batches": result.validation_batches,
        "trials": len(result.search.trials) + result.search.failures,
        "failed_trials": result.search.failures,
        "best": {
            "max_depth": result.params.max_depth,
            "min_samples_leaf": result.params.min_samples_leaf,
            "ccp_alpha": result.params.ccp_alpha,
            "batches_used": result.params.batches_used,
            "examples_used": int(tree.info["examples"]),
            "slack": result.params.slack,
        },
        "tree": {"nodes": int(tree.feature.size), "leaves": tree.leaves, "depth": tree.depth},
        "validation (used for selection)": {
            "batches": result.score.batches,
            "mean_cost_usd": result.score.mean_cost_usd,
            "max_cost_usd": result.score.max_cost_usd,
        },
        "held_out": None if result.report is None else result.report.to_dict(),
        "search": result.search.trials,
        "seconds": {k: round(v, 3) for k, v in result.seconds.items()},
        "wall_s": round(wall_s, 3),
        "tree_file": str(out / "tree.json"),
        "examples_folder": str(out / EXAMPLES),
    }


def _print_summary(report: dict[str, Any], out: Path) -> None:
    chunks, best, tree = report["chunks"], report["best"], report["tree"]
    val = report["validation (used for selection)"]
    print(
        f"{report['scenario']} ({report['slo']} SLO): {report['batches']} example sets of "
        f"{report['jobs_per_batch']} jobs, {report['examples']} examples ({chunks['total']} "
        f"chunks: {chunks['already_done']} already done, {chunks['solved']} solved now; "
        f"{report['unsolved_sets']} sets past the time limit skipped) in "
        f"{report['seconds']['examples_s']:.1f} s"
    )
    print(
        f"search: {report['trials']} trials in {report['seconds']['search_s']:.1f} s; best "
        f"max_depth {best['max_depth']}, min_samples_leaf {best['min_samples_leaf']}, "
        f"ccp_alpha {best['ccp_alpha']:.3g}, {best['batches_used']} sets "
        f"({best['examples_used']} examples), slack {best['slack']:.1%} of the SLO's bound"
    )
    print(
        f"tree: {tree['nodes']} nodes, {tree['leaves']} leaves, depth {tree['depth']}; "
        f"validation (used for selection): mean actual cost ${val['mean_cost_usd']:.5f} over "
        f"{val['batches']} batches"
    )
    held = report["held_out"]
    if held is not None:
        print(_held_out_lines(held))
    print(
        f"wrote {out / 'tree.json'}, {out / 'report.json'}, {out / 'held-out.md'}"
        + (f", {out / 'held-out.png'}" if held is not None else "")
        + f" and {out / EXAMPLES}/ in {report['wall_s']:.1f} s"
    )


def _held_out_lines(held: dict[str, Any]) -> str:
    """The held-out comparison as a few lines (the full table is held-out.md)."""
    from clusteremu.tuners.protocol import Report

    return Report.from_dict(held).to_table()


class _Progress:
    """Progress of the phases (`synthesize examples`, `synthesize search`, ...), one after
    another, on the one progress convention (`clusteremu.progress`): a bar per phase on a
    terminal, else a line every few seconds."""

    def __init__(self) -> None:
        self.phase = ""
        self.shown: Progress | None = None

    def __call__(self, phase: str, done: int, total: int) -> None:
        if phase != self.phase or self.shown is None:
            self.close()
            self.phase = phase
            unit = "batches" if phase == "examples" else "trials"
            self.shown = Progress(f"synthesize {phase}", unit=unit)
        self.shown.update(done=done, total=total)

    def close(self, finished: bool = True) -> None:
        if self.shown is not None:
            self.shown.close(finished)
            self.shown = None
