"""Exact percentiles of more values than memory holds: `SpilledValues` keeps values (float64)
in memory up to a bound and appends the rest to a temporary file; `percentiles` gives the
same figures as `numpy.percentile(values, q)` (method "linear") by selecting the order
statistics it needs in passes over the file read a chunk at a time (`numpy.fromfile`, never
a memory map of the whole file: mapped pages count as resident): a histogram of each
value's leading bits finds the bucket that holds each wanted rank, then the buckets are
narrowed (or, once small, read and sorted) until every rank is found.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
U64 = npt.NDArray[np.uint64]

#: Values held in memory before they go to the file (8 B each).
MEMORY_VALUES = 1 << 22
#: Values read from the file at once.
CHUNK_VALUES = 1 << 22
#: Bits of the sort key each histogram pass resolves (2^BITS buckets of 8 B).
BITS = 20
#: A bucket of at most this many values is read and sorted instead of narrowed further.
SORT_LIMIT = 1 << 22

_SIGN = np.uint64(1 << 63)


def sort_keys(values: FloatArray) -> U64:
    """Unsigned keys in the order of the float64 values (negative values flipped)."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    negative = (bits & _SIGN) != 0
    return np.where(negative, ~bits, bits | _SIGN)


def from_keys(keys: U64) -> FloatArray:
    """The float64 values of `sort_keys`' keys."""
    positive = (keys & _SIGN) != 0
    return np.where(positive, keys & ~_SIGN, ~keys).view(np.float64)


class SpilledValues:
    """Float64 values, held in memory up to `memory_values` and then appended to a
    temporary file in `folder` (removed by `close`)."""

    def __init__(self, memory_values: int = MEMORY_VALUES, folder: str | None = None) -> None:
        self.memory_values = memory_values
        self.folder = folder
        self.count = 0
        self._held: list[FloatArray] = []
        self._held_n = 0
        self._path: str | None = None
        self.spilled = 0

    def add(self, values: FloatArray) -> None:
        """Append values (copied)."""
        if values.size == 0:
            return
        self._held.append(np.array(values, dtype=np.float64))
        self._held_n += values.size
        self.count += values.size
        if self._held_n > self.memory_values:
            self._spill()

    def _spill(self) -> None:
        if self._path is None:
            fd, self._path = tempfile.mkstemp(prefix="clusteremu-values-", dir=self.folder)
            os.close(fd)
        with open(self._path, "ab") as f:
            for part in self._held:
                part.tofile(f)
        self.spilled += self._held_n
        self._held, self._held_n = [], 0

    def chunks(self) -> Iterator[FloatArray]:
        """Every value, a chunk at a time (the file's, then the ones in memory)."""
        if self._path is not None:
            with open(self._path, "rb") as f:
                while True:
                    part = np.fromfile(f, dtype=np.float64, count=CHUNK_VALUES)
                    if part.size == 0:
                        break
                    yield part
        yield from self._held

    def all_in_memory(self) -> FloatArray | None:
        """The values in order when none went to the file, else None."""
        if self._path is not None:
            return None
        return np.concatenate(self._held) if self._held else np.zeros(0)

    def close(self) -> None:
        """Remove the file (the values are gone)."""
        if self._path is not None:
            os.unlink(self._path)
            self._path = None
        self._held, self._held_n, self.count = [], 0, 0


def order_statistics(values: SpilledValues, ranks: Sequence[int]) -> FloatArray:
    """The values at 0-based `ranks` of the sorted values (as `np.sort(v)[ranks]`)."""
    out = np.zeros(len(ranks))
    # Each rank's bucket: (prefix of the key, bits resolved, rank within the bucket).
    todo: dict[int, tuple[int, int, int]] = {i: (0, 0, int(r)) for i, r in enumerate(ranks)}
    to_sort: dict[int, tuple[int, int, int]] = {}
    while todo:
        groups = sorted({(p, b) for p, b, _ in todo.values()})
        counts = {g: np.zeros(1 << min(BITS, 64 - g[1]), dtype=np.int64) for g in groups}
        for part in values.chunks():
            keys = sort_keys(part)
            for prefix, bits in groups:
                take = min(BITS, 64 - bits)
                sel = keys if bits == 0 else keys[(keys >> np.uint64(64 - bits)) == prefix]
                sub = (
                    (sel << np.uint64(bits)) >> np.uint64(64 - take)
                    if bits
                    else sel >> np.uint64(64 - take)
                )
                counts[prefix, bits] += np.bincount(
                    sub.astype(np.int64), minlength=counts[prefix, bits].size
                )
        nxt: dict[int, tuple[int, int, int]] = {}
        for i, (prefix, bits, rank) in todo.items():
            cum = np.cumsum(counts[prefix, bits])
            bucket = int(np.searchsorted(cum, rank, side="right"))
            before = int(cum[bucket - 1]) if bucket else 0
            take = min(BITS, 64 - bits)
            entry = ((prefix << take) | bucket, bits + take, rank - before)
            size = int(cum[bucket]) - before
            if entry[1] >= 64:  # one key: the value itself
                out[i] = from_keys(np.array([entry[0]], dtype=np.uint64))[0]
            elif size <= SORT_LIMIT:
                to_sort[i] = entry
            else:
                nxt[i] = entry
        todo = nxt
    if to_sort:
        buckets = sorted({(p, b) for p, b, _ in to_sort.values()})
        found: dict[tuple[int, int], list[FloatArray]] = {g: [] for g in buckets}
        for part in values.chunks():
            keys = sort_keys(part)
            for prefix, bits in buckets:
                found[prefix, bits].append(part[(keys >> np.uint64(64 - bits)) == prefix])
        ordered = {g: np.sort(np.concatenate(v)) for g, v in found.items()}
        for i, (prefix, bits, rank) in to_sort.items():
            out[i] = ordered[prefix, bits][rank]
    return out


def percentiles(values: SpilledValues, q: Sequence[float]) -> FloatArray:
    """`numpy.percentile(all values, q)` (method "linear", the default), to the last bit,
    without holding the values at once."""
    held = values.all_in_memory()
    if held is not None:
        return np.asarray(np.percentile(held, q), dtype=np.float64)
    n = values.count
    quantiles = np.true_divide(np.asanyarray(q), 100)
    virtual = (n - 1) * quantiles
    previous = np.floor(virtual)
    following = previous + 1
    above = virtual >= n - 1
    below = virtual < 0
    previous[above], following[above] = -1, -1
    previous[below], following[below] = 0, 0
    prev_i, next_i = previous.astype(np.intp), following.astype(np.intp)
    wanted = sorted({int(r) % n for r in np.concatenate([prev_i, next_i])})
    stats = dict(zip(wanted, order_statistics(values, wanted), strict=True))
    a = np.array([stats[int(r) % n] for r in prev_i])
    b = np.array([stats[int(r) % n] for r in next_i])
    gamma = np.asanyarray(virtual - prev_i)
    diff = b - a
    result = np.add(a, diff * gamma)
    np.subtract(b, diff * (1 - gamma), out=result, where=gamma >= 0.5)
    return result
