"""clusteremu.cluster.readback: the checks every reader of a file read back shares (issue 28)."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from clusteremu.cluster import readback
from clusteremu.cluster.readback import ReadBackError


def test_a_fifo_is_refused_without_being_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "tree.json"
    os.mkfifo(fifo)  # no writer: opening it for reading would wait for ever
    for read in (
        lambda: readback.load_json(fifo, "a tree"),
        lambda: readback.read_capped(fifo, 10, "a tree"),
        lambda: readback.check_zip(fifo, "a model", 10),
        lambda: readback.read_parquet(fifo, "a chunk", 10),
    ):
        with pytest.raises(ReadBackError, match="is a FIFO; expected"):
            read()


def test_devices_folders_and_missing_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ReadBackError, match="is a device"):
        readback.load_json("/dev/zero", "a tree")
    with pytest.raises(ReadBackError, match="is a folder"):
        readback.load_json(tmp_path, "a tree")
    with pytest.raises(ReadBackError, match="no such file"):
        readback.load_json(tmp_path / "none.json", "a tree")


def test_size_is_capped_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_text("[" + "0," * 600 + "0]")
    with pytest.raises(ReadBackError, match="larger than 1,000 bytes"):
        readback.load_json(big, "a tree", limit=1000)
    assert len(readback.load_json(big, "a tree")) == 601


def test_json_nesting_is_capped_before_parsing(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)  # json.loads: RecursionError
    with pytest.raises(ReadBackError, match="nested 100000 levels deep"):
        readback.load_json(deep, "a tree")
    quoted = tmp_path / "quoted.json"
    quoted.write_text('{"a": "[[[[[[[[[[\\"{{{{"}')  # brackets inside strings do not count
    assert readback.json_depth(quoted.read_bytes()) == 1
    assert readback.load_json(quoted, "x") == {"a": '[[[[[[[[[["{{{{'}


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_nan_and_infinities_are_refused(tmp_path: Path, constant: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(f'{{"memory_gb": {constant}}}')
    with pytest.raises(ReadBackError, match="not valid JSON"):
        readback.load_json(path, "a sizing model")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("8", "got str"),
        (True, "got bool"),
        (float("nan"), "finite"),
        (-1e9, "in [0, 10]"),
        (2.5, None),
        (3, None),
    ],
)
def test_numbers_are_strict(value: object, problem: str | None) -> None:
    found = readback.number_problem(value, 0, 10)
    assert found is None if problem is None else problem in str(found)
    assert readback.number_problem(2.5, 0, 10, integer=True) == "expected a whole number, got 2.5"


def _zip(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def test_every_zip_member_is_crc_checked(tmp_path: Path) -> None:
    path = tmp_path / "m.zip"
    _zip(path, {"meta.json": b"{}", "data": b"DATA-PAYLOAD-0123456789"})
    readback.check_zip(path, "a model", 10_000, ("meta.json", "data"))
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"PAYLOAD", b"PAYLOAX"))  # the data changes, its CRC not
    with pytest.raises(ReadBackError, match="member data: fails its CRC-32 check"):
        readback.check_zip(path, "a model", 10_000)
    with pytest.raises(ReadBackError, match="no member policy.pth"):
        readback.check_zip(path, "a model", 10_000, ("policy.pth",))


def test_zip_members_are_size_capped(tmp_path: Path) -> None:
    path = tmp_path / "m.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("data", b"\0" * 100_000)  # compresses to a few hundred bytes
    with pytest.raises(ReadBackError, match="expand to 100,000 bytes"):
        readback.check_zip(path, "a model", 10_000)


def test_a_damaged_or_foreign_parquet_file_is_refused(tmp_path: Path) -> None:
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), good)
    assert readback.read_parquet(good, "a chunk", 2**20).num_rows == 2
    assert readback.parquet_rows(good, "a chunk", 2**20) == 2
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(good.read_bytes()[:-12])
    foreign = tmp_path / "foreign.parquet"
    foreign.write_text("name,value\na,1\n")
    for path in (cut, foreign):
        with pytest.raises(ReadBackError, match="not a readable Parquet file"):
            readback.read_parquet(path, "a chunk", 2**20)
        with pytest.raises(ReadBackError, match="not a readable Parquet file"):
            readback.parquet_rows(path, "a chunk", 2**20)
