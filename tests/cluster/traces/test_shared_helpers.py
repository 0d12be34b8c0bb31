"""The helpers the trace readers share: file sniffing, the first failing row, options,
the rules' bookkeeping (`clusteremu.cluster.traces.text_files`, `inputs`, `rows`)."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from clusteremu.cluster.traces.inputs import choice, number_above, parse_options
from clusteremu.cluster.traces.rows import Rules, dedupe
from clusteremu.cluster.traces.table import ImportReport, TraceError
from clusteremu.cluster.traces.text_files import (
    check_file,
    check_values,
    compression,
    first_failing,
    load_text,
    refuse_tar,
)

TEXT = b"1 2 3\n4 5 6\n"


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (gzip.compress(TEXT, mtime=0), "gzip"),
        (bz2.compress(TEXT), "bzip2"),
        (bz2.compress(b""), "bzip2"),
        (lzma.compress(TEXT), "xz"),
        (b"(\xb5/\xfd" + b"\x00" * 8, "zstd"),
        (b'\x04"M\x18' + b"\x00" * 8, "lz4"),
        (b"PK\x03\x04" + b"\x00" * 8, "zip"),
        (b"7z\xbc\xaf\x27\x1c" + b"\x00" * 8, "7z"),
        (b"Rar!\x1a\x07\x00", "rar"),
        (b"BZh9 is a name, not bzip2\n", None),
        (TEXT, None),
    ],
)
def test_compression_by_magic_bytes(head: bytes, kind: str | None) -> None:
    assert compression(head) == kind


def test_load_text_decompresses_and_refuses(tmp_path: Path) -> None:
    path = tmp_path / "log"
    for packed in (gzip.compress(TEXT, mtime=0), bz2.compress(TEXT), lzma.compress(TEXT)):
        path.write_bytes(packed)
        assert load_text(path) == TEXT
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        info = tarfile.TarInfo("log")
        info.size = len(TEXT)
        tf.addfile(info, io.BytesIO(TEXT))
    path.write_bytes(gzip.compress(buf.getvalue(), mtime=0))
    with pytest.raises(TraceError, match="a tar archive"):
        load_text(path)
    with pytest.raises(TraceError, match="a tar archive"):
        refuse_tar(path, buf.getvalue()[:512])
    with pytest.raises(TraceError, match="is a directory; expected a file of lines"):
        check_file(tmp_path, "lines")
    path.write_bytes(b"")
    with pytest.raises(TraceError, match="empty file; expected lines"):
        check_file(path, "lines")


def test_first_failing() -> None:
    bad = {7, 9}
    assert first_failing(20, lambda lo, hi: any(lo <= b < hi for b in bad)) == 7
    assert first_failing(20, lambda lo, hi: any(lo <= b < hi for b in bad), step=4) == 7
    assert first_failing(20, lambda lo, hi: False) is None
    assert first_failing(0, lambda lo, hi: True) is None
    # A prefix check (the lines before count): the first prefix that fails ends at row 7.
    assert first_failing(20, lambda lo, hi: hi > 7) == 7


def test_check_values_names_the_first_bad_row() -> None:
    values = np.array([1.0, -2.0, -3.0])
    ok = values >= 0
    with pytest.raises(TraceError) as err:
        check_values("f.csv", values, ok, np.array([5, 8, 9]), "x", ">= 0")
    assert (err.value.row, err.value.field, err.value.problem) == (
        8,
        "x",
        "expected >= 0, found -2",
    )
    with pytest.raises(TraceError) as err:
        check_values("f.csv", values, ok, 10, "x", ">= 0", "out of range")
    assert (err.value.row, err.value.problem) == (11, "out of range: expected >= 0, found -2")
    check_values("f.csv", values, np.ones(3, dtype=bool), 10, "x", ">= 0")


def test_parse_options() -> None:
    spec = {"size": (1.0, number_above(0)), "mode": ("a", choice("a", "b"))}
    assert parse_options("fmt", None, spec) == {"size": 1.0, "mode": "a"}
    assert parse_options("fmt", {"size": "2.5", "mode": "b"}, spec) == {"size": 2.5, "mode": "b"}
    with pytest.raises(TraceError) as err:
        parse_options("fmt", {"size": "-1"}, spec)
    assert (err.value.path, err.value.field, err.value.problem) == (
        "fmt",
        "size",
        "'-1': expected a number > 0",
    )
    with pytest.raises(TraceError) as err:
        parse_options("fmt", {"size": "x"}, spec, name_as_field=False)
    assert str(err.value) == "fmt: option size='x': expected a number > 0"
    with pytest.raises(TraceError, match="fmt: unknown option 'colour': expected one of size"):
        parse_options("fmt", {"colour": "red"}, spec, name_as_field=False)
    with pytest.raises(TraceError, match="expected one of none"):
        parse_options("fmt", {"colour": "red"}, {})


def test_rules_count_the_first_drop_and_corrections_on_kept_rows() -> None:
    report = ImportReport(format="t")
    lines = np.array([2, 3, 4, 2, 3])
    rules = Rules(report, lines, ["a.csv", "b.csv"], np.array([0, 0, 0, 1, 1]))
    rules.drop(np.array([True, True, False, False, False]), "first")
    rules.drop(np.array([False, True, True, False, True]), "second")
    rules.correct(np.array([True, False, False, True, True]), "fixed")
    assert dict(report.dropped) == {"first": 2, "second": 2}
    assert dict(report.corrected) == {"fixed": 1}
    assert report.examples["second"] == ["a.csv:4", "b.csv:3"]
    assert rules.kept.tolist() == [False, False, False, True, False]


def test_dedupe_keeps_the_first_or_the_last_and_notes_it() -> None:
    report = ImportReport(format="t")
    table = pa.table({"k": ["a", "b", "a"], "v": [1, 2, 3]})
    assert dedupe(table, ["k"], report, "f").column("v").to_pylist() == [1, 2]
    assert dedupe(table, ["k"], report, "f", keep="last").column("v").to_pylist() == [2, 3]
    assert report.notes == [
        "1 f row(s) repeat a k: the first used",
        "1 f row(s) repeat a k: the last used",
    ]
