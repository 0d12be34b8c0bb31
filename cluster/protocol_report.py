"""The evaluation protocol's test set and report (steps 3 and 6 of
`clusteremu.tuners.protocol`, which re-exports every name): the reported split wrapped in a
`TestSet`, whose `score` may be called once (a second call raises `TestSetReused`), the
`Scores` of that one scoring (their `compare` is the held-out `Comparison`), and the
`Report` bundling the protocol's metadata, the test comparison and the learned-something
verdict, written as JSON (`to_json`), a markdown table (`to_table`) or a PNG (`plot`)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy.typing as npt

from clusteremu.cluster.protocol_splits import (
    DRAWN_BY,
    REPORTED_SPLIT,
    SELECTION_SPLIT,
    Overlap,
    Splits,
)
from clusteremu.cluster.protocol_stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    Better,
    Comparison,
    FloatArray,
    IntervalMethod,
    Kind,
    Verdict,
    _label,
    _values,
    compare,
)
from clusteremu.cluster.splits import split_key

T = TypeVar("T")

FORMAT = "clusteremu.protocol-report"
VERSION = 1


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
    #: Further learned-something verdicts the method must also pass (other ablations).
    learned_also: tuple[Verdict, ...] = field(default_factory=tuple)
    #: What the reported numbers are when they are not held out (e.g. fresh seeds of a
    #: validation domain, which selects): replaces "test (held out, scored once)" in the
    #: table, the verdicts and the plot. None: the test split, held out.
    scope: str | None = None

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        """Every learned-something verdict: `learned`, then `learned_also`."""
        return (self.learned, *self.learned_also)

    @property
    def learned_all(self) -> bool:
        """True only when the method beats every ablation it is checked against."""
        return all(v.holds for v in self.verdicts)

    def __post_init__(self) -> None:
        object.__setattr__(self, "overlaps", tuple(self.overlaps))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "learned_also", tuple(self.learned_also))
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
        for verdict in self.verdicts:
            if verdict.split != self.test.split or verdict.method != self.test.method.policy:
                raise ValueError(
                    f"the learned-something verdict ({verdict.method} on "
                    f"{verdict.split!r}) is not about the test comparison's method "
                    f"({self.test.method.policy} on {self.test.split!r})"
                )
            if self.test.row(verdict.ablation).role != "ablation":
                raise ValueError(f"{verdict.ablation!r} is not an ablation of the test comparison")
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
            "learned_something_also": [v.to_dict() for v in self.learned_also],
            "learned_something_against_every_ablation": self.learned_all,
            "held_out": self.scope is None,
            "scope": self.label,
        }

    @property
    def label(self) -> str:
        """What the reported numbers may be called: "test (held out, scored once)" unless
        `scope` says otherwise."""
        return self.test.label if self.scope is None else self.scope

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
            tuple(Verdict.from_dict(v) for v in data.get("learned_something_also", ())),
            None if data.get("held_out", True) else str(data["scope"]),
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
            f"- selection on: {_label(SELECTION_SPLIT, False)}; reported: {self.label}",
        ]
        if self.learned_also:
            lines.append(
                f"- learned something: {'yes' if self.learned_all else 'NO'} (only when it "
                f"beats every ablation below)"
            )
            lines += [
                f"  - against {v.ablation}: {'yes' if v.holds else 'NO'} — {v.explain(self.scope)}"
                for v in self.verdicts
            ]
        else:
            lines.append(
                f"- learned something: {'yes' if self.learned.holds else 'NO'} — "
                f"{self.learned.explain(self.scope)}"
            )
        lines += [f"- note: {n}" for n in self.notes]
        lines += ["", self.test.to_table(self.scope)]
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
            title = self.label if comp is self.test else comp.label
            ax.set_title(f"{title}, n = {comp.n}, {comp.level:.0%} CI", fontsize=9)
        fig.suptitle(self.title)
        fig.tight_layout()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(target, format="png", dpi=110)
        except OSError as exc:
            raise OSError(f"cannot write the plot to {target}: {exc.strerror or exc}") from exc
        return target
