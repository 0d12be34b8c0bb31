"""Tuned weights judged out of sample, through the evaluation protocol
(`clusteremu.tuners.protocol`).

A search tunes each experiment on the experiment's own seed: its best score is the best of
its budget on that very seed, an in-sample figure that selected the weights. Here the best
weights of every experiment are run again, with the Fixed weights, on fresh seeds the search
never saw, drawn from the protocol's "test" split (`instance_seed(seed, "test", i)`). A
fresh seed is new arrivals and execution times and, for a scenario that generates its
cluster (every domain experiment), a new cluster: ``cluster.generator.seed`` is set to it
too (`on_seed`), the same configuration drawn again (the domains sample each node's device,
`clusteremu.tuners.domains`). The search's seeds (each experiment's scenario `seed:` and
cluster seed; `--repeats` replications are streams spawned from it) come from another
stream, so a coincidence is all but impossible; it is still checked: a fresh seed equal to
a search seed is dropped and redrawn from the next index, and the count is reported (the
protocol's `Overlap`).

The test instances are the experiments. The test set is scored once (`TestSet`): every
policy on every experiment and fresh seed in one go. A policy's value on an experiment is
the mean over the fresh seeds of (score - Fixed) / Fixed, a fraction; the figure reported
is the mean over experiments with its 95% Student-t interval over experiments (seeds of one
experiment share its configuration, so they are averaged first, not counted as independent
instances), with the median and, against every other policy, the paired median and
Wilcoxon's signed-rank p beside it. Every tuner is the method of its own `Comparison`, with
the other tuners as baselines and these ablations:

- ``Fixed``: the Fixed weights themselves, improvement 0 by definition;
- ``random search``: random search at the same budget on the same experiments (the
  trivial tuner);
- for an RL tuner, its own (`clusteremu.tuners.ablations`): ``<tuner>: untrained agent``
  (the same network with 0 steps), ``<tuner>: constant`` (its mean first proposal over
  training-domain configurations, no conditioning) and ``<tuner>: first proposal only``
  (its search cut to the first proposal: the first proposal's share of the gain).

"Learned something" (`learned_against`) needs a paired interval above 0 against each of
the untrained agent and the constant for an RL tuner, against Fixed and random search for
any other (random search ties with itself and so never learns; the Fixed weights score
exactly 0). Against Fixed alone an untrained network would pass by luck.

The same fresh seeds serve every policy (paired), and every (weights, experiment, seed) is
run once. Runs go to Ray (one CPU each) when Ray is initialised, else run in this process.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from clusteremu.tuners.ablations import CONSTANT, FIRST_PROPOSAL, LEARNED_AGAINST, UNTRAINED
from clusteremu.tuners.domains import (
    DEFAULT_TEST_SEEDS,
    FIXED,
    REPORTED_DOMAIN,
    ROLES,
    SELECTION_DOMAIN,
)
from clusteremu.tuners.evaluate import Experiment, evaluate
from clusteremu.tuners.protocol import (
    REPORTED_SPLIT,
    Report,
    Row,
    Scores,
    Splits,
    TestSet,
    equivalence_report,
    instance_seed,
)

#: The protocol split the fresh seeds come from.
TEST_SPLIT = REPORTED_SPLIT
#: The ablation rows of every tuner's comparison: the Fixed weights and random search.
FIXED_POLICY = "Fixed"
RANDOM_POLICY = "random search"
#: The per-instance value every comparison is about.
METRIC = "improvement over Fixed on the fresh seeds (fraction; mean over seeds per experiment)"

Weights = tuple[float, ...]
#: Domains whose fresh-seed figures are held out: the test domain and the paper's own.
HELD_OUT_DOMAINS = (REPORTED_DOMAIN, "paper-test")


def search_seed(experiment: Experiment) -> int:
    """The seed the search ran the experiment on (its scenario's `seed:`)."""
    return int(experiment.data.get("seed", 0))


def _generator(data: Mapping[str, Any]) -> dict[str, Any] | None:
    """The scenario's ``cluster.generator`` block, None when its nodes are listed."""
    cluster = data.get("cluster")
    generator = cluster.get("generator") if isinstance(cluster, dict) else None
    return generator if isinstance(generator, dict) else None


def cluster_seed(experiment: Experiment) -> int | None:
    """The seed the search's cluster was generated from (``cluster.generator.seed``), None
    for a scenario whose nodes are listed (there is no cluster to redraw)."""
    generator = _generator(experiment.data)
    return None if generator is None else int(generator.get("seed", 0))


def fresh_seeds(seed: int, count: int, used: set[int]) -> tuple[list[int], int]:
    """`count` seeds of the test split under `seed`, skipping any seed in `used` (the
    search's own); returns them and how many were skipped."""
    seeds: list[int] = []
    skipped = 0
    i = 0
    while len(seeds) < count:
        s = instance_seed(seed, TEST_SPLIT, i)
        i += 1
        if s in used or s in seeds:
            skipped += 1
            continue
        seeds.append(s)
    return seeds, skipped


def on_seed(experiment: Experiment, seed: int) -> Experiment:
    """The experiment with its scenario run on `seed` instead of its own: new arrivals and
    execution times and, when the scenario generates its cluster, a new cluster drawn from
    `seed` (``cluster.generator.seed``; the same configuration, other nodes)."""
    data = {**experiment.data, "seed": int(seed)}
    generator = _generator(data)
    if generator is not None:
        data["cluster"] = {**data["cluster"], "generator": {**generator, "seed": int(seed)}}
    return dataclasses.replace(experiment, data=data)


def _score(experiment: Experiment, weights: Sequence[float], repeats: int) -> float:
    return float(evaluate(experiment, list(weights), repeats).score)


def ablation_name(tuner: str, ablation: str) -> str:
    """The policy name of one of a tuner's own ablations in the reports ("rl: constant")."""
    return f"{tuner}: {ablation}"


def learned_against(tuner: str, own: Sequence[str]) -> tuple[str, ...]:
    """The ablations `tuner` must beat to have learned something: an RL tuner's untrained
    agent and constant (`clusteremu.tuners.ablations.LEARNED_AGAINST`) when it has them, else
    Fixed and random search at the same budget (the trivial tuner: a search that does not
    beat it learnt nothing from its scores; random search ties with itself)."""
    if all(a in own for a in LEARNED_AGAINST):
        return tuple(ablation_name(tuner, a) for a in LEARNED_AGAINST)
    return (FIXED_POLICY, RANDOM_POLICY)


@dataclass(frozen=True)
class Judged:
    """Every policy on the fresh seeds: `scores[policy][e, s]` is the score of experiment e
    on seed s (higher is better), `Fixed` among them; `report[tuner]` is the protocol's
    report with that tuner as the method. `clusters_redrawn`: experiments whose cluster
    each fresh seed redraws (those with a cluster generator)."""

    seed: int
    seeds: tuple[int, ...]
    search_seeds: tuple[int, ...]
    skipped: int
    scores: Mapping[str, npt.NDArray[np.float64]]
    reports: Mapping[str, Report]
    clusters_redrawn: int = 0
    domain: str | None = None

    def improvements(self, policy: str) -> npt.NDArray[np.float64]:
        """Each experiment's mean over the fresh seeds of (score - Fixed) / Fixed."""
        fixed = self.scores[FIXED_POLICY]
        return np.asarray(((self.scores[policy] - fixed) / fixed).mean(axis=1))

    def summary(self, tuner: str) -> dict[str, Any]:
        """The ``out_of_sample`` object of `tuner` in ``tune --json`` (fractions)."""
        report = self.reports[tuner]
        method = report.test.method
        ablations = {r.policy: _paired(r) for r in report.test.rows if r.role == "ablation"}
        out: dict[str, Any] = {
            "label": "out of sample (fresh seeds and clusters, scored once)",
            "held_out": report.scope is None,
            "reported_as": report.label,
            "domain": self.domain,
            "domain_role": None if self.domain is None else ROLES.get(self.domain),
            "mean_improvement_over_fixed": float(method.mean.estimate),
            "median_improvement_over_fixed": method.median,
            "ci95": _half_width(method.mean.low, method.mean.high),
            "interval": [_finite(method.mean.low), _finite(method.mean.high)],
            "interval_over": "experiments (each the mean of its fresh seeds)",
            "experiments": int(report.test.n),
            "seeds": len(self.seeds),
            "test_seeds": list(self.seeds),
            "test_split": TEST_SPLIT,
            "search_seeds": list(self.search_seeds),
            "seeds_equal_to_a_search_seed_skipped": self.skipped,
            "clusters_redrawn": self.clusters_redrawn,
            "learned_something": bool(report.learned_all),
            "learned_against": [v.ablation for v in report.verdicts],
            "vs_random_search": ablations[RANDOM_POLICY],
            "ablations": ablations,
        }
        first = ablation_name(tuner, FIRST_PROPOSAL)
        if first in ablations:
            out["first_proposal"] = _first_proposal_share(report, first)
        out["report"] = report.to_dict()
        return out


def _paired(row: Row) -> dict[str, Any]:
    """Method - `row` over experiments: mean with interval, verdict, median, Wilcoxon p."""
    assert row.paired is not None
    return {
        "mean_difference": float(row.paired.estimate),
        "interval": [_finite(row.paired.low), _finite(row.paired.high)],
        "verdict": row.verdict,
        "median_difference": row.paired_median,
        "wilcoxon_p": row.rank_p,
    }


def _first_proposal_share(report: Report, first: str) -> dict[str, Any]:
    """The first proposal alone (the search cut to it) against the whole search: its own
    improvement, its share of the search's (None unless the search gained), and what the
    later proposals add (the whole search minus the first proposal alone, paired)."""
    alone = report.test.row(first)
    total = float(report.test.method.mean.estimate)
    return {
        "mean_improvement_over_fixed": float(alone.mean.estimate),
        "interval": [_finite(alone.mean.low), _finite(alone.mean.high)],
        "median_improvement_over_fixed": alone.median,
        "share_of_gain": float(alone.mean.estimate) / total if total > 0 else None,
        "later_proposals_add": _paired(alone),
    }


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _half_width(low: float, high: float) -> float:
    """(high - low) / 2; NaN (null in JSON, `n/a` printed) for an unbounded interval."""
    return (high - low) / 2.0 if math.isfinite(low) and math.isfinite(high) else math.nan


def judge(
    experiments: Sequence[Experiment],
    best_weights: Mapping[str, Sequence[Weights]],
    random_weights: Sequence[Weights],
    seed: int,
    count: int = DEFAULT_TEST_SEEDS,
    repeats: int = 1,
    progress: Callable[[int, int], None] | None = None,
    ablations: Mapping[str, Mapping[str, Sequence[Weights]]] | None = None,
    domain: str | None = None,
) -> Judged:
    """Every tuner's best weights (`best_weights[tuner][e]` for experiment e), random
    search's (`random_weights[e]`, same budget), Fixed and each tuner's own ablations
    (`ablations[tuner][name][e]`, e.g. an RL tuner's untrained agent and constant,
    `clusteremu.tuners.ablations`) on `count` fresh seeds per experiment -- each seed new
    arrivals and, where the scenario generates it, a new cluster -- scored once; one run per
    distinct (weights, experiment, seed). `domain` names the experiments' domain (None: a
    scenario file) for the report."""
    if count < 1:
        raise ValueError(f"test seeds: expected at least 1, got {count}")
    own = {t: dict(a) for t, a in (ablations or {}).items()}
    unknown = sorted(set(own) - set(best_weights))
    if unknown:
        raise ValueError(f"ablations of {unknown}: not among the tuners {sorted(best_weights)}")
    extra = {ablation_name(t, a): w for t, named in own.items() for a, w in named.items()}
    clash = ({FIXED_POLICY, RANDOM_POLICY} | set(extra)) & set(best_weights)
    if clash:
        raise ValueError(f"tuner names {sorted(clash)} are taken by the ablation rows")
    used = [search_seed(e) for e in experiments]
    clusters = [c for c in (cluster_seed(e) for e in experiments) if c is not None]
    seeds, skipped = fresh_seeds(seed, count, set(used) | set(clusters))
    policies: dict[str, Sequence[Weights]] = {
        **best_weights,
        FIXED_POLICY: [tuple(FIXED)] * len(experiments),
        RANDOM_POLICY: random_weights,
        **extra,
    }
    for name, weights in policies.items():
        if len(weights) != len(experiments):
            raise ValueError(
                f"policy {name!r}: {len(weights)} weight vectors for {len(experiments)} experiments"
            )
    raw: dict[str, npt.NDArray[np.float64]] = {}

    def scorer(instances: tuple[int, ...]) -> dict[str, npt.NDArray[np.float64]]:
        raw.update(_run_policies(experiments, instances, policies, seeds, repeats, progress))
        fixed = raw[FIXED_POLICY]
        return {p: ((s - fixed) / fixed).mean(axis=1) for p, s in raw.items()}

    scores = TestSet(range(len(experiments)), split=TEST_SPLIT).score(scorer)
    overlap = dataclasses.replace(
        equivalence_report(used, seeds, split=TEST_SPLIT), dropped=skipped
    )
    context = _Context(seed, len(experiments), overlap, len(seeds), len(clusters), domain)
    reports = {
        t: _report(t, scores, list(best_weights), own.get(t, {}), list(extra), context)
        for t in best_weights
    }
    return Judged(seed, tuple(seeds), tuple(used), skipped, raw, reports, len(clusters), domain)


@dataclass(frozen=True)
class _Context:
    """What every tuner's report says about the judgement."""

    seed: int
    experiments: int
    overlap: Any
    count: int
    clusters: int
    domain: str | None


def _report(
    tuner: str,
    scores: Scores,
    tuners: list[str],
    own: Mapping[str, Sequence[Weights]],
    extra: list[str],
    context: _Context,
) -> Report:
    """The protocol's report with `tuner` as the method: the other tuners and their own
    ablations are baselines; Fixed, random search and the tuner's own ablations are its
    ablations; the verdict is against `learned_against`."""
    mine = [ablation_name(tuner, a) for a in own]
    table = scores.compare(
        tuner,
        better="higher",
        metric=METRIC,
        baselines=[t for t in tuners if t != tuner] + [p for p in extra if p not in mine],
        ablations=[FIXED_POLICY, RANDOM_POLICY, *mine],
    )
    verdicts = [table.learned_something(a) for a in learned_against(tuner, list(own))]
    n = context.experiments
    redrawn = (
        f"each fresh seed also redraws the cluster of {context.clusters} of {n} experiment(s) "
        "(cluster.generator.seed; the same configuration, other nodes)"
        if context.clusters
        else "the scenario lists its nodes: the fresh seeds redraw arrivals and execution "
        "times on the same cluster"
    )
    notes = [
        "selection: each experiment's best weights were chosen on its own search seed "
        "(in sample); the figures here are on fresh seeds",
        f"a test instance is an experiment run on {context.count} fresh seed(s) of the "
        f"{TEST_SPLIT!r} split; the overlap line counts those seeds against the "
        "search seeds",
        redrawn,
        f"{FIXED_POLICY}: the Fixed weights (improvement 0 by definition); "
        f"{RANDOM_POLICY}: random search at the same budget on the same experiments",
        "learned something: only when the method beats "
        + " and ".join(v.ablation for v in verdicts)
        + " by paired intervals above 0",
    ]
    if own:
        notes.append(
            f"{ablation_name(tuner, UNTRAINED)}: the same network with 0 training steps, "
            f"same budget; {ablation_name(tuner, CONSTANT)}: the trained agent's mean first "
            "proposal over configurations of its training domain (Fixed kept where it "
            f"scored higher on the search seed); {ablation_name(tuner, FIRST_PROPOSAL)}: "
            "the search cut to its first proposal"
        )
    if context.domain is not None:
        notes.append(f"domain {context.domain!r}: {ROLES.get(context.domain, '?')}")
    return Report(
        f"clusteremu tune: {tuner} out of sample",
        Splits(context.seed, {"search": n, TEST_SPLIT: n}),
        (context.overlap,),
        table,
        verdicts[0],
        notes=tuple(notes),
        learned_also=tuple(verdicts[1:]),
        scope=scope_of(context.domain),
    )


def scope_of(domain: str | None) -> str | None:
    """What a domain's fresh-seed figures may be called: None (the protocol's "test (held
    out, scored once)") for a scenario file and the test domains, else the domain's role --
    the validation domain's figures select and are never called held out."""
    if domain is None or domain in HELD_OUT_DOMAINS:
        return None
    if domain == SELECTION_DOMAIN:
        return "validation domain, fresh seeds (used for selection; not held out)"
    return f"{domain} domain, fresh seeds (not held out: {ROLES.get(domain, '?')})"


def _run_policies(
    experiments: Sequence[Experiment],
    instances: Sequence[int],
    policies: Mapping[str, Sequence[Weights]],
    seeds: Sequence[int],
    repeats: int,
    progress: Callable[[int, int], None] | None,
) -> dict[str, npt.NDArray[np.float64]]:
    """Each policy's score matrix [experiment, seed]; each distinct run made once."""
    jobs: dict[tuple[Weights, int, int], float] = {}
    for e in instances:
        for s in seeds:
            for weights in policies.values():
                jobs[(tuple(weights[e]), e, s)] = math.nan
    keys = list(jobs)
    scores = _run([(on_seed(experiments[e], s), w) for w, e, s in keys], repeats, progress)
    jobs.update(zip(keys, scores, strict=True))
    return {
        p: np.array([[jobs[(tuple(w[e]), e, s)] for s in seeds] for e in instances])
        for p, w in policies.items()
    }


def _run(
    runs: list[tuple[Experiment, Weights]],
    repeats: int,
    progress: Callable[[int, int], None] | None,
) -> list[float]:
    """The score of every (experiment, weights) run: as Ray tasks when Ray is up."""
    import ray

    if not ray.is_initialized():
        out = []
        for i, (exp, w) in enumerate(runs):
            out.append(_score(exp, w, repeats))
            if progress is not None:
                progress(i + 1, len(runs))
        return out
    task = ray.remote(num_cpus=1)(_score)
    refs = [task.remote(exp, w, repeats) for exp, w in runs]
    index = {ref: i for i, ref in enumerate(refs)}
    out = [math.nan] * len(refs)
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        for ref in done:
            out[index[ref]] = float(ray.get(ref))
        if progress is not None:
            progress(len(refs) - len(pending), len(refs))
    return out
