"""The model and the simulation kernel of clusteremu (no Ray here).

Compiled functions are cached on disk by numba, which keys each cache entry on its own
source file only: a change to another module that a compiled function calls into (a
policy's decision function, say) would leave a stale entry. So the cache lives in a folder
named after a hash of every source file of this package; any change starts a fresh cache.
`NUMBA_CACHE_DIR`, when set, is the parent of that folder.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def _source_hash() -> str:
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
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
