"""The Learning to Score paper's score (Asenov et al., "Learning to Score", eq. 2;
docs/scoring.md).

The score is a summary metric any scenario can select (``metrics: {score: ...}``), whatever
its placer: it lives in `clusteremu.cluster.score_metric`, re-exported here for the scoring package.
"""

from __future__ import annotations

from clusteremu.cluster.score_metric import (
    Bounds,
    check_bounds,
    default_bounds,
    norm,
    per_function,
    score_summary,
    seed_score,
)

__all__ = [
    "Bounds",
    "check_bounds",
    "default_bounds",
    "norm",
    "per_function",
    "score_summary",
    "seed_score",
]
