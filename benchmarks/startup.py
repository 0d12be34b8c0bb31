"""First-run (cold) against later (warm) start-up: what numba's compilation costs a new user.

The event loop and the built-in policies are compiled by numba on first use and cached on
disk (`cache=True`, in `__pycache__` beside the sources, or under `NUMBA_CACHE_DIR`). A
fresh clone has no cache, so its first run compiles; later runs load the cache. This
script runs each command twice in a subprocess, each time with the same fresh
`NUMBA_CACHE_DIR` (so nothing numba compiled for earlier runs on this machine is reused):
the first run is cold, the second warm. (Python's own byte-code cache is left alone: pip
compiles it at install time. Setting `PYTHONPYCACHEPREFIX` as well makes numba miss its
cache on every run, 7-8 s instead of 1.6 s for the small `mm-c` run here.)

    .venv/bin/python benchmarks/startup.py            # small runs: the compile cost itself
    .venv/bin/python benchmarks/startup.py --readme   # also the README's main command (Ray)

Figures go to stdout as a table; `--json` prints them as JSON instead.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--set", "stop.jobs=2000", "--set", "stop.warmup_jobs=200", "--json"]
COMMANDS: dict[str, list[str]] = {
    "import only (clusteremu list)": ["list"],
    "run mm-c, 2,000 jobs (placer loop)": ["run", "mm-c", *SMALL],
    "run ps-amdahl, 2,000 jobs (pool loop)": ["run", "ps-amdahl", *SMALL],
}
README = [
    "sweep",
    "scenarios/mm-c.yaml",
    "--grid",
    "workload.classes.0.arrival.rate_per_s=6,7,8,9",
    "--seeds",
    "1-4",
    "--json",
]


def timed(args: list[str], cache: Path, out: Path | None = None) -> float:
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = str(cache / "numba")
    env.pop("RAY_ADDRESS", None)
    command = [sys.executable, "-m", "clusteremu", *args]
    if out is not None:
        command += ["--out", str(out)]
    began = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - began
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return elapsed


def measure(readme: bool) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    commands = dict(COMMANDS)
    if readme:
        commands["README main command (sweep, 16 runs on Ray)"] = README
    for label, args in commands.items():
        with tempfile.TemporaryDirectory(prefix="clusteremu-startup-") as tmp:
            cache = Path(tmp)
            needs_out = args[0] == "sweep"
            cold = timed(args, cache, cache / "out-cold" if needs_out else None)
            warm = timed(args, cache, cache / "out-warm" if needs_out else None)
        rows.append(
            {
                "command": label,
                "cold_s": round(cold, 2),
                "warm_s": round(warm, 2),
                "compile_s": round(cold - warm, 2),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readme", action="store_true", help="also the README's sweep")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    rows = measure(args.readme)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'command':<48} {'cold s':>8} {'warm s':>8} {'cold - warm':>12}")
    for row in rows:
        print(
            f"{row['command']!s:<48} {row['cold_s']:>8} {row['warm_s']:>8} {row['compile_s']:>12}"
        )


if __name__ == "__main__":
    main()
