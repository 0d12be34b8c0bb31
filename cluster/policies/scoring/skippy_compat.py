"""The Skippy compatibility switch: ``compat: skippy`` reproduces Skippy 0.1.1's scores.

Skippy (Rausch et al.; PyPI ``edgerun-skippy-core`` 0.1.1, ``skippy/core/priorities.py`` and
``scheduler.py``) is the scheduler the "Learning to Score" seed tuned; its priorities follow
Kubernetes 1.13 (``pkg/scheduler/algorithm/priorities``). The framework's default scorers are
continuous (scores on 0..100, exact transfer times, min-max rescaling). With ``compat="skippy"``
on the framework and on every built-in scorer (the scoring placer's ``compat: skippy`` sets
both), every score, total and choice is Skippy's:

- every scorer computes Skippy's / Kubernetes 1.13's integer score on 0..10 and returns it
  x 10 (so the framework's [0, 100] contract holds); the framework sums weight x score / 10,
  which is Skippy's own floating-point sum, bit for bit;
- LeastAllocated / MostAllocated / RequestedToCapacityRatio / BalancedAllocation are the 1.13
  priorities: each resource's score truncated to 0..10 before the integer mean, 0 (Least, Most)
  or utilisation 100 (RTC) when the node's capacity is 0 or the request exceeds it, the RTC
  shape's scores kept on 0..10, RTC's utilisation 100 - (cap - req)*100 // cap, cpu and memory
  only;
- ImageLocality on 0..10 (1.13 has no per-container cap);
- LatencyAwareImageLocality: whole seconds per pull, int(bytes / bytes per s), rescaled as
  int(10 (max - x + min) / max) (all 0 when max is 0; all 10 when every node is equal and > 0);
- DataLocality: whole seconds per direction, int(in / bw) + int(out / bw), then
  ``_scale_scores_inverse``: int(10 (x - max) / (min - max)), all 0 when equal;
- Capability: ``_scale_scores``, int(10 (x - min) / (max - min)), all 0 when equal;
- BalancedResource and LocalityType are the same in both modes (integer units);
- ties go to the first best node in the order of the round-robin search for feasible nodes
  (Skippy's ``max`` over its feasible list, which starts where the previous cycle stopped),
  not to the seeded generator.

Sizes enter as whole bytes (MB x 10^6, rounded) and bandwidths as Mbit/s x 125,000 bytes/s.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: The values `compat` accepts: None (the default, continuous scorers) or "skippy".
COMPAT_MODES: tuple[str, ...] = ("skippy",)
#: Skippy's ``max_priority`` (Kubernetes 1.13's MaxPriority): scores run 0..10.
COMPAT_MAX_SCORE = 10.0
#: Factor from Skippy's 0..10 to the framework's 0..100.
COMPAT_SCALE = 10.0


def check_compat(compat: str | None) -> bool:
    """True for ``"skippy"``, False for None / ``"none"``; anything else is refused."""
    if compat is None or compat == "none":
        return False
    if compat in COMPAT_MODES:
        return True
    raise ValueError(f"compat: expected 'skippy' or none (the default), got {compat!r}")


def skippy_scale(x: FloatArray) -> FloatArray:
    """Skippy's ``_scale_scores`` (t_max 10): int(((x - min) / (max - min)) * 10), all 0 when
    every value is equal."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return np.zeros(0)
    lo, hi = float(x.min()), float(x.max())
    if not hi > lo:
        return np.zeros(x.size)
    return np.trunc(((x - lo) / (hi - lo)) * COMPAT_MAX_SCORE)


def skippy_inverse_scale(x: FloatArray) -> FloatArray:
    """Skippy's ``_scale_scores_inverse`` (t_max 10): int(((x - max) / (min - max)) * 10),
    all 0 when every value is equal."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return np.zeros(0)
    lo, hi = float(x.min()), float(x.max())
    if not hi > lo:
        return np.zeros(x.size)
    return np.trunc(((x - hi) / (lo - hi)) * COMPAT_MAX_SCORE)


def skippy_latency_scale(x: FloatArray) -> FloatArray:
    """Skippy's ``LocalityPriority.reduce_mapped_score``: int(10 (max - x + min) / max) for
    whole-second times x; all 0 when max is 0."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return np.zeros(0)
    lo, hi = float(x.min()), float(x.max())
    if hi == 0:
        return np.zeros(x.size)
    return np.floor(COMPAT_MAX_SCORE * (hi - x + lo) / hi)
