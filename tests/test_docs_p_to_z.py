"""The docs test's second half: every command block of docs/p*.md to docs/z*.md runs as
written, exactly as `tests/test_docs.py` runs those of README.md and docs/a*.md to
docs/o*.md (its docstring says how, and why the documents are split in two modules)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_docs import RUN_BLOCKS, Block, half_of, param, run_in_scratch, scratch_folders


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, Path]:
    return scratch_folders(tmp_path_factory, 1)


@pytest.mark.parametrize("block", [param(b) for b in RUN_BLOCKS if half_of(b.path) == 1])
def test_doc_block_runs(block: Block, scratch: dict[Path, Path]) -> None:
    run_in_scratch(block, scratch)
