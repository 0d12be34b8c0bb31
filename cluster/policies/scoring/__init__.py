"""Scoring-function scheduler: filter and score plugins, weighted sum, seeded tie-break.

After kube-scheduler's framework and Skippy (Rausch et al.), as tuned in Asenov et al.,
"Learning to Score: Tuning Cluster Schedulers through Reinforcement Learning" (the Learning
to Score paper); formulas in docs/scoring.md. The placer is registered as ``scoring``.
"""

from __future__ import annotations

from clusteremu.cluster.policies.scoring import filters, scorers
from clusteremu.cluster.policies.scoring.framework import (
    FILTERS,
    SCORERS,
    ClusterState,
    CompiledPod,
    Cycle,
    FilterPlugin,
    Framework,
    ImageSpec,
    NodeTable,
    PodSpec,
    ScorePlugin,
    ScoreRangeError,
    compile_pod,
    make_filter,
    make_scorer,
    register_filter,
    register_scorer,
)
from clusteremu.cluster.policies.scoring.placer import ScoringPlacer

__all__ = [
    "FILTERS",
    "SCORERS",
    "ClusterState",
    "CompiledPod",
    "Cycle",
    "FilterPlugin",
    "Framework",
    "ImageSpec",
    "NodeTable",
    "PodSpec",
    "ScorePlugin",
    "ScoreRangeError",
    "ScoringPlacer",
    "compile_pod",
    "filters",
    "make_filter",
    "make_scorer",
    "register_filter",
    "register_scorer",
    "scorers",
]
