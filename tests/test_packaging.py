"""One import root: the folders at the top of the repository (`cluster/`, `actors/`,
`tuners/`, `scenarios/`) install under `clusteremu` (pyproject's package-dir mapping), so
the package index's own `cluster` or `scenarios` distributions, or a local folder of that
name, neither shadow ours nor are shadowed by them."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The repository's folders that install under `clusteremu.` (besides `clusteremu/` itself).
MAPPED = ("cluster", "actors", "tuners", "scenarios")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_folder_is_installed_under_the_one_root() -> None:
    setuptools = _pyproject()["tool"]["setuptools"]
    assert setuptools["package-dir"] == {f"clusteremu.{name}": name for name in MAPPED}
    found = set()
    for folder in ("clusteremu", *MAPPED):
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT).parts
            found.add(".".join(parts if folder == "clusteremu" else ("clusteremu", *parts)))
    assert sorted(setuptools["packages"]) == sorted(found)


def test_nothing_of_ours_imports_as_a_top_level_name(tmp_path: Path) -> None:
    """Run from a folder outside the repository (the repository's own folder is on the
    path when Python starts there): the project imports as `clusteremu.*` and none of the
    four generic names resolves to this repository."""
    code = (
        "import importlib.util, json\n"
        "import clusteremu.cluster.engine, clusteremu.actors.launch, clusteremu.tuners.sweep\n"
        "import clusteremu.scenarios.loader\n"
        f"specs = {{n: importlib.util.find_spec(n) for n in {MAPPED!r}}}\n"
        "print(json.dumps({n: s.origin if s else None for n, s in specs.items()}))\n"
        "print(clusteremu.scenarios.loader.__file__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    origins_line, loader_file = done.stdout.strip().splitlines()
    assert Path(loader_file).resolve() == ROOT / "scenarios" / "loader.py"
    ours = {(ROOT / folder).resolve() for folder in MAPPED}
    for name, origin in json.loads(origins_line).items():
        # None, or another distribution of that name (the package index's `cluster`, ...)
        assert origin is None or not ours & set(Path(origin).resolve().parents), (name, origin)
