"""HiGHS with a hard time limit, for the exact planner (`exact.py`).

HiGHS checks its own `time_limit` only between its phases, so `_milp` runs a large
`scipy.optimize.milp` model in a forked child process (`_milp_child`), killed at the
limit (s, wall clock); small ones run here, with file descriptor 1 silenced
(`_quiet_stdout`: HiGHS' C++ code prints there itself). `_SCALE`: the factor money ($)
is multiplied by inside every LP and MIP of the planner.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from scipy.optimize import milp

#: Money is scaled by this factor inside the LP and MIP (HiGHS' tolerances are absolute).
_SCALE = 1e5


# -- HiGHS with a hard time limit ------------------------------------------------------

#: MIPs with more variables than this run in a child process killed at the time limit.
_GUARD_VARIABLES = 4000


@contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Silence file descriptor 1 (HiGHS' C++ code prints some messages there itself,
    which would corrupt `--json` output)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _milp_child(conn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
        conn.send(milp(*args, **kwargs))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(exc)
    finally:
        conn.close()


def _milp(wall_s: float, *args: Any, **kwargs: Any) -> Any:
    """`scipy.optimize.milp` stopped after `wall_s` seconds of wall clock (None when it
    was stopped before HiGHS returned). HiGHS checks its own `time_limit` only between
    its phases (on 60,000 columns a 5 s limit took 60 s), so a large model runs in a
    forked child process, killed at the limit; small ones run here."""
    options = dict(kwargs.pop("options", {}))
    options["time_limit"] = max(float(wall_s), 0.05)
    kwargs["options"] = options
    n_vars = int(np.size(args[0]))
    if (
        n_vars <= _GUARD_VARIABLES
        or "fork" not in mp.get_all_start_methods()
        or threading.active_count() > 1  # forking a threaded process (a Ray worker) can hang
    ):
        with _quiet_stdout():
            return milp(*args, **kwargs)
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    try:
        proc = ctx.Process(target=_milp_child, args=(child, args, kwargs), daemon=True)
        proc.start()
    except (AssertionError, OSError):  # e.g. inside a daemonic worker: no children
        parent.close()
        child.close()
        with _quiet_stdout():
            return milp(*args, **kwargs)
    child.close()
    result: Any = None
    try:
        if parent.poll(max(float(wall_s), 0.05) + 0.5):
            result = parent.recv()
    except EOFError:
        result = None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        parent.close()
    if isinstance(result, BaseException):
        raise result
    return result
