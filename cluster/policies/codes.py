"""The one table of compiled policy codes, by extension point.

A policy's `kernel_code` says which compiled decision function the engine's loop calls for
it (`cluster.policies.compiled`); 0 means "a Python policy, called back". The engine
refuses a code that is not in this table for the policy's kind (`PolicyError` naming the
policy), so a typo can never make a run silently decide nothing.
"""

from __future__ import annotations

from enum import IntEnum


class PlacerCode(IntEnum):
    """Compiled placers (0 = a Python placer, called back)."""

    PYTHON = 0
    FIRST_FIT = 1
    RANDOM_FIT = 2


class AllocatorCode(IntEnum):
    """Compiled allocators (0 = a Python allocator, called back)."""

    PYTHON = 0
    EQUI = 1
    FCFS_ONE_CORE = 2
    WHAM = 41  #: cluster.policies.wham
    FW_CAM = 42
    GREEDY = 43
    MDP = 51  #: cluster.policies.mdp.kernel


class ScalerCode(IntEnum):
    """Scalers (0 = a Python scaler, called back; 1 = static: no node is rented or released)."""

    PYTHON = 0
    STATIC = 1


#: The one table of compiled codes, by extension point; the engine refuses any other code.
CODES: dict[str, type[IntEnum]] = {
    "placer": PlacerCode,
    "allocator": AllocatorCode,
    "scaler": ScalerCode,
}


def check_code(kind: str, code: int) -> bool:
    """Whether `code` is a known code for the extension point `kind` (0: Python)."""
    table = CODES.get(kind)
    if table is None:  # provisioners have no compiled path
        return code == 0
    return code in {int(c) for c in table}
