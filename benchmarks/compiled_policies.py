"""Compiled policies written outside the package, against SimPy, in one process.

Two placers written only from docs/adding_a_policy.md ("Make it fast"), in a module of
their own (`user_compiled_placers` below, imported as a user's module would be), run inside
the engine's compiled loop through the one table of compiled policies: a first-fit and a
most-free-cores placer. Each runs M/M/100 at load 0.9 (10^6 jobs by default) against the
textbook SimPy model of the same queue; runs are interleaved and the best of `--repeat`
kept, so a busy machine slows both alike. The built-in first-fit (registered the same
way) is the reference row. Mean response times must agree with Erlang C.

    python benchmarks/compiled_policies.py [--jobs 1000000] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_vs_simpy import erlang_c, mmc_scenario, run_simpy  # noqa: E402

from clusteremu.cluster.engine import Engine  # noqa: E402
from clusteremu.cluster.policies.base import Placer  # noqa: E402
from clusteremu.scenarios.loader import spec_from_dict  # noqa: E402

#: A user's module, as written from the docs (not part of the package).
USER_MODULE = """
from clusteremu.cluster.policies.compiled_table import compiled_placer, fits
from clusteremu.cluster.policies.fifo import FcfsPlacer


@compiled_placer
def place_first(job, now_s, view):
    for k in range(view.free_cpu.shape[0]):
        if fits(view, job, k):
            return k
    return -1


@compiled_placer
def place_most_free(job, now_s, view):
    best, room = -1, -1.0
    for k in range(view.free_cpu.shape[0]):
        if fits(view, job, k) and view.free_cpu[k] > room:
            best, room = k, view.free_cpu[k]
    return best


class UserFirstFit(FcfsPlacer):
    name = "user-compiled-first-fit"
    compiled = place_first

    def choose(self, fits, count, free_cpu):
        return int(fits.argmax())


class UserMostFree(FcfsPlacer):
    name = "user-compiled-most-free"
    compiled = place_most_free

    def choose(self, fits, count, free_cpu):
        return int(fits.nonzero()[0][free_cpu[fits].argmax()])
"""


def user_placers() -> dict[str, type[Placer]]:
    """Import the user's module from a folder of its own."""
    folder = Path(tempfile.mkdtemp(prefix="clusteremu-user-"))
    (folder / "user_compiled_placers.py").write_text(USER_MODULE)
    sys.path.insert(0, str(folder))
    import user_compiled_placers as user  # type: ignore[import-not-found]

    return {"user first-fit": user.UserFirstFit, "user most-free": user.UserMostFree}


def run_placer(placer: Placer | None, jobs: int, servers: int) -> tuple[float, float]:
    """Seconds and mean response of M/M/`servers` with `placer` (None: built-in first-fit)."""
    spec = spec_from_dict(mmc_scenario(jobs, servers))
    start = time.perf_counter()
    result = Engine(spec, placer=placer).run()
    return time.perf_counter() - start, float(result.summary["mean_response_time_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--servers", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs for each")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    rows: dict[str, type[Placer] | None] = {"built-in first-fit": None, **user_placers()}
    start = time.perf_counter()
    for cls in rows.values():  # compile (numba caches each function on disk)
        run_placer(cls() if cls else None, 2_000, args.servers)
    first_call_s = time.perf_counter() - start
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in [*rows, "SimPy"]}
    for _ in range(args.repeat):  # interleaved: a busy machine slows every row alike
        for name, cls in rows.items():
            times[name].append(run_placer(cls() if cls else None, args.jobs, args.servers))
        times["SimPy"].append(run_simpy(args.jobs, servers=args.servers))
    simpy_s = min(times["SimPy"])[0]
    out: dict[str, Any] = {
        "jobs": args.jobs,
        "servers": args.servers,
        "repeat": args.repeat,
        "compile_or_load_s": first_call_s,
        "erlang_c_mean_response_s": erlang_c(0.9 * args.servers, args.servers),
        "rows": {},
    }
    for name, runs in times.items():
        seconds, mean = min(runs)
        out["rows"][name] = {
            "seconds": seconds,
            "jobs_per_s": args.jobs / seconds,
            "vs_simpy": simpy_s / seconds,
            "mean_response_s": mean,
        }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"M/M/{args.servers}, load 0.9, {args.jobs:,} jobs, best of {args.repeat}")
    print(f"{'placer':<22} {'jobs/s':>12} {'x SimPy':>8} {'mean response s':>16}")
    for name, row in out["rows"].items():
        print(
            f"{name:<22} {row['jobs_per_s']:>12,.0f} {row['vs_simpy']:>8.1f} "
            f"{row['mean_response_s']:>16.4f}"
        )
    print(f"{'Erlang C':<22} {'':>12} {'':>8} {out['erlang_c_mean_response_s']:>16.4f}")


if __name__ == "__main__":
    main()
