"""The model and the simulation kernel of clusteremu (no Ray here).

Compiled functions are cached on disk by numba, which keys each cache entry on its own
source file only: a change to another module that a compiled function calls into (a
policy's decision function, say) or whose constants it freezes (the state layout) would
leave a stale entry. So the cache lives in a folder named after a hash of the source files
compiled code can depend on: every module that holds numba code, and every module of this
package those import (anywhere in the file, transitively). A change there starts a fresh
cache; a change to a Python-only module (a policy that decides in Python, the engine's
Python side, a docstring there) keeps it. `NUMBA_CACHE_DIR`, when set, is the parent of
that folder.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

#: A module holds compiled code when its source names one of these.
_COMPILED = re.compile(r"\b(njit|kernel_function|inline_function|import numba|from numba)\b")
#: `from clusteremu.cluster.x import a, b` (parenthesised lists too) and
#: `import clusteremu.cluster.x`.
_IMPORT = re.compile(
    r"^\s*from\s+(clusteremu\.cluster[\w.]*)\s+import\s+(\([^)]*\)|[^\n#]*)"
    r"|^\s*import\s+(clusteremu\.cluster[\w.]*)",
    re.M,
)


def _module_file(root: Path, name: str) -> Path | None:
    """The source file of module `name` (``clusteremu.cluster.x.y``) under the package
    folder `root`."""
    rel = Path(*name.split(".")[2:])
    candidates = [root / rel / "__init__.py"]
    if rel.parts:
        candidates.insert(0, root / rel.with_suffix(".py"))
    return next((c for c in candidates if c.is_file()), None)


def compiled_sources(root: Path) -> list[Path]:
    """The modules under `root` (the package folder) that compiled code can depend on:
    those holding numba code and, transitively, every module of the package they import."""
    texts = {p: p.read_text(encoding="utf-8") for p in root.rglob("*.py")}
    todo = [p for p, text in texts.items() if _COMPILED.search(text)]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for m in _IMPORT.finditer(texts[path]):
            base = m[1] or m[3]
            names = (
                [] if m[3] else [n.split(" as ")[0].strip() for n in m[2].strip("()").split(",")]
            )
            for name in [base, *(f"{base}.{n}" for n in names if n)]:
                found = _module_file(root, name)
                if found is not None and found not in seen:
                    todo.append(found)
    return sorted(seen)


def _source_hash(root: Path | None = None) -> str:
    """A short hash of `compiled_sources` (their paths and bytes)."""
    root = root or Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in compiled_sources(root):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _configure_numba_cache() -> None:
    import numba

    parent = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"),
        "clusteremu",
        "numba",
    )
    # numba reads config.CACHE_DIR when a cached function is defined (not in its stubs).
    setattr(numba.config, "CACHE_DIR", os.path.join(parent, _source_hash()))  # noqa: B010


_configure_numba_cache()
