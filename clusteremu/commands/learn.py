"""`clusteremu learn`: learn Amdahl parameters online and re-solve the core split (the MDP
paper's learning loops, Algorithms 1a / 1b; see docs/mdp.md).

Algorithm 1a re-estimates from the last epoch's departures only, with epochs that grow
(50 + n departures in epoch n by default), so it can follow parameters that change;
Algorithm 1b re-estimates from all departures since the start, 100 per epoch by default.

The files are written together (`clusteremu.cluster.io.output_folder`): an interrupted learner
leaves
the folder as it was.

    clusteremu learn SCENARIO --algorithm 1a|1b --iterations N [--set ...] [--out DIR] [--json]

The scenario has two (or more) classes in one pool (Poisson arrivals, exponential sizes with
a common mean, Amdahl speed-ups: their parallel fractions are the true theta). Learning
settings come from `scheduler.allocator.params` of an `mdp` allocator (`truncation`,
`actions`, `learn:`), and the options override them. Writes DIR/estimates.parquet (one row
per iteration), DIR/estimates.png (estimates against the truth, like the MDP paper's
Figures 4-8) and DIR/summary.json; with `--json` prints only
`{"theta": {<class>: <final estimate>}, "mean_jobs_in_system": <E[N] of the final policy>}`,
where E[N] is the exact stationary mean of the final learned policy under the true
parameters (at the end of the run, for change-point scenarios).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusteremu.cluster.io import output_folder, to_json, write_json, write_parquet
from clusteremu.cluster.policies.mdp.learn_config import ALGORITHMS, LearnConfig
from clusteremu.cluster.policies.mdp.model import MdpModelError
from clusteremu.scenarios import limits
from clusteremu.scenarios.errors import ScenarioError
from clusteremu.scenarios.loader import load_scenario

if TYPE_CHECKING:  # the learner (scipy.optimize) loads when the command runs, not at start-up
    from clusteremu.cluster.experiments.mdp_learner import LearnResult

PARAMS = "scheduler.allocator.params"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "learn", help="learn speed-up parameters online and re-solve the MDP core split"
    )
    p.add_argument("scenario", help="scenario YAML file, or the name of a shipped scenario")
    p.add_argument(
        "--algorithm",
        choices=ALGORITHMS,
        help="learning loop: 1a re-estimates from the last epoch's departures only, epochs "
        "growing (50 + n departures by default; follows changing speed-ups); 1b re-estimates "
        "from all departures so far, 100 per epoch (default: the scenario's)",
    )
    p.add_argument(
        "--iterations", type=int, help="number of epochs, >= 1 (default: the scenario's)"
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="PATH=VALUE",
        help="override a scenario field, e.g. seed=3",
    )
    p.add_argument("--seed", type=int, help="override the scenario seed (default: its seed)")
    p.add_argument(
        "--out",
        metavar="DIR",
        help="folder for estimates.parquet, estimates.png, summary.json "
        "(default: learn-<scenario name>)",
    )
    p.add_argument(
        "--json", action="store_true", help="print only {theta, mean_jobs_in_system} as JSON"
    )
    p.set_defaults(func=cmd_learn)


def cmd_learn(args: argparse.Namespace) -> int:
    from clusteremu.cli import UsageError, check_out, progress_bar
    from clusteremu.cluster.experiments.mdp_learner import learn

    if args.iterations is not None and args.iterations < 1:
        raise UsageError(f"--iterations: expected an integer >= 1, got {args.iterations}")
    if args.iterations is not None:
        refusal = limits.count_refusal(args.iterations, limits.BYTES_PER_EPOCH, "epochs")
        if refusal is not None:
            raise UsageError(f"--iterations {args.iterations}: {refusal}")
    check_out(args, "learn")
    overrides = list(args.set or [])
    if args.seed is not None:
        overrides.append(f"seed={args.seed}")
    spec = load_scenario(args.scenario, overrides)
    source = str(args.scenario)
    out = Path(args.out) if args.out else Path(f"learn-{spec.name}")
    if not args.out:
        check_out(argparse.Namespace(out=out), "learn")
    ref = spec.scheduler.allocator
    params = dict(ref.params) if ref.name == "mdp" else {}
    try:
        config = LearnConfig.from_dict(dict(params.get("learn", {})))
        if args.algorithm is not None:
            config = replace(config, algorithm=args.algorithm)
        if args.iterations is not None:
            config = replace(config, iterations=args.iterations)
        refusal = limits.count_refusal(config.iterations, limits.BYTES_PER_EPOCH, "epochs")
        if refusal is not None:
            raise ScenarioError(source, [(f"{PARAMS}.learn.iterations", refusal)])
        with progress_bar(True, f"learn {spec.name}") as update:
            result = learn(
                spec,
                config,
                truncation=int(params.get("truncation", 20)),
                actions=int(params.get("actions", 100)),
                progress=update,
            )
    except MdpModelError as exc:
        field = exc.field
        if not field.startswith(("workload", "cluster")):
            field = f"{PARAMS}.{field}"
        raise ScenarioError(source, [(field, exc.expected)]) from None
    with output_folder(out, "learn", label=spec.name) as stage:
        write_parquet(result.table_arrow(), stage / "estimates.parquet")
        plot_learning(result, stage / "estimates.png", f"{spec.name}: Algorithm {config.algorithm}")
        summary = summary_of(result, config)
        write_json(summary, stage / "summary.json")
    png = out / "estimates.png"
    if args.json:
        print(
            to_json(
                {"theta": summary["theta"], "mean_jobs_in_system": summary["mean_jobs_in_system"]}
            )
        )
    else:
        names = result.class_names
        print(
            f"{spec.name}: Algorithm {config.algorithm}, {config.iterations} iterations, "
            f"{result.rows[-1]['departures']} departures"
        )
        for c in range(len(names)):
            last = result.rows[-1]
            print(
                f"  theta[{names[c]}] = {result.theta[c]:.4f} ± "
                f"{last[f'theta{c + 1}_se']:.3g} (true {result.true_theta[c]:g})"
            )
        print(
            f"  E[N] learned policy {result.mean_jobs_learned:.5f}, optimal "
            f"{result.mean_jobs_optimal:.5f} ({summary['gap_percent']:+.3f}%)"
        )
        if result.change_times:
            print(
                f"  change points at {result.change_times} s tracked after "
                f"{summary['tracking_delays_epochs']} epochs (within 0.1)"
            )
        print(f"wrote {out / 'estimates.parquet'}, {png} and {out / 'summary.json'}")
    return 0


def summary_of(result: LearnResult, config: LearnConfig) -> dict[str, Any]:
    from clusteremu.cluster.experiments.mdp_learner import tracking_delays

    names = result.class_names
    gap = 100.0 * (result.mean_jobs_learned / result.mean_jobs_optimal - 1.0)
    return {
        "theta": {names[c]: result.theta[c] for c in range(len(names))},
        "mean_jobs_in_system": result.mean_jobs_learned,
        "mean_jobs_optimal": result.mean_jobs_optimal,
        "gap_percent": gap,
        "true_theta": {names[c]: result.true_theta[c] for c in range(len(names))},
        "algorithm": config.algorithm,
        "iterations": config.iterations,
        "departures": int(result.rows[-1]["departures"]),
        "simulated_mean_jobs_in_system": result.simulated_mean_jobs,
        "change_times_s": result.change_times,
        # Epochs after the change epoch until the estimates are within 0.1 of the new value.
        "tracking_delays_epochs": tracking_delays(result, tolerance=0.1),
    }


def plot_learning(result: LearnResult, path: Path, title: str) -> Path:
    """Estimates per iteration against the true theta (step lines), one panel per class,
    and E[N] of the learned policy against the optimum (the MDP paper's Figures 4-8)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from clusteremu.cluster.plotting import scale_axis

    rows = result.rows
    it = [r["iteration"] for r in rows]
    times = [r["time_s"] for r in rows]
    change_epochs = [
        next((r["iteration"] for r, t in zip(rows, times, strict=True) if t >= tc), None)
        for tc in result.change_times
    ]
    m = len(result.class_names)
    fig, axes = plt.subplots(m + 1, 1, figsize=(8, 3 * (m + 1)), sharex=True)
    for c, ax in enumerate(axes[:m]):
        key = f"theta{c + 1}"
        ax.plot(it, [r[f"{key}_hat"] for r in rows], lw=1.0, label=f"estimate {key}")
        ax.step(
            it,
            [r[f"{key}_true"] for r in rows],
            where="post",
            color="k",
            lw=1.2,
            label="true value",
        )
        for n_c in change_epochs:
            if n_c is not None:
                ax.axvline(n_c, color="tab:red", lw=0.6, ls=":")
        thetas = [r[f"{key}_{end}"] for r in rows for end in ("hat", "true")]
        if scale_axis(ax, thetas) == "linear":  # log (symlog) when they span over 10x
            ax.set_ylim(0.0, 1.05)
        ax.set_ylabel(f"theta ({result.class_names[c]})")
        ax.legend(loc="lower right")
    ax = axes[m]
    ax.plot(it, [r["mean_jobs_learned"] for r in rows], lw=1.0, label="policy from estimates")
    ax.plot(
        it, [r["mean_jobs_optimal"] for r in rows], color="k", lw=1.2, label="optimal (true theta)"
    )
    scale_axis(ax, [r[k] for r in rows for k in ("mean_jobs_learned", "mean_jobs_optimal")])
    ax.set_ylabel("E[N] (exact)")
    ax.set_xlabel("iteration")
    ax.legend(loc="upper right")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
