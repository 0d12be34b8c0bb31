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
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import numpy as np
import numpy.typing as npt
from clusteremu.cluster.splits import (  # noqa: F401  (the protocol's streams, re-exported)
    _check_seed,
    instance_rng,
    instance_seed,
    instance_sequence,
    split_key,
    split_rng,
    split_sequence,
)
from scipy import stats

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
    "split_key",
    "split_rng",
    "split_sequence",
    "verdict_of",
]

T = TypeVar("T")
FloatArray = npt.NDArray[np.float64]

Better = Literal["lower", "higher"]
Kind = Literal["difference", "ratio"]
IntervalMethod = Literal["t", "bootstrap"]
#: Directions, paired statistics and interval methods the protocol knows.
BETTER: tuple[str, ...] = ("lower", "higher")
KINDS: tuple[str, ...] = ("difference", "ratio")
INTERVAL_METHODS: tuple[str, ...] = ("t", "bootstrap")

#: The split hyper-parameters and policies are selected on, and the one that is reported.
SELECTION_SPLIT = "validation"
REPORTED_SPLIT = "test"
#: Bootstrap resamples and seed used unless told otherwise.
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0

FORMAT = "clusteremu.protocol-report"
VERSION = 1

#: How the splits are drawn, as written into every report.
DRAWN_BY = (
    "numpy SeedSequence(entropy=[seed, n, b_1..b_n]) per split, b_k the n UTF-8 bytes of the "
    "split's name; instance i: the same entropy with spawn_key=(i,), so it depends only on "
    "(seed, split, i); instances equivalent to a training instance (by canonical key) are "
    "dropped and redrawn from the next index"
)


# --- splits and per-instance streams: `clusteremu.cluster.splits` (imported above) ----------------


@dataclass(frozen=True)
class Splits:
    """The seed and the number of instances of each named split.

    ``Splits(seed=7, sizes={"train": 200, "validation": 50, "test": 50})``; the names are
    free, but the protocol selects on "validation" and reports "test"."""

    seed: int
    sizes: Mapping[str, int]

    def __post_init__(self) -> None:
        _check_seed(self.seed)
        sizes: dict[str, int] = {}
        for name, size in dict(self.sizes).items():
            split_key(name)
            if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 0:
                raise ValueError(f"split {name!r}: size must be an integer >= 0, got {size!r}")
            sizes[name] = int(size)
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "sizes", sizes)

    def size(self, split: str) -> int:
        """Instances of `split` (KeyError naming the known splits if there is no such one)."""
        try:
            return self.sizes[split]
        except KeyError:
            raise KeyError(f"no split {split!r}; the splits are {sorted(self.sizes)}") from None

    def rng(self, split: str) -> np.random.Generator:
        """`split_rng` of this seed."""
        self.size(split)
        return split_rng(self.seed, split)

    def instance_rng(self, split: str, index: int) -> np.random.Generator:
        """`instance_rng` of this seed."""
        self.size(split)
        return instance_rng(self.seed, split, index)

    def instance_seed(self, split: str, index: int) -> int:
        """`instance_seed` of this seed."""
        self.size(split)
        return instance_seed(self.seed, split, index)

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "sizes": dict(self.sizes), "drawn_by": DRAWN_BY}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Splits:
        return cls(int(data["seed"]), {str(k): int(v) for k, v in data["sizes"].items()})


# --- equivalent instances --------------------------------------------------------------------


def canonical_key(obj: Any, *, decimals: int = 6, exclude: Iterable[str] = ()) -> Hashable:
    """A hashable key for an instance: mappings (and dataclasses) become sorted (name, value)
    tuples without the top-level names in `exclude`, sequences and arrays tuples, floats are
    rounded to `decimals` decimal places (so run times equal to that precision compare equal),
    NaN becomes "nan". E.g. ``canonical_key((counts, run_times_s), decimals=3)`` for a batch,
    ``canonical_key(config.row(), exclude=["index"])`` for a tuning experiment.

    Raises TypeError naming the type of a value it cannot key."""
    skip = frozenset(exclude)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        obj = dataclasses.asdict(obj)
    if isinstance(obj, Mapping):
        return tuple(
            sorted((str(k), _canon(v, decimals)) for k, v in obj.items() if str(k) not in skip)
        )
    return _canon(obj, decimals)


