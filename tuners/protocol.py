"""One evaluation protocol for every learned policy: disjoint splits, paired 95% intervals,
a learned-something check against the policy's ablation, and a test set scored once.

The protocol, in the order it is used:

1. **Splits, disjoint by construction.** Every split ("train", "validation", "test", or any
   other name) has its own random stream under one seed: `split_sequence(seed, split)` is a
   `numpy.random.SeedSequence` whose entropy is ``[seed, n, b_1, ..., b_n]``, the ``b_k`` being
   the UTF-8 bytes of the split's name (a stable key; Python's ``hash()`` is salted per
   process and is not used). Instance ``i`` of a split has the same entropy with
   ``spawn_key=(i,)`` (what ``SeedSequence.spawn`` gives its child ``i``), so it depends only
   on (seed, split, i), never on how many instances are drawn. `Splits` records the seed and
   the size of each split.

2. **Equivalent instances counted and dropped.** Two instances drawn from different streams
   can still be the same problem (a small domain, a rounded run time). The caller gives a
   canonical key per instance (`canonical_key` builds one from counts, rounded floats,
   configs); `equivalence_report` counts the instances of a split whose key is a training
   key, and `drop_equivalent` draws a split index by index, skipping (and so redrawing) such
   instances, then checks the result. Both counts go into the report.

3. **Selection on validation, one score on test.** Hyper-parameters and policies are chosen
   on the validation split as often as needed; the numbers are labelled "validation (used
   for selection)". The test split is wrapped in a `TestSet`, whose `score` may be called
   once: it evaluates every policy (method, baselines, ablations) on every test instance in
   one go, and a second call raises `TestSetReused`. Only test numbers are "held out".

4. **Paired comparisons.** All policies are scored on the same instances, so the method is
   compared with each other policy through per-instance differences (method - other) or
   ratios (method / other): `paired_interval` gives the mean of those with a 95% interval,
   by default a Student-t interval over instances; a percentile bootstrap (fixed seed) is
   available as ``method="bootstrap"``. A `Comparison` holds each policy's mean (with
   `mean_interval`) and its paired interval against the method, with a verdict for the
   method: "better" or "worse" when the interval excludes 0 (1 for ratios), else "tie".
   Whether lower or higher values are better is always stated (``better=``).

5. **Learned something.** `learned_something(method, ablation)` compares the learned policy
   with the same policy without its learned part (an empty or shuffled-label model) on the
   same held-out instances: ``.holds`` is True only when the paired interval shows the
   method strictly better; a tie, a worse method or fewer than two instances never hold.
   A policy may need several ablations (an RL tuner: its untrained network and the constant
   of its average decision): the report's `learned` verdict is the first, `learned_also`
   the others, and `learned_all` holds only when every one does.

6. **Report.** `Report` bundles the protocol metadata (seed, split sizes, how the splits
   were drawn, overlap counts, selection split, reported split), the test comparison, the
   learned-something verdict and optionally the validation comparison. `to_json` (stable key
   order, plain floats, infinite interval ends as null), `to_table` (markdown) and `plot`
   (a PNG of per-policy means with 95% error bars).

Example (a Pennyworth-like cost ratio, lower is better)::

    splits = Splits(seed=7, sizes={"train": 200, "validation": 50, "test": 50})
    train_keys = {canonical_key(draw_batch(splits.instance_rng("train", i)))
                  for i in range(200)}
    test = drop_equivalent(train_keys, lambda i: draw_batch(splits.instance_rng("test", i)),
                           canonical_key, splits.size("test"))
    scores = TestSet(test.instances).score(lambda batches: {
        "rad-tree": ratios(tree, batches), "greedy": ratios(greedy, batches),
        "no-tree": ratios(empty_tree, batches)})
    table = scores.compare("rad-tree", better="lower", metric="cost / optimum",
                           baselines=["greedy"], ablations=["no-tree"])
    report = Report("Pennyworth", splits, (test.overlap,), table,
                    table.learned_something("no-tree"))
    assert report.learned.holds, report.learned.explain()

The code lives in three modules, re-exported here (import from this one): the splits and
equivalent instances (steps 1-2) in `clusteremu.cluster.protocol_splits`, the intervals,
verdicts and comparisons (steps 4-5) in `clusteremu.cluster.protocol_stats`, the test set
scored once and the report (steps 3 and 6) in `clusteremu.cluster.protocol_report`.
"""

from __future__ import annotations

from clusteremu.cluster.protocol_report import (  # noqa: F401  (re-exported)
    FORMAT,
    VERSION,
    Report,
    Scores,
    TestSet,
    TestSetReused,
)
from clusteremu.cluster.protocol_splits import (  # noqa: F401  (re-exported)
    DRAWN_BY,
    REPORTED_SPLIT,
    SELECTION_SPLIT,
    Disjoint,
    Overlap,
    Splits,
    canonical_key,
    drop_equivalent,
    equivalence_report,
)
from clusteremu.cluster.protocol_stats import (  # noqa: F401  (re-exported)
    BETTER,
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    INTERVAL_METHODS,
    KINDS,
    ROLES,
    Better,
    Comparison,
    FloatArray,
    Interval,
    IntervalMethod,
    Kind,
    Row,
    Verdict,
    compare,
    learned_something,
    mean_interval,
    paired_interval,
    paired_median,
    paired_rank_test,
    verdict_of,
)
from clusteremu.cluster.splits import (  # noqa: F401  (the protocol's streams, re-exported)
    _check_seed,
    instance_rng,
    instance_seed,
    instance_sequence,
    split_key,
    split_rng,
    split_sequence,
)

__all__ = [
    "BETTER",
    "INTERVAL_METHODS",
    "KINDS",
    "Comparison",
    "Disjoint",
    "Interval",
    "Overlap",
    "Report",
    "Row",
    "Scores",
    "Splits",
    "TestSet",
    "TestSetReused",
    "Verdict",
    "canonical_key",
    "compare",
    "drop_equivalent",
    "equivalence_report",
    "instance_rng",
    "instance_seed",
    "instance_sequence",
    "learned_something",
    "mean_interval",
    "paired_interval",
    "paired_median",
    "paired_rank_test",
    "split_key",
    "split_rng",
    "split_sequence",
    "verdict_of",
]
