"""The compiled cache's folder is named after the sources compiled code can depend on
(`cluster._source_hash`): an edit to a Python-only policy, or to a docstring there, keeps
the cache; an edit to compiled code, or to a module whose constants it freezes (the state
layout), starts a fresh one."""

from __future__ import annotations

import shutil
from pathlib import Path

import cluster

PACKAGE = Path(cluster.__file__).resolve().parent


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "cluster"
    shutil.copytree(PACKAGE, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def test_python_only_modules_do_not_name_the_cache(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    before = cluster._source_hash(root)
    compiled = {p.relative_to(root).as_posix() for p in cluster.compiled_sources(root)}
    for rel in ("policies/fifo.py", "policies/scoring/placer.py", "engine.py"):
        assert rel not in compiled
        _edit(root / rel, '"""', '"""An edited docstring. ')
    _edit(root / "policies/provisioner/policies.py", "\n", "\n# a comment\n")
    assert cluster._source_hash(root) == before


def test_compiled_code_and_what_it_imports_name_the_cache(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    before = cluster._source_hash(root)
    compiled = {p.relative_to(root).as_posix() for p in cluster.compiled_sources(root)}
    # the numba modules, and the modules whose constants they freeze
    assert {"kernel.py", "policies/compiled.py", "layout.py", "state.py"} <= compiled
    seen = {before}
    for rel in ("kernel.py", "layout.py", "policies/compiled_table.py"):
        _edit(root / rel, "\n", "\n# changed\n")
        now = cluster._source_hash(root)
        assert now not in seen, rel
        seen.add(now)