def _canon(v: Any, decimals: int) -> Hashable:
    if v is None or isinstance(v, str | bytes | bool):
        return v
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, float | np.floating):
        f = float(v)
        if math.isnan(f):
            return "nan"
        return round(f, decimals) + 0.0  # + 0.0: -0.0 and 0.0 alike
    if isinstance(v, np.bool_):
        return bool(v)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        v = dataclasses.asdict(v)
    if isinstance(v, Mapping):
        return tuple(sorted((str(k), _canon(x, decimals)) for k, x in v.items()))
    if isinstance(v, np.ndarray):
        return tuple(_canon(x, decimals) for x in v.tolist())
    if isinstance(v, set | frozenset):
        return tuple(sorted((_canon(x, decimals) for x in v), key=repr))
    if isinstance(v, Sequence):
        return tuple(_canon(x, decimals) for x in v)
    raise TypeError(f"canonical_key: cannot key a value of type {type(v).__name__}: {v!r}")


@dataclass(frozen=True)
class Overlap:
    """Instances of `split` equivalent (same canonical key) to a training instance.

    `count` of `total` remain equivalent (`indices`: their positions in the split); `train`:
    the number of training keys; `dropped`: candidates removed and redrawn before that."""

    split: str
    count: int
    total: int
    train: int
    indices: tuple[int, ...] = ()
    dropped: int = 0

    @property
    def disjoint(self) -> bool:
        """True when no instance of the split is equivalent to a training one."""
        return self.count == 0

    def describe(self) -> str:
        text = f"{self.split}: {self.count} of {self.total} equivalent to a training instance"
        if self.dropped:
            text += f" ({self.dropped} dropped and redrawn before)"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "count": self.count,
            "total": self.total,
            "train": self.train,
            "indices": list(self.indices),
            "dropped": self.dropped,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Overlap:
        return cls(
            str(data["split"]),
            int(data["count"]),
            int(data["total"]),
            int(data["train"]),
            tuple(int(i) for i in data["indices"]),
            int(data["dropped"]),
        )


def equivalence_report(
    train_keys: Iterable[Hashable], other_keys: Iterable[Hashable], *, split: str = "test"
) -> Overlap:
    """Count the instances of `split` (their keys, in order) whose key is a training key."""
    train = set(train_keys)
    keys = list(other_keys)
    indices = tuple(i for i, k in enumerate(keys) if k in train)
    return Overlap(split, len(indices), len(keys), len(train), indices)


@dataclass(frozen=True)
class Disjoint(Generic[T]):
    """A split drawn disjoint from training: the kept `instances`, the candidate `indices`
    they were drawn at, the candidate indices `dropped`, and the check (`overlap`, whose
    count is 0 by construction and whose `dropped` is len(dropped))."""

    instances: tuple[T, ...]
    indices: tuple[int, ...]
    dropped: tuple[int, ...]
    overlap: Overlap


def drop_equivalent(
    train_keys: Iterable[Hashable],
    draw: Callable[[int], T],
    key: Callable[[T], Hashable],
    count: int,
    *,
    split: str = "test",
    unique: bool = False,
    max_draws: int | None = None,
) -> Disjoint[T]:
    """Draw `count` instances of `split` disjoint from training by construction, then check.

    `draw(i)` makes candidate i (from ``instance_rng(seed, split, i)``, say); candidates
    whose `key` is a training key are dropped and the next index is drawn in their place,
    so the kept set is a pure function of (seed, split, training keys). With `unique`, a
    candidate equivalent to an already kept one is dropped too. Raises ValueError after
    `max_draws` candidates (default 10 * count + 100) without `count` kept ones: the domain
    is too small to hold that many new instances."""
    if count < 0:
        raise ValueError(f"count: expected an integer >= 0, got {count!r}")
    limit = 10 * count + 100 if max_draws is None else int(max_draws)
    train = set(train_keys)
    seen: set[Hashable] = set()
    kept: list[T] = []
    kept_keys: list[Hashable] = []
    indices: list[int] = []
    dropped: list[int] = []
    i = 0
    while len(kept) < count:
        if i >= limit:
            raise ValueError(
                f"split {split!r}: only {len(kept)} of {count} instances not equivalent to "
                f"a training one in {limit} draws ({len(dropped)} dropped); the instance "
                f"space is too small for a disjoint {split} set of this size"
            )
        candidate = draw(i)
        k = key(candidate)
        if k in train or (unique and k in seen):
            dropped.append(i)
        else:
            kept.append(candidate)
            kept_keys.append(k)
            indices.append(i)
            seen.add(k)
        i += 1
    check = equivalence_report(train, kept_keys, split=split)
    overlap = dataclasses.replace(check, dropped=len(dropped))
    return Disjoint(tuple(kept), tuple(indices), tuple(dropped), overlap)


