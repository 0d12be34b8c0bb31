"""Atomic file output: write to a temporary file in the same folder, then rename.

An interrupted run never leaves a truncated table or summary behind.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def _atomic(path: Path, write: Callable[[str], None]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_parquet(table: pa.Table, path: str | Path) -> None:
    """Write an Arrow table to Parquet atomically (deterministic bytes for equal tables)."""
    _atomic(Path(path), lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def _clean(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def to_json(data: Any) -> str:
    return json.dumps(_clean(data), indent=2, sort_keys=False)


def write_json(data: Any, path: str | Path) -> None:
    """Write JSON atomically (NaN and infinity become null)."""
    text = to_json(data) + "\n"

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)

    _atomic(Path(path), write)
