"""A trace table streamed into the engine: its Parquet row groups read a chunk at a time
(docs/traces.md, "Streaming").

`TableSource` is the table a scenario's classes of arrival kind `table` replay: its path,
its row count and its classes. The engine reads it in chunks of `chunk_rows` jobs
(`TableSource.chunks`) and feeds each just before the simulated time of its first arrival,
so the table is never held whole in memory; the per-job table and summary are those of the
table read at once (the tests check it, chunk sizes apart). Paths that need every job up
front (Ray's arrival actors) read a class whole (`TableClassStream` loads it on first use).

Columns read: `arrival_s` (s), `run_s` (s; NaN: until the end of the run: +inf),
`request_cpu` (cores), `request_memory_gb` (GB), `request_gpu` (milli-GPU: / 1,000 to
GPUs), `estimate_s` (s; NaN: none, 0) and `class`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from clusteremu.cluster.jobs import Jobs
from clusteremu.cluster.workload import ArrivalProcess, FloatArray, TableArrivals

#: Columns the engine reads (the labels and trace ids stay in the file).
READ_COLUMNS = (
    "arrival_s",
    "run_s",
    "request_cpu",
    "request_memory_gb",
    "request_gpu",
    "estimate_s",
    "class",
)
#: Jobs per chunk the engine reads at a time (about 60 MB of columns).
CHUNK_ROWS = 1 << 20
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Chunk:
    """Rows [lo, hi) of a table as engine columns (class names, not indices)."""

    lo: int
    arrival_s: FloatArray
    size: FloatArray
    cpu: FloatArray
    memory_gb: FloatArray
    gpu: FloatArray
    estimate_s: FloatArray
    class_code: IntArray
    class_names: list[str]


def batch_columns(batch: pa.RecordBatch, lo: int) -> Chunk:
    """One record batch of the table as engine columns (run_s NaN -> +inf, milli-GPU ->
    GPUs, estimate NaN -> 0)."""

    def floats(name: str) -> FloatArray:
        return np.ascontiguousarray(
            batch.column(name).to_numpy(zero_copy_only=False), dtype=np.float64
        )

    run = floats("run_s")
    est = floats("estimate_s")
    cls = batch.column("class")
    if not pa.types.is_dictionary(cls.type):
        cls = cls.dictionary_encode()
    return Chunk(
        lo,
        floats("arrival_s"),
        np.where(np.isnan(run), np.inf, run),
        floats("request_cpu"),
        floats("request_memory_gb"),
        floats("request_gpu") / 1000.0,
        np.where(np.isnan(est), 0.0, est),
        np.asarray(cls.indices.to_numpy(zero_copy_only=False), dtype=np.int64),
        [str(x) for x in cls.dictionary.to_pylist()],
    )


@dataclass(frozen=True, eq=False)
class TableSource:
    """A validated trace table (the loader checked every value): path, rows, the row count
    of each class, and the chunk size the engine reads it in."""

    path: str
    rows: int
    class_rows: Mapping[str, int]
    chunk_rows: int = CHUNK_ROWS
    #: class name -> its rows arriving in the measurement window (the loader's checks)
    window_rows: Mapping[str, int] = field(default_factory=dict)
    #: class name -> its rows, read on first use by a path that needs them all
    _loaded: dict[str, TableArrivals] = field(default_factory=dict, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (to a Ray worker) without what was read: the worker reads the file."""
        state = dict(self.__dict__)
        state["_loaded"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def batches(self) -> Iterator[Chunk]:
        """The table as chunks of at most `chunk_rows` rows, in order."""
        import pyarrow.parquet as pq

        lo = 0
        with pq.ParquetFile(self.path) as f:
            for batch in f.iter_batches(
                batch_size=self.chunk_rows, columns=list(READ_COLUMNS), use_threads=True
            ):
                yield batch_columns(batch, lo)
                lo += batch.num_rows

    def arrival_at(self, row: int) -> float:
        """The arrival (s) of row `row` (0-based), reading only its row group."""
        import pyarrow.parquet as pq

        with pq.ParquetFile(self.path) as f:
            lo = 0
            for g in range(f.metadata.num_row_groups):
                n = f.metadata.row_group(g).num_rows
                if row < lo + n:
                    column = f.read_row_group(g, columns=["arrival_s"]).column(0)
                    return float(column[row - lo].as_py())
                lo += n
        raise IndexError(f"row {row} of a table of {self.rows} rows")

    def chunks(
        self, class_index: Mapping[str, int], limit: int, until_s: float = np.inf
    ) -> Iterator[Jobs]:
        """The first `limit` jobs arriving by `until_s` (s) as `Jobs` chunks (class
        indices from `class_index`), as `clusteremu.cluster.jobs.generate_jobs` draws a finite
        workload: every arrival up to the horizon, at most `limit`."""
        left = limit
        for c in self.batches():
            if left <= 0:
                return
            n = min(left, int(np.searchsorted(c.arrival_s, until_s, side="right")))
            if n == 0:
                return
            left -= n
            names = np.array([class_index[name] for name in c.class_names], dtype=np.int64)
            yield Jobs(
                c.arrival_s[:n],
                names[c.class_code[:n]] if names.size else c.class_code[:n],
                c.size[:n],
                request=(c.cpu[:n], c.memory_gb[:n], c.gpu[:n]),
                estimate_s=c.estimate_s[:n],
            )

    def load_class(self, name: str) -> TableArrivals:
        """Every row of class `name` (read once for all classes, then kept)."""
        if not self._loaded:
            parts: dict[str, list[tuple[Chunk, IntArray]]] = {n: [] for n in self.class_rows}
            for c in self.batches():
                for code, cname in enumerate(c.class_names):
                    rows = np.flatnonzero(c.class_code == code)
                    if rows.size:
                        parts.setdefault(cname, []).append((c, rows))
            for cname, got in parts.items():

                def joined(f: str, got: list[tuple[Chunk, IntArray]] = got) -> FloatArray:
                    if not got:
                        return np.zeros(0)
                    return np.concatenate([getattr(c, f)[r] for c, r in got])

                rows = (
                    np.concatenate([c.lo + r for c, r in got])
                    if got
                    else np.zeros(0, dtype=np.int64)
                )
                self._loaded[cname] = TableArrivals(
                    joined("arrival_s"),
                    joined("size"),
                    joined("cpu"),
                    joined("memory_gb"),
                    joined("gpu"),
                    joined("estimate_s"),
                    rows,
                )
        return self._loaded[name]


@dataclass(frozen=True, eq=False)
class TableClassStream(ArrivalProcess):
    """A class's jobs in a streamed trace table: the engine feeds them chunk by chunk
    (`TableSource.chunks`); a path that needs them all reads the class on first use."""

    source: TableSource
    name: str

    @property
    def count(self) -> int:
        return int(self.source.class_rows.get(self.name, 0))

    def load(self) -> TableArrivals:
        """Every row of the class, read whole (kept for the next call)."""
        return self.source.load_class(self.name)

    def _all(self) -> TableArrivals:
        return self.load()

    def generate(self, rng: np.random.Generator, until_s: float, max_count: int) -> FloatArray:
        return self._all().generate(rng, until_s, max_count)

    def job_sizes(self, count: int) -> FloatArray | None:
        return self._all().job_sizes(count) if count else np.zeros(0)

    def job_requests(self, count: int) -> tuple[FloatArray, FloatArray, FloatArray] | None:
        if count == 0:
            return (np.zeros(0), np.zeros(0), np.zeros(0))
        return self._all().job_requests(count)

    def job_estimates(self, count: int) -> FloatArray | None:
        return self._all().job_estimates(count) if count else np.zeros(0)

    def job_rows(self, count: int) -> IntArray | None:
        return self._all().job_rows(count) if count else np.zeros(0, dtype=np.int64)


def streamed_source(classes: Any) -> TableSource | None:
    """The one table every class streams from, or None (some class is not such a class,
    or they stream from several tables)."""
    sources = {id(c.arrival.source): c.arrival.source for c in classes if _streams(c)}
    if len(sources) != 1 or not all(_streams(c) for c in classes):
        return None
    return next(iter(sources.values()))


def _streams(cls: Any) -> bool:
    return isinstance(cls.arrival, TableClassStream)