# --- intervals -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    """A mean over `n` instances (`estimate`, in the values' unit) with its `level`
    confidence interval [low, high] by `method` ("t": Student-t over instances; "bootstrap":
    percentile bootstrap). Fewer than two instances give (-inf, inf): no information."""

    estimate: float
    low: float
    high: float
    level: float
    method: str
    n: int

    @property
    def half_width(self) -> float:
        """(high - low) / 2, in the values' unit."""
        return (self.high - self.low) / 2.0

    def excludes(self, value: float) -> bool:
        """True when `value` lies strictly outside [low, high]."""
        return value < self.low or value > self.high

    def describe(self, digits: int = 4) -> str:
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return "n/a (n < 2)"
        return f"[{self.low:.{digits}g}, {self.high:.{digits}g}]"

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimate": float(self.estimate),
            "low": _finite_or_none(self.low),
            "high": _finite_or_none(self.high),
            "level": float(self.level),
            "method": self.method,
            "n": int(self.n),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Interval:
        low = -math.inf if data["low"] is None else float(data["low"])
        high = math.inf if data["high"] is None else float(data["high"])
        return cls(
            float(data["estimate"]),
            low,
            high,
            float(data["level"]),
            str(data["method"]),
            int(data["n"]),
        )


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _values(x: npt.ArrayLike, name: str) -> FloatArray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected one value per instance (1-d), got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name}: no instances")
    bad = np.flatnonzero(~np.isfinite(arr))
    if bad.size:
        raise ValueError(
            f"{name}: instance {int(bad[0])} is {float(arr[bad[0]])}; every value must be finite"
        )
    return arr


def _check_options(level: float, method: str) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level: expected a probability in (0, 1), got {level!r}")
    if method not in INTERVAL_METHODS:
        raise ValueError(f"interval method: expected one of {INTERVAL_METHODS}, got {method!r}")


