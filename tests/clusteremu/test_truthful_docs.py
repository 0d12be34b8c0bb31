"""What README.md and docs/faults.md say about the program is what it does (issue 41,
"truthful output"): where compiled code is cached, and the faults-rack figures."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from clusteremu.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _cache_dir(env: dict[str, str]) -> Path:
    code = "import cluster, numba; print(numba.config.CACHE_DIR)"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return Path(done.stdout.strip())


def test_readme_says_where_compiled_code_is_cached(tmp_path: Path) -> None:
    readme = " ".join(ROOT.joinpath("README.md").read_text(encoding="utf-8").split())
    assert "`__pycache__`" not in readme
    for claim in ("`~/.cache/clusteremu/numba/`", "`$XDG_CACHE_HOME/clusteremu/numba/`"):
        assert claim in readme
    assert "`$NUMBA_CACHE_DIR`" in readme
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "NUMBA_CACHE_DIR")}
    home = tmp_path / "home"
    assert _cache_dir({**env, "HOME": str(home)}).parent == home / ".cache/clusteremu/numba"
    xdg = tmp_path / "xdg"
    assert _cache_dir({**env, "XDG_CACHE_HOME": str(xdg)}).parent == xdg / "clusteremu/numba"
    own = tmp_path / "own"
    assert _cache_dir({**env, "NUMBA_CACHE_DIR": str(own)}).parent == own


def test_the_faults_rack_figures_are_what_the_command_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = " ".join(ROOT.joinpath("docs/faults.md").read_text(encoding="utf-8").split())
    paragraph = text[text.index("In `faults-rack`, one or two nodes") :]
    paragraph = paragraph[: paragraph.index("##")]
    assert "clusteremu run faults-rack" in paragraph
    assert main(["run", "faults-rack", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    expected = [
        f"{summary['node_failures']} node failures",
        f"{summary['failure_kills']} failure kills",
        f"availability {summary['availability']:.5g}",
        f"{summary['lost_core_s']:,.2f} core-seconds lost",
        f"mean response {summary['mean_response_time_s']:.2f} s",
        f"{summary['jobs_unfinished']} jobs unfinished",
    ]
    for figure in expected:
        assert figure in paragraph, (figure, paragraph)
    # the command's own wall time is given only as an example
    assert re.search(r"about \d+ s here .* is an example", paragraph)
