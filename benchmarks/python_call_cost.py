"""What a Python placer's call costs above the placer's own code, in ns, split by part.

The docs' strict-FCFS first-fit (`DocsFirstFit` of `engine_vs_simpy.py`: each waiting job
to the first node `fitting_nodes` names) decides exactly as the engine's compiled first-fit
on M/M/c's one-core nodes, so the difference between the two runs is the cost of asking
Python. It splits into:

* `user code`: the placer's `place` on a live view with one waiting job (timeit);
* `bridge`: the engine's Python around it per call (`PolicyBridge.placer_call` with a
  placer that returns a ready answer, less that placer);
* `callback`: compiled code calling a Python function through the C pointer the loop uses
  (`jit.call_c` on a ctypes callback), less the Python call itself;
* `loop's side`: the rest: the compiled checks, gathering the waiting jobs, applying the
  answer, and what Python's work costs the loop in caches.

Runs are interleaved, best of `--repeat`; M/M/10 and M/M/100 at load 0.9.

    python benchmarks/python_call_cost.py [--jobs 200000] [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from engine_vs_simpy import DocsFirstFit, mmc_scenario  # noqa: E402

from clusteremu.cluster import kernel  # noqa: E402
from clusteremu.cluster.engine import Engine  # noqa: E402
from clusteremu.cluster.layout import Status  # noqa: E402
from clusteremu.cluster.policies.base import Placement, PlacementView, Placer  # noqa: E402
from clusteremu.scenarios.loader import spec_from_dict  # noqa: E402


class _Ready(Placer):
    """Returns the answer it holds (for timing the bridge around a call)."""

    name = "ready-answer"
    strict_fcfs = True
    answer: list[Placement] = []

    def place(self, view: PlacementView) -> list[Placement]:
        return self.answer


def _loop_ns_per_job(jobs: int, servers: int, placer: Placer | None) -> float:
    engine = Engine(spec_from_dict(mmc_scenario(jobs, servers)), placer=placer)
    start = time.perf_counter()
    while engine.step() != Status.FINISHED:
        pass
    return (time.perf_counter() - start) / jobs * 1e9


class _Timed(DocsFirstFit):
    """`DocsFirstFit`, timing its own `place` at every call."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.calls = 0

    def place(self, view: PlacementView) -> list[Placement]:
        start = time.perf_counter()
        out = DocsFirstFit.place(self, view)
        self.seconds += time.perf_counter() - start
        self.calls += 1
        return out


def _user_code_ns(jobs: int, servers: int) -> float:
    """The placer's own code per call (ns), timed inside the run's real calls, less the
    timer's cost."""
    placer = _Timed()
    _loop_ns_per_job(jobs, servers, placer)
    clock = time.perf_counter
    timer = _timeit_ns("clock(); clock()", {"clock": clock})
    return placer.seconds / placer.calls * 1e9 - timer


def _waiting_one(servers: int, placer: Placer) -> tuple[Engine, int]:
    """An engine stopped with one waiting job gathered for its placer."""
    engine = Engine(spec_from_dict(mmc_scenario(5_000, servers)), placer=placer)
    n = 0
    while n != 1:
        engine.step(max_events=1)
        n = kernel.gather_entry(engine.store.t)
    return engine, n


def _timeit_ns(stmt: str, names: dict[str, Any], number: int = 100_000) -> float:
    return min(timeit.repeat(stmt, globals=names, number=number, repeat=7)) / number * 1e9


def _callback_ns() -> float:
    """Compiled code calling Python through a C function pointer, less the Python call."""
    from numba import njit

    from clusteremu.cluster.jit import call_c

    class Target:
        def f(self, n: int) -> int:
            return n

    target = Target()
    callback = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(target.f)
    address = ctypes.c_void_p.from_buffer(callback).value or 0

    @njit(cache=False)
    def calls(address: int, n: int) -> int:
        total = 0
        for i in range(n):
            total += call_c(address, i)
        return total

    calls(address, 10)
    n = 500_000
    best = min(_time(lambda: calls(address, n)) for _ in range(5)) / n * 1e9
    plain = _timeit_ns("f(1)", {"f": target.f}, number=n)
    return best - plain


def _time(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def call_cost(jobs: int, servers: int, repeat: int) -> dict[str, float]:
    """The split of one call's cost (ns) on M/M/`servers` (see the module's docstring)."""
    _loop_ns_per_job(2_000, servers, DocsFirstFit())  # compile what the runs use
    python_runs, compiled_runs = [], []
    for _ in range(repeat):  # interleaved: a busy machine slows both alike
        python_runs.append(_loop_ns_per_job(jobs, servers, DocsFirstFit()))
        compiled_runs.append(_loop_ns_per_job(jobs, servers, None))
    python_ns, compiled_ns = min(python_runs), min(compiled_runs)
    user = min(_user_code_ns(jobs, servers) for _ in range(repeat))
    ready = _Ready()
    engine, n = _waiting_one(servers, ready)
    view = engine.bridge.placement_view()
    ready.answer = [Placement(int(view.queue[0]), 0)]
    bridge = _timeit_ns("call(n)", {"call": engine.bridge.placer_call, "n": n}) - _timeit_ns(
        "place(view)", {"place": ready.place, "view": view}
    )
    callback = _callback_ns()
    above = python_ns - compiled_ns - user
    return {
        "python_ns_per_job": python_ns,
        "compiled_ns_per_job": compiled_ns,
        "user_code_ns": user,
        "above_user_code_ns": above,
        "bridge_ns": bridge,
        "callback_ns": callback,
        "loop_side_ns": above - bridge - callback,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = {f"mm{c}": call_cost(args.jobs, c, args.repeat) for c in (10, 100)}
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"A Python placer's call, {args.jobs:,} jobs, load 0.9, best of {args.repeat} (ns):")
    for name, row in rows.items():
        print(
            f"  {name:<6} per job: Python {row['python_ns_per_job']:,.0f}, compiled "
            f"{row['compiled_ns_per_job']:,.0f}; the placer's code {row['user_code_ns']:,.0f}; "
            f"above it {row['above_user_code_ns']:,.0f} = bridge {row['bridge_ns']:,.0f} "
            f"+ callback {row['callback_ns']:,.0f} + loop's side {row['loop_side_ns']:,.0f}"
        )


if __name__ == "__main__":
    main()
