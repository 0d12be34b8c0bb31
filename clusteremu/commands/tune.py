"""`clusteremu tune` and `clusteremu train-rl`: tune the scoring placer's weights (the
Learning to Score paper; see docs/tuning.md).

    clusteremu tune --tuner fixed|random|tpe|bo|rl[,...]
                    (--domain train|validation|test|paper-test|tiny [--experiments N]
                     | --scenario FILE [--set PATH=VALUE ...])
                    [--budget 5] [--seed S] [--workers W] [--repeats R] [--model MODEL]
                    [--test-seeds 5] [--address ADDR] [--out DIR] [--json]
    clusteremu train-rl --out MODEL [--steps 12000] [--algorithm recurrent-ppo|sac]
                        [--envs 2] [--domain train] [--budget 5] [--seed S]
                        [--net-arch 256,256] [--json]

`tune` draws N experiments from a domain (`clusteremu.tuners.domains`: the training domain
of the paper's Table II, the validation domain that selects algorithms, the test domain
whose setups and workloads training never saw, the paper's own test domain, or a tiny one)
-- or takes one scenario file -- and tunes each with every listed tuner on Ray Tune, one
trial per evaluation (`clusteremu.tuners.tuning`). The first evaluation is always the Fixed
weights; the budget counts it. It prints one line per experiment and tuner (Fixed score,
best score, improvement) and the mean improvement over Fixed with its 95% interval, in
sample (on the seed the search ran on, which selected the weights) and out of sample (the
best weights against Fixed on `--test-seeds` fresh seeds per experiment from the protocol's
"test" split -- new arrivals and a new cluster -- scored once, with Fixed and random search
at the same budget as ablation rows, and for ``rl`` its untrained agent, its constant and
its first proposal alone, `clusteremu.tuners.out_of_sample`, `clusteremu.tuners.ablations`;
random search is run for that when it is not among the tuners, the untrained agent and the
constant whenever ``rl`` is); `--json` prints ``{"mean_best_score",
"mean_improvement_over_fixed", "ci95", "experiments", "out_of_sample": {...}, ...}`` (one
tuner) or ``{"tuners": {name: that object}}``. `--out DIR` writes ``experiments.parquet``
(one row per experiment and tuner: configuration, weights tried, scores), ``tune.json``,
``tune.png`` (best against Fixed per experiment; in sample and out of sample side by
side), ``out-of-sample.md`` (the protocol's report of each tuner), ``trials/`` (Ray Tune's
trial folders, each with the run's per-function ``detail.parquet``) and, with `--scenario`,
``placer.yaml``: the best weights as a ``scheduler.placer`` block to paste into the file.

`train-rl` trains the RL tuner (RecurrentPPO, or SAC with a frame stack, on parallel
environments, `clusteremu.tuners.rl`) and saves it as an SB3 zip for ``--tuner rl --model MODEL``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from clusteremu.cluster.io import to_json, write_json, write_parquet
from clusteremu.progress import Progress


def add_parser(sub: Any) -> None:
    from clusteremu.tuners.domains import DEFAULT_TEST_SEEDS, DOMAINS

    p = sub.add_parser(
        "tune", help="tune the scoring placer's weights on Ray Tune (Learning to Score)"
    )
    p.add_argument(
        "--tuner",
        required=True,
        help="fixed, random, tpe, bo or rl; several separated by commas run on the same "
        "experiments",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--domain", default=None, help=f"draw experiments from {', '.join(DOMAINS)} (default train)"
    )
    src.add_argument("--scenario", help="tune one scenario file (its placer must be scoring)")
    p.add_argument(
        "--set", action="append", default=[], metavar="PATH=VALUE", help="with --scenario"
    )
    p.add_argument("--experiments", type=int, default=20, help="experiments (default 20)")
    p.add_argument(
        "--budget", type=int, default=5, help="evaluations per experiment, the fixed weights first"
    )
    p.add_argument("--seed", type=int, default=0, help="experiment and tuner seed (default 0)")
    p.add_argument("--workers", type=int, default=2, help="trials at once (default 2)")
    p.add_argument("--repeats", type=int, default=1, help="replications per evaluation")
    p.add_argument(
        "--test-seeds",
        type=int,
        default=DEFAULT_TEST_SEEDS,
        help="fresh seeds per experiment on which the best weights are run again against "
        f"Fixed and random search, out of sample (default {DEFAULT_TEST_SEEDS}; 0: skip)",
    )
    p.add_argument("--model", help="the RL tuner's model (from train-rl), for --tuner rl")
    p.add_argument(
        "--weights",
        help="with --tuner fixed: evaluate these weights instead of the Learning to Score "
        "paper's fixed weights (1 for every scorer, 0 for LeastAllocated and "
        "RequestedToCapacityRatio): 8 numbers in [0, 1], comma-separated, in the order of "
        "clusteremu.tuners.domains.WEIGHT_NAMES",
    )
    p.add_argument("--address", help="join this Ray cluster instead of starting one")
    p.add_argument(
        "--out",
        help="folder for experiments.parquet, tune.json, tune.png, out-of-sample.md, trials/",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_tune, out_command="tune")

    t = sub.add_parser(
        "train-rl", help="train the RL weight tuner (SAC or RecurrentPPO) and save it"
    )
    t.add_argument(
        "--steps",
        type=int,
        default=DEFAULT_RL_STEPS,
        help=f"environment steps to train (default {DEFAULT_RL_STEPS:,})",
    )
    t.add_argument(
        "--algorithm",
        default="recurrent-ppo",
        help="recurrent-ppo (an LSTM, the paper's recurrent variant; default) or sac (a frame "
        "stack, the paper's main agent)",
    )
    t.add_argument("--out", required=True, help="model file to write (an SB3 .zip)")
    t.add_argument("--envs", type=int, default=2, help="parallel environments (default 2)")
    t.add_argument("--domain", default="train", help="domain to train on (default train)")
    t.add_argument("--budget", type=int, default=5, help="evaluations per experiment")
    t.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    t.add_argument(
        "--net-arch",
        default="256,256",
        help="hidden layer sizes of the policy and value networks (default 256,256; the "
        "paper's 512,512,512 costs 4.7x more per gradient step)",
    )
    t.add_argument("--json", action="store_true", help="print the training report as JSON")
    t.set_defaults(func=cmd_train_rl)


# --- tune --------------------------------------------------------------------------------------


def _check_tune_args(args: argparse.Namespace) -> list[str]:
    from clusteremu.cli import UsageError, check_out
    from clusteremu.scenarios import option_checks
    from clusteremu.tuners.domains import DOMAINS
    from clusteremu.tuners.strategies import STRATEGIES

    tuners = option_checks.name_list(args.tuner, "--tuner", list(STRATEGIES))
    option_checks.count(args.budget, "--budget")
    option_checks.count(args.experiments, "--experiments")
    option_checks.count(args.repeats, "--repeats")
    option_checks.count(args.test_seeds, "--test-seeds", minimum=0, maximum=1000)
    option_checks.seed(args.seed)
    ablation_searches = int(_needs_random_ablation(args, tuners)) + 2 * int(
        _needs_rl_ablations(args, tuners)
    )
    _check_trials(args, len(tuners) + ablation_searches)
    option_checks.workers(args.workers, local=not args.address)
    if args.domain is not None and args.domain not in DOMAINS:
        raise UsageError(
            f"--domain: unknown domain {args.domain!r}; expected one of {', '.join(DOMAINS)}"
        )
    if args.set and not args.scenario:
        raise UsageError("--set: only with --scenario")
    if "rl" in tuners:
        if not args.model:
            raise UsageError("--tuner rl: needs --model MODEL (a zip from `clusteremu train-rl`)")
        if args.budget < 2:
            raise UsageError("--tuner rl: needs --budget 2 or more")
    elif args.model:
        raise UsageError("--model: only with --tuner rl")
    if args.weights is not None:
        from clusteremu.tuners.domains import parse_weights

        if tuners != ["fixed"]:
            raise UsageError("--weights: only with --tuner fixed")
        try:
            args.weights = parse_weights(args.weights)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    if "bo" in tuners:
        try:
            import torch  # noqa: F401
        except ImportError:
            raise UsageError(
                "--tuner bo: Optuna's GPSampler needs torch: pip install -e '.[rl]'"
            ) from None
    check_out(args, "tune")
    return tuners


def _needs_random_ablation(args: argparse.Namespace, tuners: list[str]) -> bool:
    """True when random search must run as the out-of-sample ablation (not a tuner)."""
    return args.test_seeds > 0 and "random" not in tuners


def _needs_rl_ablations(args: argparse.Namespace, tuners: list[str]) -> bool:
    """True when the RL tuner's untrained agent and constant must be searched (judged out
    of sample, `clusteremu.tuners.ablations`)."""
    return args.test_seeds > 0 and "rl" in tuners


def _check_trials(args: argparse.Namespace, tuners: int) -> None:
    """Refuse, before Ray starts, more trials (experiments x budget per tuner) than the
    driver can hold; the message names the larger of --experiments and --budget."""
    from clusteremu.scenarios import option_checks

    flag = "--budget" if args.budget > args.experiments else "--experiments"
    trials = float(args.experiments) * args.budget * tuners
    what = (
        f"trials ({args.experiments:,} experiments x {args.budget:,} evaluations x "
        f"{tuners} tuner(s))"
    )
    option_checks.fits_memory(trials, option_checks.BYTES_PER_TRIAL, flag, what)


def cmd_tune(args: argparse.Namespace) -> int:
    from clusteremu.actors.launch import ensure_ray, stop_ray
    from clusteremu.cluster.errors import UsageError
    from clusteremu.tuners.domains import placer_block, sample_configs
    from clusteremu.tuners.evaluate import experiment_from_config, experiment_from_file

    tuners = _check_tune_args(args)
    agent_options: dict[str, Any] = {}
    if "rl" in tuners:
        from clusteremu.tuners.rl import ModelError, load_agent

        try:
            agent = load_agent(args.model)
        except ModelError as exc:
            raise UsageError(f"--model: {exc}") from None
        except ValueError as exc:  # the rl extra is missing
            raise UsageError(str(exc)) from None
        if agent.budget != args.budget:
            raise UsageError(
                f"--budget {args.budget}: the agent in {args.model} was trained for a budget "
                f"of {agent.budget}"
            )
        agent_options["model"] = args.model
        agent_options["agent"] = agent
    if args.scenario:
        experiments = [experiment_from_file(args.scenario, args.set)]
    else:
        domain = args.domain or "train"
        experiments = [
            experiment_from_config(c) for c in sample_configs(domain, args.experiments, args.seed)
        ]
    started = ensure_ray(args.address, num_cpus=None if args.address else max(args.workers, 1))
    try:
        results = _run_all(args, tuners, experiments, agent_options)
    finally:
        stop_ray(started)
    if args.json:
        summaries = {t: r.summary() for t, r in results.items()}
        print(to_json(summaries[tuners[0]] if len(tuners) == 1 else {"tuners": summaries}))
    else:
        _print_table(results, experiments)
        if args.out:
            out = Path(args.out)
            files = ["experiments.parquet", "tune.json", "tune.png"]
            files += ["out-of-sample.md"] if args.test_seeds > 0 else []
            files += ["placer.yaml"] if args.scenario else []
            print(f"wrote {', '.join(str(out / f) for f in files)} and {out / 'trials'}/")
    if args.scenario:
        best = max(results.values(), key=lambda r: r.outcomes[0].best_score).outcomes[0]
        print(
            f"# best weights for {args.scenario} (score {best.best_score:.4f}, Fixed "
            f"{best.fixed_score:.4f}):",
            file=sys.stderr,
        )
        print(
            placer_block(best.best_weights, _other_params(experiments[0])), file=sys.stderr, end=""
        )
    return 0


#: The trials folder of random search run only as the out-of-sample ablation.
RANDOM_ABLATION = "random-ablation"
#: The trials folders of the RL tuner's untrained agent and constant (the ablations).
UNTRAINED_ABLATION = "rl-untrained"
CONSTANT_ABLATION = "rl-constant"


def _run_all(
    args: argparse.Namespace,
    tuners: list[str],
    experiments: list[Any],
    agent_options: dict[str, Any],
) -> dict[str, Any]:
    from clusteremu.cluster.io import output_folder
    from clusteremu.tuners.tuning import run_tuning

    judged: list[Any] = []
    ablations: list[Any] = []
    rl_ablations: dict[str, Any] = {}

    def search(
        tuner: str, storage: Path | None, folder: str, options: dict[str, Any] | None = None
    ) -> Any:
        label = f"tune {tuner}" if folder == tuner else f"tune {folder} (ablation)"
        with Progress(label, unit="evaluations") as shown:
            result = run_tuning(
                experiments,
                tuner,
                args.budget,
                seed=args.seed,
                workers=args.workers,
                repeats=args.repeats,
                storage=None if storage is None else storage / folder,
                strategy_options=_options(tuner, args, agent_options)
                if options is None
                else options,
                progress=_counts(shown),
            )
        if result.failures:
            print(
                f"{tuner}: {len(result.failures)} evaluation(s) failed: {result.failures[0]}",
                file=sys.stderr,
            )
        return result

    def run(storage: Path | None) -> dict[str, Any]:
        out = {tuner: search(tuner, storage, tuner) for tuner in tuners}
        if args.test_seeds > 0:
            if _needs_random_ablation(args, tuners):
                ablations.append(search("random", storage, RANDOM_ABLATION))
            ablation = ablations[0] if ablations else out["random"]
            own: dict[str, Any] = {}
            if _needs_rl_ablations(args, tuners):
                own["rl"], info = _rl_ablations(out["rl"], search, storage, agent_options, args)
                rl_ablations.update(info)
            judged.append(_judge_out_of_sample(out, ablation, experiments, args, own))
        return out

    if not args.out:
        return run(None)
    label = args.scenario or f"{args.domain or 'train'} domain"
    with output_folder(args.out, "tune", label=label) as stage:
        results = run(stage / "trials")
        import pyarrow as pa

        write_parquet(
            pa.concat_tables([r.table() for r in results.values()], promote_options="default"),
            stage / "experiments.parquet",
        )
        write_json(
            {
                "command": "tune",
                "tuners": {t: r.summary() for t, r in results.items()},
                "domain": None if args.scenario else (args.domain or "train"),
                "scenario": args.scenario,
                "seed": args.seed,
                "budget": args.budget,
                "repeats": args.repeats,
                "test_seeds": args.test_seeds,
                # random search run only as the out-of-sample ablation: its in-sample summary
                "random_search_ablation": ablations[0].summary() if ablations else None,
                # the RL tuner's untrained agent and constant (their in-sample summaries)
                "rl_ablations": rl_ablations or None,
            },
            stage / "tune.json",
        )
        _plot(results, stage / "tune.png")
        if judged:
            reports = [judged[0].reports[t].to_table() for t in results]
            (stage / "out-of-sample.md").write_text("\n".join(reports), encoding="utf-8")
        if args.scenario:
            from clusteremu.tuners.domains import placer_block

            best = max(results.values(), key=lambda r: r.outcomes[0].best_score).outcomes[0]
            (stage / "placer.yaml").write_text(
                f"# clusteremu tune --scenario {args.scenario}: best score "
                f"{best.best_score:.4f} (Fixed {best.fixed_score:.4f})\n"
                + placer_block(best.best_weights, _other_params(experiments[0]))
            )
    return results


def _rl_ablations(
    result: Any,
    search: Any,
    storage: Path | None,
    agent_options: dict[str, Any],
    args: argparse.Namespace,
) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """The RL tuner's own ablations (`clusteremu.tuners.ablations`): the untrained agent's
    search at the same budget, the constant (the agent's mean first proposal over its
    training domain's configurations) run on each experiment's search seed, and the search
    cut to its first proposal. Returns each one's best weights per experiment and what
    ``tune.json`` records about them."""
    from clusteremu.tuners import ablations as ab

    agent = agent_options["agent"]
    untrained = search(
        "rl",
        storage,
        UNTRAINED_ABLATION,
        {"model": agent_options["model"], "untrained": True},
    )
    domain = str(agent.meta.get("domain", "train"))
    configs = ab.constant_configs(domain, ab.CONSTANT_CONFIGS, args.seed)
    constant = ab.constant_weights(agent, configs)
    runs = search("fixed", storage, CONSTANT_ABLATION, {"weights": constant})
    weights = {
        ab.UNTRAINED: [o.best_weights for o in untrained.outcomes],
        ab.CONSTANT: [
            ab.better_of(o.fixed_score, constant, c.scores[0])
            for o, c in zip(result.outcomes, runs.outcomes, strict=True)
        ],
        ab.FIRST_PROPOSAL: [ab.first_proposal_best(o.tried, o.scores) for o in result.outcomes],
    }
    info = {
        "untrained_search": untrained.summary(),
        "untrained_seed": int(agent.meta.get("seed", 0)),
        "constant_weights": list(constant),
        "constant_from": {
            "domain": domain,
            "configurations": len(configs),
            "configuration_seed": configs[0].seed if configs else None,
            "split": ab.CONSTANT_SPLIT,
        },
        "constant_search_seed_scores": [c.scores[0] for c in runs.outcomes],
    }
    return weights, info


def _judge_out_of_sample(
    results: dict[str, Any],
    ablation: Any,
    experiments: list[Any],
    args: argparse.Namespace,
    own: dict[str, dict[str, list[Any]]] | None = None,
) -> Any:
    """Each tuner's best weights against Fixed, random search (`ablation`, the same
    budget) and its own ablations (`own`: the RL tuner's) on --test-seeds fresh seeds and
    clusters per experiment, scored once (`clusteremu.tuners.out_of_sample`); each summary
    stored on its result, the verdicts returned."""
    from clusteremu.tuners.out_of_sample import judge

    best = {t: [o.best_weights for o in r.outcomes] for t, r in results.items()}
    random_best = [o.best_weights for o in ablation.outcomes]
    with Progress("tune out of sample", unit="runs") as shown:
        judged = judge(
            experiments,
            best,
            random_best,
            args.seed,
            args.test_seeds,
            args.repeats,
            _counts(shown),
            ablations=own,
            domain=None if args.scenario else (args.domain or "train"),
        )
    for tuner in results:
        results[tuner].out_of_sample = judged.summary(tuner)
    return judged


def _other_params(experiment: Any) -> dict[str, Any]:
    """The scenario's scoring-placer parameters other than the weights (kept in the block)."""
    placer = (experiment.data.get("scheduler") or {}).get("placer") or {}
    return {k: v for k, v in (placer.get("params") or {}).items() if k != "weights"}


def _options(tuner: str, args: argparse.Namespace, agent: dict[str, Any]) -> dict[str, Any]:
    if tuner == "rl":
        return {"model": agent["model"]}
    if tuner == "fixed" and args.weights is not None:
        return {"weights": args.weights}
    return {}


def _counts(shown: Progress) -> Any:
    """`run_tuning`'s progress(done, total) on the one progress convention."""

    def update(done: int, total: int) -> None:
        shown.update(done=done, total=total)

    return update


def _print_table(results: dict[str, Any], experiments: list[Any]) -> None:
    tuners = list(results)
    head = "".join(f"{t:>10}" for t in tuners)
    print(f"{'experiment':<18}{'Fixed':>8}{head}   (best score; improvement over Fixed)")
    for i, exp in enumerate(experiments):
        fixed = results[tuners[0]].outcomes[i].fixed_score
        cells = "".join(f"{results[t].outcomes[i].best_score:>10.4f}" for t in tuners)
        print(f"{exp.name:<18}{fixed:>8.4f}{cells}")
        if len(experiments) <= 20 and exp.row.get("setup"):
            cfg = exp.row
            print(
                f"  {cfg['setup']}/{cfg['topology']} {cfg['nodes']} nodes, "
                f"{len(str(cfg['functions']).split(','))} functions at {cfg['rate_per_s']:g}/s"
            )
    print()
    head = f"{'tuner':<8}{'mean best':>10}{'mean Fixed':>11}{'in sample':>13}"
    print(
        f"{head}{'ci95':>8}{'out of sample':>15}{'ci95':>8}{'vs random':>11}{'learned':>9}"
        f"{'wall s':>8}"
    )
    for t, r in results.items():
        s = r.summary()
        print(
            f"{t:<8}{s['mean_best_score']:>10.4f}{s['mean_fixed_score']:>11.4f}"
            f"{100 * s['mean_improvement_over_fixed']:>12.2f}%{_percent(s['ci95']):>8}"
            f"{_fresh_cells(s.get('out_of_sample'))}{s['wall_s']:>8.1f}"
        )
    judged = [r.summary()["out_of_sample"] for r in results.values() if r.out_of_sample]
    if judged:
        print(
            "in sample (used for selection): improvement over Fixed on the seed the search ran "
            f"on; out of sample: the same weights on {judged[0]['seeds']} fresh seed(s) per "
            "experiment from the protocol's test split (new arrivals and, where the scenario "
            "generates it, a new cluster), scored once; vs random: out of sample minus random "
            "search at the same budget (paired over experiments; * when its 95% interval "
            "excludes 0); learned: paired intervals above 0 against Fixed and random search "
            "(rl: against its untrained agent and its constant)"
        )
    for t, r in results.items():
        if r.out_of_sample and "first_proposal" in r.out_of_sample:
            _print_ablations(t, r.out_of_sample)


def _print_ablations(tuner: str, oos: dict[str, Any]) -> None:
    """A learned tuner's ablations out of sample: mean difference with its interval, median
    difference and Wilcoxon p against each, and the first proposal's share of the gain."""
    print()
    print(
        f"{tuner} out of sample against its ablations (paired over experiments, {tuner} minus "
        "ablation; mean [95% CI], median, Wilcoxon signed-rank p):"
    )
    for name, a in oos["ablations"].items():
        low, high = a["interval"]
        interval = "n/a" if low is None or high is None else f"[{_pp(low)}, {_pp(high)}]"
        median = "n/a" if a["median_difference"] is None else _pp(a["median_difference"])
        p = "n/a" if a["wilcoxon_p"] is None else f"{a['wilcoxon_p']:.3g}"
        print(
            f"  {name:<28}{_pp(a['mean_difference']):>9} {interval:<22} median {median:>8}"
            f"  p {p:<7} {a['verdict']}"
        )
    first = oos["first_proposal"]
    share = first["share_of_gain"]
    share_words = "n/a" if share is None else f"{100 * share:.0f}%"
    later = first["later_proposals_add"]
    print(
        f"  the first proposal alone: {_pp(first['mean_improvement_over_fixed'])} of "
        f"{_pp(oos['mean_improvement_over_fixed'])} (share {share_words}); the later "
        f"proposals add {_pp(later['mean_difference'])}"
    )
    against = " and ".join(oos["learned_against"])
    print(
        f"  learned something: {'yes' if oos['learned_something'] else 'no'} (needs paired "
        f"intervals above 0 against {against})"
    )


def _pp(fraction: float) -> str:
    """A fraction as signed percentage points."""
    return f"{100 * fraction:+.2f}%"


def _fresh_cells(oos: dict[str, Any] | None) -> str:
    """The out-of-sample columns of the table: mean, ci95, vs random, learned."""
    if not oos:
        return f"{'-':>15}{'':>8}{'':>11}{'':>9}"
    versus = oos["vs_random_search"]
    star = "*" if versus["verdict"] in ("better", "worse") else ""
    difference = f"{100 * versus['mean_difference']:+.2f}%{star}"
    return (
        f"{100 * oos['mean_improvement_over_fixed']:>14.2f}%{_percent(oos['ci95']):>8}"
        f"{difference:>11}{'yes' if oos['learned_something'] else 'no':>9}"
    )


def _percent(fraction: float) -> str:
    """A fraction as a percentage, `n/a` for NaN (an interval from one experiment)."""
    return "n/a" if fraction != fraction else f"{100 * fraction:.2f}%"


def _plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig = _figure(results)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _figure(results: dict[str, Any]) -> Any:
    """tune.png's figure: each experiment's improvement, and the mean improvement per
    tuner with its 95% interval drawn only where the table has one (none from one
    experiment: the table's n/a is no error bar here either)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from clusteremu.cluster.plotting import scale_axis

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    plotted = []
    for t, r in results.items():
        imp = 100 * r.improvements()
        plotted += list(imp)
        ax.plot(range(len(imp)), imp, marker="o", linestyle="", label=t)
    ax.axhline(0.0, color="grey", linewidth=0.8)
    scale_axis(ax, plotted)  # log (symlog) when the improvements span more than 10x
    ax.set_xlabel("experiment")
    ax.set_ylabel("best score vs Fixed (%)")
    ax.legend()
    names = list(results)
    summaries = [results[t].summary() for t in names]
    x = np.arange(len(names))
    width = 0.38
    plotted_means: list[float] = []
    intervals = 0
    for offset, key, label, color in (
        (-width / 2, None, "in sample (selected on)", "tab:blue"),
        (width / 2, "out_of_sample", "out of sample (fresh seeds)", "tab:orange"),
    ):
        parts = [s if key is None else s.get(key) for s in summaries]
        if any(p is None for p in parts):
            continue
        means = [100 * p["mean_improvement_over_fixed"] for p in parts]
        errs = [100 * p["ci95"] for p in parts]
        bx.bar(x + offset, means, width, color=color, label=label)
        has = [i for i, e in enumerate(errs) if e == e]  # NaN: one experiment, no interval
        if has:
            bx.errorbar(
                [x[i] + offset for i in has],
                [means[i] for i in has],
                yerr=[errs[i] for i in has],
                fmt="none",
                ecolor="black",
                capsize=4,
            )
            intervals += len(has)
        plotted_means += means
    bx.set_xticks(x, names)
    bx.axhline(0.0, color="grey", linewidth=0.8)
    scale_axis(bx, plotted_means)
    bx.legend()
    bx.set_ylabel(
        "mean improvement over Fixed (%)"
        + (", 95% interval" if intervals else " (one experiment: no interval)")
    )
    fig.tight_layout()
    return fig


# --- train-rl ----------------------------------------------------------------------------------

#: `train-rl`'s default steps: 3,000 experiments at budget 5 (docs/tuning.md: the time it
#: takes on 2 cores).
DEFAULT_RL_STEPS = 12_000


#: Bytes one network parameter costs while SAC trains: float32 weights, gradients and Adam's
#: two moments (the critics' target copies are counted as networks of their own).
BYTES_PER_PARAMETER = 16


def _mlp_parameters(sizes: list[int]) -> float:
    """Weights and biases of a fully connected network with these layer sizes."""
    return float(sum((a + 1) * b for a, b in zip(sizes, sizes[1:], strict=False)))


def _check_training_memory(args: argparse.Namespace, net_arch: list[int]) -> None:
    """Refuse, before training, a replay buffer (--steps, --budget) or networks (--net-arch)
    that cannot fit in memory: SAC keeps every step's observation pair, and an actor and
    two critics with their target copies."""
    from clusteremu.scenarios import option_checks
    from clusteremu.tuners.domains import WEIGHT_NAMES
    from clusteremu.tuners.rl import observation_size

    obs, act = observation_size(args.budget), len(WEIGHT_NAMES)
    per_step = 4.0 * (2 * obs + act + 3)  # float32 observations, action, reward, flags
    flag = "--budget" if obs * 1000 > max(args.steps, 1000) else "--steps"
    what = f"replay buffer steps of {obs:,} observations (--budget {args.budget})"
    option_checks.fits_memory(max(args.steps, 1000), per_step, flag, what)
    actor = _mlp_parameters([obs, *net_arch, 2 * act])
    critics = 4 * _mlp_parameters([obs + act, *net_arch, 1])  # two critics, two targets
    option_checks.fits_memory(
        actor + critics, BYTES_PER_PARAMETER, "--net-arch", "network parameters"
    )


def cmd_train_rl(args: argparse.Namespace) -> int:
    from clusteremu.cluster.errors import UsageError
    from clusteremu.scenarios import option_checks
    from clusteremu.tuners.domains import DOMAINS

    option_checks.count(args.steps, "--steps")
    option_checks.workers(args.envs, "--envs")
    if args.budget < 2:
        raise UsageError(f"--budget: the RL tuner needs at least 2 evaluations, got {args.budget}")
    option_checks.seed(args.seed)
    if args.domain not in DOMAINS:
        raise UsageError(
            f"--domain: unknown domain {args.domain!r}; expected one of {', '.join(DOMAINS)}"
        )
    from clusteremu.tuners.rl import ALGORITHMS

    if args.algorithm not in ALGORITHMS:
        raise UsageError(
            f"--algorithm: unknown algorithm {args.algorithm!r}; expected one of "
            f"{', '.join(ALGORITHMS)}"
        )
    net_arch = option_checks.layer_sizes(args.net_arch)
    _check_training_memory(args, net_arch)
    from clusteremu.tuners.domains import REPORTED_DOMAIN, SELECTION_DOMAIN

    if args.domain in (SELECTION_DOMAIN, REPORTED_DOMAIN):
        print(
            f"warning: --domain {args.domain}: training on a held-out domain; an agent "
            f"trained there cannot be judged on it as novel (docs/tuning.md, the domains)",
            file=sys.stderr,
        )
    out = Path(args.out)
    if out.suffix != ".zip":
        raise UsageError(f"--out {out}: the model is an SB3 zip; name it MODEL.zip")
    if out.is_dir():
        raise UsageError(f"--out {out}: is a folder; expected a file name")
    parent = out.absolute().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"--out {out}: cannot create {parent} ({err.strerror})") from None
    if not os.access(parent, os.W_OK):
        raise UsageError(f"--out {out}: cannot write into {parent}")
    from clusteremu.tuners.rl import require_rl, train_agent

    try:
        require_rl()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    shown = Progress("train-rl", total=args.steps, unit="steps")

    def progress(step: int, episodes: int, mean_reward: float) -> None:
        shown.update(
            done=min(step, args.steps),
            note=f"{episodes} episodes, mean reward (last 100) {mean_reward:.4f}",
        )

    with tempfile.TemporaryDirectory(prefix=".train-rl-", dir=parent) as tmp:
        staged = Path(tmp) / out.name
        try:
            report = train_agent(
                args.steps,
                staged,
                envs=args.envs,
                seed=args.seed,
                domain_name=args.domain,
                budget=args.budget,
                net_arch=net_arch,
                learning_starts=min(200, max(args.steps // 4, 1)),
                progress=progress,
                algorithm=args.algorithm,
            )
        except BaseException:
            shown.close(finished=False)
            raise
        shown.close()
        os.replace(staged, out)
    result = {
        "model": str(out),
        "steps": report.steps,
        "episodes": report.episodes,
        "mean_reward_last_100": report.mean_reward_last_100,
        "wall_s": round(report.wall_s, 3),
        "learning_curve": [round(r, 4) for r in report.curve],
        "algorithm": args.algorithm,
        "net_arch": net_arch,
        "domain": args.domain,
        "budget": args.budget,
    }
    if args.json:
        print(to_json(result))
    else:
        print(
            f"trained {report.steps} steps ({report.episodes} experiments) in "
            f"{report.wall_s:.1f} s; mean reward of the last 100 (percentage improvement over "
            f"the fixed weights): {100 * report.mean_reward_last_100:.2f}%"
        )
        print(f"wrote {out}")
    return 0
