"""Compiled policies written outside the package, against SimPy, in one process.

Three placers written only from docs/adding_a_policy.md ("Make it fast"), in a module of
their own (`user_compiled_placers` below, imported as a user's module would be), run inside
the engine's compiled loop through the one table of compiled policies: a first-fit and a
most-free-cores placer that loop over the nodes themselves, and a best-fit on cores that
visits only the nodes where the job fits, through `next_fit` (the engine's index of free
capacity from `fit_index.MIN_ROWS` node rows, a scan below). Each runs M/M/c at load 0.9
(M/M/100 and M/M/10, 10^6 jobs by default) against the textbook SimPy model of the same
queue (`engine_vs_simpy.run_simpy`); runs are interleaved, the placers' order rotating from
one round to the next, and the best of `--repeat` kept, so a busy machine slows all alike.
The built-in first-fit (registered the same way) is the reference row. Mean response times
must agree with Erlang C.

    python benchmarks/compiled_policies.py [--jobs 1000000] [--servers 100 10] [--repeat 3] [--json]
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
import math

import numpy as np

from clusteremu.cluster.policies.compiled_table import compiled_placer, fits, next_fit
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


@compiled_placer
def place_best_fit(job, now_s, view):
    best, left_best = -1, math.inf
    k = next_fit(view, job, 0)
    while k >= 0:
        left = view.free_cpu[k] - view.request_cpu[job]
        if left < left_best:
            best, left_best = k, left
            if left <= 0.0:
                break
        k = next_fit(view, job, k + 1)
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


class UserBestFit(FcfsPlacer):
    name = "user-compiled-best-fit"
    compiled = place_best_fit
    uses_fit_index = True

    def choose_node(self, view, i, fits, count):
        best, left_best = -1, math.inf
        for k in np.flatnonzero(fits).tolist():
            left = view.free_cpu[k] - view.request_cpu[i]
            if left < left_best:
                best, left_best = k, left
                if left <= 0.0:
                    break
        return best
"""


def user_placers() -> dict[str, type[Placer]]:
    """Import the user's module from a folder of its own."""
    folder = Path(tempfile.mkdtemp(prefix="clusteremu-user-"))
    (folder / "user_compiled_placers.py").write_text(USER_MODULE)
    sys.path.insert(0, str(folder))
    import user_compiled_placers as user  # type: ignore[import-not-found]

    return {
        "user first-fit": user.UserFirstFit,
        "user most-free": user.UserMostFree,
        "user best-fit": user.UserBestFit,
    }


def run_placer(placer: Placer | None, jobs: int, servers: int) -> tuple[float, float]:
    """Seconds and mean response of M/M/`servers` with `placer` (None: built-in first-fit)."""
    spec = spec_from_dict(mmc_scenario(jobs, servers))
    start = time.perf_counter()
    result = Engine(spec, placer=placer).run()
    return time.perf_counter() - start, float(result.summary["mean_response_time_s"])


def measure(
    rows: dict[str, type[Placer] | None], jobs: int, servers: int, repeat: int
) -> dict[str, Any]:
    """Best of `repeat` interleaved runs of every row and of SimPy on M/M/`servers`."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in [*rows, "SimPy"]}
    names = list(rows)
    for r in range(repeat):  # interleaved: a busy machine slows every row alike
        # Rotated: no row always runs first after SimPy's run (or last before it).
        for name in names[r % len(names) :] + names[: r % len(names)]:
            cls = rows[name]
            times[name].append(run_placer(cls() if cls else None, jobs, servers))
        times["SimPy"].append(run_simpy(jobs, servers=servers))
    simpy_s = min(times["SimPy"])[0]
    out: dict[str, Any] = {
        "servers": servers,
        "erlang_c_mean_response_s": erlang_c(0.9 * servers, servers),
        "rows": {},
    }
    for name, runs in times.items():
        seconds, mean = min(runs)
        out["rows"][name] = {
            "seconds": seconds,
            "jobs_per_s": jobs / seconds,
            "ns_per_job": 1e9 * seconds / jobs,
            "vs_simpy": simpy_s / seconds,
            "mean_response_s": mean,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--servers", type=int, nargs="+", default=[100, 10])
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs for each")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    rows: dict[str, type[Placer] | None] = {"built-in first-fit": None, **user_placers()}
    start = time.perf_counter()
    for cls in rows.values():  # compile (numba caches each function on disk)
        for servers in args.servers:
            run_placer(cls() if cls else None, 2_000, servers)
    first_call_s = time.perf_counter() - start
    out: dict[str, Any] = {
        "jobs": args.jobs,
        "repeat": args.repeat,
        "compile_or_load_s": first_call_s,
        "queues": [measure(rows, args.jobs, c, args.repeat) for c in args.servers],
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for queue in out["queues"]:
        print(f"M/M/{queue['servers']}, load 0.9, {args.jobs:,} jobs, best of {args.repeat}")
        print(f"{'placer':<22} {'jobs/s':>12} {'ns/job':>8} {'x SimPy':>8} {'mean response s':>16}")
        for name, row in queue["rows"].items():
            print(
                f"{name:<22} {row['jobs_per_s']:>12,.0f} {row['ns_per_job']:>8.0f} "
                f"{row['vs_simpy']:>8.1f} {row['mean_response_s']:>16.4f}"
            )
        print(
            f"{'Erlang C':<22} {'':>12} {'':>8} {'':>8} {queue['erlang_c_mean_response_s']:>16.4f}"
        )
        print()


if __name__ == "__main__":
    main()
