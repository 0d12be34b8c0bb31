"""The evaluation protocol's splits and instances (steps 1 and 2 of
`clusteremu.tuners.protocol`, which re-exports every name): `Splits`, the seed and the size
of each split (the per-instance streams themselves are `clusteremu.cluster.splits`), the
canonical key of an instance (`canonical_key`), and the instances of a split equivalent to a
training one, counted (`equivalence_report`, an `Overlap`) or dropped and redrawn from the
next index (`drop_equivalent`, a `Disjoint`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from clusteremu.cluster.splits import (
    _check_seed,
    instance_rng,
    instance_seed,
    split_key,
    split_rng,
)

T = TypeVar("T")

#: The split hyper-parameters and policies are selected on, and the one that is reported.
SELECTION_SPLIT = "validation"
REPORTED_SPLIT = "test"

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
