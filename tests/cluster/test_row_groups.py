"""`RowGroups`: a per-job table held while small (written as `write_parquet` writes it),
then streamed to its file in row groups, in order, through a temporary file renamed at
the end; abandoned, it leaves nothing; without a path, rows past memory are dropped."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clusteremu.cluster.io import write_parquet
from clusteremu.cluster.row_groups import RowGroups


def _table(lo: int, hi: int) -> pa.Table:
    return pa.table(
        {"job": pa.array(range(lo, hi), pa.int64()), "x": [0.5 * j for j in range(lo, hi)]}
    )


def test_a_table_held_whole_is_written_as_write_parquet_writes_it(tmp_path: Path) -> None:
    with RowGroups(tmp_path / "t.parquet", hold_rows=100) as table:
        table.add(_table(0, 40))
        table.add(_table(40, 90))
        assert not table.streamed and table.held() is not None
    write_parquet(pa.concat_tables([_table(0, 40), _table(40, 90)]), tmp_path / "w.parquet")
    assert (tmp_path / "t.parquet").read_bytes() == (tmp_path / "w.parquet").read_bytes()
    assert table.bytes == (tmp_path / "t.parquet").stat().st_size


def test_past_its_bound_the_rows_go_to_the_file_in_order(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    with RowGroups(out, hold_rows=50) as table:
        table.add(_table(0, 40))
        assert not list(tmp_path.iterdir())  # held
        table.add(_table(40, 90))  # past 50 rows: both go to the file
        assert table.streamed and table.held() is None
        assert not out.exists() and len(list(tmp_path.glob(".t.parquet.*.tmp"))) == 1
        table.write(_table(90, 95))
        table.add(_table(95, 100))
    assert pq.read_table(out)["job"].to_pylist() == list(range(100))
    assert pq.ParquetFile(out).num_row_groups == 4
    assert table.rows == 100 and not list(tmp_path.glob("*.tmp"))


def test_a_batch_written_sends_the_rows_held_first(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    with RowGroups(out) as table:
        table.add(_table(0, 10))
        table.write(_table(10, 20))
    assert pq.read_table(out)["job"].to_pylist() == list(range(20))


def test_an_abandoned_table_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    out.write_bytes(b"before")
    with pytest.raises(KeyboardInterrupt), RowGroups(out, hold_rows=0) as table:
        table.write(_table(0, 10))
        assert list(tmp_path.glob(".t.parquet.*.tmp"))
        raise KeyboardInterrupt
    assert out.read_bytes() == b"before" and [p.name for p in tmp_path.iterdir()] == ["t.parquet"]
    other = RowGroups(tmp_path / "u.parquet", hold_rows=0)
    other.write(_table(0, 10))
    other.abort()
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


def test_without_a_path_rows_past_memory_are_dropped() -> None:
    with RowGroups(None, hold_rows=15) as table:
        table.add(_table(0, 10))
        assert table.held() is not None
        table.add(_table(10, 20))
        table.write(_table(20, 30))
    assert table.streamed and table.held() is None and table.rows == 30
    assert table.schema is not None and table.schema.names == ["job", "x"]