def _interval(x: FloatArray, level: float, method: str, resamples: int, seed: int) -> Interval:
    n = int(x.size)
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, -math.inf, math.inf, level, method, n)
    if method == "t":
        sem = float(x.std(ddof=1)) / math.sqrt(n)
        half = float(stats.t.ppf(0.5 + level / 2.0, n - 1)) * sem
        return Interval(mean, mean - half, mean + half, level, method, n)
    if resamples < 1:
        raise ValueError(f"resamples: expected an integer >= 1, got {resamples!r}")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    chunk = max(1, 2**20 // n)  # at most ~8 MB of indices at a time
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        means[start:stop] = x[rng.integers(0, n, size=(stop - start, n))].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return Interval(mean, float(low), float(high), level, method, n)


def mean_interval(
    x: npt.ArrayLike,
    *,
    level: float = 0.95,
    method: IntervalMethod = "t",
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Interval:
    """The mean of per-instance values `x` with its `level` interval: Student-t (``"t"``,
    mean +- t_{(1+level)/2, n-1} s / sqrt(n)) or percentile bootstrap (``"bootstrap"``,
    `resamples` resamples from ``default_rng(seed)``). Raises ValueError for no values or a
    non-finite one (naming the instance)."""
    _check_options(level, method)
    return _interval(_values(x, "values"), level, method, resamples, seed)


def paired_interval(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    *,
    kind: Kind = "difference",
    level: float = 0.95,
    method: IntervalMethod = "t",
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Interval:
    """The mean over instances of a_i - b_i (``kind="difference"``, unit of the values) or
    a_i / b_i (``kind="ratio"``, dimensionless; needs b_i > 0 and a_i >= 0) with its interval
    (see `mean_interval`). `a` and `b` hold the same instances in the same order."""
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
    _check_options(level, method)
    x = _values(a, "a")
    y = _values(b, "b")
    if x.shape != y.shape:
        raise ValueError(
            f"paired values: a has {x.size} instances, b has {y.size}; pair the same instances"
        )
    if kind == "difference":
        d = x - y
    else:
        bad = np.flatnonzero((y <= 0) | (x < 0))
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"ratio: instance {i} has a = {x[i]!r}, b = {y[i]!r}; ratios need b > 0, a >= 0"
            )
        d = x / y
    return _interval(d, level, method, resamples, seed)


def verdict_of(paired: Interval, *, better: Better, kind: Kind = "difference") -> str:
    """The method's verdict from the paired interval of method - other (or method / other):
    "better" or "worse" when the interval excludes 0 (1 for ratios) on that side, else "tie"."""
    _check_better(better)
    null = 0.0 if kind == "difference" else 1.0
    below, above = paired.high < null, paired.low > null
    if better == "lower":
        return "better" if below else "worse" if above else "tie"
    return "better" if above else "worse" if below else "tie"


def _check_better(better: str) -> None:
    if better not in BETTER:
        raise ValueError(f"better: expected 'lower' or 'higher' (explicitly), got {better!r}")


# --- comparisons -----------------------------------------------------------------------------

ROLES = ("method", "baseline", "ablation")


@dataclass(frozen=True)
class Row:
    """One policy of a comparison: its per-instance `values`, `mean` with interval, and (not
    for the method itself) the `paired` interval of method - policy (or method / policy)
    with the method's `verdict` against it ("better", "worse", "tie")."""

    policy: str
    role: str
    values: tuple[float, ...]
    mean: Interval
    paired: Interval | None = None
    verdict: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "role": self.role,
            "mean": self.mean.to_dict(),
            "paired": None if self.paired is None else self.paired.to_dict(),
            "verdict": self.verdict,
            "values": [float(v) for v in self.values],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Row:
        return cls(
            str(data["policy"]),
            str(data["role"]),
            tuple(float(v) for v in data["values"]),
            Interval.from_dict(data["mean"]),
            None if data["paired"] is None else Interval.from_dict(data["paired"]),
            data["verdict"],
        )


@dataclass(frozen=True)
class Verdict:
    """Did the method learn something? Its paired interval against the `ablation` (the same
    policy without its learned part) on the same instances of `split`. `holds` only when the
    interval shows the method strictly better (never on a tie or with fewer than two
    instances). ``bool(verdict)`` is `holds`, so ``assert verdict, verdict.explain()`` works."""

    method: str
    ablation: str
    better: str
    kind: str
    split: str
    paired: Interval
    holds: bool

    def __bool__(self) -> bool:
        return self.holds

    def explain(self) -> str:
        op = "-" if self.kind == "difference" else "/"
        null = "0" if self.kind == "difference" else "1"
        return (
            f"{self.method} {'learned something' if self.holds else 'did NOT learn something'}"
            f" over {self.ablation} on {_label(self.split, True)}: mean of {self.method} {op} "
            f"{self.ablation} = {self.paired.estimate:.4g}, {self.paired.level:.0%} "
            f"{self.paired.method} interval {self.paired.describe()} over {self.paired.n} "
            f"instances ({self.better} is better; holds only if the interval lies strictly "
            f"on the better side of {null})"
        )

    __str__ = explain

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "ablation": self.ablation,
            "better": self.better,
            "kind": self.kind,
            "split": self.split,
            "paired": self.paired.to_dict(),
            "holds": self.holds,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            str(data["method"]),
            str(data["ablation"]),
            str(data["better"]),
            str(data["kind"]),
            str(data["split"]),
            Interval.from_dict(data["paired"]),
            bool(data["holds"]),
        )


def learned_something(
    method_values: npt.ArrayLike,
    ablation_values: npt.ArrayLike,
    better: Better = "lower",
    *,
    kind: Kind = "difference",
    level: float = 0.95,
    method: IntervalMethod = "t",
    names: tuple[str, str] = ("method", "ablation"),
    split: str = REPORTED_SPLIT,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Verdict:
    """The learned policy (`method_values`) against its ablation on the same held-out
    instances: a `Verdict` whose `holds` is True only when the paired interval (`method`:
    Student-t by default) of method - ablation (or method / ablation) lies strictly on the
    better side of 0 (1). An empty or shuffled-label model ties with its ablation, so a test
    asserting ``.holds`` fails for it."""
    _check_better(better)
    paired = paired_interval(
        method_values,
        ablation_values,
        kind=kind,
        level=level,
        method=method,
        resamples=resamples,
        seed=seed,
    )
    holds = paired.n >= 2 and verdict_of(paired, better=better, kind=kind) == "better"
    return Verdict(names[0], names[1], better, kind, split, paired, bool(holds))


def _label(split: str, scored_once: bool) -> str:
    if split == REPORTED_SPLIT:
        return "test (held out, scored once)" if scored_once else "test"
    if split == SELECTION_SPLIT:
        return "validation (used for selection)"
    return split


@dataclass(frozen=True)
class Comparison:
    """A method against named baselines and ablations on the same instances of `split`.

    `rows[0]` is the method; `metric` names the per-instance value (with its unit),
    `better` says whether lower or higher is better, `kind` whether the paired statistic is
    a difference or a ratio, `interval` which interval method (``"t"`` or ``"bootstrap"``)
    every interval uses. `scored_once`: the values come from `TestSet.score`."""

    metric: str
    better: str
    kind: str
    split: str
    interval: str
    level: float
    rows: tuple[Row, ...]
    scored_once: bool = False

    @property
    def method(self) -> Row:
        return self.rows[0]

    @property
    def n(self) -> int:
        """Instances compared."""
        return len(self.method.values)

    @property
    def label(self) -> str:
        """How the numbers may be called: only a test set scored once is "held out"."""
        return _label(self.split, self.scored_once)

    def row(self, policy: str) -> Row:
        for r in self.rows:
            if r.policy == policy:
                return r
        raise KeyError(f"no policy {policy!r}; the policies are {[r.policy for r in self.rows]}")

    def learned_something(self, ablation: str) -> Verdict:
        """`learned_something` of the method against the ablation row named `ablation`, with
        this comparison's direction, kind and interval method."""
        row = self.row(ablation)
        if row.role != "ablation":
            raise ValueError(
                f"{ablation!r} is a {row.role}, not an ablation of {self.method.policy}"
            )
        assert row.paired is not None
        holds = row.paired.n >= 2 and row.verdict == "better"
        return Verdict(
            self.method.policy, ablation, self.better, self.kind, self.split, row.paired, holds
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "label": self.label,
            "scored_once": self.scored_once,
            "metric": self.metric,
            "better": self.better,
            "paired": self.kind,
            "interval": self.interval,
            "level": float(self.level),
            "n": self.n,
            "rows": [r.to_dict() for r in self.rows],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Comparison:
        return cls(
            str(data["metric"]),
            str(data["better"]),
            str(data["paired"]),
            str(data["split"]),
            str(data["interval"]),
            float(data["level"]),
            tuple(Row.from_dict(r) for r in data["rows"]),
            bool(data["scored_once"]),
        )

    def to_table(self) -> str:
        """A markdown table: policy, role, mean, 95% CI, method vs policy (paired), verdict."""
        op = "−" if self.kind == "difference" else "/"
        pct = f"{self.level:.0%}"
        lines = [
            f"**{self.label}**: {self.metric}, {self.better} is better, n = {self.n} instances, "
            f"{pct} {_method_words(self.interval)} intervals",
            "",
            f"| policy | role | mean | {pct} CI | vs method (paired: method {op} policy) "
            f"| verdict (method) |",
            "|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            if r.paired is None:
                vs, verdict = "—", "—"
            else:
                vs = f"{r.paired.estimate:.4g} {r.paired.describe()}"
                verdict = str(r.verdict)
            lines.append(
                f"| {r.policy} | {r.role} | {r.mean.estimate:.4g} | {r.mean.describe()} "
                f"| {vs} | {verdict} |"
            )
        return "\n".join(lines)


def _method_words(method: str) -> str:
    return "Student-t" if method == "t" else "percentile-bootstrap"


def compare(
    method: str,
    values: Mapping[str, npt.ArrayLike],
    *,
    better: Better,
    metric: str,
    split: str,
    baselines: Sequence[str] = (),
    ablations: Sequence[str] = (),
    kind: Kind = "difference",
    interval: IntervalMethod = "t",
    level: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Comparison:
    """Compare `method` with each baseline and ablation (names of `values`, one value per
    instance, the same instances in the same order for every policy). Every scored policy
    must be named (no result left out silently). `better` ("lower"/"higher") is required.
    For test numbers use `TestSet.score(...).compare`, which marks them held out."""
    _check_better(better)
    _check_options(level, interval)
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
    split_key(split)
    roles = [(method, "method")] + [(b, "baseline") for b in baselines]
    roles += [(a, "ablation") for a in ablations]
    names = [n for n, _ in roles]
    if len(set(names)) != len(names):
        raise ValueError(f"a policy is named twice among method, baselines, ablations: {names}")
    missing = [n for n in names if n not in values]
    if missing:
        raise KeyError(f"no values for {missing}; the scored policies are {sorted(values)}")
    unnamed = sorted(set(values) - set(names))
    if unnamed:
        raise ValueError(
            f"scored policies {unnamed} are neither the method, a baseline nor an ablation; "
            "every scored policy must be reported"
        )
    arrays = {n: _values(values[n], f"policy {n!r}") for n in names}
    base = arrays[method]
    rows: list[Row] = []
    for name, role in roles:
        x = arrays[name]
        if x.shape != base.shape:
            raise ValueError(
                f"policy {name!r} has {x.size} instances, the method {base.size}; every "
                "policy must be scored on the same instances"
            )
        mean = _interval(x, level, interval, resamples, seed)
        if role == "method":
            rows.append(Row(name, role, tuple(float(v) for v in x), mean))
            continue
        paired = paired_interval(
            base, x, kind=kind, level=level, method=interval, resamples=resamples, seed=seed
        )
        verdict = verdict_of(paired, better=better, kind=kind) if paired.n >= 2 else "tie"
        rows.append(Row(name, role, tuple(float(v) for v in x), mean, paired, verdict))
    return Comparison(metric, better, kind, split, interval, level, tuple(rows))


# --- the test set, scored once ---------------------------------------------------------------


class TestSetReused(RuntimeError):
    """`TestSet.score` was called a second time."""

    __test__ = False  # not a pytest test class


class Scores(Mapping[str, FloatArray]):
    """Per-instance values of every policy on one scoring of a test set (read-only arrays,
    in instance order). `compare` turns them into the held-out `Comparison`."""

    def __init__(self, split: str, values: Mapping[str, FloatArray]) -> None:
        self.split = split
        self._values = dict(values)

    def __getitem__(self, name: str) -> FloatArray:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def compare(
        self,
        method: str,
        *,
        better: Better,
        metric: str,
        baselines: Sequence[str] = (),
        ablations: Sequence[str] = (),
        kind: Kind = "difference",
        interval: IntervalMethod = "t",
        level: float = 0.95,
        resamples: int = BOOTSTRAP_RESAMPLES,
        seed: int = BOOTSTRAP_SEED,
    ) -> Comparison:
        """`compare` on these scores, marked as the single scoring of the test set."""
        c = compare(
            method,
            self._values,
            better=better,
            metric=metric,
            split=self.split,
            baselines=baselines,
            ablations=ablations,
            kind=kind,
            interval=interval,
            level=level,
            resamples=resamples,
            seed=seed,
        )
        return dataclasses.replace(c, scored_once=True)


class TestSet(Generic[T]):
    """The reported split, scored once.

    `score(scorer)` calls ``scorer(instances)`` once; it returns, for every policy (method,
    baselines and ablations together), one value per instance in instance order. A second
    `score` raises `TestSetReused`: choose policies and hyper-parameters on the validation
    split, then score the test set a single time with all of them. A scorer that raises
    still uses up the test set (it has seen the instances)."""

    __test__ = False  # not a pytest test class

    def __init__(self, instances: Iterable[T], *, split: str = REPORTED_SPLIT) -> None:
        split_key(split)
        self.split = split
        self._instances = tuple(instances)
        if not self._instances:
            raise ValueError(f"test set {split!r}: no instances")
        self._scored: str | None = None

    def __len__(self) -> int:
        return len(self._instances)

    @property
    def scored(self) -> bool:
        """True once `score` has been called."""
        return self._scored is not None

    def score(self, scorer: Callable[[tuple[T, ...]], Mapping[str, npt.ArrayLike]]) -> Scores:
        """Score every policy on every instance, once (see the class)."""
        if self._scored is not None:
            raise TestSetReused(
                f"the {self.split!r} set was already scored once ({self._scored}); it may be "
                "scored only once: select on the validation split and score every policy "
                "(method, baselines, ablations) in a single call"
            )
        self._scored = "by an earlier score() call"
        try:
            out = scorer(self._instances)
        except BaseException:
            self._scored = "by an earlier score() call that raised"
            raise
        self._scored = f"for policies {sorted(out)}"
        values: dict[str, FloatArray] = {}
        for name, v in out.items():
            arr = _values(v, f"policy {name!r} on {self.split!r}")
            if arr.size != len(self._instances):
                raise ValueError(
                    f"policy {name!r}: {arr.size} values for {len(self._instances)} "
                    f"{self.split} instances; one per instance, in order"
                )
            arr.setflags(write=False)
            values[str(name)] = arr
        return Scores(self.split, values)


# --- the report ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    """The protocol's result: metadata (`splits`, the `overlaps` of each split with
    training), the held-out `test` comparison (from `TestSet.score(...).compare`), the
    `learned` verdict (from ``test.learned_something(ablation)``) and optionally the
    `validation` comparison used for selection.

    Raises ValueError when the pieces do not fit (a test comparison not scored once through
    a `TestSet`, a validation comparison of another split, a verdict for other policies)."""

    title: str
    splits: Splits
    overlaps: tuple[Overlap, ...]
    test: Comparison
    learned: Verdict
    validation: Comparison | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "overlaps", tuple(self.overlaps))
        object.__setattr__(self, "notes", tuple(self.notes))
        if self.test.split != REPORTED_SPLIT or not self.test.scored_once:
            raise ValueError(
                f"the reported comparison must be of the {REPORTED_SPLIT!r} split, scored once "
                f"through TestSet.score(...).compare(...); got split {self.test.split!r}, "
                f"scored_once={self.test.scored_once}"
            )
        if self.validation is not None and self.validation.split != SELECTION_SPLIT:
            raise ValueError(
                f"the selection comparison must be of the {SELECTION_SPLIT!r} split, got "
                f"{self.validation.split!r}"
            )
        if self.learned.split != self.test.split or self.learned.method != self.test.method.policy:
            raise ValueError(
                f"the learned-something verdict ({self.learned.method} on "
                f"{self.learned.split!r}) is not about the test comparison's method "
                f"({self.test.method.policy} on {self.test.split!r})"
            )
        if self.test.row(self.learned.ablation).role != "ablation":
            raise ValueError(f"{self.learned.ablation!r} is not an ablation of the test comparison")
        sizes = self.splits.sizes
        if REPORTED_SPLIT in sizes and sizes[REPORTED_SPLIT] != self.test.n:
            raise ValueError(
                f"the test comparison has {self.test.n} instances, the test split "
                f"{sizes[REPORTED_SPLIT]}"
            )

    def to_dict(self) -> dict[str, Any]:
        """Plain data, in a fixed key order (floats as floats, infinite interval ends null)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "title": self.title,
            "protocol": {
                **self.splits.to_dict(),
                "overlaps": [o.to_dict() for o in self.overlaps],
                "selection_split": SELECTION_SPLIT,
                "reported_split": REPORTED_SPLIT,
                "test_scored": "once",
                "interval": self.test.interval,
                "level": float(self.test.level),
            },
            "test": self.test.to_dict(),
            "learned_something": self.learned.to_dict(),
            "validation": None if self.validation is None else self.validation.to_dict(),
            "notes": list(self.notes),
        }

    def to_json(self) -> str:
        """`to_dict` as JSON (strict: no NaN or Infinity)."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Report:
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise ValueError(
                f"not a protocol report: format {data.get('format')!r} version "
                f"{data.get('version')!r}, expected {FORMAT!r} version {VERSION}"
            )
        proto = data["protocol"]
        return cls(
            str(data["title"]),
            Splits.from_dict(proto),
            tuple(Overlap.from_dict(o) for o in proto["overlaps"]),
            Comparison.from_dict(data["test"]),
            Verdict.from_dict(data["learned_something"]),
            None if data["validation"] is None else Comparison.from_dict(data["validation"]),
            tuple(str(n) for n in data["notes"]),
        )

    @classmethod
    def from_json(cls, text: str) -> Report:
        return cls.from_dict(json.loads(text))

    def to_table(self) -> str:
        """Markdown: the protocol, the held-out table, the verdict, then validation."""
        sizes = ", ".join(f"{k} {v}" for k, v in self.splits.sizes.items())
        lines = [
            f"### {self.title}",
            "",
            f"- seed {self.splits.seed}; splits: {sizes}",
            f"- drawn by: {DRAWN_BY}",
        ]
        lines += [f"- overlap: {o.describe()}" for o in self.overlaps]
        lines += [
            f"- selection on: {_label(SELECTION_SPLIT, False)}; reported: "
            f"{_label(REPORTED_SPLIT, True)}",
            f"- learned something: {'yes' if self.learned.holds else 'NO'} — "
            f"{self.learned.explain()}",
        ]
        lines += [f"- note: {n}" for n in self.notes]
        lines += ["", self.test.to_table()]
        if self.validation is not None:
            lines += ["", self.validation.to_table()]
        return "\n".join(lines) + "\n"

    def plot(self, path: str | os.PathLike[str]) -> Path:
        """A PNG of each policy's mean with its interval as error bars (the test panel, and
        the validation panel when there is one). Creates missing parent folders; raises
        OSError naming `path` when it cannot be written."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        target = Path(path)
        panels = [self.test] + ([self.validation] if self.validation is not None else [])
        width = max(4.0, 1.3 * len(self.test.rows) + 2.0)
        fig = Figure(figsize=(width * len(panels), 4.0))
        FigureCanvasAgg(fig)
        colours = {"method": "#4c72b0", "baseline": "#8c8c8c", "ablation": "#dd8452"}
        from clusteremu.cluster.plotting import scale_axis

        for k, comp in enumerate(panels):
            ax = fig.add_subplot(1, len(panels), k + 1)
            scale_axis(ax, [r.mean.estimate for r in comp.rows])  # log when over 10x
            for j, r in enumerate(comp.rows):
                lo, hi = r.mean.low, r.mean.high
                err = (
                    [[r.mean.estimate - lo], [hi - r.mean.estimate]]
                    if math.isfinite(lo) and math.isfinite(hi)
                    else None
                )
                colour = colours.get(r.role, "k")
                ax.errorbar([j], [r.mean.estimate], yerr=err, fmt="o", capsize=6, color=colour)
            ax.set_xticks(range(len(comp.rows)), [r.policy for r in comp.rows], rotation=15)
            ax.set_ylabel(f"{comp.metric} ({comp.better} is better)")
            ax.set_title(f"{comp.label}, n = {comp.n}, {comp.level:.0%} CI", fontsize=9)
        fig.suptitle(self.title)
        fig.tight_layout()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(target, format="png", dpi=110)
        except OSError as exc:
            raise OSError(f"cannot write the plot to {target}: {exc.strerror or exc}") from exc
        return target
