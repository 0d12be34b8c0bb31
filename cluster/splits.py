"""Random streams keyed by (seed, split name, instance): the splits of the evaluation
protocol (`clusteremu.tuners.protocol`, which re-exports these), here so that any layer can draw
from
them (the provisioner's classifiers split their profiling runs with them).

Split ``name`` under ``seed`` has the SeedSequence ``[seed, n, b_1, ..., b_n]`` (the
``b_k`` the UTF-8 bytes of the name); instance ``i`` of it has the same entropy with
``spawn_key=(i,)``, so it depends only on (seed, split, i). Different names give
independent streams; Python's salted ``hash()`` is not used.
"""

from __future__ import annotations

import numpy as np


def split_key(split: str) -> tuple[int, ...]:
    """The stable integer key of a split name: its length, then its UTF-8 bytes (0..255).

    Raises ValueError for an empty name or one holding a NUL character."""
    if not isinstance(split, str) or not split:
        raise ValueError(f"split name: expected a non-empty string, got {split!r}")
    if "\x00" in split:
        raise ValueError(f"split name {split!r}: NUL characters are not allowed")
    raw = split.encode("utf-8")
    return (len(raw), *raw)


def _check_seed(seed: int) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValueError(f"seed: expected an integer >= 0, got {seed!r}")
    return int(seed)


def _check_index(index: int) -> int:
    if isinstance(index, bool) or not isinstance(index, int | np.integer) or index < 0:
        raise ValueError(f"instance index: expected an integer >= 0, got {index!r}")
    return int(index)


def split_sequence(seed: int, split: str) -> np.random.SeedSequence:
    """The SeedSequence of a whole split under `seed` (entropy ``[seed, *split_key(split)]``)."""
    return np.random.SeedSequence([_check_seed(seed), *split_key(split)])


def split_rng(seed: int, split: str) -> np.random.Generator:
    """A Generator for the whole split (e.g. to shuffle it); different split names give
    independent streams, the same (seed, split) the same stream."""
    return np.random.default_rng(split_sequence(seed, split))


def instance_sequence(seed: int, split: str, index: int) -> np.random.SeedSequence:
    """The SeedSequence of instance `index` of `split`: child `index` of the split's
    sequence, so it depends only on (seed, split, index)."""
    return np.random.SeedSequence(
        [_check_seed(seed), *split_key(split)], spawn_key=(_check_index(index),)
    )


def instance_rng(seed: int, split: str, index: int) -> np.random.Generator:
    """A Generator for instance `index` of `split` (see `instance_sequence`)."""
    return np.random.default_rng(instance_sequence(seed, split, index))


def instance_seed(seed: int, split: str, index: int) -> int:
    """An integer seed in [0, 2**32) for instance `index` of `split`, for APIs that take an
    int (a scenario's ``seed:``, ``sample_config``, scikit-learn's ``random_state``). Two
    instances may share one by chance (2**-32 per pair); `equivalence_report` catches the
    instances that matter, those equal by canonical key."""
    return int(instance_sequence(seed, split, index).generate_state(1, np.uint32)[0])
