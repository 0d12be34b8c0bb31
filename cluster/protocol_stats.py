"""The evaluation protocol's statistics (steps 4 and 5 of `clusteremu.tuners.protocol`,
which re-exports every name): the mean of per-instance values with its 95% interval
(`mean_interval`: Student-t over instances, or a percentile bootstrap with a fixed seed),
the paired interval of per-instance differences or ratios (`paired_interval`), beside the
means the medians and a paired rank test (`paired_rank_test`, Wilcoxon's signed-rank test,
for long tails), the method's
verdict against another policy (`verdict_of`), the learned-something check against an
ablation (`learned_something`, a `Verdict`), and the `Comparison` of a method with its
baselines and ablations on the same instances (`compare`; its markdown table)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy import stats

from clusteremu.cluster.protocol_splits import REPORTED_SPLIT, SELECTION_SPLIT
from clusteremu.cluster.splits import split_key

FloatArray = npt.NDArray[np.float64]

Better = Literal["lower", "higher"]
Kind = Literal["difference", "ratio"]
IntervalMethod = Literal["t", "bootstrap"]
#: Directions, paired statistics and interval methods the protocol knows.
BETTER: tuple[str, ...] = ("lower", "higher")
KINDS: tuple[str, ...] = ("difference", "ratio")
INTERVAL_METHODS: tuple[str, ...] = ("t", "bootstrap")

#: Bootstrap resamples and seed used unless told otherwise.
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


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


def paired_rank_test(a: npt.ArrayLike, b: npt.ArrayLike, *, kind: Kind = "difference") -> float:
    """Two-sided p-value of Wilcoxon's signed-rank test (`scipy.stats.wilcoxon`, zero
    differences dropped) that the per-instance a_i - b_i (``kind="difference"``) or
    log(a_i / b_i) (``kind="ratio"``) are symmetric about 0: a median-like check that one
    long tail cannot drive, beside the mean's interval. 1.0 when every difference is 0;
    NaN for fewer than two instances (no test)."""
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
    x, y = _values(a, "a"), _values(b, "b")
    if x.shape != y.shape:
        raise ValueError(
            f"paired values: a has {x.size} instances, b has {y.size}; pair the same instances"
        )
    if x.size < 2:
        return math.nan
    d = x - y if kind == "difference" else np.log(np.maximum(x, 1e-300) / y)
    if not np.any(d != 0.0):
        return 1.0
    with warnings.catch_warnings():  # ties and zeros switch scipy to the normal approximation
        warnings.simplefilter("ignore")
        return float(stats.wilcoxon(d, zero_method="wilcox").pvalue)


def paired_median(a: npt.ArrayLike, b: npt.ArrayLike, *, kind: Kind = "difference") -> float:
    """The median over instances of a_i - b_i (or a_i / b_i), in the unit of `paired_interval`."""
    x, y = _values(a, "a"), _values(b, "b")
    return float(np.median(x - y if kind == "difference" else x / y))


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
    #: Median of method - policy (or method / policy) over instances, and the two-sided
    #: p-value of Wilcoxon's signed-rank test on those (None: fewer than two instances).
    paired_median: float | None = None
    rank_p: float | None = None

    @property
    def median(self) -> float:
        """The median of the policy's per-instance values."""
        return float(np.median(self.values))

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "role": self.role,
            "mean": self.mean.to_dict(),
            "median": self.median,
            "paired": None if self.paired is None else self.paired.to_dict(),
            "verdict": self.verdict,
            "paired_median": self.paired_median,
            "wilcoxon_p": self.rank_p,
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
            None if data.get("paired_median") is None else float(data["paired_median"]),
            None if data.get("wilcoxon_p") is None else float(data["wilcoxon_p"]),
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

    def explain(self, on: str | None = None) -> str:
        """The verdict in words; `on` names the instances when they are not the split's own
        label (a report's `scope`)."""
        op = "-" if self.kind == "difference" else "/"
        null = "0" if self.kind == "difference" else "1"
        return (
            f"{self.method} {'learned something' if self.holds else 'did NOT learn something'}"
            f" over {self.ablation} on {on or _label(self.split, True)}: mean of {self.method} "
            f"{op} {self.ablation} = {self.paired.estimate:.4g}, {self.paired.level:.0%} "
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

    def to_table(self, label: str | None = None) -> str:
        """A markdown table: policy, role, mean, 95% CI, method vs policy (paired), verdict.
        `label` replaces the split's label in the heading (a report's `scope`)."""
        op = "−" if self.kind == "difference" else "/"
        pct = f"{self.level:.0%}"
        lines = [
            f"**{label or self.label}**: {self.metric}, {self.better} is better, "
            f"n = {self.n} instances, {pct} {_method_words(self.interval)} intervals",
            "",
            f"| policy | role | mean | {pct} CI | vs method (paired: method {op} policy) "
            f"| verdict (method) | median | paired median (Wilcoxon p) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            if r.paired is None:
                vs, verdict, rank = "—", "—", "—"
            else:
                vs = f"{r.paired.estimate:.4g} {r.paired.describe()}"
                verdict = str(r.verdict)
                rank = _rank_words(r.paired_median, r.rank_p)
            lines.append(
                f"| {r.policy} | {r.role} | {r.mean.estimate:.4g} | {r.mean.describe()} "
                f"| {vs} | {verdict} | {r.median:.4g} | {rank} |"
            )
        return "\n".join(lines)


def _rank_words(median: float | None, p: float | None) -> str:
    """`median (p = ...)` of a paired row; `n/a` where there is no test (n < 2)."""
    m = "n/a" if median is None else f"{median:.4g}"
    test = "n/a" if p is None else f"{p:.3g}"
    return f"{m} (p = {test})"


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
        p = paired_rank_test(base, x, kind=kind)
        rank = (paired_median(base, x, kind=kind), p if math.isfinite(p) else None)
        rows.append(Row(name, role, tuple(float(v) for v in x), mean, paired, verdict, *rank))
    return Comparison(metric, better, kind, split, interval, level, tuple(rows))
