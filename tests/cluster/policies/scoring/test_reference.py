"""The compiled Kubernetes scorers against a plain-Python transcription of kube-scheduler's
Go code (int64 arithmetic with truncating division) on random clusters: the float64 kernels
must give exactly the same integers. The gpu row is an extended resource: a pod that does not
request it has it skipped (resource_allocation.go, ``calculateResourceAllocatableRequest``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clusteremu.cluster.policies.scoring import scorers as S
from clusteremu.cluster.policies.scoring.framework import INTEGER_SCALE, PodSpec
from tests.cluster.policies.scoring.helpers import cluster, cycle, node


def go_div(a: int, b: int) -> int:
    q = abs(a) // b
    return -q if a < 0 else q


def units(x: float, r: int) -> int:
    return int(math.floor(x * INTEGER_SCALE[r] + 0.5))


def least(req: list[int], cap: list[int], w: list[int]) -> int:
    num = den = 0
    for rq, cp, wt in zip(req, cap, w, strict=True):
        if cp == 0:
            continue
        num += (0 if rq > cp else (cp - rq) * 100 // cp) * wt
        den += wt
    return num // den if den else 0


def most(req: list[int], cap: list[int], w: list[int]) -> int:
    num = den = 0
    for rq, cp, wt in zip(req, cap, w, strict=True):
        if cp == 0:
            continue
        num += min(rq, cp) * 100 // cp * wt
        den += wt
    return num // den if den else 0


def broken_linear(p: int, shape: list[tuple[int, int]]) -> int:
    for i, (u, s) in enumerate(shape):
        if p <= u:
            if i == 0:
                return s
            (u0, s0) = shape[i - 1]
            return s0 + go_div((s - s0) * (p - u0), u - u0)
    return shape[-1][1]


def rtc(req: list[int], cap: list[int], w: list[int], shape: list[tuple[int, int]]) -> int:
    pts = [(u, s * 10) for u, s in shape]
    num = den = 0
    for rq, cp, wt in zip(req, cap, w, strict=True):
        if cp == 0:
            continue
        s = broken_linear(100 if rq > cp else rq * 100 // cp, pts)
        if s > 0:
            num += s * wt
            den += wt
    return int(math.floor(num / den + 0.5)) if den else 0


def balanced(req: list[int], cap: list[int]) -> int:
    fr = [min(rq / cp, 1.0) for rq, cp in zip(req, cap, strict=True) if cp != 0]
    std = 0.0
    if len(fr) == 2:
        std = abs((fr[0] - fr[1]) / 2)
    elif len(fr) > 2:
        mean = sum(fr) / len(fr)
        std = math.sqrt(sum((f - mean) ** 2 for f in fr) / len(fr))
    return int((1 - std) * 100)


@pytest.mark.parametrize("seed", range(4))
def test_kubernetes_scorers_match_the_go_arithmetic(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 300
    types = [
        node(
            f"t{i}",
            float(rng.choice([0, 1, 2, 3, 4, 6, 8, 96])),
            float(rng.choice([0.0, 0.95, 1.0, 3.9, 7.7, 7.8, 16.0])),
            gpu=float(rng.choice([0, 0, 1, 2])),
        )
        for i in range(n)
    ]
    table, state, _ = cluster(types)
    state.free[:] = np.round(table.capacity * rng.uniform(-0.2, 1.0, table.capacity.shape), 3)
    pod = PodSpec(
        "p",
        (float(rng.choice([0.1, 0.5, 1, 2])), float(rng.uniform(0, 2)), float(rng.choice([0, 1]))),
    )
    rows = [0, 1, 2]
    weights = [int(w) for w in rng.integers(1, 5, 3)]
    shape = [(0, 0), (20, 3), (55, 9), (85, 2), (100, 6)]  # 90 -> 20 over 30: inexact, < 0
    plugins = {
        "least": S.LeastAllocated(dict(zip(("cpu", "memory", "gpu"), weights, strict=True))),
        "most": S.MostAllocated(dict(zip(("cpu", "memory", "gpu"), weights, strict=True))),
        "rtc": S.RequestedToCapacityRatio(
            shape=[list(p) for p in shape],
            resources=dict(zip(("cpu", "memory", "gpu"), weights, strict=True)),
        ),
        "balanced": S.BalancedAllocation({"cpu": 1, "memory": 1, "gpu": 1}),
    }
    got = {k: p.score(cycle(table, state, pod)).tolist() for k, p in plugins.items()}
    for k in range(n):
        cap = [units(table.capacity[r, k], r) for r in rows]
        req = [units(table.capacity[r, k] - state.free[r, k] + pod.request[r], r) for r in rows]
        if pod.request[2] == 0:  # extended resource not requested: (0, 0), skipped
            cap[2] = req[2] = 0
        assert got["least"][k] == least(req, cap, weights), k
        assert got["most"][k] == most(req, cap, weights), k
        assert got["rtc"][k] == rtc(req, cap, weights, shape), k
        assert got["balanced"][k] == balanced(req, cap), k
