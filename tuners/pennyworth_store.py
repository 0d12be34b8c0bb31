"""The chunked example store of Pennyworth's synthesis (`clusteremu.tuners.pennyworth`,
which re-exports every name): a folder holding the manifest `_examples.json` (what the
examples are) and one Parquet file per finished chunk of example sets (batch, step, one
column per feature, label), each written atomically by the driver, so the folder is always
a valid Parquet dataset of finished chunks. `check_folder` refuses a folder of other
examples before any work, `done_chunks` keeps the chunks already solved (and removes the
others), `generate_examples` solves the missing ones on Ray and `read_examples` reads the
rows back, every column checked."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from clusteremu.cluster import readback
from clusteremu.cluster.io import write_json, write_parquet
from clusteremu.cluster.policies.pennyworth.features import feature_names
from clusteremu.cluster.policies.pennyworth.problem import Problem
from clusteremu.tuners.pennyworth_examples import (
    FORMAT,
    TRAIN,
    Chunk,
    ChunkResult,
    ExamplePlan,
    ExamplesError,
    FloatArray,
    IntArray,
    run_chunks,
)

log = logging.getLogger(__name__)

MANIFEST = "_examples.json"
_CHUNK_FILE = re.compile(r"^chunk-(\d{6})-([0-9a-f]{12})\.parquet$")


#: Largest examples chunk read back (bytes) and examples manifest.
MAX_CHUNK_BYTES = 1 * 2**30
MAX_MANIFEST_BYTES = 16 * 2**20


# --- the examples folder ---------------------------------------------------------------------


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The examples manifest in `folder`, None when there is none (ExamplesError when it
    cannot be read)."""
    path = folder / MANIFEST
    if not path.exists():
        return None
    try:
        data = readback.load_json(path, "an examples manifest", limit=MAX_MANIFEST_BYTES)
    except readback.ReadBackError as exc:
        raise ExamplesError(
            f"{path} cannot be read ({exc.problem}; cut short?): it says which examples "
            f"{folder} holds; "
            f"delete {folder} to start clean, or use another --out"
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ExamplesError(f"{path} is not an examples manifest ({FORMAT}); use another --out")
    return data


def check_folder(folder: Path, plan: ExamplePlan) -> None:
    """Refuse, writing nothing, a folder that is not one (or holds other files), or holds
    examples of another scenario, --jobs, --seed or feature layout."""
    if folder.exists() and not folder.is_dir():
        raise ExamplesError(f"{folder} is a file; expected the examples folder")
    old = read_manifest(folder)
    if old is None:
        if folder.is_dir() and any(not p.name.startswith(".") for p in folder.iterdir()):
            raise ExamplesError(
                f"{folder} holds files but no {MANIFEST}, so they are not examples of "
                "clusteremu synthesize; use another --out or empty the folder"
            )
        return
    new = plan.identity()
    differ = [k for k in new if old.get(k) != new[k]]
    if differ:
        shown = ", ".join(
            f"{k} {old.get(k)!r} (now {new[k]!r})"
            if k not in ("features", "labels")
            else f"{k} (the tasks or VM types changed)"
            for k in differ
        )
        raise ExamplesError(
            f"{folder} holds examples of another configuration: {shown}; use another --out, "
            f"the same scenario, --jobs and --seed to resume, or delete {folder} to start clean"
        )


def _readable(path: Path) -> bool:
    """Whether a chunk file is whole (its footer reads; a chunk whose sets were all past
    the time limit has no rows and is whole too)."""
    try:  # a FIFO or a device is not opened
        return readback.parquet_rows(path, "an examples chunk", MAX_CHUNK_BYTES) >= 0
    except readback.ReadBackError:
        return False


def done_chunks(folder: Path, plan: ExamplePlan) -> set[int]:
    """Indices of the plan's chunks with a readable file. A chunk file of this example set
    that the plan does not hold (another --batches) or that cannot be read is removed."""
    done: set[int] = set()
    if not folder.is_dir():
        return done
    chunks = plan.chunks
    for path in sorted(folder.iterdir()):
        m = _CHUNK_FILE.match(path.name)
        if m is None:
            continue
        index = int(m.group(1))
        if index < len(chunks) and chunks[index].key == m.group(2) and _readable(path):
            done.add(index)
            continue
        log.info("%s: not a chunk of this example set (or cut short); removed", path)
        with suppress(OSError):
            path.unlink()
    return done


def chunk_table(plan: ExamplePlan, result: ChunkResult) -> pa.Table:
    """The Parquet table of a chunk: batch, step, one column per feature, label."""
    columns: dict[str, Any] = {
        "batch": pa.array(result.batch, pa.int32()),
        "step": pa.array(result.step, pa.int32()),
    }
    for j, name in enumerate(feature_names(plan.task_names, plan.type_names)):
        columns[name] = pa.array(result.x[:, j], pa.float64())
    columns["label"] = pa.array(result.y, pa.int32())
    return pa.table(columns)


@dataclass
class ExamplesOutcome:
    """One generation: chunks in all, already on disk, solved now; rows; wall seconds."""

    chunks: int
    skipped: int
    ran: int
    rows: int = 0
    wall_s: float = 0.0
    #: Sets solved now that were not proven optimal within the time limit (no examples).
    unsolved: int = 0


def generate_examples(
    base: Problem,
    plan: ExamplePlan,
    folder: str | Path,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> ExamplesOutcome:
    """Write the plan's chunks that `folder` lacks (Ray must be initialised); the others
    are kept. `progress(batches done, batches)` is called as chunks finish."""
    start = time.perf_counter()
    out = Path(folder)
    check_folder(out, plan)
    out.mkdir(parents=True, exist_ok=True)
    if read_manifest(out) != plan.manifest():
        write_json(plan.manifest(), out / MANIFEST)
    chunks = plan.chunks
    done = done_chunks(out, plan)
    outcome = ExamplesOutcome(len(chunks), len(done), 0)
    outcome.rows = sum(
        readback.parquet_rows(out / chunks[i].filename, "an examples chunk", MAX_CHUNK_BYTES)
        for i in done
    )
    finished = [sum(chunks[i].last - chunks[i].first for i in done)]
    if progress is not None:
        progress(finished[0], plan.batches)

    def on_result(index: int, result: ChunkResult) -> None:
        chunk = chunks[index]
        write_parquet(chunk_table(plan, result), out / chunk.filename)
        outcome.ran += 1
        outcome.rows += len(result.y)
        outcome.unsolved += result.skipped
        finished[0] += chunk.last - chunk.first
        if progress is not None:
            progress(finished[0], plan.batches)

    todo = [(c.index, c.first, c.last) for c in chunks if c.index not in done]
    if todo:
        run_chunks(
            base,
            plan.jobs,
            plan.seed,
            TRAIN,
            todo,
            workers,
            on_result,
            plan.time_limit_s,
            plan.slack,
        )
    outcome.wall_s = time.perf_counter() - start
    return outcome


@dataclass(frozen=True)
class Examples:
    """Decision rows of an example set: features `x`, labels `y` and each row's batch."""

    x: FloatArray
    y: IntArray
    batch: IntArray
    batches: int

    def first(self, batches: int) -> tuple[FloatArray, IntArray]:
        """The rows of batches 0..batches-1."""
        keep = self.batch < batches
        return self.x[keep], self.y[keep]


def read_examples(folder: str | Path, plan: ExamplePlan) -> Examples:
    """The plan's rows from `folder`, in batch order (every chunk must be there)."""
    out = Path(folder)
    names = feature_names(plan.task_names, plan.type_names)
    tables = [_read_chunk(out / c.filename, c, plan, names) for c in plan.chunks]
    table = pa.concat_tables(tables)
    x = np.column_stack([table[n].to_numpy() for n in names]).astype(np.float64, copy=False)
    return Examples(
        x,
        table["label"].to_numpy().astype(np.int64),
        table["batch"].to_numpy().astype(np.int64),
        plan.batches,
    )


def _read_chunk(path: Path, chunk: Chunk, plan: ExamplePlan, names: list[str]) -> pa.Table:
    """A chunk file read back: readable Parquet with the chunk's columns (`chunk_table`),
    its batches in the chunk's range, labels among the decisions, finite features
    (ExamplesError naming the file and column otherwise)."""

    def bad(column: str, expected: str) -> ExamplesError:
        return ExamplesError(
            f"{path}: column {column!r}: expected {expected}; delete the file to compute "
            "its examples again"
        )

    try:
        table = readback.read_parquet(path, "an examples chunk", MAX_CHUNK_BYTES)
    except readback.ReadBackError as exc:
        raise ExamplesError(f"{exc}; delete the file to compute its examples again") from None
    for name in ("batch", "step", *names, "label"):
        if name not in table.column_names:
            raise bad(name, "a column of an examples chunk (the file is not one)")
    for name in ("batch", "step", "label"):
        if not pa.types.is_integer(table.schema.field(name).type):
            raise bad(name, "whole numbers")
    batch = table["batch"].to_numpy(zero_copy_only=False)
    if batch.size and (batch.min() < chunk.first or batch.max() >= chunk.last):
        raise bad("batch", f"batches {chunk.first} to {chunk.last - 1}")
    label = table["label"].to_numpy(zero_copy_only=False)
    actions = len(plan.task_names) + len(plan.type_names)
    if label.size and (label.min() < 0 or label.max() >= actions):
        raise bad("label", f"decisions 0 to {actions - 1}")
    for name in names:
        if not pa.types.is_floating(table.schema.field(name).type):
            raise bad(name, "numbers")
        values = table[name].to_numpy(zero_copy_only=False)
        if not np.all(np.isfinite(values)):
            raise bad(name, "finite feature values")
    return table
