"""The compiled cache's folder is named after the sources compiled code can depend on
(`cluster._source_hash`): an edit to a Python-only policy, or to a docstring there, keeps
the cache; an edit to compiled code, or to a module whose constants it freezes (the state
layout), starts a fresh one."""

from __future__ import annotations

import shutil
from pathlib import Path

from clusteremu import cluster

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
    for rel in ("policies/fifo.py", "policies/scoring/placer.py", "engine/facade.py"):
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


def test_a_function_passed_to_compiled_code_keeps_its_callers_cache(tmp_path: Path) -> None:
    """numba files a compiled caller under its function argument's id: `argument_function`
    makes that id the same in every process, so the next process loads the caller (as
    `gpu_share.choose` with a policy's score) instead of compiling it again."""
    import os
    import subprocess
    import sys

    (tmp_path / "passed.py").write_text(
        "from numba import njit\n"
        "from clusteremu.cluster.jit import argument_function\n\n\n"
        "@argument_function\n"
        "def plus_one(x):\n"
        "    return x + 1.0\n\n\n"
        "@njit(cache=True)\n"
        "def apply(f, x):\n"
        "    return f(x)\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE.parent), str(tmp_path)])
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "cache")
    env["NUMBA_DEBUG_CACHE"] = "1"
    code = "import passed; print(passed.apply(passed.plus_one, 1.0))"
    logs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert done.stdout.splitlines()[-1] == "2.0"
        logs.append(done.stdout + done.stderr)
    assert "passed.apply" in logs[0] and "data saved" in logs[0]
    assert "data saved" not in logs[1] and "data loaded" in logs[1]
